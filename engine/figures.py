"""A multi-part task's figures, computed once by a program, and the parts that state them otherwise.

A task with numbers split into parts ("the repayment model for a 250,000 loan at 4.5% over 25 years, a script that
prints its amortisation table, and a memo quoting the monthly payment") had each part work the numbers out on its
own: on the real models the model part's memo said $10,456.79 a month and the memo part a table starting at
$378.96, where the payment is $1,389.58. Before the parts are written, the biggest installed code model writes one
program that prints the task's quantities (``name: value`` lines), and one or two more are sampled; the sandbox
runs them, and every part's prompt gets the figures two programs printed as a constraint. After the parts are written,
:func:`stated_otherwise` finds a part that states a figure with another value (``engine.agreement`` sends it back
once). The document shows the program and its output (``nodes.assemble``).
"""

from __future__ import annotations

import ast
import re
import threading
from functools import lru_cache

import engine.prompts as prompts
from engine.slots.checks.examples import prose_calls
from engine.slots.checks.text import norm, without_code
from engine.slots.program_of_thought import (
    PROGRAM_TOKENS,
    RELATIVE_TOLERANCE,
    numbers_in,
    program_in,
    set_aside,
)
from engine.slots.sandbox import SandboxLimits, run_python
from engine.spread import spread_hint
from engine.units import conversion_hint, conversions, percent_hint, unconverted, written_numbers
from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from experts.routing.aspects import named_deliverables, object_phrase
from state.figures import Figure, TaskFigures
from state.python_ast import parse_module

__all__ = ["MAX_FIGURES", "compute_figures", "figures_constraint", "left_out", "stated_otherwise", "wants_figures"]

SAMPLED_TEMPERATURE = 0.6
"""The sampling temperature of the programs after the first (as the single-slot vote's: ``engine.slots.run``)."""
MAX_PROGRAMS = 3
LEFT_OUT = 2
"""A program that leaves out this many of the numbers the task gives confirms no figure (:func:`left_out`)."""
MAX_FIGURES = 8
"""More lines than this is a table (an amortisation schedule), not the task's figures: the first eight are kept."""
_LINE = re.compile(
    r"^\s*([A-Za-z][\w ()'/-]{1,60}?)\s*[:=]\s*[$€£]?\s*(-?\d[\d,]*(?:\.\d+)?)\s*%?(?:\s+[A-Za-z][\w/]{0,14})?\s*$"
)
"""``name: value``, a unit word after it allowed ("Break-even point: 1200.00 loaves": told to print no unit, the
program did, and the bakery's one figure was not read: bench_figures)."""
_QUANTITY = re.compile(
    r"\b(?:payments?|interest|totals?|costs?|price|rates?|returns?|profit|revenue|budget|dose|dosage|average|"
    r"percent(?:age)?|balance|tax|vat|fees?|invoices?|deposits?|rent|wages?|depreciation|salary|loan|mortgage|sum|"
    r"growth|npv|irr|break[- ]even|margin|figures|how (?:much|many|long)|calculate|compute|work out)\b",
    re.I,
)
"""A word naming a quantity the task's numbers give: without one, "top 10 ... in 90 days" are no figures."""
_PERCENTAGE = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(?:%|percent\b)")
_STOP = frozenset({"the", "a", "an", "of", "per", "in", "for", "to", "and"})
_BETWEEN_WORDS = r"\W+(?:(?:" + "|".join(sorted(_STOP)) + r")\W+)?"
_STATED = r"[^\d\n|]{0,40}?(-?\d[\d,]*(?:\.\d+)?)"
"""After a figure's name: up to 40 characters that are no digit, line end or table bar, then its value."""


