"""Scoping a task before planning, and the autonomous defaults a run applied instead of asking the person."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

ScopeKind = Literal["trivial", "single", "multi", "unclassified"]

DefaultRule = Literal[
    "unclear_scope_narrower",
    "context_not_expertise",
    "tie_prefers_task_type",
    "missing_deps_parallel",
    "irrelevant_slot_removed",
    "uncovered_aspect_added",
    "planner_reads_one",
]
"""The autonomous defaults of the design (docs/decisions.md, "Autonomous defaults"):

- ``unclear_scope_narrower``: a task between one expert and a plan gets one expert;
- ``context_not_expertise``: domain words that describe the data or context do not pick the expert;
- ``tie_prefers_task_type``: between close experts the task-type specialist wins;
- ``missing_deps_parallel``: a slot added without dependencies runs in parallel with the others;
- ``irrelevant_slot_removed``: a plan's slot that serves nothing the task asks for is removed;
- ``uncovered_aspect_added``: a deliverable the task names that no slot covers gets a slot;
- ``planner_reads_one``: a task read as a plan that the planner model reads as one piece of work gets one expert.
"""


class ScopeDecision(BaseModel):
    """How much planning a task needs: none (trivial), one expert (single) or a multi-slot plan (multi)."""

    kind: ScopeKind
    words: int
    trivial_similarity: float | None = None
    """Best cosine similarity to a trivial-request prototype."""
    template_similarity: float | None = None
    """Best cosine similarity to a template of the library."""
    expert_similarity: float | None = None
    """The router's score of the best expert for the whole task (capability fit)."""
    expert: str | None = None
    """That expert; the one slot of a single-expert task is routed on its own text afterwards."""
    rule: DefaultRule | None = None
    """The autonomous default that decided the kind, if any (``unclear_scope_narrower``, ``planner_reads_one``)."""
    reason: str
    firm: bool = False
    """The task names deliverables of different kinds (tests beside the code, a clause and a letter): a plan however
    it reads, so the planner model is not asked to read it again."""
    transition: Literal["same_domain", "new_domain"] | None = None
    """A follow-up turn: whether the task's expert is one the previous turn ran on (None: the thread's first)."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_kind(cls, data: Any) -> Any:
        # Checkpoints written before single/multi existed say "task" (every non-trivial task was planned).
        if isinstance(data, dict) and data.get("kind") == "task":
            return {**data, "kind": "multi"}
        return data


class AppliedDefault(BaseModel):
    """One autonomous default the run applied where an interactive run would ask (the seam for asking)."""

    rule: DefaultRule
    node: str
    detail: str
    """What was decided, on which numbers."""
    question: str
    """The question an interactive run would put to the person instead."""
    slot_id: str | None = None
    alternatives: list[str] = Field(default_factory=list)
    """What the person could have chosen instead (expert ids, scope kinds)."""
