"""The completion round's findings: what a finished document still lacks against its task.

A gap is read from the parts once they are written (:mod:`engine.completion`); the round (``nodes.complete``)
answers each with one action: a part added and routed, or a part written again with the gap as its feedback.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

GapKind = Literal["form", "piece", "failed", "restates", "expert_work"]
"""``form``: the task asks for a deliverable of a form no part has (an OpenAPI document, SQL, tests); ``piece``: the
task names a piece of prose a reader would look for (an FAQ, a table, a sign's wording, an email) that no part
holds; ``failed``:
a part failed or failed its checks; ``restates``: a part mostly repeats an earlier one; ``expert_work``: a part
asked, through an expert assist, for work outside its expert's scope (a query, a review), not for a fact."""

ADDING_KINDS = frozenset({"form", "piece", "expert_work"})
"""The gaps the round answers with a part of its own (the others: a part written again)."""

WORK_REASON = "asks for work, not a fact: the completion round writes it as a part of its own"
"""The reason an expert assist that asks for work is left unresolved by the slot (``nodes.complete`` reads it)."""


class CompletionGap(BaseModel):
    """One thing the document lacks, and what the round would do about it."""

    model_config = ConfigDict(extra="forbid")

    kind: GapKind
    slot_id: str | None = None
    """The part written again (failed, restates) or the part that asked (expert_work); None for a missing form or
    piece."""
    aspect: str
    """What was asked for: the task's aspect, the part's title or the assist's description."""
    detail: str
    """What is missing or wrong, in one line (the ledger's and the document's words)."""
    feedback: str = ""
    """For a part written again: what its next writing must do, given to it as a constraint."""
    domain: str | None = None
    """For expert work: the assist's domain (an expert id of the catalog names the expert)."""
    assist_id: str | None = None
    """For expert work: the assist record whose marker the added part replaces."""

    @property
    def adds(self) -> bool:
        """Whether the round answers this gap with a part of its own."""
        return self.kind in ADDING_KINDS

    def action(self) -> str:
        """What the round does about this gap, in a few words."""
        if self.adds:
            return f"add a part: {self.aspect}"
        return f"write part {self.slot_id} again"
