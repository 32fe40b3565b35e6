"""A math task's result, computed by a program a code model writes and the sandbox runs (program of thought).

Small models set up a word problem better than they carry it out, and a program carries it out exactly: asked for
a short Python program that prints the answer, Qwen2.5-Coder-1.5B computed four of five review-set problems
(at least one six in four rolls: 0.5177; +20% then -20%: -4.0; the first 100 integers: 5050; 5,000 at 6% for
ten years: 8954.24), where the review set's last runs had the probability wrong on both sides and the bare model
the compound interest.

:func:`calculable` says which tasks (math; finance that states numbers); :func:`calculate` asks for the program
(the biggest installed code model, else the slot's own) and runs it in :mod:`engine.slots.sandbox`;
:func:`result_check` is the ``math.result`` check of each candidate: it states the values the program printed
(to the digits it shows, within 1%; a percentage reads as its fraction too). A candidate that does not state them
fails, so one more is drawn with the value named. When the kept answer still disagrees, a second program, sampled,
votes (:func:`verdict`): with the answer, with the first program, or with neither. :func:`with_working` then adds
the working to the kept answer as its source, as a lookup shows its quote: a "Computed result" section with the
result the vote gives (none for a three-way split), the program that printed it and its output, and a sentence on
the agreement (a disagreement said plainly, never silently). The expert's own words are kept as written.

A program's value that the task itself states (``4 rolls``) proves nothing, and a program that fails, prints no
number or prints more than :data:`MAX_VALUES` of them gives no check.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import engine.prompts as prompts
from engine.slots.checks import code_blocks, repeated_line
from engine.slots.checks.text import PYTHON_TAGS
from engine.slots.contracts import ASKS_A_QUANTITY
from engine.slots.inline_arithmetic import compute
from engine.slots.sandbox import SandboxLimits, SandboxResult, run_python
from engine.spread import asked_spread, spread_hint, wrong_spread
from engine.units import (
    compounds,
    conversion_hint,
    conversions,
    percent_hint,
    percent_unscaled,
    split_compounds,
    unconverted,
)
from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from state.passport import LedgerEntry
from state.python_ast import parse_module
from state.quality import CheckResult
from state.result import OutlineItem, Section, SlotResult, render_section

__all__ = [
    "WORKING_TITLE",
    "Calculation",
    "MAX_VALUES",
    "RECALCULATE_TEMPERATURE",
    "Verdict",
    "asks_a_size",
    "asks_a_value",
    "calculable",
    "calculate",
    "concludes_check",
    "final_statement",
    "fractions_read",
    "is_money",
    "printed_values",
    "readable",
    "repair_messages",
    "result_check",
    "result_lines",
    "stated_rounded",
    "verdict",
    "with_working",
]

PROGRAM_TOKENS = 600
"""The program's answer budget: a few lines of arithmetic and their comments (the longest of five review-set
programs: 393 tokens). Asked for no comments, the 1.5B model's program for the dice problem was a wrong
simulation that failed; with them (its steps, as comments) it was right."""
RECALCULATE_TEMPERATURE = 0.6
"""The second program's temperature: another program for the vote, not the first one again."""
MAX_VALUES = 3
"""A last line with more numbers than this is a report, not a result: no check."""
RESULT_LINES = 4
"""The most printed lines a result of several values spans (one value a line: the flour, the eggs, the milk)."""
AGREED = ("agrees", "confirmed", "answer")
"""The votes whose result the kept answer states: its math.result check passes."""
RELATIVE_TOLERANCE = 0.01
"""A stated value within 1% of the computed one agrees (besides agreeing to the digits it shows)."""

CALCULATED_EXPERTS = ("math_reasoning",)
"""Experts whose task's result is always computed (a proof's program prints no number, and gives no check)."""
NUMERIC_EXPERTS = ("finance_analyst", "general_reasoning", "medical_clinical")
"""Experts whose task's result is computed when the task asks for one (:data:`_ASKS_A_VALUE`) and states two numbers
or more (a project's cash flows and discount rate, a sum and a rate, a dose per kilogram and a weight, a word
problem the router gave the generalist), not when it asks for a plan or a budget."""
WORKING_TITLE = "Computed result"
"""The title of the section that shows the program, what it printed and whether the answer agrees."""
_ASKS_A_VALUE = re.compile(
    r"\?|\b(?:how (?:much|many|long)|what(?:'s| (?:is|was|will|would|are))|calculate|compute|work out|whether|"
    r"determine|find|figure out|estimate)\b",
    re.I,
)
"""A task that asks for a value (a question, or a verb that asks for one: "Please determine the net present value
...", numeric_heldout_first, was answered with no program and no NPV, every check passing)."""

