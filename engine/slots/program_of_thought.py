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
fails, so more are drawn, and the one kept is the one that agrees with the computation; when none does, its
caveat names the value the program printed, for the person to weigh. Nothing is written into the answer: the
program checks it, the expert's words are kept.

A program's value that the task itself states (``4 rolls``) proves nothing, and a program that fails, prints no
number or prints more than :data:`MAX_VALUES` of them gives no check.
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass

import engine.prompts as prompts
from engine.slots.checks import code_blocks
from engine.slots.inline_arithmetic import compute
from engine.slots.sandbox import SandboxLimits, run_python
from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from state.quality import CheckResult

__all__ = ["Calculation", "MAX_VALUES", "calculable", "calculate", "printed_values", "result_check"]

PROGRAM_TOKENS = 600
"""The program's answer budget: a few lines of arithmetic and their comments (the longest of five review-set
programs: 393 tokens). Asked for no comments, the 1.5B model's program for the dice problem was a wrong
simulation that failed; with them (its steps, as comments) it was right."""
MAX_VALUES = 3
"""A last line with more numbers than this is a report, not a result: no check."""
RELATIVE_TOLERANCE = 0.01
"""A stated value within 1% of the computed one agrees (besides agreeing to the digits it shows)."""

CALCULATED_EXPERTS = ("math_reasoning",)
"""Experts whose task's result is always computed (a proof's program prints no number, and gives no check)."""
NUMERIC_EXPERTS = ("finance_analyst",)
"""Experts whose task's result is computed when the task asks for one (:data:`_ASKS_A_VALUE`) and states two numbers
or more (a project's cash flows and discount rate, a sum and a rate), not when it asks for a plan or a budget."""
_ASKS_A_VALUE = re.compile(
    r"\?|\b(?:how (?:much|many|long)|what (?:is|was|will|would)|calculate|compute|work out|whether)\b", re.I
)

_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])(\s*%)?")
_TIME = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::\d{2})?(?![\d:])")


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


def calculable(task: str, expert: str) -> bool:
    """Whether the result of ``task``, answered by ``expert``, is worth computing by a program."""
    if expert in CALCULATED_EXPERTS:
        return True
    return expert in NUMERIC_EXPERTS and len(_numbers(task)) >= 2 and _ASKS_A_VALUE.search(task) is not None


def calculate(
    task: str,
    backend: ExpertBackend,
    model: str,
    limits: SandboxLimits,
    *,
    slot_id: str,
    cancel: threading.Event | None = None,
) -> Calculation:
    """Ask ``backend`` for a program that prints the task's answer, and run it in the sandbox.

    The calculation's ``values`` are empty (no check) when no program came back, it failed, it printed no single
    result, or what it printed the task states already. Backend errors propagate.
    """
    request = GenerationRequest(
        messages=(ChatMessage("user", prompts.PROGRAM_PROMPT.format(task=task.strip())),),
        max_tokens=PROGRAM_TOKENS,
        temperature=0.0,
        slot_id=f"{slot_id}@calculate",
        cancel=cancel,
    )
    gen = backend.generate(request)

    def made(note: str, program: str = "", output: str = "", values: tuple[float | str, ...] = ()) -> Calculation:
        return Calculation(model, note, program, output, values, gen.prompt_tokens, gen.completion_tokens)

    program = _program(gen.text)
    if program is None:
        return made("the answer held no Python program")
    ran = run_python({"program.py": program}, "program.py", limits=limits)
    if ran.timed_out or ran.returncode != 0 or ran.violations:
        why = "timed out" if ran.timed_out else (ran.violations or [ran.stderr.strip()[-160:]])[0]
        return made(f"the program failed: {why}", program)
    output = ran.stdout.strip()
    values = printed_values(output, task)
    if values:
        return made(f"the program printed {output[-120:]!r}", program, output, values)
    if printed_values(output):
        return made(f"the program printed {output[-120:]!r}, only values the task states", program, output)
    return made(f"the program printed no single result ({output[-120:]!r})", program, output)


def printed_values(output: str, task: str = "") -> tuple[float | str, ...]:
    """The values of a program's last printed line: its times of day and numbers, but those ``task`` states.

    None when the line holds more than :data:`MAX_VALUES` (a report, not a result). A number the task states is
    an echo ("The sum of the first 100 positive integers is 5050"), or proves nothing when it is the result.
    """
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return ()
    last = lines[-1]
    times = [f"{int(m.group(1))}:{m.group(2)}" for m in _TIME.finditer(last)]
    given = {abs(w) for w, _, _ in _numbers(task)}
    numbers = [v for v, _, _ in _numbers(_TIME.sub(" ", last)) if abs(v) not in given]
    values: tuple[float | str, ...] = (*times, *numbers)
    return values if 0 < len(values) <= MAX_VALUES else ()


def result_check(text: str, calc: Calculation) -> CheckResult:
    """``math.result``: the answer states every value the program printed (``calc.values`` must not be empty)."""
    stated = compute(text)[0]  # its own arithmetic, computed, counts as stated
    numbers = _numbers(stated)
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
        detail=f"a program written for this task printed {calc.output[-100:]!r}, and the answer does not state "
        f"{said[0]}: check each step, and state the result"
        if missing
        else "",
    )


def _program(text: str) -> str | None:
    blocks = [code for tag, code in code_blocks(text) if tag in ("", "python", "py", "python3") and code.strip()]
    candidate = blocks[0] if blocks else text
    try:
        ast.parse(candidate)
    except SyntaxError:
        return None
    return candidate


def _numbers(text: str) -> list[tuple[float, int, bool]]:
    """Each number of ``text``: its value, the decimals it shows, and whether it is a percentage."""
    found = []
    for m in _NUMBER.finditer(text):
        written = m.group(0).rstrip("% \t")
        digits = written.replace(",", "")
        try:
            value = float(digits)
        except ValueError:
            continue
        decimals = len(digits.split(".", 1)[1]) if "." in digits and "e" not in digits.lower() else 0
        found.append((value, decimals, m.group(1) is not None))
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