def wants_figures(task: str) -> bool:
    """Whether a multi-part task's figures are worth the programs (each costs a generation before any part starts).

    Two numbers or more and a word naming a quantity to work out (a payment, an interest, a total, a fee, a
    budget, a dose ...), whoever writes the parts: a consulting agreement "for 12 days of work at 800 a day plus
    20% VAT" went to the legal expert, and neither its clauses nor its summary gave the fee (the summary made it
    "an hourly rate of $800"); a runbook's error budget went to the DevOps expert, which computed 99.9% of 30 days
    as "41760 minutes" (multipart_new8).

    Not a task that asks for a function named with its parameters: its numbers are the function's rules ("the
    first 30 minutes are free; after that it's 2.50 per started hour ... capped at 18.00. I want
    parking_fee(minutes) in tariff.py"), and the programs wrote the function again and printed cases nobody asked
    for, which the document then showed as unconfirmed figures to check (multipart_set3_pieces2: three generations,
    and a section about numbers the task never asked for).
    """
    return (
        len(numbers_in(task)) >= 2
        and _QUANTITY.search(task) is not None
        and not prose_calls(task)
        and not _only_code(task)
    )


_CODE_ASPECT = re.compile(
    r"\b(?:sql|quer(?:y|ies)|create table|schema|ddl|inserts?|migration|scripts?|functions?|class|module|"
    r"implementation|program|cli|command-line tool|tests?|regex|endpoints?|api|dockerfile|manifests?|crontab|cron|"
    r"config(?:uration)?|units?|readme|usage|documentation|docs|"
    r"[\w-]+\.(?:py|sh|sql|json|ya?ml|toml|ini|conf|cfg|env|service|timer))\b",
    re.I,
)
"""Code, a query, a configuration file or the code's documentation named as what an aspect delivers (its object, up
to a preposition or a relative clause: "show the working so they can redo it for their next tests" is not tests).
A README's example figures are the code's to print (multipart_set5_rules3: colstats' figures programs wrote
command-line tools that failed without their arguments, and a "Computed figures" section followed the README)."""
_TABLES = re.compile(r"^[\w-]+\s+(?:(?:the|a|an|two|three|four|both|our)\s+)?(?:[\w-]+\s+)?tables?\b", re.I)
"""An aspect whose object is tables ("deliver the two tables (products ...; stock_movements)")."""
_SQL_TASK = re.compile(r"\b(?:sql|sqlite|postgres(?:ql)?|mysql|database)\b", re.I)


@lru_cache(maxsize=64)  # wants_figures is asked at every slot's dispatch: the aspects are read once per task
def _only_code(task: str) -> bool:
    """Whether every deliverable the task names is code, a query or a configuration file.

    Its numbers are the code's data and rules ("Then two queries: (a) ... how many direct reports they have"; "a
    bash script ... prints how many it deleted ..."): the figures programs of multipart_set5_rules2 failed on them
    ("no such column: depth") and put a "Computed figures" section under SQL and a systemd unit telling the reader
    to check every number.
    """
    named = named_deliverables(task)
    tables = _SQL_TASK.search(task) is not None  # "the two tables (...)" of a SQLite task are a schema
    return bool(named) and all(
        _CODE_ASPECT.search(object_phrase(a)) or (tables and _TABLES.match(a.text)) for a in named
    )