_OF_EACH = re.compile(
    r"\bhow (?:much|many)\b(?:\s+\w+){0,2}\s+of each\b|\b(?:amounts?|quantit(?:y|ies)) of each\b", re.I
)
"""A question whose answer is one value for each of several things ("How much of each do I need for 10 people?")."""
_ASKS_A_SIZE = re.compile(
    r"\bhow (?:many|much)\b[^.?!]{0,40}?\b(?:more|fewer|less|longer|shorter|older|younger|farther|further|"
    r"taller|heavier|lighter|bigger|smaller|cheaper|dearer)\b",
    re.I,
)
"""A question whose answer is the size of a difference ("how many fewer eyes does the lizard have than ...")."""

_NUMBER = re.compile(
    r"(?<![\w.])(?P<digits>-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"(?:(?P<scale>k|K|M|bn)|\s(?P<word>thousand|million|billion))?(?![\w])(?P<percent>\s*%)?"
)
"""A number as written: thousands commas, decimals, an exponent, a scale ("$95k", "1.2 million") and a percent sign."""
_SCALES = {"k": 1e3, "K": 1e3, "thousand": 1e3, "M": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_GIVES_RESULT = re.compile(
    r"\b(?:therefore|thus|hence|so|in total|altogether|the (?:final )?(?:answer|result|total)|answer:|result:)\b",
    re.I,
)
_TIME = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::\d{2})?(?![\d:])")
_DATE_OF_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}(?=[ T]\d{1,2}:\d{2})")
"""The date a program's ``datetime`` prints before the time of day ("2023-10-01 17:25:00"): where the task names no
date, a day the program made up to hold the time (a flight's landing time read as four values, no result)."""
_DATED = re.compile(
    r"\b(?:1[89]|20)\d{2}\b|\b\d{1,2}/\d{1,2}\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\s+\d", re.I
)
"""A task that names a date (a year, "3/14", "March 1"): the day a program prints is part of its answer."""


@dataclass(frozen=True)
class Calculation:
    """A program written for the task, what it printed, and the values read from its last line."""

    model: str
    note: str
    """What happened, for the ledger ("the program printed '0.5177'", "the program failed: ...")."""
    program: str = ""
    output: str = ""
    values: tuple[float | str, ...] = ()
    """Numbers, and times of day as ``"H:MM"`` strings; empty when the calculation gives no check."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    """The line a failed program's run ended with ("TypeError: ..."); '' when it ran or none came back."""
    lines: int = 1
    """How many of the last printed lines give the result (:func:`result_lines`): one, or one a value asked."""

    @property
    def result(self) -> str:
        """What the program printed as the result: its last line, or its last ``lines`` lines joined by "; "."""
        printed = [line.strip() for line in self.output.splitlines() if line.strip()]
        return "; ".join(printed[-self.lines :]) if printed else ""


def calculable(task: str, expert: str, *, writes_code: bool = False) -> bool:
    """Whether the result of ``task``, answered by ``expert``, is worth computing by a program.

    Always for :data:`CALCULATED_EXPERTS`; for :data:`NUMERIC_EXPERTS` when the task states two numbers or more and
    asks for a value; for any other expert whose answer is not code (``writes_code``: a function that computes
    interest is the answer, not a number) when it states two numbers or more and asks for a quantity in so many
    words (:data:`ASKS_A_QUANTITY`).
    """
    if expert in CALCULATED_EXPERTS:
        return True
    if len(_numbers(task)) < 2:
        return False
    if expert in NUMERIC_EXPERTS:
        return _ASKS_A_VALUE.search(task) is not None
    return not writes_code and ASKS_A_QUANTITY.search(task) is not None


def asks_a_value(task: str) -> bool:
    """Whether ``task`` asks for a value (a question, or a verb that asks for one), not a proof or a plan."""
    return _ASKS_A_VALUE.search(task) is not None or ASKS_A_QUANTITY.search(task) is not None


