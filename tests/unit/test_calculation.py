"""A math slot's result computed by a program the sandbox runs, and the ``math.result`` check of each candidate."""

from __future__ import annotations

from engine.slots.job import SlotJob
from engine.slots.program_of_thought import (
    Calculation,
    Verdict,
    asks_a_size,
    calculable,
    calculate,
    final_statement,
    is_money,
    printed_values,
    readable,
    result_check,
    result_lines,
    verdict,
    with_working,
)
from engine.slots.run import SlotOutcome, run_slot
from engine.slots.sandbox import SandboxLimits
from state.context import resolve_settings
from state.framework import SlotSpec
from state.passport import LedgerEntry
from state.result import SlotResult
from tests.unit.scripted import Scripted

DICE = "What is the probability of getting at least one six in four rolls of a fair die? Show the steps."
PROGRAM = "```python\nprint(1 - (5 / 6) ** 4)\n```"
DICE_RESULT = "**Result: 0.517747** (rounded from 0.5177469135802468)"
"""The headline of the program's value: rounded as a reader writes it, the output block below it verbatim."""


def calc(output: str, task: str = DICE) -> Calculation:
    return Calculation("m", "", "print()", output, printed_values(output, task))


def states(text: str, output: str, task: str = DICE) -> bool:
    return result_check(text, calc(output, task)).passed


def test_a_stated_result_agrees_to_the_digits_it_shows() -> None:
    p = "0.5177469135802468"
    assert states("The probability is about 0.518.", p) and states("That is 0.52, a little over half.", p)
    assert states("So the chance is 51.77%.", p) and states("P = 1 - 625/1296 = 0.5177", p)
    assert not states("The probability is 0.5.", p)  # to its one decimal, but 3% off
    assert not states("The probability is 0.51.", p)  # rounded wrong
    assert not states("There are 1296 outcomes and 4 rolls.", p)
    assert states("Overall it is a 4% decrease.", "-4.0") and states("The change is -4%.", "-4.0")
    assert states("It grows to $8,954.24.", "8954.238482714272") and states("about 8,950", "8954.238482714272")
    assert states("The second train catches up at 12:00 noon.", "12:00")
    assert not states("It catches up at 10:40.", "The second train catches up at 12:00:00")
    sum_task = "What is the sum of the first 100 positive integers, and why?"
    assert states("The sum is 5,050.", "The sum of the first 100 positive integers is 5050", sum_task)
    check = result_check("The probability is 0.6.", calc(p))
    assert check.name == "math.result" and check.severity == "hard"
    assert "printed '0.5177469135802468'" in check.detail and "does not state 0.517747:" in check.detail


def test_a_fraction_written_in_latex_states_its_value() -> None:
    # the review set's dice problem (review_reference_decode): a right answer read as 671 and 1296 was sent to a
    # vote, a split and a caveat
    assert states("Therefore, the probability is \\(\\boxed{\\frac{671}{1296}}\\).", "0.5177469135802468")
    assert states("So \\(H = \\dfrac{88,000}{11}\\), and the answer is \\boxed{8000}.", "8000.0", task="")
    assert not states("Therefore, the probability is \\(\\boxed{\\frac{1}{2}}\\).", "0.5177469135802468")


def test_only_a_last_line_with_a_few_values_is_a_result() -> None:
    assert printed_values("step 1\n0.25\n") == (0.25,)
    assert printed_values("x = 3, y = -2") == (3.0, -2.0)
    assert printed_values("10:40:00") == ("10:40",)
    assert printed_values("1 2 3 4 5") == () and printed_values("True") == () and printed_values("") == ()
    assert printed_values("In 4 rolls: 0.5177", "in 4 rolls of a die") == (0.5177,)  # the task's own numbers go


def test_the_made_up_day_of_a_printed_time_is_no_value() -> None:
    # a user task of 2026-12-07: the third program printed the right landing time with datetime's day before it,
    # read as four values and no result, and the document gave none
    flight = "My flight leaves at 14:35 and takes 7 hours 50 minutes. The destination is 5 hours behind. Local time?"
    assert printed_values("2023-10-01 17:25:00", flight) == ("17:25",)
    assert printed_values("1900-01-01 17:25:00", flight) == ("17:25",)
    assert printed_values("2024-03-02 09:00:00", "What day and time is it 30 hours after 1 March 2024 03:00?") != (
        "9:00",
    )  # the task names a date: the day is part of the answer


def test_calculate_runs_the_program_in_the_sandbox() -> None:
    backend = Scripted([PROGRAM])
    done = calculate(DICE, backend, "coder", SandboxLimits(timeout_s=10), slot_id="s")
    assert done.values == (1 - (5 / 6) ** 4,) and done.model == "coder" and done.completion_tokens > 0
    [request] = backend.requests
    assert DICE in request.messages[0].content and request.temperature == 0.0 and request.slot_id == "s@calculate"


def test_a_program_that_fails_or_proves_nothing_gives_no_check() -> None:
    limits = SandboxLimits(timeout_s=10)
    task = DICE.replace("four", "4")  # "in 4 rolls": a program that prints 4 proves nothing
    for text, why in [
        ("I cannot write that.", "no Python program"),
        ("```python\nprint(1 / 0)\n```", "ZeroDivisionError"),
        ("```python\nimport socket\nsocket.create_connection(('example.org', 80))\n```", "failed"),
        ("```python\nprint(4)\n```", "only values the task states"),
        ("```python\nprint('no idea')\n```", "no single result"),
    ]:
        done = calculate(task, Scripted([text]), "coder", limits, slot_id="s")
        assert done.values == () and why in done.note, (text, done.note)


