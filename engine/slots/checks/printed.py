"""Output blocks an answer shows after its Python: whether a program printed them.

A small model writes what its program "prints" without running it. The mortgage answer of issue 39 showed a Python
block, then an output block with $2,500 (the interest alone; the right payment is $1,798.65), then a boxed $2,500:
a reader takes such a block for the program's own output. :func:`unprinted_outputs` finds each output block that
follows a Python block (fenced as ``output``, ``result`` or ``console``; or as text under a label such as
"Output:" or "# Output") and runs that Python once in :mod:`engine.slots.sandbox`, after the functions, classes and
imports of the answer's earlier Python blocks (a usage block calls the function the first block defines). A block
is kept only when the program prints what it shows; one that differs, or whose program cannot run (it reads
``input()``, uses the network, fails, or is not Python), goes: nobody printed it.
:func:`numbers_only_from` names the numbers an answer states that only such a block gave.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

from engine.slots.checks.text import FENCE_BLOCK, PYTHON_TAGS, code_blocks, norm, without_closed_code
from engine.slots.sandbox import SandboxLimits, run_python
from state.python_ast import parse_module

__all__ = ["MAX_RUNS", "Unprinted", "WrongComment", "numbers_only_from", "unprinted_outputs", "wrong_print_comments"]

OUTPUT_LANGUAGES = frozenset({"output", "result", "results", "console", "stdout", "out"})
"""Fence languages that say the block is what a program printed."""
LABELLED_LANGUAGES = frozenset({"", "text", "plaintext", "txt", "plain", "bash", "sh", "shell"})
"""Fence languages that hold a program's output when a label line says so ("Output:" then a ```text block)."""
_LABEL = re.compile(
    r"^\W{0,8}(?:(?:[\w',]+\s+){0,10}(?:outputs?|results?|prints?|printed|console)\b[^\n]{0,40}:\W{0,4}"
    r"|(?:#{1,6}\s*|\*\*|__)?\s*(?:(?:expected|example|sample|program|console)\s+)?(?:outputs?|results?)\W{0,4})$",
    re.I,
)
"""A line that announces a program's output: "Output:", "**Output:**", "# Output", "When you run this code, it will
output:", "The result will be:"."""
_NETWORK = frozenset({"socket", "requests", "urllib", "http", "httpx", "aiohttp", "ftplib", "smtplib", "websockets"})
MAX_RUNS = 4
"""Programs run per answer at most (each within the check timeout); an output block past them was not printed by
any program the harness ran, and goes as well."""
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
_MARKER = re.compile(r"^\s*(?:#{1,6}\s*)?\d+(?:\.\d+)*[.)]?\s", re.M)


@dataclass(frozen=True)
class Unprinted:
    """An output block no program printed: where it is, what it shows, and what its program printed instead."""

    body: int
    """Which of the texts given holds it."""
    start: int
    end: int
    """What goes: the block, and the label line that announced it."""
    shown: str
    """The block's contents."""
    printed: str | None
    """What its program printed (None: it could not run)."""
    why: str


def unprinted_outputs(bodies: list[str], limits: SandboxLimits) -> list[Unprinted]:
    """Each output block of ``bodies`` (the sections' texts, in order) that no program printed, in order.

    One sandbox run per distinct program, at most :data:`MAX_RUNS`.
    """
    found: list[Unprinted] = []
    earlier: list[str] = []  # the definitions and imports of the Python blocks so far
    program: str | None = None  # the Python block the next output block would follow
    runs: dict[str, tuple[str | None, str]] = {}
    for index, body in enumerate(bodies):
        for match in FENCE_BLOCK.finditer(body):
            language, code = match.group(2).lower(), match.group(3)
            label = _label_before(body, match.start())
            output = language in OUTPUT_LANGUAGES or (
                label is not None and language in LABELLED_LANGUAGES | PYTHON_TAGS and not _is_code(code)
            )
            if not output:
                program = code if language in PYTHON_TAGS or (language == "" and _is_code(code)) else None
                if program is not None:
                    earlier.append(_definitions(program))
                continue
            if program is None:
                continue
            whole = "\n".join([*earlier[:-1], program])
            if whole not in runs:
                runs[whole] = _run(whole, limits) if len(runs) < MAX_RUNS else (None, "no run left for it")
            printed, failure = runs[whole]
            if printed is not None and _same(_shown(code), printed):
                continue
            why = failure if printed is None else f"the program above it prints {printed.strip()[-80:]!r}"
            start = label if label is not None else match.start()
            found.append(Unprinted(index, start, match.end(), _shown(code), printed, why))
    return found