def compute_figures(
    task: str, backend: ExpertBackend, model: str, limits: SandboxLimits, *, cancel: threading.Event | None = None
) -> TaskFigures:
    """Programs for the task's figures; the parts get those two programs print. Backend errors propagate.

    The first program is greedy, the next sampled at :data:`SAMPLED_TEMPERATURE`: a second always, a third when the
    second leaves one of the first's figures unconfirmed. A figure is given to the parts only when two programs
    print it (within 1%, under any name), and not against the greedy program's value for it. Seen on the real
    models for a 250,000 loan at 4.5% over 25 years: one greedy program divided the principal by the months (833.33
    a month, where it is 1,389.58); another got the payment right and the total interest wrong (simple interest,
    281,250); a sampled one used the yearly rate as the monthly one (11,250.02). Any of them alone would have had
    every part state its figures. The program shown is one that printed the figures given.

    A first program that fails is drawn again, sampled (the new hire's greedy program subtracted two date strings,
    multipart_set4_first, and until then no other was drawn); two failures end it. A first program that runs and
    prints no figure ends it at once: the task's numbers give none.
    """
    runs: list[tuple[str, str, list[Figure]]] = []
    partial: list[tuple[str, str, list[Figure]]] = []  # programs that left out numbers the task gives
    notes: list[str] = []
    needed = conversions(task)
    # every program's prompt names the conversions the task needs
    units = hint = conversion_hint(needed) + percent_hint(task) + spread_hint(task)
    for n in range(MAX_PROGRAMS):
        if n == 2 and runs and all(_printed_by_two(f, runs) for f in runs[0][2]):
            break  # the second program confirmed every figure of the first
        run = _run_program(task, backend, limits, cancel, 0.0 if n == 0 else SAMPLED_TEMPERATURE, n, hint)
        if isinstance(run, str):
            notes.append(f"program {n + 1}: {run}")
        elif len(missed := left_out(run[0], task)) >= LEFT_OUT:
            listed = ", ".join(_shown(v) for v in missed)
            notes.append(f"program {n + 1} left out {listed} of the task's numbers: not used")
            hint = units + prompts.FIGURES_LEFT_OUT.format(numbers=listed)
            partial.append(run)
        elif negative := _never_negative(run[2]):
            notes.append(f"program {n + 1} printed {_named(negative)}, which cannot be negative: not used")
            hint = units + prompts.FIGURES_NEGATIVE.format(figure=_named(negative))
            partial.append(run)
        elif added := costs_added(run[0]):
            cost, net = added
            notes.append(f"program {n + 1} added {cost} into {net}: not used")
            hint = units + prompts.FIGURES_COST_ADDED.format(cost=cost, net=net)
            partial.append(run)
        elif (why := set_aside(run[0], task)) is not None:
            notes.append(f"program {n + 1} {why}: not used")
            partial.append(run)
        elif skipped := unconverted(run[0], needed):
            c = skipped[0]
            notes.append(f"program {n + 1} used {c.given} with {c.named} unconverted: not used")
            hint = units + prompts.FIGURES_UNCONVERTED.format(
                given=c.given, named=c.named, bigger=c.bigger, factor=c.shown_factor, smaller=c.smaller
            )
            partial.append(run)
        else:
            runs.append(run)
        if n == 0 and not isinstance(run, str) and not run[2]:  # it ran and printed no figure: the task has none
            return TaskFigures(model=model, note=f"no figure in {run[1][-120:]!r}", program=run[0])
        if n == 1 and not runs and not partial:  # a failed first program is drawn again, sampled, once
            return TaskFigures(model=model, note="; ".join(notes))
    if not runs and not partial:
        return TaskFigures(model=model, note="; ".join(notes))
    if not runs:  # every program left numbers out: none is given to the parts, the first is shown
        program, output, found = partial[0]
        return TaskFigures(
            model=model, note="; ".join(notes), program=program, output=output, unconfirmed=found[:MAX_FIGURES]
        )
    confirmed: list[Figure] = []
    unconfirmed: list[Figure] = []
    for figure in (f for _, _, found in runs for f in found):
        if any(_agrees(figure.value, c.value) for c in confirmed + unconfirmed):
            continue  # the same value under another program's name
        greedy = any(_agrees(figure.value, f.value) for f in runs[0][2])
        agreed = _printed_by_two(figure, runs) and (greedy or not _contradicted(figure, runs))
        (confirmed if agreed else unconfirmed).append(figure)
    notes.insert(0, f"{len(runs)} program(s) ran; {len(confirmed)} figure(s) printed by two")
    if unconfirmed:
        listed = ", ".join(map(_named, unconfirmed))
        notes.append(f"printed by one only, or outvoting the greedy program (not given to the parts): {listed}")
    # the program shown is one that printed the figures the parts get (the greedy one, unless it was outvoted)
    shown = max(runs, key=lambda r: sum(any(_agrees(c.value, f.value) for f in r[2]) for c in confirmed))
    others = [r for r in runs if r is not shown]
    return TaskFigures(
        model=model,
        note="; ".join(notes),
        program=shown[0],
        output=shown[1],
        figures=confirmed[:MAX_FIGURES],
        more_programs=[r[0] for r in others],
        more_outputs=[r[1] for r in others],
        unconfirmed=unconfirmed[:MAX_FIGURES],
    )


