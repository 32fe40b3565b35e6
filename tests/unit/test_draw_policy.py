"""The draw policy as a table: given the earlier draws of a slot, which draw comes next (no backend, no clock)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.slots.draw_policy import (
    RUNNABLE_EXAMPLES_DRAWS,
    SAMPLE_TEMPERATURES,
    Drawn,
    DrawPolicy,
    NextDraw,
    Origin,
    PromptKind,
)

ONE_PROMPT = DrawPolicy(
    temperature=0.0,
    two_prompts=False,
    plain_first=False,
    alternate=False,
    best_of=4,
    outline_retries=2,
    runnable_examples=False,
    time_factor=4.0,
    escalation=False,
)
"""A slot that is a part of a plan: the contract's prompt only."""
CODE = replace(ONE_PROMPT, two_prompts=True, alternate=True)
"""A one-slot code task: both prompts, alternating from the first draw."""
FUNCTION = replace(CODE, plain_first=True)
"""A one-slot task that hands over one function to complete: the plain prompt first."""
PROSE = replace(ONE_PROMPT, two_prompts=True)
"""A one-slot prose task: a plain answer only once a contract answer loops."""


def fails(
    prompt: PromptKind = "contract",
    origin: Origin = "first",
    score: float = 50.0,
    *,
    compliant: bool = True,
    loops: bool = False,
    s: float = 2.0,
) -> Drawn:
    """An earlier draw that fails a hard check (by default one that follows the contract, in ``s`` seconds)."""
    return Drawn(prompt, origin, score, compliant, False, loops, s)


def broken(prompt: PromptKind = "contract", origin: Origin = "first", score: float = 20.0) -> Drawn:
    """An earlier draw that breaks the output contract."""
    return fails(prompt, origin, score, compliant=False)


def looped(origin: Origin = "first", score: float = 30.0) -> Drawn:
    """An earlier contract draw whose text loops."""
    return fails("contract", origin, score, loops=True)


def passes(prompt: PromptKind = "contract", origin: Origin = "first") -> Drawn:
    """An earlier draw that passes every hard check."""
    return Drawn(prompt, origin, 111.0, True, True)


def sampled(n: int) -> list[Drawn]:
    """A first answer and ``n`` samples, all failing."""
    return [fails()] + [fails(origin="sample")] * n


T1, T2, T3 = SAMPLE_TEMPERATURES

PROMPT_AND_TEMPERATURE = [
    # the first draw of a prompt kind is at its opening temperature: the expert's, the plain one greedy
    ("one prompt: first at the expert's temperature", replace(ONE_PROMPT, temperature=0.2), [], "contract", 0.2),
    ("function: the plain prompt first, greedy", replace(FUNCTION, temperature=0.6), [], "plain", 0.0),
    ("code: the contract first", CODE, [], "contract", 0.0),
    ("code: then the plain one, greedy", CODE, [fails()], "plain", 0.0),
    ("function: then the contract's first", replace(FUNCTION, temperature=0.2), [fails("plain")], "contract", 0.2),
    ("code: kinds alternate, sampled", CODE, [fails(), fails("plain", "sample")], "contract", T1),
    ("code: the fourth draw", CODE, [fails(), fails("plain", "sample"), fails(origin="sample")], "plain", T2),
    ("prose: no loop, the contract again", PROSE, [fails()], "contract", T3),
    ("prose: a contract answer looped, plain", PROSE, [looped()], "plain", 0.0),
    ("prose: after the plain one, contract", PROSE, [looped(), fails("plain", "sample")], "contract", T1),
    ("prose: then plain again, sampled", PROSE, [looped(), fails("plain", "sample"), fails()], "plain", T2),
    ("prose: the loop came second", PROSE, [fails(), looped("sample")], "plain", 0.0),
    # later draws of one prompt are sampled in turn, never below the expert's temperature
    ("one prompt: second draw", ONE_PROMPT, [fails()], "contract", T1),
    ("one prompt: third draw", ONE_PROMPT, sampled(1), "contract", T2),
    ("one prompt: fourth draw", ONE_PROMPT, sampled(2), "contract", T3),
    ("one prompt: fifth draw, the turn again", replace(ONE_PROMPT, best_of=8), sampled(3), "contract", T1),
    ("never below the expert's", replace(ONE_PROMPT, temperature=0.6), [fails()], "contract", 0.6),
    ("above the expert's when the turn is", replace(ONE_PROMPT, temperature=0.6), sampled(2), "contract", T3),
]