@dataclass(frozen=True)
class WrongComment:
    """A ``print(...)  # Output: X`` line whose program prints something else: the line, and the line fixed."""

    body: int
    line: str
    fixed: str
    claimed: str
    printed: str


def wrong_print_comments(
    bodies: list[str], limits: SandboxLimits, modules: Mapping[str, str] | None = None
) -> list[WrongComment]:
    """Each top-level ``print(...)`` of a Python block whose comment says what it prints, and it prints else.

    The tax function of multipart_new8 ended on ``print(compute_income_tax(30000))  # Output: 300.0`` and two more
    such lines, every one wrong for its own code (it returns 5000.0). The block runs in the sandbox after the
    earlier blocks' definitions, only when its output can be matched to its prints: every print call of the
    program is a statement of the block's top level, one line each, as many lines as prints. At most
    :data:`MAX_RUNS` runs. ``modules``: Python modules written beside the program (name -> code), which its
    blocks may import (another part's module, :mod:`engine.agreement`).
    """
    found: list[WrongComment] = []
    earlier: list[str] = []
    runs = 0
    for index, body in enumerate(bodies):
        for language, code in code_blocks(body):
            if language not in PYTHON_TAGS and not (language == "" and _is_code(code)):
                continue  # an untagged block is read when it is Python (a README's example often is)
            claims = _print_claims(code, "\n".join(earlier))
            earlier.append(_definitions(code))
            if not claims or runs >= MAX_RUNS:
                continue
            runs += 1
            printed, _ = _run("\n".join([*earlier[:-1], code]), limits, modules)
            out = printed.rstrip("\n").split("\n") if printed else []
            if printed is None or len(out) != len(claims):
                continue
            for (line, claimed, start, end), actual in zip(claims, out, strict=True):
                if claimed is None or _same(claimed, actual) or _same_number(claimed, actual):
                    continue
                fixed = f"{line[:start]}{actual.strip()}{line[end:]}"
                found.append(WrongComment(index, line, fixed, claimed, actual.strip()))
    return found


_PRINT_CLAIM = re.compile(
    r"#\s*(?:outputs?|prints?|printed|result|returns?|expected|->|=>)\s*:?\s*(?P<claim>\S.*?)\s*$", re.I
)
"""The comment of a print line that says what it prints: "# Output: 300.0", "# prints 5000", "# -> True"."""


def _print_claims(code: str, earlier: str) -> list[tuple[str, str | None, int, int]] | None:
    """Per print of ``code`` (all at its top level, one line each): its line, what its comment claims, the claim's span.

    None when the program's output cannot be matched to its prints (a print inside a function or over several
    lines, or no claim at all).
    """
    try:
        tree = parse_module(code)
        defined = parse_module(earlier) if earlier else None
    except (SyntaxError, ValueError):
        return None
    calls = [n for n in ast.walk(tree) if _is_print(n)]
    if defined is not None and any(_is_print(n) for n in ast.walk(defined)):
        return None
    top = [n.value for n in tree.body if isinstance(n, ast.Expr) and _is_print(n.value)]
    if not calls or len(top) != len(calls) or any(n.lineno != n.end_lineno for n in top):
        return None
    lines = code.splitlines()
    claims: list[tuple[str, str | None, int, int]] = []
    for call in top:
        line = lines[call.lineno - 1]
        claim = _PRINT_CLAIM.search(line, call.end_col_offset or 0)
        claims.append(
            (line, claim.group("claim"), claim.start("claim"), claim.end("claim")) if claim else (line, None, 0, 0)
        )
    return claims if any(c[1] is not None for c in claims) else None