_NEVER_NEGATIVE = re.compile(
    r"\b(?:period|payback|years?|months?|weeks?|days?|hours?|minutes?|duration|time|how long|age|count|number)\b"
)
"""A figure named as a duration or a count: printed negative, the program computed something else."""


def _never_negative(figures: list[Figure]) -> Figure | None:
    """The first of ``figures`` that is a duration or a count and negative, or None.

    multipart_set4_first, a solar quote (7,800 installed, 4,200 kWh a year, 60% used at 0.30 and 40% exported at
    0.08): two programs took the installed cost from the year's export income and agreed on a saving of
    -7,665.60 and a payback of -1.02 years, and the email to the person's partner stated both (right: 890.40 a
    year, 8.76 years). A negative saving can be right; a negative payback period cannot.
    """
    return next((f for f in figures if f.value < 0 and _NEVER_NEGATIVE.search(f.name)), None)


_NET = re.compile(r"(?:^|_)(?:net|profit|surplus|remaining|left|raised|take_?home)(?:_|$)", re.I)
_COST = re.compile(
    r"(?:^|_)(?:costs?|fees?|expenses?|expenditure|charges?|spend|spent|tax|taxes|outgoings?|deductions?)(?:_|$)",
    re.I,
)


def costs_added(program: str) -> tuple[str, str] | None:
    """A cost the program adds into a net amount it never takes a cost from: ``(cost, net)``, or None.

    multipart_set5_first, a gala (7,700 of tickets, fees, venue and catering, 4,092.50 of auction and raffle): two
    programs summed income, fees, venue and catering into ``net_amount_raised`` and agreed on 19,660.30 (right:
    5,420.70), and the email to the volunteers quoted it. Each variable's terms are followed through the program's
    assignments with their signs (``+``, ``-``; a product or a call keeps its term's sign); a variable named as a
    net (net, profit, surplus, remaining, raised ...; not "balance": a balance due is a cost), not itself a cost,
    whose every cost-named term is added, has a cost added into it. A net that takes any cost away is not judged
    (a saving of an old cost against a new one adds the old). Over the 291 Python blocks of the saved results it
    finds the gala's program only.
    """
    try:
        tree = parse_module(program)
    except (SyntaxError, ValueError):
        return None
    terms: dict[str, dict[str, int]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            signed: dict[str, int] = {}
            for name, sign in _signed(node.value, 1):
                for inner, inner_sign in {name: 1, **terms.get(name, {})}.items():
                    signed.setdefault(inner, sign * inner_sign)
            terms[node.targets[0].id] = signed
    for target, signed in terms.items():
        if not _NET.search(target) or _COST.search(target):
            continue
        costs = [(name, sign) for name, sign in signed.items() if _COST.search(name)]
        if costs and all(sign > 0 for _, sign in costs):
            return costs[0][0], target
    return None


def _signed(node: ast.AST, sign: int) -> list[tuple[str, int]]:
    """The names of an expression with the sign of the term each stands in."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        right = -sign if isinstance(node.op, ast.Sub) else sign
        return _signed(node.left, sign) + _signed(node.right, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _signed(node.operand, -sign)
    if isinstance(node, ast.Name):
        return [(node.id, sign)]
    if isinstance(node, ast.BinOp):
        return _signed(node.left, sign) + _signed(node.right, sign)
    return [(n.id, sign) for n in ast.walk(node) if isinstance(n, ast.Name)]


def _printed_by_two(figure: Figure, runs: list[tuple[str, str, list[Figure]]]) -> bool:
    return sum(any(_agrees(figure.value, f.value) for f in found) for _, _, found in runs) >= 2


def _contradicted(figure: Figure, runs: list[tuple[str, str, list[Figure]]]) -> bool:
    """Whether a program printed another value under ``figure``'s name.

    Two sampled programs against the greedy one are no agreement (multipart_new8, the bakery: the greedy program
    printed the right break-even, 1,200 loaves (3,000 / 2.50); two sampled ones printed 2,000 (3,000 / 1.50), and
    every part was told 2,000). The greedy program and a third against a sampled second are (the loan: a sampled
    program on the yearly rate, outvoted).
    """
    name = norm(figure.name)
    return any(norm(f.name) == name and not _agrees(figure.value, f.value) for _, _, found in runs for f in found)


def _named(figure: Figure) -> str:
    return f"{figure.name} {_shown(figure.value)}"


def _run_program(
    task: str,
    backend: ExpertBackend,
    limits: SandboxLimits,
    cancel: threading.Event | None,
    temperature: float,
    n: int,
    hint: str = "",
) -> tuple[str, str, list[Figure]] | str:
    """Program ``n``'s text, output and figures (``n`` 0 is greedy); or why it gave none.

    ``hint`` is added to the prompt (what an earlier program left out).
    """
    request = GenerationRequest(
        messages=(ChatMessage("user", prompts.FIGURES_PROMPT.format(task=task.strip()) + hint),),
        max_tokens=PROGRAM_TOKENS,
        temperature=temperature,
        seed=n + 1 if n else 0,
        slot_id="@figures" if n == 0 else f"@figures-{n + 1}",
        cancel=cancel,
    )
    program = program_in(backend.generate(request).text)
    if program is None:
        return "the answer held no Python program"
    ran = run_python({"figures.py": program}, "figures.py", limits=limits)
    if ran.timed_out or ran.returncode != 0 or ran.violations:
        error = (ran.stderr.strip().splitlines() or ["no error output"])[-1][-160:]  # the exception's own line
        why = "timed out" if ran.timed_out else (ran.violations or [error])[0]
        return f"the program failed: {why}"
    output = ran.stdout.strip()
    return program, output, read_figures(output, task)


def left_out(program: str, task: str) -> list[float]:
    """The numbers ``task`` gives that ``program`` never writes (as itself, or a percentage as its fraction).

    A program that leaves two of them out computed something else: both figure programs of a server-room task
    ("14 machines drawing 350 W each ... onto 9 machines at 420 W each") priced one machine, and every part was
    told "initial cost 70,560" (multipart_set3_first). One may be a restatement ("over 24 hours", beside 1440
    minutes), so one is allowed (:data:`LEFT_OUT`). A number written converted ("0.35" kW for the task's "350 W")
    is written.
    """
    code = program_in(program)  # a model's answer or the program itself
    if code is None:
        return []
    written = set(written_numbers(code) or ())  # it ran, so it parses
    needed = conversions(task)
    scaled = {v: [c.factor for c in needed if v in c.values] for v in numbers_in(task)}
    return [
        value
        for value, factors in scaled.items()
        if not any(
            _agrees(value, w)
            or _agrees(value / 100, w)
            or any(_agrees(value / f, w) or _agrees(value * f, w) for f in factors)
            for w in written
        )
    ]


def read_figures(output: str, task: str) -> list[Figure]:
    """The ``name: value`` lines of a program's output, but those that repeat a number the task gives.

    A percentage the task gives, printed as its fraction (rounded to the two decimals asked for), repeats it too:
    an SLO task's "99.9% availability" came back as "availability: 1" from two programs, and every part would have
    been told it (bench_figures).
    """
    given = {abs(v) for v in numbers_in(task)}
    percentages = [float(p.replace(",", "")) / 100 for p in _PERCENTAGE.findall(task)]
    given |= {abs(p) for p in percentages} | {abs(round(p, 2)) for p in percentages}
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
        # the name's words in a row, a small word between allowed ("number of payments")
        pattern = r"\b" + _BETWEEN_WORDS.join(re.escape(w) for w in words) + r"\w*\b" + _STATED
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