@pytest.mark.parametrize(
    ("policy", "earlier", "prompt", "temperature"),
    [row[1:] for row in PROMPT_AND_TEMPERATURE],
    ids=[row[0] for row in PROMPT_AND_TEMPERATURE],
)
def test_the_next_draws_prompt_and_temperature(
    policy: DrawPolicy, earlier: list[Drawn], prompt: str, temperature: float
) -> None:
    draw = policy.next(earlier)
    assert draw is not None
    assert (draw.prompt, draw.temperature) == (prompt, temperature)


ORIGIN_AND_FEEDBACK = [
    ("nothing drawn: the first, no feedback", ONE_PROMPT, [], NextDraw("contract", "first", 0.0)),
    ("a compliant failure: a sample told what failed", ONE_PROMPT, [fails()], NextDraw("contract", "sample", T1, 0)),
    ("a broken answer: a retry told what broke", ONE_PROMPT, [broken()], NextDraw("contract", "retry", T1, 0)),
    (
        "the feedback is the leader's, the earliest of the best",
        ONE_PROMPT,
        [fails(score=40), fails(origin="sample", score=60), fails(origin="sample", score=60)],
        NextDraw("contract", "sample", T3, 1),
    ),
    (
        "a broken leader: a retry though a compliant candidate scored lower",
        ONE_PROMPT,
        [broken(score=70), fails(origin="retry", score=40)],
        NextDraw("contract", "retry", T2, 0),
    ),
    ("a plain draw is the task alone: no feedback", CODE, [fails()], NextDraw("plain", "sample", 0.0)),
    ("a plain retry has none either", CODE, [broken()], NextDraw("plain", "retry", 0.0)),
]


@pytest.mark.parametrize(
    ("policy", "earlier", "expected"),
    [row[1:] for row in ORIGIN_AND_FEEDBACK],
    ids=[row[0] for row in ORIGIN_AND_FEEDBACK],
)
def test_the_next_draws_origin_and_feedback(policy: DrawPolicy, earlier: list[Drawn], expected: NextDraw) -> None:
    assert policy.next(earlier) == expected


ESCALATING = replace(ONE_PROMPT, escalation=True)
EXAMPLES = replace(ONE_PROMPT, best_of=2, runnable_examples=True)
RUNNABLE_SAMPLES = 2 - 1 + 2 * (RUNNABLE_EXAMPLES_DRAWS - 1)

