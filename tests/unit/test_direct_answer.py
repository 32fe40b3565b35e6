"""A trivial task's direct answer held to a program when it asks for a value (engine.direct_answer)."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from engine.direct_answer import check_direct_answer, wants_program
from engine.slots.sandbox import SandboxLimits
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.io import RunInput
from tests.unit.scripted import Scripted

TASK = "Convert 72 degrees Fahrenheit to Celsius and explain the formula."
WRONG = "72 degrees Fahrenheit is equivalent to 25.4 degrees Celsius. The formula is C = (F - 32) * 5/9."
"""The 0.5B's answer, as it came (2026-12-02)."""
PROGRAM = "```python\n# Celsius from Fahrenheit\nf = 72\nprint(f'{(f - 32) * 5 / 9:.4f} C')\n```"


@pytest.mark.parametrize(
    ("task", "wanted"),
    [
        (TASK, True),
        ("what is 72 degrees Fahrenheit in Celsius?", True),
        ("convert 5 miles to kilometres", True),
        ("how many seconds are in a day?", True),
        ("what is 15% of 240?", True),
        ("what is a mutex?", False),
        ("hello", False),
        ("who wrote Pride and Prejudice?", False),
        ("thanks, that's all", False),
    ],
)
def test_a_request_for_a_value_is_computed(task: str, wanted: bool) -> None:
    assert wants_program(task) is wanted


def check(answer: str, programs: list[str], told: str = "") -> tuple[str, list[str], Scripted, list[str]]:
    backend = Scripted(programs)
    asked: list[str] = []

    def tell(value: str) -> str:
        asked.append(value)
        return told

    checked = check_direct_answer(
        TASK, answer, programs=backend, model="coder", limits=SandboxLimits(), tell=tell, slot_id="answer_directly"
    )
    return checked.text, [e.action for e in checked.ledger], backend, asked


def test_an_answer_that_states_the_computed_value_gets_its_working_after_it() -> None:
    right = "72 degrees Fahrenheit is about 22.2 degrees Celsius: subtract 32, then multiply by 5/9."
    text, actions, backend, asked = check(right, [PROGRAM])
    assert text.startswith(right) and "## Computed result" in text and "22.2222 C" in text
    assert "The answer above states the same value." in text
    assert actions == ["calculate", "show_working"] and not asked and len(backend.requests) == 1
    assert backend.requests[0].slot_id == "answer_directly@calculate" and backend.requests[0].temperature == 0


def test_a_wrong_answer_outvoted_by_two_programs_is_asked_again_told_the_value() -> None:
    told = "72 degrees Fahrenheit is 22.22 degrees Celsius: C = (F - 32) * 5/9."
    text, actions, backend, asked = check(WRONG, [PROGRAM, PROGRAM], told)
    assert asked == ["22.2222 C"] and text.startswith(told) and "25.4" not in text
    assert "which it was told after an earlier answer did not, and another program printed it too" in text
    assert actions == ["calculate", "recalculate", "answer_told", "show_working"]
    assert backend.requests[1].temperature > 0  # the vote's program is another one, sampled


def test_a_told_answer_that_still_departs_leaves_the_computed_value_first() -> None:
    text, actions, _, asked = check(WRONG, [PROGRAM, PROGRAM], "It is 25.4 degrees.")
    assert asked and text.startswith("## Computed result") and "**Result: 22.2222 C**" in text
    assert "The answer below does not state this value" in text and text.index("22.2222") < text.index("25.4")
    assert actions == ["calculate", "recalculate", "answer_told", "show_working"]


def test_a_program_that_prints_no_value_leaves_the_answer_as_it_was() -> None:
    text, actions, _, asked = check(WRONG, ["```python\nprint('Saturday')\n```"])
    assert text == WRONG and actions == ["calculate"] and not asked


def test_a_trivial_request_for_a_value_through_the_graph_asks_for_a_program() -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "direct-value"}}
    graph.invoke(RunInput(task="what is 72 degrees Fahrenheit in Celsius?"), config, context={"backend": "fake"})
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.scope is not None and state.scope.kind == "trivial"
    actions = [e.action for e in state.ledger]
    # the fake backend writes no program: the answer goes out as before, and the ledger says a program was asked
    assert actions[-2:] == ["answer_directly", "calculate"] and state.status.value == "completed"
    assert state.ledger[-1].outputs_summary == "the answer held no Python program"
