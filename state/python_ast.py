"""Python source read into an AST behind one lock, for every thread of a run.

CPython 3.11 keeps the AST constructor's recursion depth in state the threads share: two slot workers parsing at
once raised ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905), and a multi-part run
lost a part to it (multipart_set5_rules2, mp5-colstats-cli: "unexpected error in slot worker"). A parse takes
milliseconds; holding one lock around each costs nothing measurable beside a generation.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse_expression", "parse_module"]

_LOCK = threading.Lock()


def parse_module(source: str) -> ast.Module:
    """``ast.parse(source)``, one thread at a time (SyntaxError and ValueError propagate as from ``ast.parse``)."""
    with _LOCK:
        return ast.parse(source)


def parse_expression(source: str) -> ast.Expression:
    """``ast.parse(source, mode="eval")``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, mode="eval")