def test_a_program_that_skips_the_units_conversion_gives_no_check_and_the_prompt_names_it() -> None:
    task = "It takes a dog groomer 10 minutes to dry a dog. How many hours does it take him to dry 15 dogs?"
    limits = SandboxLimits(timeout_s=10)
    backend = Scripted(["```python\nprint(10 * 15)\n```"])
    done = calculate(task, backend, "coder", limits, slot_id="s")
    assert done.values == () and "used min with h unconverted" in done.note
    assert "1 h is 60 min" in backend.requests[0].messages[0].content
    done = calculate(task, Scripted(["```python\nprint(10 * 15 / 60)\n```"]), "coder", limits, slot_id="s")
    assert done.values == (2.5,)


def test_a_failed_program_can_be_shown_its_error_for_a_corrected_one() -> None:
    # bench_programs compares this with a blind redraw (the slot's): the 1.5B repeated its own bug
    failing = "```python\nprint(sum(4000 / 1.1 ** range(1, 4)) - 10000)\n```"
    fixed = "```python\nprint(round(sum(4000 / 1.1**t for t in range(1, 4)) - 10000, 2))\n```"
    npv = "Is a project costing 10,000 that returns 4,000 a year for 3 years worth it at 10%?"
    backend, limits = Scripted([failing, fixed]), SandboxLimits(timeout_s=10)
    first = calculate(npv, backend, "coder", limits, slot_id="s")
    assert first.values == () and first.error.startswith("TypeError: unsupported operand type(s) for ** or pow()")
    again = calculate(npv, backend, "coder", limits, slot_id="s", failed=first)
    assert again.values == (-52.59,) and again.error == ""
    repair = backend.requests[1]
    assert [m.role for m in repair.messages] == ["user", "assistant", "user"] and repair.temperature == 0.0
    assert npv in repair.messages[0].content and "1.1 ** range(1, 4)" in repair.messages[1].content
    assert first.error in repair.messages[2].content and repair.slot_id == "s@recalculate"


def test_an_answer_with_no_computed_value_must_state_its_result() -> None:
    # the review set's NPV (2026-11-29): its program failed, the redraw wrote none, and the answer stopped after
    # the three present values, never stating the NPV or whether the project is worth it: every check passed
    npv = "Is a project costing 10,000 that returns 4,000 a year for 3 years worth it at 10%?"
    failing = "```python\nprint(sum(4000 / 1.1 ** range(1, 4)) - 10000)\n```"
    stops = (
        "## Outline\n1. Present values\n\n## 1. Present values\nEach year's inflow is discounted at 10%: "
        "PV1 = 4000 / 1.1 = 3636.36, PV2 = 4000 / 1.21 = 3305.79 and PV3 = 4000 / 1.331 = 3005.26.\n"
    )
    concludes = stops + "Therefore, the NPV is -52.59, so the project is not worth it.\n"
    backend = Scripted([failing, "I would discount each year.", stops, concludes])
    settings = resolve_settings({"backend": "fake", "best_of": 2, "calculate": True}, env={})
    job = SlotJob(**{**math_job(npv).__dict__, "expert": "finance_analyst"})
    outcome = run_slot(job, backend, settings, emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    quality = outcome.result.quality
    first = {c.name: c for c in quality.candidates[0].checks}["math.concludes"]
    assert not first.passed and "never states its result" in first.detail
    assert quality.chosen == "c2" and quality.passed and "the NPV is -52.59" in outcome.result.raw
    assert "never states its result" in backend.requests[3].messages[-1].content  # the redraw is told why
    # a computed value has its own check (math.result)
    computed = run_slot(math_job(), Scripted([PROGRAM, answer("0.5177")]), settings, emit=lambda _: None).result
    assert computed is not None and computed.quality is not None
    assert "math.concludes" not in {c.name for c in computed.quality.candidates[0].checks}


def test_a_second_program_that_printed_nothing_is_not_quoted_as_if_it_had() -> None:
    # the download time through coe run (2026-11-29): "a second one ''" and "other programs printed 'nothing usable'"
    first, empty = calc("0.1818"), Calculation("m", "the answer held no Python program")
    vote = Verdict("split", first, empty)
    assert vote.check.detail == "a program printed '0.1818', a second one nothing usable, and the answer states neither"
    answer = SlotResult(slot_id="answer", expert="python_coder", raw="It takes 16.384 minutes.\n")
    ledger: list[LedgerEntry] = []
    document = with_working(answer, vote, ledger).raw
    assert "other programs printed nothing usable and more" in document and "'nothing usable'" not in document
    assert ledger[-1].outputs_summary.endswith("; the other program printed nothing usable")
    with_working(answer, Verdict("split", first, calc("16.384")), ledger)
    assert ledger[-1].outputs_summary.endswith("; the other program printed '16.384'")  # quoted once


def math_job(task: str = DICE) -> SlotJob:
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable="prose")
    return SlotJob(
        spec=spec, task=task, constraints=(), expert="math_reasoning", persona="You solve problems.",
        references={}, max_tokens=600, temperature=0.0,
    )  # fmt: skip


def answer(value: str) -> str:
    return (
        "## Outline\n1. Probability\n\n## 1. Probability\nNo six in one roll has probability 5/6, so no six in "
        f"four rolls has (5/6) ** 4. The probability of at least one six is its complement, {value}.\n"
    )


