"""An answer's usage example, run against its own module: ``python.usage``.

A small model writes a usage block it never ran. mp5-feature-flags (multipart_set5_rules3) ended on
``print(flags.is_enabled('new_checkout', 'u-1001'))  # Output: True`` where its own ``is_enabled`` takes a ``flags``
argument as well: a reader who runs the example gets a ``TypeError``, and every check passed (the print-comment
check skips a block that fails; the agreement check reads only another part's functions). Each later Python block
that calls what the module defines, and defines and tests nothing itself, runs once after ``from solution import *``.
It fails the check only for the code's own fault:

* the exception passes through the module's code (the function refused the example), or it is a ``TypeError`` at
  the call of one of its functions or classes (the example calls it with arguments it does not take);
* not when the example reads a file, the network or input it was not given (``OSError``, ``ImportError``,
  ``NameError`` for a name the reader supplies, ``EOFError``), not at a sandbox refusal or the time limit, and not
  on a line whose comment says it raises ("# raises ValueError").
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from engine.slots.checks.text import PYTHON_TAGS, code_blocks
from engine.slots.sandbox import SandboxLimits, run_python
from state.python_ast import parse_module

__all__ = ["Raised", "raising_usage", "usage_blocks"]

_NOT_THE_CODES = (
    "OSError",
    "FileNotFoundError",
    "PermissionError",
    "IsADirectoryError",
    "NotADirectoryError",
    "ConnectionError",
    "ConnectionRefusedError",
    "TimeoutError",
    "ModuleNotFoundError",
    "ImportError",
    "NameError",
    "EOFError",
    "KeyboardInterrupt",
    "SystemExit",
)
"""Exceptions an example raises for what it was not given (a file, the network, a package, a value the reader
supplies), not for the code's fault."""
_SAYS_IT_RAISES = re.compile(
    r"#.*(?:\b(?:rais|error|exception|invalid|fails?\b|throws?)|\w(?:Error|Exception)\b)", re.I
)
"""A line whose comment says it raises ("# raises ValueError", "# Output: ValueError: ...")."""
_SIGNATURE = re.compile(
    r"^TypeError: (?:[\w.]+\(\) )?(?:missing \d+ required|takes (?:from )?\d+|got an unexpected keyword|"
    r"got multiple values)"
)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.M)


@dataclass(frozen=True)
class Raised:
    """A usage block's line that raised, and the exception's last line."""

    line: str
    error: str


def usage_blocks(raw: str, module: str, tests: str | None) -> list[str]:
    """The answer's Python blocks that use its module: not the module's own, not its tests, with a call in them.

    An untagged block counts when it parses as Python (a README's example often has no tag).
    """
    out = []
    for language, code in code_blocks(raw):
        if language not in PYTHON_TAGS | {""} or code.strip() in module or (tests and code.strip() in tests):
            continue
        try:
            tree = parse_module(code)
        except (SyntaxError, ValueError):
            continue
        defines = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body)
        tests_it = any(isinstance(n, ast.Assert) for n in ast.walk(tree))
        calls = any(isinstance(n, ast.Call) for n in ast.walk(tree))
        if calls and not defines and not tests_it:
            out.append(code)
    return out


def raising_usage(
    module: str,
    blocks: Sequence[str],
    limits: SandboxLimits,
    *,
    beside: Mapping[str, str] | None = None,
    stubs: Collection[str] = (),
) -> Raised | None:
    """The first usage block (of ``blocks``) that raises for the module's own fault, run after it; None if none.

    ``beside``: other files the example may read or import (name -> text), written next to it.
    """
    try:
        tree = parse_module(module)
    except (SyntaxError, ValueError):
        return None  # python.parses says it
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for code in blocks:
        if not names or not re.search(rf"\b(?:{'|'.join(map(re.escape, sorted(names)))})\s*\(", code):
            continue
        program = f"from solution import *\n{code}"
        ran = run_python(
            {**(beside or {}), "solution.py": module, "usage.py": program}, "usage.py", limits=limits, stubs=stubs
        )
        if ran.ok or ran.timed_out or ran.violations or ran.stubbed:
            continue
        raised = _own_fault(ran.stderr, program)
        if raised is not None:
            return raised
    return None


def _own_fault(stderr: str, program: str) -> Raised | None:
    """The usage line and the exception, when the traceback says the module's code is at fault."""
    lines = stderr.strip().splitlines()
    error = lines[-1].strip() if lines else ""
    kind = error.split(":", 1)[0].strip()
    if not re.fullmatch(r"\w+", kind) or kind in _NOT_THE_CODES:
        return None
    frames = [(m.group("file"), int(m.group("line"))) for m in _FRAME.finditer(stderr)]
    at = [line for file, line in frames if file.endswith("usage.py")]
    if not at or at[-1] == 1:
        return None  # the module raised as it was imported: python.runs says it
    written = program.splitlines()
    line = written[at[-1] - 1].strip() if 0 < at[-1] <= len(written) else ""
    if _SAYS_IT_RAISES.search(line):
        return None  # the example shows the error on purpose
    in_module = any(file.endswith("solution.py") for file, _ in frames)
    if in_module or (kind == "TypeError" and _SIGNATURE.match(error) and frames[-1][0].endswith("usage.py")):
        return Raised(line, error)
    return None