def calculate(
    task: str,
    backend: ExpertBackend,
    model: str,
    limits: SandboxLimits,
    *,
    slot_id: str,
    cancel: threading.Event | None = None,
    temperature: float = 0.0,
    draw: int = 0,
    failed: Calculation | None = None,
) -> Calculation:
    """Ask ``backend`` for a program that prints the task's answer, and run it in the sandbox.

    The calculation's ``values`` are empty (no check) when no program came back, it looped (stopped as it was
    written: :class:`_ProgramWatch`), it failed, it printed no single result, or what it printed the task states
    already. Backend errors propagate. The first program is greedy;
    the ones :func:`verdict` asks for are sampled at ``temperature``, each with its own seed (``draw`` 1, 2).
    With ``failed`` (a program that ran into an error), the model is shown its program and the error's line and
    asked for the program corrected (:func:`repair_messages`): measured against a blind redraw by
    ``bench.bench_programs``; slots draw blind, since the 1.5B wrote its bug again (docs/decisions/answers.md).
    """
    watch = _ProgramWatch()
    request = GenerationRequest(
        messages=repair_messages(task, failed) if failed is not None else program_messages(task),
        max_tokens=PROGRAM_TOKENS,
        temperature=temperature,
        seed=1 + draw if temperature else 0,
        slot_id=f"{slot_id}@recalculate" if temperature or failed is not None else f"{slot_id}@calculate",
        cancel=cancel,
        halt=watch.halt,
        on_token=watch.feed,
    )
    gen = backend.generate(request)

    def made(
        note: str,
        program: str = "",
        output: str = "",
        values: tuple[float | str, ...] = (),
        error: str = "",
        lines: int = 1,
    ) -> Calculation:
        tokens = gen.prompt_tokens, gen.completion_tokens
        return Calculation(model, note, program, output, values, *tokens, error, lines)

    program = program_in(gen.text)
    if watch.halt.is_set():
        return made(f"the program looped and was stopped ({watch.line[:80]!r} {LOOP_LINES} times in a row)")
    if program is None:
        return made("the answer held no Python program")
    ran = run_python({"program.py": program}, "program.py", limits=limits)
    if (why := _failure(ran)) is not None:
        return made(f"the program failed: {why}", program, error=why)
    output = ran.stdout.strip()
    lines = result_lines(output, task)
    values = printed_values(output, task, lines)
    if values and (split := split_compounds(program, compounds(task))):
        why = f"left out the {split[0].whole:g} of {split[0].written!r}"
        return made(f"the program printed {output[-120:]!r} but {why}", program, output, error=why)
    if values and (skipped := unconverted(program, conversions(task))):
        c = skipped[0]
        return made(
            f"the program printed {output[-120:]!r} but used {c.given} with {c.named} unconverted", program, output
        )
    if values and (why := set_aside(program, task)) is not None:
        return made(f"the program printed {output[-120:]!r} but {why}", program, output, error=why)
    if values:
        return made(f"the program printed {output[-120:]!r}", program, output, values, lines=lines)
    if printed_values(output):
        return made(f"the program printed {output[-120:]!r}, only values the task states", program, output)
    return made(f"the program printed no single result ({output[-120:]!r})", program, output)


def set_aside(program: str, task: str) -> str | None:
    """Why a program that printed a value gives no check, or None.

    It grew by a percentage's number (:func:`engine.units.percent_unscaled`) or took the other kind of spread than
    the task names (:func:`engine.spread.wrong_spread`). A single slot's program and a plan's figures program alike.
    """
    if (percent := percent_unscaled(program, task)) is not None:
        return f"grew by {percent:g} where the task's {percent:g}% is {percent / 100:g}"
    if (call := wrong_spread(program, task)) is not None:
        other = "population" if asked_spread(task) == "sample" else "sample"
        return f"took the {other}'s spread ({call[:60]})"
    return None


OWN_PROGRAM = "the answer"
"""The ``model`` of a calculation that is the answer's own program (:func:`answer_program`)."""


def answer_program(text: str, task: str, limits: SandboxLimits) -> Calculation | None:
    """The answer's own Python program, run in the sandbox, when it prints a result; else None.

    An expert that checks its reasoning with a program in its answer gives the vote a program of its own
    (:func:`verdict`): gsm8k row 83, the answer worked out 8 of 32 M&Ms (25%) and its own program printed 25.0,
    where the two programs written for the task added the yellow ones to the green and agreed on 47.83, which the
    document gave as the result.
    """
    blocks = [code for tag, code in code_blocks(text) if tag in PYTHON_TAGS and code.strip()]
    if not blocks:
        return None
    ran = run_python({"program.py": blocks[0]}, "program.py", limits=limits)
    if _failure(ran) is not None:
        return None
    output = ran.stdout.strip()
    lines = result_lines(output, task)
    values = printed_values(output, task, lines)
    if not values:
        return None
    return Calculation(OWN_PROGRAM, f"the answer's own program printed {output[-120:]!r}", blocks[0], output, values,
                       lines=lines)  # fmt: skip


def _failure(ran: SandboxResult) -> str | None:
    """Why a program's run failed (it timed out, broke a sandbox rule, or ended in an error), or None: it ran."""
    if not (ran.timed_out or ran.returncode != 0 or ran.violations):
        return None
    error = (ran.stderr.strip().splitlines() or ["no error output"])[-1]  # "NameError: name 'x' ...", not its trace
    return "timed out" if ran.timed_out else (ran.violations or [error[-160:]])[0]


def program_messages(task: str) -> tuple[ChatMessage, ...]:
    """The request for a program that prints ``task``'s answer (with the unit conversions it needs named)."""
    hints = conversion_hint(conversions(task)) + percent_hint(task) + spread_hint(task)
    return (ChatMessage("user", prompts.PROGRAM_PROMPT.format(task=task.strip()) + hints),)


def repair_messages(task: str, failed: Calculation) -> tuple[ChatMessage, ...]:
    """The request for ``failed``'s program corrected: the first request, the program as its answer, the error."""
    return (
        *program_messages(task),
        ChatMessage("assistant", f"```python\n{failed.program.strip()}\n```"),
        ChatMessage("user", prompts.PROGRAM_REPAIR_PROMPT.format(error=failed.error)),
    )


LOOP_LINES = 4
"""A program that writes the same line (of more than ten characters) this many times in a row is stopped."""


