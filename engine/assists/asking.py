"""Asking the person: put the question until an answer fits, and say how many answers it took.

Shared by every node that asks (``scope``, ``confirm_plan``, ``ask_user``, ``complete``); each passes LangGraph's
``interrupt`` as ``put``. An answer that ``parse`` refuses (:class:`~state.hitl.AnswerError`) is asked again
with the reason in the payload's ``error``; the node returns nothing until an answer fits, so a bad answer
changes nothing in the state. On resume LangGraph replays the earlier answers to the earlier ``interrupt()``
calls in order, so the loop reaches the same point again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from state.hitl import (
    AnswerError,
    EscalationCategory,
    EscalationSeverity,
    InterruptPayload,
    Question,
    parse_clarify_answer,
)

__all__ = ["ask", "ask_choice"]

T = TypeVar("T")


def ask(payload: InterruptPayload, parse: Callable[[object], T], put: Callable[[Any], Any]) -> tuple[T, int]:
    """Put ``payload`` to the person with ``put`` until ``parse`` accepts the answer; return it and the rounds.

    Args:
        payload: The question (its ``error`` is filled in when an answer is refused).
        parse: Turns an answer into its value, or raises :class:`~state.hitl.AnswerError` saying why not.
        put: Sends the JSON payload to the person and returns their answer (``langgraph.types.interrupt``).
    """
    error: str | None = None
    rounds = 0
    while True:
        rounds += 1
        value = put(payload.model_copy(update={"error": error}).model_dump(mode="json"))
        try:
            return parse(value), rounds
        except AnswerError as exc:
            error = exc.message


def ask_choice(node: str, question: Question, answer_format: str, put: Callable[[Any], Any]) -> tuple[str, int]:
    """Put one ``clarify`` question of ``node`` (a decision between ``question.allowed``); its answer and rounds."""
    payload = InterruptPayload(
        kind="clarify",
        category=EscalationCategory.DECISION,
        severity=EscalationSeverity.MEDIUM,
        node=node,
        questions=[question],
        answer_format=answer_format,
    )
    answers, rounds = ask(payload, lambda value: parse_clarify_answer(value, [question]), put)
    return answers[question.id], rounds