def _is_print(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


def _same_number(claimed: str, printed: str) -> bool:
    """Whether a claim and a printed line are the same number (300 and 300.0)."""
    try:
        return float(claimed.replace(",", "")) == float(printed.strip().replace(",", ""))
    except ValueError:
        return False


def numbers_only_from(stated: str, gone: list[Unprinted], sources: str) -> list[str]:
    """The numbers ``stated`` (outside code) that only the ``gone`` blocks showed, as written.

    ``sources`` is every other place a number may honestly come from: the task, the answer's code, what its
    programs printed. Section numbers and list markers are not statements.
    """
    shown = [v for u in gone for v, _, _ in _numbers(u.shown)]
    given = _numbers(sources + "\n" + "\n".join(u.printed or "" for u in gone))
    prose = _MARKER.sub(" ", without_closed_code(stated))
    found: dict[float, str] = {}
    for value, decimals, written in _numbers(prose):
        if any(_states(v, value, decimals) for v in shown) and not any(
            _states(v, value, decimals) for v, _, _ in given
        ):
            found.setdefault(value, written)  # once per value, as first written
    return list(found.values())


def _label_before(body: str, at: int) -> int | None:
    """Where the line that announces the block starting at ``at`` starts (None: the line before is no label)."""
    before = body[:at].rstrip()
    line_start = before.rfind("\n") + 1
    line = before[line_start:]
    if not line.strip() or not _LABEL.match(line.strip()):
        return None
    return line_start


def _is_code(code: str) -> bool:
    """Whether a block holds Python statements (a call, an assignment, a definition), not printed values."""
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError):
        return False
    return any(
        not isinstance(node, ast.Expr) or any(isinstance(n, ast.Call) for n in ast.walk(node)) for node in tree.body
    )


def _definitions(code: str) -> str:
    """The functions, classes and imports of a Python block (what a later block may use), as source."""
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError):
        return ""
    lines = code.splitlines()
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    spans = [
        (min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))]), n.end_lineno or n.lineno)
        for n in tree.body
        if isinstance(n, kinds)
    ]
    return "\n".join("\n".join(lines[first - 1 : last]) for first, last in spans)


def _run(program: str, limits: SandboxLimits, beside: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """What ``program`` prints in the sandbox, or None and why it cannot run.

    It must need nothing from outside but the modules ``beside`` it (name -> code).
    """
    try:
        tree = parse_module(program)
    except (SyntaxError, ValueError) as exc:
        return None, f"the Python above it does not parse ({exc})"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "input":
            return None, "the Python above it reads input() and cannot run alone"
        modules = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        if any(m.split(".")[0] in _NETWORK for m in modules):
            return None, "the Python above it uses the network and cannot run here"
    files = {f"{name}.py": code for name, code in (beside or {}).items()}
    ran = run_python({**files, "program.py": program}, "program.py", limits=limits)
    if not ran.ok:
        why = "timed out" if ran.timed_out else (ran.violations or [ran.stderr.strip()[-120:]])[0]
        return None, f"the Python above it cannot run: {why}"
    return ran.stdout, ""


def _shown(code: str) -> str:
    """A block's text as a program would have printed it: without a first "# Output" line and shell prompts."""
    lines = code.splitlines()
    if lines and re.fullmatch(r"\W*(?:outputs?|results?)\W*", lines[0].strip(), re.I):
        lines = lines[1:]
    return "\n".join(line for line in lines if not line.lstrip().startswith(("$ ", ">>> ")))


def _same(shown: str, printed: str) -> bool:
    """Whether a block shows what was printed: line for line, or alike once case, punctuation and spacing go."""
    lines = [line.rstrip() for line in shown.strip("\n").splitlines() if line.strip()]
    out = [line.rstrip() for line in printed.strip("\n").splitlines() if line.strip()]
    return lines == out or (bool(out) and norm(shown) == norm(printed))


def _numbers(text: str) -> list[tuple[float, int, str]]:
    """Each number of ``text``: its value, the decimals it shows, and how it is written."""
    found = []
    for m in _NUMBER.finditer(text):
        digits = m.group(0).replace(",", "")
        found.append((float(digits), len(digits.split(".", 1)[1]) if "." in digits else 0, m.group(0)))
    return found


def _states(value: float, written: float, decimals: int) -> bool:
    """Whether ``written`` (showing ``decimals`` decimals) states ``value``: equal to the digits it shows."""
    return abs(abs(value) - abs(written)) <= 0.5 / 10.0**decimals + 1e-9