class _ProgramWatch:
    """Stops a program that loops while it is written.

    The 1.5B wrote one comment line, an annuity's formula, until its 600 tokens were spent (47 s,
    nh2-annuity-income), and the slot went on with no check at all.
    """

    def __init__(self) -> None:
        self.halt = threading.Event()
        self.line = ""
        """The line that looped ('' until one does)."""
        self._text = ""

    def feed(self, piece: str) -> None:
        """One more piece of the program (never raises: it runs on the generating thread)."""
        self._text += piece
        if "\n" in piece and not self.halt.is_set():  # a line is done: the program so far, read again (a few dozen)
            *done, _ = self._text.split("\n")
            if (line := repeated_line(done, LOOP_LINES)) is not None:
                self.line = line
                self.halt.set()


def printed_values(output: str, task: str = "", lines: int = 1) -> tuple[float | str, ...]:
    """The values of a program's last printed line (its last ``lines``): times of day and numbers, but the task's.

    None when a line holds more than :data:`MAX_VALUES` (a report, not a result). A number the task states is
    an echo ("The sum of the first 100 positive integers is 5050"), or proves nothing when it is the result.
    """
    printed = [line for line in output.splitlines() if line.strip()]
    found = [_line_values(line, task) for line in printed[-lines:]]
    if not found or any(not 0 < len(values) <= MAX_VALUES for values in found):
        return ()
    return tuple(v for values in found for v in values)


def _line_values(line: str, task: str) -> tuple[float | str, ...]:
    if not _DATED.search(task):
        line = _DATE_OF_TIME.sub(" ", line)
    times = [f"{int(m.group(1))}:{m.group(2)}" for m in _TIME.finditer(line)]
    given = {abs(w) for w, _, _ in _numbers(task, scaled=True)}
    return (*times, *(v for v, _, _ in _numbers(_TIME.sub(" ", line)) if abs(v) not in given))


def result_lines(output: str, task: str) -> int:
    """How many of the last printed lines give the result: one, unless the task asks how much of each.

    Then it is the last lines that each give one value, up to :data:`RESULT_LINES`: "How much of each do I need
    for 10 people?" was printed as three lines (flour, eggs, milk), and the document's headline gave the milk's
    375 ml alone as "the result" (2026-12-07, a bread recipe scaled from 4 people to 10).
    """
    if _OF_EACH.search(task) is None:
        return 1
    printed = [line for line in output.splitlines() if line.strip()]
    count = 0
    for line in reversed(printed[-RESULT_LINES:]):
        if len(_line_values(line, task)) != 1:
            break
        count += 1
    return max(count, 1)


_LATEX_FRACTION = re.compile(r"\\[dt]?frac\s*\{\s*(-?\d[\d,]*(?:\.\d+)?)\s*\}\s*\{\s*(-?\d[\d,]*(?:\.\d+)?)\s*\}")


def fractions_read(text: str) -> str:
    r"""``text`` with each LaTeX fraction of two numbers written as its value: ``\frac{671}{1296}`` -> 0.5177469136.

    A boxed ``\frac{671}{1296}`` states 0.5177...; read as the numbers 671 and 1296 it stated neither, and a right
    answer was sent to a vote and a caveat (the review set's dice problem).
    """

    def value(m: re.Match[str]) -> str:
        numerator, denominator = (float(g.replace(",", "")) for g in m.groups())
        return m.group(0) if denominator == 0 else f"{numerator / denominator:.10g}"

    return _LATEX_FRACTION.sub(value, text)


def _as_stated(text: str) -> str:
    """``text`` as :func:`result_check` reads it: its fractions and its arithmetic computed."""
    return compute(fractions_read(text))[0]


def final_statement(text: str) -> str:
    r"""Where an answer states its result: its last ``\boxed{}``, else its last line giving one, else all of it.

    A line gives a result when it says so ("Therefore, ...", "The total is ..."). An intermediate figure ("6
    hours = 360 minutes" before a boxed 21600) is not the answer's result.
    """
    stated = _stated_result(text)
    return text if stated is None else stated


def _stated_result(text: str) -> str | None:
    r"""The answer's last ``\boxed{}``, else its last line that gives a result with a number; None: neither."""
    boxed: list[str] = _BOXED.findall(text)
    if boxed:
        return boxed[-1]
    lines = [line for line in text.splitlines() if _GIVES_RESULT.search(line) and _NUMBER.search(line)]
    return lines[-1] if lines else None


def concludes_check(text: str) -> CheckResult:
    r"""``math.concludes``: an answer to a task that asks for a value ends by stating one.

    For a slot whose programs gave no value (nothing else checks its result): it passes when the answer boxes a
    result or has a line that gives one with a number (:func:`final_statement`). Seen on the review set's NPV
    (2026-11-29): the answer stopped after the three present values, never stated the NPV or whether the project
    is worth it, and passed every check.
    """
    stated = _stated_result(text) is not None
    return CheckResult(
        name="math.concludes",
        passed=stated,
        detail=""
        if stated
        else "the answer never states its result: end with the sentence that gives it "
        '("Therefore, ... is ..."), and answer every question the task asks',
    )