def test_a_math_slot_keeps_the_candidate_that_states_the_computed_result() -> None:
    # a second program votes on the first answer and prints the first program's value: the second answer is told
    # it, and passes on the two programs' word
    backend = Scripted([PROGRAM, answer("0.6"), "```python\nprint(1 - 625 / 1296)\n```", answer("about 0.518")])
    settings = resolve_settings({"backend": "fake", "best_of": 3, "calculate": True}, env={})
    events: list[dict[str, object]] = []
    outcome = run_slot(math_job(), backend, settings, emit=events.append)
    said, again = [e for e in events if e["event"] == "slot_calculated"]  # coe run's progress shows it
    assert said["check"] is True and "0.5177" in str(said["note"]) and "0.5177" in str(again["note"])
    assert outcome.result is not None and outcome.result.quality is not None
    quality = outcome.result.quality
    assert len(backend.requests) == 4 and quality.chosen == "c2" and quality.passed
    assert "which it was told after an earlier answer did not, and another program printed it too" in (
        outcome.result.sections[-1].body
    )
    first = {c.name: c for c in quality.candidates[0].checks}["math.result"]
    assert not first.passed and "0.5177" in first.detail
    [entry] = [e for e in outcome.ledger if e.action == "calculate"]
    assert "printed '0.5177469135802468'" in entry.outputs_summary
    # the program's tokens are spent too
    programs = len(PROGRAM) // 4 + len("```python\nprint(1 - 625 / 1296)\n```") // 4
    assert quality.tokens_generated == sum(c.completion_tokens for c in quality.candidates) + programs


def test_no_candidate_states_it_the_kept_one_says_what_the_program_printed() -> None:
    backend = Scripted([PROGRAM, answer("0.6")])
    settings = resolve_settings({"backend": "fake", "best_of": 2, "calculate": True}, env={})
    outcome = run_slot(math_job(), backend, settings, emit=lambda _: None)
    assert outcome.result is not None
    # the program, the first candidate, a second program for the vote on it (it prints nothing: no vote), the
    # second candidate told the value, and the judge of their tie
    assert [r.slot_id for r in backend.requests] == [
        "answer@calculate",
        "answer",
        "answer@recalculate",
        "answer",
        "answer@judge",
    ]
    assert any("math.result" in n.message and "0.5177" in n.message for n in outcome.notices)


def test_without_a_usable_program_or_with_calculate_off_the_slot_runs_as_before() -> None:
    fails = "```python\nraise SystemExit(3)\n```"
    failing = Scripted([fails, fails, answer("0.6")])  # a program that fails is drawn once more, sampled
    settings = resolve_settings({"backend": "fake", "best_of": 3, "calculate": True}, env={})
    outcome = run_slot(math_job(), failing, settings, emit=lambda _: None)
    assert outcome.result is not None and len(failing.requests) == 3 and outcome.result.quality is not None
    assert [r.slot_id for r in failing.requests[:2]] == ["answer@calculate", "answer@recalculate"]
    [again] = [e for e in outcome.ledger if e.action == "recalculate"]
    assert "again, at t=0.6: the first gave no program that ran" in again.inputs_summary
    assert outcome.result.quality.passed  # no check without a result to check against
    # but the document says its value is unchecked (nh-dose-volume: 2.2 mL, right 5.5, went out unmarked)
    [unchecked] = [n for n in outcome.notices if n.source == "calculate"]
    assert unchecked.message.startswith("the result was not computed (the program failed: ")
    assert unchecked.message.endswith("the answer's numbers are the model's own, unchecked")
    proof = "Prove that the square root of two is irrational."
    outcome = run_slot(math_job(proof), Scripted([fails, fails, answer("0.6")]), settings, emit=lambda _: None)
    assert not [n for n in outcome.notices if n.source == "calculate"]  # a proof asks for no value
    off = Scripted([answer("0.6")])
    run_slot(math_job(), off, resolve_settings({"backend": "fake", "calculate": False}, env={}), emit=lambda _: None)
    assert len(off.requests) == 1
    other = Scripted([answer("0.6")])
    job = math_job()
    run_slot(SlotJob(**{**job.__dict__, "expert": "general_reasoning"}), other, settings, emit=lambda _: None)
    assert len(other.requests) == 1  # only math slots are calculated, and finance that states numbers:
    npv = "Is a project costing 10,000 that returns 4,000 a year for 3 years worth it at 10%?"
    assert calculable(npv, "finance_analyst") and not calculable("Give the steps of a budget.", "finance_analyst")
    npv = "Please determine the net present value at 8%: outlay 50,000; inflows 15,000, 18,000, 20,000, 22,000."
    assert calculable(npv, "finance_analyst")  # a verb that asks for a value, no question mark
    rent = "Build a first-year budget for a cafe with rent of 3,000 a month and 2 staff."
    assert not calculable(rent, "finance_analyst")  # numbers, but no value asked for
    assert calculable("Prove that the square root of two is irrational.", "math_reasoning")
    part = Scripted([answer("0.6")])
    run_slot(SlotJob(**{**job.__dict__, "task": f"A dice game.\n{DICE}"}), part, settings, emit=lambda _: None)
    assert len(part.requests) == 1  # and only a slot that is the whole task: a plan's part may be no number


def test_the_kept_answer_shows_the_computed_result_and_its_program() -> None:
    backend = Scripted([PROGRAM, answer("about 0.518")])
    settings = resolve_settings({"backend": "fake", "calculate": True}, env={})
    outcome = run_slot(math_job(), backend, settings, emit=lambda _: None)
    assert outcome.result is not None
    last = outcome.result.sections[-1]
    # the bare prompt's worked answer is drawn first, its own headings kept under the slot's one part
    assert [m.role for m in backend.requests[1].messages] == ["user"]
    assert [s.title for s in outcome.result.sections] == ["Answer", "Computed result"] and last.label == "2"
    assert DICE_RESULT in last.body and "print(1 - (5 / 6) ** 4)" in last.body
    assert "```text\n0.5177469135802468\n```" in last.body and "states the same value" in last.body
    assert outcome.result.outline[-1].title == "Computed result"
    [shown] = [e for e in outcome.ledger if e.action == "show_working"]
    assert shown.outputs_summary.startswith("agrees:")
    assert not any(e.action == "recalculate" for e in outcome.ledger)  # no second program when they agree


