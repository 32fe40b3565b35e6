"""Enumerations shared by the Passport and the input/output schemas."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """How much the harness may ask the person running it."""

    INTERACTIVE = "interactive"
    CONFIRM = "confirm"
    AUTONOMOUS = "autonomous"


class SlotStatus(StrEnum):
    """Lifecycle of one slot of the framework."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    AWAITING_USER = "awaiting_user"
    """Answered, but its {{ASSIST:user:...}} questions wait for the person (interactive mode)."""
    DONE = "done"
    BLOCKED = "blocked"
    FAILED = "failed"


class RunStatus(StrEnum):
    """Overall status of a run."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    PARTIAL = "partial"
    FAILED = "failed"
    REJECTED = "rejected"
    """The person rejected the plan (confirm / interactive mode); no expert ran."""
