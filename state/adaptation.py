"""Adapting a template to a task: edit operations, applying them, and the record of what happened.

The model does not write a framework; it writes a short list of edit operations against the seed template:

* ``KEEP slot``: keep it as it is (also what happens to every slot no operation names);
* ``REMOVE slot``: drop it, and drop it from the other slots' deps and references;
* ``MODIFY slot``: give it a title and description fitted to the task;
* ``ADD id``: a new slot with its title, description, expert and deps (deps among the template's slots);
* ``REORDER order``: the order in which slots are listed (and assembled); unnamed slots keep their place
  after the named ones.

:func:`apply_operations` turns them into a framework and returns every problem it finds (unknown or removed
slot ids, a new id that clashes, a slot count outside the template's adaptable range, an unknown expert, and
every structural error of :func:`state.framework.validation_errors`), so the caller can retry with the
errors or fall back. Nothing that fails here reaches execution.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from state.framework import Framework, SlotSpec, validation_errors
from state.template import Template

__all__ = ["AdaptationAttempt", "AdaptationRecord", "EditOp", "Plan", "PlanFit", "apply_operations", "parse_plan"]

OpName = Literal["KEEP", "REMOVE", "MODIFY", "ADD", "REORDER"]


class EditOp(BaseModel):
    """One edit operation (fields by operation: see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    op: OpName
    slot: str | None = None
    id: str | None = None
    title: str | None = None
    description: str | None = None
    expert: str | None = None
    deps: list[str] = Field(default_factory=list)
    order: list[str] = Field(default_factory=list)


class Plan(BaseModel):
    """What the model returns: operations and a short rationale."""

    model_config = ConfigDict(extra="forbid")

    operations: list[EditOp] = Field(default_factory=list, max_length=24)
    rationale: str = ""


class AdaptationAttempt(BaseModel):
    """One try: the model's raw text (trimmed), the parsed plan if any, and what was wrong."""

    attempt: int
    raw: str = ""
    plan: Plan | None = None
    errors: list[str] = Field(default_factory=list)
    seconds: float = 0.0


class PlanFit(BaseModel):
    """How a plan was fitted to its task (:mod:`engine.planning.planner`): the aspects, relevance and coverage."""

    aspects: list[str] = Field(default_factory=list)
    """The deliverables the task names (:func:`experts.routing.aspects.task_aspects`)."""
    verbs: list[str] = Field(default_factory=list)
    """Each aspect's verb."""
    relevance: dict[str, float] = Field(default_factory=dict)
    """Per slot of the plan as it was assessed: similarity to the task or its closest aspect."""
    removed: list[str] = Field(default_factory=list)
    """Slots removed as serving nothing the task asked for."""
    removed_slots: list[SlotSpec] = Field(default_factory=list)
    """Those slots as they were, so a person who answers "keep" gets them back (interactive mode)."""
    coverage: dict[str, float] = Field(default_factory=dict)
    """Per aspect: similarity to the closest slot that stays."""
    missing: list[str] = Field(default_factory=list)
    """Aspects no slot covered."""
    added: list[str] = Field(default_factory=list)
    """Slots added for those aspects."""


class AdaptationRecord(BaseModel):
    """How the run's framework was chosen and adapted (kept in the Passport)."""

    seed_id: str | None = None
    similarity: float | None = None
    as_is: bool = False
    """The seed was similar enough (>= 0.95) to use without adaptation."""
    operations: list[EditOp] = Field(default_factory=list)
    rationale: str = ""
    attempts: list[AdaptationAttempt] = Field(default_factory=list)
    fallback: Literal["none", "seed", "single_slot"] = "none"
    reason: str = ""
    built_from: Literal["template", "aspects"] = "template"
    """``aspects``: no template fitted (similarity under the line), the plan is one slot per aspect."""
    fit_before: PlanFit | None = None
    """The template fitted to the task before the planner edited it."""
    fit_after: PlanFit | None = None
    """The validation tier on the plan that runs (after the planner, or of the aspect-built plan)."""
    seconds: float | None = None
    """Time to the plan (fitting and the planner)."""

    @property
    def fits(self) -> list[PlanFit]:
        """The plan checks that ran, in order (before the planner, then on the plan that runs)."""
        return [f for f in (self.fit_before, self.fit_after) if f is not None]


def parse_plan(text: str) -> tuple[Plan | None, list[str]]:
    """Parse the model's JSON into a plan, or say why it cannot be."""
    raw = text.strip()
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end <= start:
        return None, ["the answer is not a JSON object with operations and rationale"]
    try:
        data = json.loads(raw[start : end + 1])
    except json.JSONDecodeError as exc:
        return None, [f"the answer is not valid JSON ({exc.msg} at position {exc.pos})"]
    try:
        return Plan.model_validate(data), []
    except ValidationError as exc:
        return None, [f"{'.'.join(str(p) for p in e['loc']) or 'plan'}: {e['msg']}" for e in exc.errors()[:8]]


def _need(op: EditOp, index: int, *fields: str) -> list[str]:
    return [f"operations[{index}] ({op.op}): {f} is required" for f in fields if not getattr(op, f)]


def apply_operations(
    template: Template, plan: Plan, known_experts: Iterable[str]
) -> tuple[Framework | None, list[str]]:
    """Apply a plan to a template; return the framework, or None and every problem found."""
    edit = _Editing({s.id: s.spec_fields() for s in template.slots}, [s.id for s in template.slots], set(known_experts))
    for i, op in enumerate(plan.operations):
        edit.apply(i, op)
    slots, removed, errors = edit.slots, edit.removed, edit.errors
    for spec in slots.values():  # removed slots vanish from everyone's deps and references
        spec["deps"] = [d for d in spec["deps"] if d not in removed]
        spec["can_reference"] = [r for r in spec["can_reference"] if r not in removed]
        spec["reference_hints"] = {k: v for k, v in spec["reference_hints"].items() if k not in removed}
    low, high = template.adaptable.slot_count
    if not low <= len(slots) <= high:
        errors.append(f"the plan has {len(slots)} slots; this template allows {low} to {high}")
    if errors:
        return None, errors
    try:
        fw = Framework(
            id=template.id,
            title=template.title,
            source=f"template:{template.id} (adapted)",
            slots=[SlotSpec.model_validate(slots[s]) for s in edit.order],
        )
    except ValidationError as exc:
        return None, [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:8]]
    problems = validation_errors(fw)
    return (None, problems) if problems else (fw, [])