def result_check(text: str, calc: Calculation) -> CheckResult:
    """``math.result``: the answer states what the program printed (``calc.values`` must not be empty).

    One value: the answer's result (:func:`final_statement`) states it. Several (x and y): the answer states each.
    """
    stated = _as_stated(final_statement(text) if len(calc.values) == 1 else text)
    numbers = _numbers(stated, scaled=True)
    times = {f"{int(m.group(1))}:{m.group(2)}" for m in _TIME.finditer(stated)}
    missing = [
        v
        for v in calc.values
        if not (v in times if isinstance(v, str) else any(_agrees(v, w, d, pct) for w, d, pct in numbers))
    ]
    said = [v if isinstance(v, str) else f"{v:.6g}" for v in missing]
    return CheckResult(
        name="math.result",
        passed=not missing,
        detail=f"a program written for this task printed {(calc.result if calc.lines > 1 else calc.output[-100:])!r}, "
        "and the answer does not state "
        f"{said[0]}: check each step, and state the result"
        if missing
        else "",
    )


Agreement = Literal["agrees", "confirmed", "answer", "computed", "split", "unconfirmed"]


@dataclass(frozen=True)
class Verdict:
    """What the document gives as the task's result, and on whose agreement.

    ``agrees``: the answer states what the program printed. Otherwise a second program, sampled, votes:
    ``answer`` (it prints what the answer states: two against the first program), ``computed`` (it prints what
    the first printed: two programs against the answer) or ``split`` (three values, no result). An answer that
    was told the value (an earlier one did not state it) is no vote: it states the first program's value, which
    is ``confirmed`` when another program prints it too and ``unconfirmed`` when none does.
    """

    agreement: Agreement
    shown: Calculation
    """The program shown as the working: the one that agrees with the result."""
    other: Calculation | None = None
    """The program that was outvoted, or the second of a split."""

    @property
    def result(self) -> str:
        """The value the document gives as the result ('' for a split or an unconfirmed value)."""
        return "" if self.agreement in ("split", "unconfirmed") else self.shown.result

    @property
    def check(self) -> CheckResult:
        """``math.result`` of the kept answer, as the vote decided it."""
        shown = self.shown.result
        other = _printed(self.other)
        details = {
            "agrees": "",
            "confirmed": "",
            "answer": "",
            "computed": f"two programs written for this task print {shown!r}, and the answer does not state it",
            "split": f"two programs written for this task print {shown!r}, and the answer and its own program state "
            f"{other}"
            if self.other is not None and self.other.model == OWN_PROGRAM
            else f"a program printed {shown!r}, a second one {other}, and the answer states neither",
            "unconfirmed": f"the answer states {shown!r} as it was told, and no other program printed it (a second "
            f"one printed {other})",
        }
        return CheckResult(name="math.result", passed=self.agreement in AGREED, detail=details[self.agreement])


def verdict(
    text: str,
    first: Calculation,
    again: Callable[[], Calculation | None],
    *,
    told: bool = False,
    own: Calculation | None = None,
) -> Verdict:
    """The vote on a kept answer ``text`` and the ``first`` program (which gives a check); ``again`` draws another.

    A second program is drawn only when the answer and the first disagree; a third only when the three values
    still differ (it sides with one of them, or the vote is split). A program that printed no value does not vote.
    An answer ``told`` the first program's value is no vote: a second program must print it too. The answer's
    ``own`` program (:func:`answer_program`), when it prints what the answer states and not what the first
    printed, votes with the answer: two programs against it make a split, not a computed result.
    """
    if result_check(text, first).passed:
        return _confirmed(first, again) if told else Verdict("agrees", first)
    backed = own is not None and not told and result_check(text, own).passed and not _agree(first, own)
    second = again()
    if second is None or not second.values:  # no second vote: the answer and the program still disagree
        return Verdict("answer", own, first) if backed and own is not None else Verdict("split", first, second)
    if result_check(text, second).passed:
        return Verdict("answer", second, first)
    if _agree(first, second):
        return Verdict("split", first, own) if backed else Verdict("computed", first, second)
    if backed and own is not None:
        return Verdict("answer", own, first)  # the answer and its program against two programs that differ
    third = again()
    if third is None or not third.values:
        return Verdict("split", first, second)
    if result_check(text, third).passed:
        return Verdict("answer", third, first)
    for program, outvoted in ((first, second), (second, first)):
        if _agree(program, third):
            return Verdict("computed", program, outvoted)
    return Verdict("split", first, second)


