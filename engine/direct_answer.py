"""A trivial task's direct answer, computed when it asks for a value (issue 39: every number in an answer computed).

The generalist's model answers short requests in a sentence or three (:mod:`nodes.answer_directly`), and a conversion is
one of them: "Convert 72 degrees Fahrenheit to Celsius and explain the formula." came back as "72 degrees
Fahrenheit is equivalent to 25.4 degrees Celsius" (right: 22.22), no arithmetic written for the inline check to
compute, no caveat (2026-12-02). So a direct answer to a request that asks for a value from a number it states, or
for a quantity (:func:`wants_program`), is held to a program, as a slot's is (:mod:`engine.slots.program_of_thought`):
the code model writes one and the sandbox runs it; the answer states what it printed, or a second program votes
(:func:`~engine.slots.program_of_thought.verdict`); an answer outvoted by two programs is asked once more, told the
value (:data:`engine.prompts.DIRECT_TOLD`), and kept only if it then states it. The document shows the working as a
slot's does (:func:`~engine.slots.program_of_thought.with_working`), first when the answer departs from it.
A program that prints no number ("Saturday", "True") gives no check, and the answer is delivered as before.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.slots.contracts import ASKS_A_QUANTITY
from engine.slots.program_of_thought import (
    RECALCULATE_TEMPERATURE,
    Calculation,
    Verdict,
    asks_a_value,
    calculate,
    is_money,
    numbers_in,
    result_check,
    verdict,
    with_working,
)
from engine.slots.sandbox import SandboxLimits
from experts.backends import ExpertBackend
from state.passport import LedgerEntry
from state.result import SlotResult

__all__ = ["CheckedAnswer", "check_direct_answer", "wants_program"]

_CONVERTS = re.compile(r"\b(?:convert|conversion|express|in (?:celsius|fahrenheit|kelvin))\b", re.I)
"""A conversion asks for a value without a question's words: "Convert 5 miles to kilometres"."""


def wants_program(task: str) -> bool:
    """Whether a trivial ``task`` asks for a value a program can compute: a number stated, or a quantity asked.

    "what is a mutex?" asks for no value; "what is 15% of 240?", "how many seconds are in a day?" and "convert 5
    miles to kilometres" do.
    """
    asks = asks_a_value(task) or _CONVERTS.search(task) is not None
    return asks and (bool(numbers_in(task)) or ASKS_A_QUANTITY.search(task) is not None)


@dataclass
class CheckedAnswer:
    """The direct answer as delivered, how the programs voted on it, and the ledger entries of the check."""

    text: str
    vote: Verdict | None = None
    """None when no program gave a value (the answer is the model's own, unchecked)."""
    ledger: list[LedgerEntry] = field(default_factory=list)


def check_direct_answer(
    task: str,
    answer: str,
    *,
    programs: ExpertBackend,
    model: str,
    limits: SandboxLimits,
    tell: Callable[[str], str],
    slot_id: str,
) -> CheckedAnswer:
    """Check ``answer`` to ``task`` against programs ``programs`` (running ``model``) writes, and show the working.

    Args:
        task: The trivial request.
        answer: The direct answer, its inline arithmetic computed.
        programs: The backend that writes the programs (the biggest installed code model, else the base model).
        model: Its model's name, for the working and the ledger.
        limits: The sandbox's limits for each program.
        tell: Asks the answering model again, told the given value (its answer, arithmetic computed).
        slot_id: The name the ledger and the backend's requests carry (the node's).

    Backend errors propagate (the node reports them as its own).
    """
    checked = CheckedAnswer(answer)
    first = _program(task, programs, model, limits, slot_id, checked.ledger)
    if not first.values:
        return checked
    again: list[Calculation] = []

    def another() -> Calculation:
        drawn = _program(task, programs, model, limits, slot_id, checked.ledger, draw=len(again) + 1)
        again.append(drawn)
        return drawn

    vote = verdict(answer, first, another)
    if vote.agreement == "computed":  # two programs against the answer: asked once more, told the value
        told = tell(vote.shown.result)
        stated = result_check(told, vote.shown).passed
        checked.ledger.append(
            LedgerEntry(
                agent="direct answer",
                action="answer_told",
                slot_id=slot_id,
                inputs_summary="the request again, told the value two programs printed",
                outputs_summary=("kept: it states the value" if stated else "not kept: it does not state the value")
                + f" ({told[:120]!r})",
            )
        )
        if stated:
            answer, vote = told, Verdict("confirmed", vote.shown, vote.other)
    result = SlotResult(slot_id=slot_id, expert="base", raw=answer)
    checked.text = with_working(result, vote, checked.ledger, money=is_money(task)).raw.strip()
    checked.vote = vote
    return checked


def _program(
    task: str,
    backend: ExpertBackend,
    model: str,
    limits: SandboxLimits,
    slot_id: str,
    ledger: list[LedgerEntry],
    draw: int = 0,
) -> Calculation:
    """One program for the task, run and ledgered; the first greedy, the vote's sampled, each with its own seed."""
    t0 = time.perf_counter()
    calc = calculate(
        task, backend, model, limits, slot_id=slot_id, temperature=RECALCULATE_TEMPERATURE if draw else 0.0, draw=draw
    )
    ledger.append(
        LedgerEntry(
            agent=model,
            action="recalculate" if draw else "calculate",
            slot_id=slot_id,
            inputs_summary="a Python program that prints the request's value, run in the sandbox"
            + (f" (number {draw + 1}: the values so far disagree)" if draw else ""),
            outputs_summary=calc.note[:500],
            duration_ms=int((time.perf_counter() - t0) * 1000),
            prompt_tokens=calc.prompt_tokens,
            completion_tokens=calc.completion_tokens,
        )
    )
    return calc
