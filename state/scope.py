"""Scoping a task before planning: does it need experts and a plan at all?"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class ScopeDecision(BaseModel):
    """Whether the task is trivial (answered directly) or a task for the planned, multi-slot path."""

    kind: Literal["trivial", "task"]
    words: int
    trivial_similarity: float | None = None
    """Best cosine similarity to a trivial-request prototype."""
    template_similarity: float | None = None
    """Best cosine similarity to a template of the library."""
    reason: str