def _confirmed(first: Calculation, again: Callable[[], Calculation | None]) -> Verdict:
    """The vote on a value the answer was told.

    Another program prints it (``confirmed``), two other programs agree on another (``computed``: the answer is
    outvoted), or it stands alone (``unconfirmed``).

    A told answer stated the 1.5B's wrong formula for a mortgage's payment ($11,141.67 for $2,068.81) and its
    check passed, on the first program's word alone (bench/results/numeric_heldout_first). Two more programs at
    most; one that prints no value does not vote (a loan's right $1,535.22 stayed unconfirmed when the second
    program failed: numeric_heldout_after).
    """
    second = again()
    if second is None or not second.values:
        second = again()
        confirms = second is not None and bool(second.values) and _agree(first, second)
        return Verdict("confirmed" if confirms else "unconfirmed", first, second)
    if _agree(first, second):
        return Verdict("confirmed", first, second)
    third = again()
    if third is None or not third.values:
        return Verdict("unconfirmed", first, second)
    if _agree(first, third):
        return Verdict("confirmed", first, second)
    if _agree(second, third):
        return Verdict("computed", second, first)
    return Verdict("unconfirmed", first, second)


def _agree(one: Calculation, other: Calculation) -> bool:
    """Two programs printed the same values."""
    return all(any(_same(v, w) for w in other.values) for v in one.values)


def _printed(calc: Calculation | None, limit: int | None = None) -> str:
    """What a program printed (its last line, to ``limit`` characters), quoted; "nothing usable" when nothing.

    The download time's caveat read "a second one ''" and its working "printed 'nothing usable'".
    """
    line = calc.result[:limit] if calc is not None else ""
    return repr(line) if line else "nothing usable"