@dataclass
class _Editing:
    """A template's slots (as :class:`SlotSpec` fields) while a plan is applied, and the problems found so far."""

    slots: dict[str, dict[str, Any]]
    order: list[str]
    experts: set[str]
    removed: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def apply(self, i: int, op: EditOp) -> None:
        """Apply ``operations[i]``, or record why it cannot be."""
        if op.op in ("KEEP", "REMOVE", "MODIFY"):
            self._on_slot(i, op)
        elif op.op == "ADD":
            self._add(i, op)
        elif op.op == "REORDER":
            self._reorder(i, op)

    def _on_slot(self, i: int, op: EditOp) -> None:
        if not op.slot:
            self.errors += _need(op, i, "slot")
            return
        if op.slot not in self.slots:
            state = "was removed" if op.slot in self.removed else "is not a slot of the template"
            self.errors.append(f"operations[{i}] ({op.op}): {op.slot!r} {state}")
        elif op.op == "REMOVE":
            del self.slots[op.slot]
            self.removed.add(op.slot)
            self.order.remove(op.slot)
        elif op.op == "MODIFY":
            self._modify(i, op, op.slot)

    def _modify(self, i: int, op: EditOp, slot: str) -> None:
        spec = self.slots[slot]
        if not (op.title or op.description):
            self.errors.append(f"operations[{i}] (MODIFY): give a new title or description for {slot!r}")
        unchanged = (op.title or "").strip() in ("", spec["title"]) and (op.description or "").strip() in (
            "",
            spec["description"],
        )
        if (op.title or op.description) and unchanged:
            self.errors.append(f"operations[{i}] (MODIFY): {slot!r} is unchanged; use KEEP or name the task")
        if op.title:
            spec["title"] = op.title.strip()
        if op.description:
            spec["description"] = op.description.strip()

    def _add(self, i: int, op: EditOp) -> None:
        if not (op.id and op.title and op.description and op.expert):
            self.errors += _need(op, i, "id", "title", "description", "expert")
            return
        if op.id in self.slots or op.id in self.removed:
            self.errors.append(f"operations[{i}] (ADD): slot id {op.id!r} is already taken")
            return
        if op.expert not in self.experts:
            self.errors.append(f"operations[{i}] (ADD): unknown expert {op.expert!r}")
        bad = [d for d in op.deps if d not in self.slots]
        if bad:
            self.errors.append(f"operations[{i}] (ADD): deps {bad} are not slots of the plan")
        deps = [d for d in op.deps if d in self.slots]
        self.slots[op.id] = {
            "id": op.id,
            "title": op.title.strip(),
            "description": op.description.strip(),
            "expected_outputs": [],
            "expert": None,  # the planner's choice is checked by the router like any other
            "deps": deps,
            "can_reference": list(deps),
            "reference_hints": {},
        }
        self.order.append(op.id)

    def _reorder(self, i: int, op: EditOp) -> None:
        unknown = [s for s in op.order if s not in self.slots]
        if unknown:
            self.errors.append(f"operations[{i}] (REORDER): {unknown} are not slots of the plan")
            return
        named = list(dict.fromkeys(op.order))
        self.order = named + [s for s in self.order if s not in named]
