"""Asking the person from inside a node: interrupt until an answer fits, and say how many answers it took.

Shared by every node that asks (``scope``, ``confirm_plan``, ``ask_user``). An answer that ``parse`` refuses
(:class:`~state.hitl.AnswerError`) is asked again with the reason in the payload's ``error``; the node returns
nothing until an answer fits, so a bad answer changes nothing in the state. On resume LangGraph replays the
earlier answers to the earlier ``interrupt()`` calls in order, so the loop reaches the same point again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from langgraph.types import interrupt

from state.hitl import AnswerError, InterruptPayload

T = TypeVar("T")


def ask(payload: InterruptPayload, parse: Callable[[object], T]) -> tuple[T, int]:
    """Interrupt with ``payload`` until ``parse`` accepts the answer; return the parsed answer and the rounds."""
    error: str | None = None
    rounds = 0
    while True:
        rounds += 1
        value = interrupt(payload.model_copy(update={"error": error}).model_dump(mode="json"))
        try:
            return parse(value), rounds
        except AnswerError as exc:
            error = exc.message
