"""Planning: a task's slots from a template (adapted by constrained edit operations) and the plan's checks."""

from engine.planning.adaptation import adapt, adaptation_messages

__all__ = ["adapt", "adaptation_messages"]