BUDGETS_AND_STOP = [
    # (id, policy, earlier, seconds spent since the first draw started, the next draw's origin or None: stop)
    ("a passing first answer: stop", ESCALATING, [passes()], 0.0, None),
    ("a passing later one: stop", ESCALATING, [fails(), passes(origin="sample")], 0.0, None),
    ("a passing plain one: stop", replace(CODE, escalation=True), [fails(), passes("plain", "sample")], 0.0, None),
    ("best_of 1: no sample", replace(ONE_PROMPT, best_of=1), [fails()], 0.0, None),
    ("best_of 2: one sample", replace(ONE_PROMPT, best_of=2), [fails()], 0.0, "sample"),
    ("best_of 2: then stop", replace(ONE_PROMPT, best_of=2), sampled(1), 0.0, None),
    ("best_of 4: the third sample", ONE_PROMPT, sampled(2), 0.0, "sample"),
    ("best_of 4: then stop", ONE_PROMPT, sampled(3), 0.0, None),
    ("no outline retries", replace(ONE_PROMPT, outline_retries=0), [broken()], 0.0, None),
    ("two retries: the second", ONE_PROMPT, [broken(), broken("contract", "retry")], 0.0, "retry"),
    ("two retries: then stop", ONE_PROMPT, [broken()] + [broken("contract", "retry")] * 2, 0.0, None),
    (
        "retries do not spend samples",
        replace(ONE_PROMPT, best_of=2),
        [broken(score=20), broken("contract", "retry", 10), fails(origin="retry", score=60)],
        0.0,
        "sample",
    ),
    (
        "samples do not spend retries",
        replace(ONE_PROMPT, outline_retries=1),
        [fails(score=10), fails(origin="sample", score=5), broken("contract", "sample", 80)],
        0.0,
        "retry",
    ),
    ("runnable examples: more samples", EXAMPLES, sampled(RUNNABLE_SAMPLES), 0, None),
    ("runnable examples: the last", EXAMPLES, sampled(RUNNABLE_SAMPLES - 1), 0, "sample"),
    ("runnable examples need best_of > 1", replace(EXAMPLES, best_of=1), [fails()], 0.0, None),
    # the time bound: time_factor times the first answer's seconds (2 s here), at least one second
    ("the second draw is never timed out", ONE_PROMPT, [fails()], 1000.0, "sample"),
    ("within the time", ONE_PROMPT, sampled(1), 8.0, "sample"),
    ("over the time: stop", ONE_PROMPT, sampled(1), 8.1, None),
    ("a fast first answer counts one second", ONE_PROMPT, [fails(s=0.1), fails(origin="sample")], 4.1, None),
    ("runnable examples: three times the time", EXAMPLES, sampled(1), 24.0, "sample"),
    ("runnable examples: over it", EXAMPLES, sampled(1), 24.1, None),
    # escalation: one last candidate from the bigger model when the best one follows the contract and still fails
    ("escalation after the samples", replace(ESCALATING, best_of=1), [fails()], 0.0, "escalated"),
    ("escalation after the time", ESCALATING, sampled(1), 100.0, "escalated"),
    ("no escalation for a broken leader", replace(ESCALATING, outline_retries=0), [broken()], 0.0, None),
    ("escalation is drawn once", replace(ESCALATING, best_of=1), [fails(), fails(origin="escalated")], 0.0, None),
    ("no escalation when it is off", replace(ONE_PROMPT, best_of=1), [fails()], 0.0, None),
]


@pytest.mark.parametrize(
    ("policy", "earlier", "spent_s", "origin"),
    [row[1:] for row in BUDGETS_AND_STOP],
    ids=[row[0] for row in BUDGETS_AND_STOP],
)
def test_the_budgets_and_the_stop(policy: DrawPolicy, earlier: list[Drawn], spent_s: float, origin: str | None) -> None:
    draw = policy.next(earlier, spent_s)
    assert (draw.origin if draw is not None else None) == origin


def test_an_escalated_draw_is_the_contracts_greedy_answer_from_the_bigger_model_told_what_failed() -> None:
    draw = replace(ESCALATING, best_of=1, temperature=0.7).next([broken(score=10), fails(origin="retry", score=40)])
    assert draw == NextDraw("contract", "escalated", 0.0, 1)
    assert draw.model == "escalation"
    first = ESCALATING.next([])
    assert first is not None and first.model == "own"


def test_the_samples_and_the_time_limit_of_a_task_whose_examples_run() -> None:
    assert replace(ONE_PROMPT, best_of=4).samples == 3
    assert replace(EXAMPLES, best_of=4).samples == 3 + 4 * (RUNNABLE_EXAMPLES_DRAWS - 1)
    assert EXAMPLES.time_limit(5.0) == 4.0 * RUNNABLE_EXAMPLES_DRAWS * 5.0
    assert ONE_PROMPT.time_limit(0.25) == 4.0