MORTGAGE = "Compute the monthly payment on a 300,000 dollar mortgage at 6% annual interest over 30 years."
HOUSE = (
    "We'd put 20% down on a $420,000 house and borrow the rest on a 30-year fixed mortgage at 6.25% a year. What "
    "would our monthly payment be?"
)


def finance_job(task: str) -> SlotJob:
    return SlotJob(**{**math_job(task).__dict__, "expert": "finance_analyst"})


def told(value: str) -> str:
    return f"## Outline\n1. Payment\n\n## 1. Payment\nWith the monthly rate and 360 payments, it is ${value}.\n"


def test_a_finance_task_with_a_computed_result_draws_the_worked_answer_first_then_the_contract_told_the_value() -> None:
    # the mortgage a user asked (issue 39): the contract's first answer, three sections of outline, stated
    # "approximately $1,500" under the program's $1798.65; the bare prompt's worked answer comes first now
    program = "```python\nr = 0.06 / 12\nprint(round(300000 * r / (1 - (1 + r) ** -360), 2))\n```"
    backend = Scripted([program, "The monthly payment is about $1,500.", told("1,798.65"), program])
    settings = resolve_settings({"backend": "fake", "best_of": 4, "calculate": True}, env={})
    outcome = run_slot(finance_job(MORTGAGE), backend, settings, emit=lambda _: None)
    slots = ["answer@calculate", "answer", "answer", "answer@recalculate"]  # told the value: a second program
    assert [r.slot_id for r in backend.requests] == slots
    assert [m.role for m in backend.requests[1].messages] == ["user"]  # the task alone, as the bare model gets it
    assert "1798.65" in backend.requests[2].messages[-1].content  # the contract's draw is told the value
    assert outcome.result is not None and outcome.result.quality is not None and outcome.result.quality.passed
    assert "$1,798.65" in outcome.result.sections[0].body and "another program printed it too" in (
        outcome.result.sections[-1].body
    )


def test_a_program_that_writes_one_line_over_and_over_is_stopped() -> None:
    from engine.slots.program_of_thought import _ProgramWatch

    watch = _ProgramWatch()
    looping = "import math\n\n" + "# P = (P * r * (1 + r)^n) / ((1 + r)^n - 1)\n" * 3
    for piece in looping:
        watch.feed(piece)
    assert not watch.halt.is_set()  # three times: not yet
    for piece in "# P = (P * r * (1 + r)^n) / ((1 + r)^n - 1)\n":
        watch.feed(piece)
    assert watch.halt.is_set() and watch.line.startswith("# P = (P * r")
    short = _ProgramWatch()
    for piece in "x += 1\n" * 8:  # short lines repeat in real code
        short.feed(piece)
    assert not short.halt.is_set()


