"""The turns of a thread: each earlier run's task and answer, kept when a new input starts a follow-up turn.

A thread is a conversation: ``coe run --thread ID "now add tests to that"`` (or a new run on the same thread
through the SDK) starts a new turn. The guard archives the previous run as a :class:`Turn` (its task, status,
document and the results of its slots) before the new run replaces the per-run state, and the new run's slots
get the latest turn's results as read-only working memory (shown in their prompts like a referenced slot).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from state.enums import RunStatus
from state.result import SlotResult

__all__ = ["Turn", "TurnSlot"]


class TurnSlot(BaseModel):
    """One slot of an earlier turn, as a person reads its plan."""

    id: str
    title: str
    expert: str | None = None


class Turn(BaseModel):
    """One earlier run of the thread."""

    number: int = Field(ge=1)
    """1 for the thread's first run."""
    run_id: str
    task: str
    status: RunStatus
    started_at: datetime
    finished_at: datetime | None = None
    document: str = ""
    slots: list[TurnSlot] = Field(default_factory=list)
    results: dict[str, SlotResult] = Field(default_factory=dict)
    """The kept result of each slot that finished (the next turn's working memory)."""
    experts: list[str] = Field(default_factory=list)
    """The experts its slots ran on, in plan order, each once."""