def _same(a: float | str, b: float | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return abs(a - b) <= max(1e-9, RELATIVE_TOLERANCE * 0.1 * max(abs(a), abs(b)))


_CONTESTED = (
    "**Another program printed this value too, and the answer above states {other}, which its own program printed: "
    "they disagree, so no result is given.** Check the step where they part before relying on either."
)
"""The note of a split between two programs and the answer backed by its own program."""
_NOTES: dict[str, str] = {
    "agrees": "The answer above states the same value.",
    "confirmed": "The answer above states the same value, which it was told after an earlier answer did not, and "
    "another program printed it too.",
    "answer": "Another program printed {other}; this one agrees with the answer above, so the result is the answer's.",
    "computed": "**The answer above does not state this value, and another program printed it too, so {result} is "
    "given as the result. Both programs were written by the same model and can share its mistake: check the step "
    "where the answer departs from them.**",
    "split": "**The answer above does not state this value, and other programs printed {other} and more: they "
    "disagree, so no result is given.** Check the steps before relying on any of them.",
    "unconfirmed": "**The answer above states this value because it was told it, and no other program printed it "
    "(another printed {other}): the value is not confirmed.** Check the steps before relying on it.",
}


def asks_a_size(task: str) -> bool:
    """Whether ``task`` asks how many more, fewer or less (a difference's size, never negative)."""
    return _ASKS_A_SIZE.search(task) is not None


def with_working(
    result: SlotResult, vote: Verdict, ledger: list[LedgerEntry], *, money: bool = False, size: bool = False
) -> SlotResult:
    """``result`` with a section giving the result, the program that computed it and its output.

    The section is the harness's, not the expert's: the result as the vote decided it (:class:`Verdict`), the
    program (written by its model) and what the sandbox printed, verbatim, and a sentence on the agreement; a
    ledger entry says the same. The headline gives the result as a reader writes it (:func:`readable`: to the cent
    when the task is about ``money``), saying what it was rounded from. It is the answer's last section, except
    when programs outvoted the answer (``computed``): then it comes first, so a reader meets the computed value
    before the answer's own figure. When the task asks a ``size`` (how many fewer, how much more), a negative value
    is given as its size, saying so: gsm8k row 73 asked how many fewer eyes a lizard has than its spots and
    wrinkles together, the answer boxed 69, the program printed 3 - 72 = -69 (signs are not compared), and the
    document's headline read "Result: -69".
    """
    calc = vote.shown
    value = calc.result
    other = _printed(vote.other)
    first = vote.agreement == "computed"
    several = calc.lines > 1  # one value a line, each line as printed: "Flour needed ...: 750.0 grams; Eggs ..."
    shown = _as_read(vote.result, several, money) if vote.result else ""
    computed_value = _as_read(value, several, money)
    printed = value if several else stated_value(vote.result if vote.result else value)
    # the headline rounds a float's noise; the output below is verbatim
    headline = shown or computed_value
    changed = printed != headline and numbers_in(printed) != numbers_in(headline)  # "£74.9700" is £74.97
    asides = [f"rounded from {printed}"] if changed else []
    if size and headline.startswith("-") and len(numbers_in(headline)) == 1:
        shown, computed_value = (v.removeprefix("-") for v in (shown, computed_value))
        asides.insert(0, f"the program printed {printed}: the task asks for a difference's size")
    if not vote.result:
        asides.append("not confirmed")
    head = f"**Result: {shown}**" if vote.result else f"**Computed: {computed_value}**"
    head += f" ({'; '.join(asides)})" if asides else ""
    contested = vote.agreement == "split" and vote.other is not None and vote.other.model == OWN_PROGRAM
    note = (_CONTESTED if contested else _NOTES[vote.agreement]).format(other=other, result=shown)
    rounded = stated_rounded(result.body_text(), calc) if vote.agreement in AGREED else None
    if rounded is not None:  # "11" for 10.909...: the same to the digits it shows, not the same number
        note = f"The answer above states it rounded, as {rounded}: check that the task wants it rounded."
        if vote.agreement == "answer":
            note += f" Another program printed {other}."
    if first:
        note = note.replace("The answer above", "The answer below")
    body = (
        f"{head}: printed by this Python program, which {calc.model} wrote for the task and the sandbox ran.\n\n"
        f"```python\n{calc.program.strip()}\n```\n\nOutput:\n\n```text\n{calc.output.strip()}\n```\n\n{note}"
    )
    ledger.append(
        LedgerEntry(
            agent="harness",
            action="show_working",
            slot_id=result.slot_id,
            outputs_summary=f"{vote.agreement}: added the result {vote.result[:80] or '(none)'!r} and the program "
            f"that printed {value[:80]!r}"
            + (f"; the other program printed {_printed(vote.other, 80)}" if vote.other else ""),
        )
    )
    if not result.sections:
        working = f"## {WORKING_TITLE}\n\n{body}\n"
        raw = f"{working}\n{result.raw.strip()}\n" if first else f"{result.raw.rstrip()}\n\n{working}"
        return result.model_copy(update={"raw": raw})
    if first:
        sections = [s.model_copy(update={"label": _shifted(s.label)}) for s in result.sections]
        outline = [o.model_copy(update={"label": _shifted(o.label)}) for o in result.outline]
        section = Section(label="1", title=WORKING_TITLE, level=1, body=body)
        sections.insert(0, section)
        if outline:
            outline.insert(0, OutlineItem(label="1", title=WORKING_TITLE, level=1))
        raw = "\n\n".join(render_section(s) for s in sections) + "\n"
        return result.model_copy(update={"raw": raw, "sections": sections, "outline": outline})
    label = str(
        1 + max((int(s.label.split(".")[0]) for s in result.sections if s.label.split(".")[0].isdigit()), default=0)
    )
    section = Section(label=label, title=WORKING_TITLE, level=1, body=body)
    outline = [*result.outline, OutlineItem(label=label, title=WORKING_TITLE, level=1)] if result.outline else []
    raw = f"{result.raw.rstrip()}\n\n{render_section(section)}\n"
    return result.model_copy(update={"raw": raw, "sections": [*result.sections, section], "outline": outline})


def _as_read(printed: str, several: bool, money: bool) -> str:
    """The headline's value: a line's value as a reader writes it, or several lines as printed."""
    return printed if several else readable(stated_value(printed), money=money)


def stated_rounded(text: str, calc: Calculation) -> str | None:
    """How the answer's result states the program's one value when it states it only rounded, else None.

    "11" states 10.909090909090908 by :func:`result_check`'s rule (to the digits it shows, within 1%), but it is
    not that number, and a reader who meets both should be told which is which. None when the answer states the
    value within a thousandth somewhere in its result ($1,798.65 for 1798.6515754), or does not state it, or the
    program printed several values.
    """
    if len(calc.values) != 1 or isinstance(calc.values[0], str):
        return None
    value = calc.values[0]
    agreeing = [
        (written, percent)
        for written, decimals, percent in _numbers(_as_stated(final_statement(text)))
        if _agrees(value, written, decimals, percent)
    ]
    if not agreeing or any(_exactly(value, w / 100 if pct else w) or _exactly(value, w) for w, pct in agreeing):
        return None
    written, percent = agreeing[0]
    return f"{written:,.{_decimals_of(written)}f}" + ("%" if percent else "")


def _exactly(value: float, written: float) -> bool:
    """Within a thousandth: a value written to the precision a reader uses, not rounded to another number."""
    return abs(abs(written) - abs(value)) <= max(1e-9, 0.001 * abs(value))


def _decimals_of(number: float) -> int:
    """The decimals ``number`` needs to be written as read (at most six)."""
    text = f"{number:.6f}".rstrip("0")
    return len(text.split(".", 1)[1]) if "." in text else 0


def _shifted(label: str) -> str:
    """A section label one place down (``2.1`` -> ``3.1``): the computed result takes the first place."""
    head, dot, rest = label.partition(".")
    return f"{int(head) + 1}{dot}{rest}" if head.isdigit() else label


_STATED = re.compile(r"-?[$£€]?\d[\d,]*(?:\.\d+)?%?")
_LABELLED = re.compile(r":\s+|\s+(?:is|are|was|were|will be|would be|equals|=)\s+")
STATED_MAX_CHARS = 40
"""A printed line longer than this ("The monthly payment ... is $1798.65") is given as its last number."""


_PLAIN_NUMBER = re.compile(r"(-?)([$£€]?)(-?)(\d[\d,]*\.\d+)(%?)")
READABLE_SIGNIFICANT = 6
"""Significant figures the headline keeps of a long float (16920.984050717176: 16,920.98 as money, else 16,921)."""
_MONEY = re.compile(r"[$£€]|\b(?:dollars?|pounds?|euros?|usd|gbp|eur|cents?|pence)\b", re.I)


def is_money(task: str) -> bool:
    """Whether a task speaks of money (a currency sign or name): its result reads to the cent."""
    return _MONEY.search(task) is not None


def readable(value: str, *, money: bool = False) -> str:
    """A printed value as a reader writes it: ``58.8`` for ``58.800000000000004``.

    ``16920.984050717176`` reads ``16,920.98`` as money (to the cent, when at least 1), ``4.285714285714286``
    reads ``4.28571`` (:data:`READABLE_SIGNIFICANT` figures). Anything but one plain decimal number, with its
    currency sign or percent, is left as printed, and so is a number no longer than that.
    """
    match = _PLAIN_NUMBER.fullmatch(value.strip())
    if match is None:
        return value
    sign, currency, sign2, digits, percent = match.groups()
    number = float(digits.replace(",", ""))
    whole = len(str(int(number))) if number >= 1 else 0
    if money and number >= 1 and not percent:
        decimals = 2
    elif number >= 1:
        decimals = max(0, READABLE_SIGNIFICANT - whole)
    else:
        decimals = READABLE_SIGNIFICANT - 1 - int(f"{number:e}".split("e")[1])
    cents = money and number >= 1 and not percent
    if len(digits.split(".")[1]) <= decimals or (round(number, decimals) == number and not cents):
        return value  # as a reader writes it already; money's "£74.9700" still reads "£74.97"
    text = f"{number:,.{decimals}f}"
    if not cents:
        text = text.rstrip("0").rstrip(".")
    return f"{sign}{currency}{sign2}{text}{percent}"


def stated_value(line: str) -> str:
    """The value a program's printed line gives, as printed.

    What follows the line's last label ("The monthly payment is £365.45", "Monthly payment: $1798.65") when it
    holds a number: ``£365.45``, with its unit ("2 hours 24 minutes"); else the line itself when short, else
    its last number. "**Result: The monthly payment is £365.45**" read as a sentence, not a result
    (numeric_heldout2_after).
    """
    value = _LABELLED.split(line.strip())[-1].strip().rstrip(".")
    if value != line.strip() and _STATED.search(value) and len(value) <= STATED_MAX_CHARS:
        return value
    found = _STATED.findall(line)
    return found[-1] if len(line) > STATED_MAX_CHARS and found else line


def numbers_in(text: str) -> list[float]:
    """The numbers ``text`` states (thousands commas read, percentages as written), in order."""
    return [value for value, _, _ in _numbers(text)]


def program_in(text: str) -> str | None:
    """The Python program of a model's answer (its first Python block, else the whole text), if it parses."""
    blocks = [code for tag, code in code_blocks(text) if tag in PYTHON_TAGS | {""} and code.strip()]
    candidate = blocks[0] if blocks else text
    try:
        parse_module(candidate)
    except SyntaxError:
        return None
    return candidate


def _numbers(text: str, *, scaled: bool = False) -> list[tuple[float, int, bool]]:
    """Each number of ``text``: its value, the decimals it shows, and whether it is a percentage.

    A number with a scale ("$95k", "1.2 million") is its digits; with ``scaled`` its scaled value follows it too,
    for comparisons: a program that read "$85k" as 85 printed 95, and the answer's "$95k" states it, while another
    program may print 95000 (the job offers, 2026-12-02: the answer was outvoted for a value it stated).
    """
    found = []
    for m in _NUMBER.finditer(text):
        digits = m.group("digits").replace(",", "")
        try:
            value = float(digits)
        except ValueError:
            continue
        decimals = len(digits.split(".", 1)[1]) if "." in digits and "e" not in digits.lower() else 0
        percent = m.group("percent") is not None
        found.append((value, decimals, percent))
        scale = m.group("scale") or m.group("word")
        if scaled and scale:
            found.append((value * _SCALES[scale], 0, percent))
    return found


def _agrees(value: float, written: float, decimals: int, percent: bool = False) -> bool:
    """Whether ``written`` (showing ``decimals`` decimals) states ``value``; a percentage may state a fraction.

    It agrees to the digits it shows and within :data:`RELATIVE_TOLERANCE` (0.52 states 0.5177, 0.5 does not), or
    within a thousandth whatever it shows (8,950 states 8954.24). Signs are not compared: "a 4% decrease" states -4.
    """
    target = abs(value)
    options = [(abs(written), decimals)] + ([(abs(written) / 100, decimals + 2)] if percent else [])
    for option, shown in options:
        error = abs(option - target)
        if error <= 0.5 * 10 ** (-shown) + 1e-12 and (target == 0 or error <= RELATIVE_TOLERANCE * target):
            return True
        if target != 0 and error <= 0.001 * target:
            return True
    return False