def test_a_value_the_answer_was_told_is_confirmed_by_another_program_or_outvoted() -> None:
    # numeric_heldout_first, nh-mortgage-chatty: the 1.5B's program printed $11141.67 (a wrong formula), the answer
    # told it stated it, and the check passed on one program's word; two programs that print $2,068.81 outvote it
    wrong = "```python\nprint(round(336000 * (1 - 0.0625 / 12) / 30, 2))\n```"
    right = "```python\nr = 0.0625 / 12\nprint(round(336000 * r / (1 - (1 + r) ** -360), 2))\n```"
    settings = resolve_settings({"backend": "fake", "best_of": 4, "calculate": True}, env={})
    plain = "The loan is $336,000, and the payment is $2,100."
    # the first answer states neither: a second program votes first, then the answer told the first's value
    backend = Scripted([wrong, plain, right, told("11,141.67"), right])
    outcome = run_slot(finance_job(HOUSE), backend, settings, emit=lambda _: None)
    order = ["answer@calculate", "answer", "answer@recalculate", "answer", "answer@recalculate"]
    assert [r.slot_id for r in backend.requests] == order
    assert outcome.result is not None and outcome.result.quality is not None
    assert not outcome.result.quality.passed and "11,141.67" in outcome.result.body_text()
    first = outcome.result.sections[0]  # the programs' result comes first
    assert first.title == "Computed result" and "**Result: 2068.81**" in first.body
    # a first answer that states what the second program prints is kept on their vote: no answer is told the
    # value two voices reject (GSM8K train rows 40-49: four told answers drawn and then outvoted)
    stated = "The loan is $336,000, and the monthly payment is about $2,068.81."
    backend = Scripted([wrong, stated, right])
    outcome = run_slot(finance_job(HOUSE), backend, settings, emit=lambda _: None)
    assert [r.slot_id for r in backend.requests] == order[:3]
    assert outcome.result is not None and outcome.result.quality is not None and outcome.result.quality.passed
    assert outcome.result.quality.chosen == "c1" and "11,141.67" not in outcome.result.body_text()
    working = outcome.result.sections[-1]
    assert "**Result: 2068.81**" in working.body and "so the result is the answer's" in working.body
    [first] = outcome.result.quality.candidates
    [sided] = [c for c in first.checks if c.name == "math.result"]
    assert sided.passed and "printed ('2068.81'), against the first program's '11141.67'" in sided.detail
    # a second program that prints nothing does not vote: a third does
    fails = "```python\nraise SystemExit(1)\n```"
    program = wrong.replace("336000 * (1 - 0.0625 / 12) / 30", "11141.67")
    backend = Scripted([wrong, "The payment is $2,100.", told("11,141.67"), fails, program])  # it fails stubs too
    outcome = run_slot(finance_job(HOUSE), backend, settings, emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None and outcome.result.quality.passed
    assert "another program printed it too" in outcome.result.sections[-1].body
    # no program confirms it: the value is said to be unconfirmed, and the check fails
    outcome = run_slot(
        finance_job(HOUSE),
        Scripted([wrong, plain, right, told("11,141.67"), "no program"]),
        settings,
        emit=lambda _: None,
    )
    assert outcome.result is not None and outcome.result.quality is not None and not outcome.result.quality.passed
    assert "**Computed: 11141.67** (not confirmed)" in outcome.result.sections[-1].body
    assert "the value is not confirmed" in outcome.result.sections[-1].body


TUB = (
    "Robi Ney wants to fill a 120-liter tub. The tap lets in 12 liters per minute and the cap lets 1 liter escape "
    "per minute. How many minutes does it take to fill the tub?"
)


def test_an_answer_that_states_the_result_only_rounded_is_told_apart_from_it() -> None:
    # GSM8K train row 23 (gsm8k_rows10_29): the program printed 10.909090909090908, the answer boxed 11, and the
    # document said only that the answer agreed, under "Result: 10.909090909090908"
    kept = (
        "## Outline\n1. Calculation\n\n## 1. Calculation\nEach minute fills 12 - 1 = 11 liters, so 120 / 11 = "
        "10.909 cycles; a fraction of a cycle is a whole one.\n\nThus, it takes \\(\\boxed{11}\\) minutes.\n"
    )
    program = "```python\nprint(120 / (12 - 1))\n```"
    settings = resolve_settings({"backend": "fake", "calculate": True}, env={})
    outcome = run_slot(math_job(TUB), Scripted([program, kept]), settings, emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None and outcome.result.quality.passed
    last = outcome.result.sections[-1]
    assert last.title == "Computed result" and "**Result: 10.9091** (rounded from 10.909090909090908)" in last.body
    assert "The answer above states it rounded, as 11: check that the task wants it rounded." in last.body
    assert "states the same value" not in last.body
    exact = kept.replace("boxed{11}", "boxed{10.91}")  # to the digits a reader uses: the same value
    outcome = run_slot(math_job(TUB), Scripted([program, exact]), settings, emit=lambda _: None)
    assert outcome.result is not None and "states the same value" in outcome.result.sections[-1].body


def disagreeing(second: str, third: str = "```python\nprint(0.3)\n```") -> tuple[SlotOutcome, Scripted, Scripted]:
    """A math slot whose two candidates state 0.6 and 0.7 where the program prints 0.5177, ``second`` the second
    program's answer and ``third`` a third's: the bigger model writes the programs and draws nothing else."""
    backend = Scripted([answer("0.6"), answer("0.7"), answer("0.8"), answer("0.9")])
    settings = resolve_settings({"backend": "fake", "best_of": 4, "calculate": True}, env={})
    bigger = Scripted([PROGRAM, second, third])
    job = SlotJob(**{**math_job().__dict__, "escalation": ("big", bigger)})
    return run_slot(job, backend, settings, emit=lambda _: None), backend, bigger


def test_an_answer_that_disagrees_gets_one_more_draw_then_programs_vote_until_two_agree_or_three_differ() -> None:
    # best_of 4 and escalation on: with a computed result, two candidates in all and no bigger model's
    outcome, backend, bigger = disagreeing("```python\nprint(0.25)\n```")
    assert outcome.result is not None
    assert [r.slot_id for r in bigger.requests] == ["answer@calculate", "answer@recalculate", "answer@recalculate"]
    assert bigger.requests[1].temperature > 0  # another program, not the first one again
    assert bigger.requests[1].seed != bigger.requests[2].seed  # and the third is not the second again
    assert [r.slot_id for r in backend.requests] == ["answer", "answer", "answer@judge"]
    assert "0.5177" in backend.requests[1].messages[-1].content  # the second draw is told the value
    last = outcome.result.sections[-1]  # three values: no result, said plainly
    assert last.title == "Computed result"
    assert "**Computed: 0.517747** (rounded from 0.5177469135802468; not confirmed)" in last.body
    assert "they disagree, so no result is given" in last.body and "'0.25'" in last.body
    [shown] = [e for e in outcome.ledger if e.action == "show_working"]
    assert shown.outputs_summary.startswith("split:")
    assert any("math.result" in n.message for n in outcome.notices)  # and the caveat says it too


def test_two_programs_that_agree_outvote_the_answer_and_their_result_comes_first() -> None:
    outcome, _, _ = disagreeing("```python\nfrom math import isclose\nprint(1 - 625 / 1296)\n```")
    assert outcome.result is not None and outcome.result.quality is not None
    last = outcome.result.sections[0]
    assert [(s.label, s.title) for s in outcome.result.sections] == [("1", "Computed result"), ("2", "Answer")]
    assert outcome.result.raw.index("Computed result") < outcome.result.raw.index("Probability")
    assert "The answer below does not state this value" in last.body
    assert DICE_RESULT in last.body and "another program printed it too" in last.body
    # two programs by one model are no proof (numeric_heldout: two printed the same wrong mortgage payment)
    assert "written by the same model and can share its mistake" in last.body
    assert not outcome.result.quality.passed and any("two programs" in n.message for n in outcome.notices)


def test_a_third_program_breaks_a_three_way_split() -> None:
    # the mortgage's case: the greedy program was right, the answer and the sampled second were not
    same = "```python\nprint(1 - 625 / 1296)\n```"
    outcome, _, bigger = disagreeing("```python\nprint(0.25)\n```", same)
    assert outcome.result is not None and len(bigger.requests) == 3
    last = outcome.result.sections[0]
    assert DICE_RESULT in last.body and "print(1 - 625 / 1296)" not in last.body  # the first's
    assert "another program printed it too" in last.body
    outcome, _, _ = disagreeing("```python\nprint(0.25)\n```", "```python\nprint(0.6)\n```")
    assert outcome.result is not None and "**Result: 0.6**" in outcome.result.sections[-1].body  # sides with the answer


def test_a_second_program_that_agrees_with_the_answer_makes_it_the_result() -> None:
    outcome, _, _ = disagreeing("```python\nprint(0.6)\n```")
    assert outcome.result is not None and outcome.result.quality is not None
    last = outcome.result.sections[-1]
    assert "**Result: 0.6**" in last.body and "print(0.6)" in last.body and "'0.5177469135802468'" in last.body
    assert outcome.result.quality.passed and not outcome.notices  # the vote confirms the answer: no caveat


def test_a_program_without_a_result_adds_no_section() -> None:
    backend = Scripted(["```python\nraise SystemExit(3)\n```", answer("0.6")])
    outcome = run_slot(math_job(), backend, resolve_settings({"backend": "fake"}, env={}), emit=lambda _: None)
    assert outcome.result is not None and [s.title for s in outcome.result.sections] == ["Probability"]
    assert not any(e.action == "show_working" for e in outcome.ledger)


def test_calculation_is_on_by_default_for_a_word_problem_the_generalist_gets() -> None:
    assert resolve_settings({}, env={}).calculate
    word = "A shop sells 12 pens for 3 dollars each and 5 books for 8 dollars each. How much is that in all?"
    assert calculable(word, "general_reasoning") and calculable(
        "A dose of 5 mg/kg for a 12 kg child: what is it?", "medical_clinical"
    )
    assert not calculable("Write a 300 word essay on 2 topics.", "general_reasoning")


def test_the_answers_result_is_its_final_statement_not_an_intermediate_figure() -> None:
    # GSM8K train row 5 (kept answer, 2026-11-28): "360 minutes" on the way, a boxed 21600 as the result
    shadow = (
        "\\[ 6 \\text{ hours} = 6 \\times 60 \\text{ minutes/hour} = 360 \\text{ minutes} \\]\n"
        "\\[ 1800 \\text{ feet} \\times 12 \\text{ inches/foot} = 21600 \\text{ inches} \\]\n"
        "Therefore, the length of the shadows is \\(\\boxed{21600}\\) inches."
    )
    assert final_statement(shadow) == "21600" and not states(shadow, "360", "How long are the shadows?")
    hours = "She works 3 hours, then 2 more: 3 + 2 = 5 hours.\nSo she stays at work for 3 hours.\nCheck: 3 > 0."
    assert final_statement(hours) == "So she stays at work for 3 hours." and not states(hours, "5", "How long?")
    assert states("The total comes to 5 hours.", "5", "How long?")  # no box, no cue: the whole text


def test_a_long_printed_line_is_given_as_its_value() -> None:
    from engine.slots.program_of_thought import stated_value

    line = "The monthly payment on a 300,000 dollar mortgage at 6% annual interest over 30 years is $1798.65"
    assert stated_value(line) == "$1798.65"
    assert stated_value("Monthly payment: $1798.65") == "$1798.65"  # what follows its label
    assert stated_value("The monthly payment is £365.45") == "£365.45"
    assert stated_value("Together they take: 2 hours 24 minutes.") == "2 hours 24 minutes"  # with its unit
    assert stated_value("12:00") == "12:00" and stated_value("2157") == "2157"
    assert stated_value("The answer is the word seven, written out in full here.") == (
        "The answer is the word seven, written out in full here."
    )


def test_a_quantity_question_is_computed_whichever_expert_the_router_chose() -> None:
    # numeric_heldout2's download question went to the software architect, which stated 2.81 minutes (22.04)
    download = (
        "How long, in minutes, will it take to download a 12.4 GB game over a connection that holds a steady "
        "75 Mbps? Take 1 GB = 1,000 MB and 1 byte = 8 bits, and ignore protocol overhead."
    )
    assert calculable(download, "software_architect") and calculable(download, "technical_writer")
    assert not calculable(download, "python_coder", writes_code=True)  # a function that computes it is the answer
    design = "Design a cache for 10,000 requests per second across 3 regions, with invalidation rules."
    assert not calculable(design, "software_architect")  # numbers, but no quantity asked for
    assert not calculable("How long should a runbook be?", "devops_engineer")  # a quantity, but nothing to compute
    backup = "A backup job kicks off at 21:40 and runs for 7 hours 55 minutes. At what clock time should it finish?"
    assert calculable(backup, "devops_engineer")  # numeric_heldout_rest: 26:00 stated, 05:35 right


def test_the_headline_gives_a_long_float_as_a_reader_writes_it() -> None:
    # numeric_heldout2_after: "**Result: 16920.984050717176**" for a present value, "58.800000000000004" for a cost
    assert is_money("What is it worth today in dollars?") and is_money("a £12,000 car") and not is_money("12 kg")
    assert readable("16920.984050717176", money=True) == "16,920.98"
    assert readable("16920.984050717176") == "16,921" and readable("58.800000000000004") == "58.8"
    assert readable("$1798.6515754", money=True) == "$1,798.65" and readable("-12.3456789", money=True) == "-12.35"
    assert readable("0.5177469135802468") == "0.517747" and readable("4.285714285714286") == "4.28571"
    assert readable("0.0734215", money=True) == "0.0734215"  # a rate in a money task is not cents
    assert readable("166.5290") == "166.5290" and readable("166.5290", money=True) == "166.53"  # to the cent
    assert readable("£74.9700", money=True) == "£74.97" and readable("74.9700") == "74.9700"  # nh-paint-cost
    for printed in ("£365.45", "2 hours 24 minutes", "0.9", "45"):
        assert readable(printed, money=True) == printed  # already as a reader writes it, or not one number


def test_the_headline_says_rounded_only_when_the_value_changed() -> None:
    paint = "How much will I spend on paint at £24.99 a tin, 3 tins?"
    printed = "The total cost of paint is £74.9700"
    shown = Calculation("m", "", "print()", printed, printed_values(printed, paint))
    answer = SlotResult(slot_id="answer", expert="finance_analyst", raw="It costs £74.97.\n")
    working = with_working(answer, Verdict("agrees", shown), [], money=True).raw
    assert "**Result: £74.97**: printed by" in working and "rounded from" not in working  # the same value
    pv = "16920.984050717176"
    shown = Calculation("m", "", "print()", pv, printed_values(pv, "25,000 in 8 years at 5%"))
    working = with_working(answer, Verdict("agrees", shown), [], money=True).raw
    assert "**Result: 16,920.98** (rounded from 16920.984050717176)" in working and f"```text\n{pv}\n```" in working


def test_a_number_with_a_scale_states_its_digits_and_its_value() -> None:
    # the job offers (2026-12-02): the programs read "$85k" as 85 and printed 95; the answer's "$95k" was outvoted
    task = (
        "I have 3 job offers: $85k with a 10% bonus, $92k flat, and $80k plus $15k in stock per year. Which pays "
        "the most per year?"
    )
    answer = "The job offer that pays the most per year is **Option 3** with a total annual salary of $95k."
    assert states(answer, "95", task) and states(answer, "95000", task) and not states(answer, "93.5", task)
    assert states("It comes to 1.2 million dollars.", "1200000") and states("about $3.4bn", "3400000000")
    assert not states("Run 5km a day.", "5000")  # a unit, not a scale
    assert printed_values("85", task) == () and printed_values("85000", task) == ()  # echoes of "$85k"


LIZARD = (
    "Jan's three-eyed lizard has 3 times more wrinkles than eyes, and seven times more spots than wrinkles. How many "
    "fewer eyes does the lizard have than the combined number of spots and wrinkles?"
)
"""gsm8k_rows70_79, row 73: the answer boxed 69, the program printed 3 - 72 = -69, and the headline read -69."""


def test_a_difference_the_task_asks_the_size_of_is_given_as_its_size() -> None:
    assert asks_a_size(LIZARD) and asks_a_size("How much more money does Betty need to buy the wallet?")
    assert not asks_a_size("What is the net present value of the project at 10%?")
    assert not asks_a_size("How many eyes does the lizard have? It has more wrinkles than eyes.")
    shown = Calculation("m", "", "print(3 - 72)", "-69", printed_values("-69", LIZARD))
    answer = SlotResult(slot_id="answer", expert="math_reasoning", raw="Therefore, the answer is \\boxed{69}.\n")
    assert result_check(answer.raw, shown).passed  # signs are not compared
    working = with_working(answer, Verdict("agrees", shown), [], size=True).raw
    assert "**Result: 69** (the program printed -69: the task asks for a difference's size)" in working
    assert "```text\n-69\n```" in working  # the output stays verbatim
    assert "**Result: -69**: printed by" in with_working(answer, Verdict("agrees", shown), []).raw
    positive = Calculation("m", "", "print(72 - 3)", "69", printed_values("69", LIZARD))
    assert "**Result: 69**: printed by" in with_working(answer, Verdict("agrees", positive), [], size=True).raw


RECIPE = (
    "A bread recipe for 4 people needs 300 g of flour, 2 eggs and 150 ml of milk. How much of each do I need for 10 "
    "people?"
)
RECIPE_OUTPUT = (
    "Flour needed for 10 people: 750.0 grams\nEggs needed for 10 people: 5.0 eggs\n"
    "Milk needed for 10 people: 375.0 milliliters"
)
"""2026-12-07, through ``coe run``: the program's three lines, of which the headline gave the milk alone."""


def test_a_result_of_one_value_for_each_thing_asked_is_every_line() -> None:
    assert result_lines(RECIPE_OUTPUT, RECIPE) == 3
    assert printed_values(RECIPE_OUTPUT, RECIPE, 3) == (750.0, 5.0, 375.0)  # the 10 each line echoes is the task's
    assert result_lines(RECIPE_OUTPUT, "How much milk do I need for 10 people if 4 need 150 ml?") == 1
    assert result_lines("Step 1: 12\nThe total is\n42", RECIPE) == 1  # a line that gives no value ends the block
    shown = Calculation("m", "", "print()", RECIPE_OUTPUT, printed_values(RECIPE_OUTPUT, RECIPE, 3), lines=3)
    wrong = "For 10 people you need 30 grams of flour, 0.2 eggs and 15 ml of milk."
    check = result_check(wrong, shown)
    assert not check.passed and "printed 'Flour needed for 10 people: 750.0 grams; Eggs needed" in check.detail
    right = "For 10 people you need 750 g of flour, 5 eggs and 375 ml of milk."
    assert result_check(right, shown).passed
    assert not result_check("You need 375 ml of milk.", shown).passed  # the milk alone is not the result
    answer = SlotResult(slot_id="answer", expert="math_reasoning", raw=right + "\n")
    working = with_working(answer, Verdict("agrees", shown), []).raw
    assert (
        "**Result: Flour needed for 10 people: 750.0 grams; Eggs needed for 10 people: 5.0 eggs; Milk needed for 10 "
        "people: 375.0 milliliters**: printed by" in working
    )


CAR = "A car travels 150 km in 1 hour 40 minutes. What is its average speed in km/h?"
"""2026-12-07, through ``coe run``: two programs wrote ``hours = 40 / 60`` and outvoted the answer's right 90."""


def test_a_program_that_leaves_out_part_of_a_two_unit_quantity_gives_no_check_and_is_drawn_again() -> None:
    from engine.units import compounds, split_compounds

    [car] = compounds(CAR)
    assert (car.written, car.whole, car.part, car.factor) == ("1 hour 40 minutes", 1, 40, 60)
    assert car.totals[0] == 100 and abs(car.totals[1] - 5 / 3) < 1e-12
    assert [c.written for c in compounds("It weighs 2 kg 300 g and runs 5 km 10 km.")] == ["2 kg 300 g"]
    program = "hours = 40 / 60\nprint(150 / hours)\n"
    assert split_compounds(program, [car]) == [car]
    partial = f"```python\n{program}```"
    for whole in ("print(150 / (1 + 40 / 60))", "print(150 / (100 / 60))", "minutes = 40\nprint(150 * 60 / 100)"):
        assert split_compounds(whole, [car]) == [], whole
    limits = SandboxLimits(timeout_s=10)
    done = calculate(CAR, Scripted([partial]), "coder", limits, slot_id="s")
    assert done.values == () and done.error == "left out the 1 of '1 hour 40 minutes'"
    assert done.note == "the program printed '225.0' but left out the 1 of '1 hour 40 minutes'"
    right = "```python\nprint(150 / (1 + 40 / 60))\n```"
    stated = (
        "## Outline\n1. Speed\n\n## 1. Speed\n1 hour 40 minutes is 5/3 hours, so the speed is 150 / (5/3) = 90 km/h.\n"
    )
    backend = Scripted([partial, right, stated])
    settings = resolve_settings({"backend": "fake", "best_of": 2, "calculate": True}, env={})
    outcome = run_slot(math_job(CAR), backend, settings, emit=lambda _: None)
    assert [r.slot_id for r in backend.requests[:3]] == ["answer@calculate", "answer@recalculate", "answer"]
    [again] = [e for e in outcome.ledger if e.action == "recalculate"]
    assert "the first program left out the 1 of '1 hour 40 minutes'" in again.inputs_summary
    assert outcome.result is not None and "**Result: 90** (rounded from 90.00000000000001)" in outcome.result.raw


M_AND_MS = (
    "Carter has a jar with 20 green M&Ms and 20 red M&Ms. He eats 12 of the green M&Ms, then his sister comes and "
    "eats half the red M&Ms and adds 14 yellow M&Ms. If Carter picks an M&M at random now, what is the percentage "
    "chance he'll get a green M&M?"
)
"""gsm8k row 83: the answer worked out 8 of 32 (25%) and its own program printed 25.0; the two programs written for
the task added the yellow ones to the green and agreed on 47.83, which the document gave as the result."""
OWN_ANSWER = (
    "Green left: 20 - 12 = 8. Red left: 10. Total: 8 + 10 + 14 = 32.\n\n```python\ngreen = 20 - 12\nred = 20 // 2\n"
    "print(green / (green + red + 14) * 100)\n```\n\nThe chance is \\(\\boxed{25}\\)%."
)


def test_the_answers_own_program_votes_with_it() -> None:
    from engine.slots.program_of_thought import answer_program

    own = answer_program(OWN_ANSWER, M_AND_MS, SandboxLimits())
    assert own is not None and own.values == (25.0,) and own.model == "the answer"
    wrong = calc("47.82608695652174", M_AND_MS)
    # two programs against the answer and its own program: a split, no result given, and it says why
    vote = verdict(OWN_ANSWER, wrong, lambda: calc("47.82608695652174", M_AND_MS), own=own)
    assert vote.agreement == "split" and vote.result == ""
    assert vote.check.detail == "two programs written for this task print '47.82608695652174', and the answer and " \
        "its own program state '25.0'"  # fmt: skip
    working = with_working(SlotResult(slot_id="s", expert="e", raw=OWN_ANSWER), vote, []).raw
    assert "the answer above states '25.0', which its own program printed: they disagree" in working
    # without its own program the two programs outvote it, as before
    assert verdict(OWN_ANSWER, wrong, lambda: calc("47.82608695652174", M_AND_MS)).agreement == "computed"
    # one program against the answer and its own: the answer's result
    backed = verdict(OWN_ANSWER, wrong, lambda: None, own=own)
    assert backed.agreement == "answer" and backed.result == "25.0"
    # an answer told the value, or whose program prints the first program's value, gets no such vote
    assert verdict(OWN_ANSWER, wrong, lambda: calc("47.82608695652174", M_AND_MS), own=wrong).agreement == "computed"
    assert answer_program("The chance is 25%.", M_AND_MS, SandboxLimits()) is None  # no program


def test_a_program_that_grows_by_a_percentage_as_its_number_gives_no_check() -> None:
    from tests.unit.test_units import CAR_LOAN, LOAN_IN_PERCENT

    limits = SandboxLimits(timeout_s=10)
    backend = Scripted([f"```python\n{LOAN_IN_PERCENT}```"])
    done = calculate(CAR_LOAN, backend, "coder", limits, slot_id="s")
    assert done.values == () and "but grew by 7.9 where the task's 7.9% is 0.079" in done.note
    assert "(7.9% is 0.079)" in backend.requests[0].messages[0].content
    right = LOAN_IN_PERCENT.replace("7.9 / 12", "0.079 / 12")
    done = calculate(CAR_LOAN, Scripted([f"```python\n{right}```"]), "coder", limits, slot_id="s")
    assert done.values and abs(float(done.values[0]) - 374.2285) < 1e-3
