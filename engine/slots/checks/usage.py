"""An answer's usage example, run against its own module: ``python.usage``.

A small model writes a usage block it never ran. mp5-feature-flags (multipart_set5_rules3) ended on
``print(flags.is_enabled('new_checkout', 'u-1001'))  # Output: True`` where its own ``is_enabled`` takes a ``flags``
argument as well: a reader who runs the example gets a ``TypeError``, and every check passed (the print-comment
check skips a block that fails; the agreement check reads only another part's functions). Each later Python block
that calls what the module defines, and defines and tests nothing itself, runs once after ``from solution import *``.
It fails the check only for the code's own fault:

* the exception passes through the module's code (the function refused the example), or it is a ``TypeError`` at
  the call of one of its functions or classes (the example calls it with arguments it does not take);
* not when the example names a file it was not given (``load_settings('diskwatch.ini')``: configparser reads a
  missing file as an empty one, and the module then refuses it), nor when it reads the network or input it was
  not given (``OSError``, ``ImportError``,
  ``NameError`` in the example for a name the reader supplies, ``EOFError``), not at a sandbox refusal or the time
  limit, and not on a line whose comment says it raises ("# raises ValueError"). A ``NameError`` inside the module
  is the module's (mp5-merge-ranges' ``total_length`` summed a ``merged_ranges`` only ``merge_ranges`` had).
"""

from __future__ import annotations

import ast
import importlib.util
import os
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
_READS_FILE = re.compile(
    r"""["']([\w./-]+\.(?:ini|json|csv|tsv|ya?ml|toml|txt|cfg|conf|env|db|sqlite3?|xlsx?|log|xml|html?|md|pdf))["']""",
    re.I,
)
"""A file the example names in a string ("diskwatch.ini"): the example reads what the reader has."""
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
        files = {**(beside or {}), "solution.py": module, "usage.py": program}
        if any(name not in files for name in _READS_FILE.findall(code)):
            continue  # it reads a file it was not given (a missing one may fail inside the module: configparser)
        # the example imports the module by the name it is delivered under ("from ranges import merge_ranges")
        files.update({f"{name}.py": module for name in _own_module_names(code, files)})
        ran = run_python(files, "usage.py", limits=limits, stubs=stubs)
        if ran.ok or ran.timed_out or ran.violations or ran.stubbed:
            continue
        raised = _own_fault(ran.stderr, program, tuple(name for name, text in files.items() if text == module))
        if raised is not None:
            return raised
    return None


def _own_module_names(code: str, files: Mapping[str, str]) -> list[str]:
    """The modules the example imports that are neither beside it nor importable here: the answer's own module."""
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError):
        return []
    names = {n.module.partition(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    names |= {a.name.partition(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return sorted(
        name
        for name in names
        if f"{name}.py" not in files and name.isidentifier() and importlib.util.find_spec(name) is None
    )


def _own_fault(stderr: str, program: str, own: tuple[str, ...]) -> Raised | None:
    """The usage line and the exception, when the traceback says the module's code is at fault."""
    lines = stderr.strip().splitlines()
    error = lines[-1].strip() if lines else ""
    kind = error.split(":", 1)[0].strip()
    frames = [(m.group("file"), int(m.group("line"))) for m in _FRAME.finditer(stderr)]
    inside = bool(frames) and os.path.basename(frames[-1][0]) in own
    if not re.fullmatch(r"\w+", kind) or (kind in _NOT_THE_CODES and not (kind == "NameError" and inside)):
        return None  # a NameError inside the module is its own (a function that reads a name it never set)
    at = [line for file, line in frames if file.endswith("usage.py")]
    if not at or at[-1] == 1:
        return None  # the module raised as it was imported: python.runs says it
    written = program.splitlines()
    line = written[at[-1] - 1].strip() if 0 < at[-1] <= len(written) else ""
    if _SAYS_IT_RAISES.search(line):
        return None  # the example shows the error on purpose
    in_module = any(os.path.basename(file) in own for file, _ in frames)
    if in_module or (kind == "TypeError" and _SIGNATURE.match(error) and frames[-1][0].endswith("usage.py")):
        return Raised(line, error)
    return None
