"""Python source parsed one thread at a time (state/python_ast.py): CPython 3.11's AST constructor is not safe
across threads (python/cpython#106905; a slot worker died of it in multipart_set5_rules2)."""

from __future__ import annotations

import ast
import threading

import pytest

from state import python_ast
from state.python_ast import parse_expression, parse_module


def test_a_parse_waits_for_the_one_before_it_to_finish() -> None:
    done = threading.Event()
    parsed: list[ast.Module] = []

    def worker() -> None:
        parsed.append(parse_module("x = 1\n"))
        done.set()

    with python_ast._LOCK:  # another thread's parse in progress
        thread = threading.Thread(target=worker)
        thread.start()
        assert not done.wait(0.2)  # it waits
    assert done.wait(5) and isinstance(parsed[0], ast.Module)
    thread.join()


def test_parsing_behaves_as_ast_parse() -> None:
    assert isinstance(parse_module("def f():\n    return 1\n").body[0], ast.FunctionDef)
    assert isinstance(parse_expression("1 + 2").body, ast.BinOp)
    with pytest.raises(SyntaxError):
        parse_module("def f(:\n")
