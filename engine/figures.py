"""A multi-part task's figures, computed once by a program, and the parts that state them otherwise.

A task with numbers split into parts ("the repayment model for a 250,000 loan at 4.5% over 25 years, a script that
prints its amortisation table, and a memo quoting the monthly payment") had each part work the numbers out on its
own: on the real models the model part's memo said $10,456.79 a month and the memo part a table starting at
$378.96, where the payment is $1,389.58. Before the parts are written, the biggest installed code model writes one
program that prints the task's quantities (``name: value`` lines); the sandbox runs it, and every part's prompt
gets the figures as a constraint. After the parts are written, :func:`stated_otherwise` finds a part that states a
figure with another value (``engine.agreement`` sends it back once). The document shows the program and its
output (``nodes.assemble``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

import engine.prompts as prompts
from engine.slots.checks.text import without_code
from engine.slots.program_of_thought import (
    CALCULATED_EXPERTS,
    NUMERIC_EXPERTS,
    PROGRAM_TOKENS,
    RELATIVE_TOLERANCE,
    numbers_in,
    program_in,
)
from engine.slots.sandbox import SandboxLimits, run_python
from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from state.figures import Figure, TaskFigures

__all__ = ["MAX_FIGURES", "compute_figures", "figures_constraint", "stated_otherwise", "wants_figures"]

MAX_FIGURES = 8
"""More lines than this is a table (an amortisation schedule), not the task's figures: the first eight are kept."""
_LINE = re.compile(r"^\s*([A-Za-z][\w ()'/-]{1,60}?)\s*[:=]\s*[$€£]?\s*(-?\d[\d,]*(?:\.\d+)?)\s*%?\s*$")
_STOP = frozenset({"the", "a", "an", "of", "per", "in", "for", "to", "and"})
_STATED = r"[^\d\n|]{0,40}?(-?\d[\d,]*(?:\.\d+)?)"
"""After a figure's name: up to 40 characters that are no digit, line end or table bar, then its value."""


def wants_figures(task: str, experts: Iterable[str]) -> bool:
    """Whether a multi-part task's figures are worth one program: two numbers or more and a numeric expert."""
    numeric = (*CALCULATED_EXPERTS, *NUMERIC_EXPERTS)
    return len(numbers_in(task)) >= 2 and any(e in numeric for e in experts)


def compute_figures(
    task: str, backend: ExpertBackend, model: str, limits: SandboxLimits, *, cancel: threading.Event | None = None
) -> TaskFigures:
    """Ask ``backend`` for the program that prints the task's figures and run it. Backend errors propagate."""
    request = GenerationRequest(
        messages=(ChatMessage("user", prompts.FIGURES_PROMPT.format(task=task.strip())),),
        max_tokens=PROGRAM_TOKENS,
        temperature=0.0,
        seed=0,
        slot_id="@figures",
        cancel=cancel,
    )
    text = backend.generate(request).text
    program = program_in(text)
    if program is None:
        return TaskFigures(model=model, note="the answer held no Python program")
    ran = run_python({"figures.py": program}, "figures.py", limits=limits)
    if ran.timed_out or ran.returncode != 0 or ran.violations:
        why = "timed out" if ran.timed_out else (ran.violations or [ran.stderr.strip()[-160:]])[0]
        return TaskFigures(model=model, note=f"the program failed: {why}", program=program)
    output = ran.stdout.strip()
    figures = read_figures(output, task)
    note = f"the program printed {len(figures)} figure(s)" if figures else f"no figure in {output[-120:]!r}"
    return TaskFigures(model=model, note=note, program=program, output=output, figures=figures)


def read_figures(output: str, task: str) -> list[Figure]:
    """The ``name: value`` lines of a program's output, but those that repeat a number the task gives."""
    given = {abs(v) for v in numbers_in(task)}
    found: dict[str, Figure] = {}
    for line in output.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        name = " ".join(match.group(1).replace("_", " ").lower().split())
        value = float(match.group(2).replace(",", ""))
        if abs(value) not in given and _words(name):
            found.setdefault(name, Figure(name=name, value=value))
    return list(found.values())[:MAX_FIGURES]


def figures_constraint(figures: TaskFigures) -> str:
    """The constraint every part's prompt gets: the computed figures, to be stated exactly."""
    lines = "\n".join(f"  - {f.name}: {_shown(f.value)}" for f in figures.figures)
    return (
        "These figures were computed by a program from the task's numbers; wherever this part states one of them, "
        f"state exactly this value:\n{lines}"
    )


def stated_otherwise(text: str, figures: TaskFigures, task: str) -> list[tuple[Figure, float]]:
    """Each figure ``text`` states (its name, then a number) with another value; numbers the task gives are skipped.

    Read outside code blocks (a program's own variables are the program's business), for figures named in two
    words or more (a one-word name would match every payment of a schedule).
    """
    prose = without_code(text)
    given = {abs(v) for v in numbers_in(task)}
    out = []
    for figure in figures.figures:
        words = _words(figure.name)
        if len(words) < 2:
            continue  # "payment" alone would match every payment of a schedule
        pattern = r"\b" + r"\W+".join(re.escape(w) for w in words) + r"\w*\b" + _STATED  # the name's words in a row
        for match in re.finditer(pattern, prose, re.I):
            stated = float(match.group(1).replace(",", ""))
            if abs(stated) in given:
                continue
            if not _agrees(figure.value, stated):
                out.append((figure, stated))
            break  # the first statement of a figure is the one compared
    return out


def _words(name: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", name.lower()) if w not in _STOP]


def _agrees(value: float, stated: float) -> bool:
    return abs(value - stated) <= max(0.01, RELATIVE_TOLERANCE * abs(value))


def _shown(value: float) -> str:
    return f"{value:,.2f}" if value != int(value) else f"{int(value):,}"
