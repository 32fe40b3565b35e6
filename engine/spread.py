"""Which standard deviation (or variance) a task asks for, and a program that computes the other one.

"My daily step counts last week were ... What are the mean, the median and the sample standard deviation?": two
programs of the 1.5B called ``np.std`` (numpy divides by n) and agreed, and the document gave their value as the
result (2026-12-08). A task that names the sample's (dividing by n - 1) or the population's gets a sentence in the
program's prompt (:func:`spread_hint`); a program that calls the library function of the other kind
(:func:`wrong_spread`) gives no vote, as one that skips a unit conversion gives none (:mod:`engine.units`). A
formula written out is not judged: only the calls whose kind is certain.
"""

from __future__ import annotations

import ast
import re
from typing import Literal

import engine.prompts as prompts
from state.python_ast import parse_module

__all__ = ["asked_spread", "spread_hint", "wrong_spread"]

Kind = Literal["sample", "population"]

_SAMPLE = re.compile(
    r"\bsample\s+(?:standard\s+deviation|std\.?\s*dev|variance|s\.?d\.?)\b|\bn\s*-\s*1\b"
    r"|\b(?:standard\s+deviation|variance)\s+of\s+(?:the|this|a)\s+sample\b",
    re.I,
)
_POPULATION = re.compile(
    r"\bpopulation\s+(?:standard\s+deviation|std\.?\s*dev|variance|s\.?d\.?)\b"
    r"|\b(?:standard\s+deviation|variance)\s+of\s+the\s+(?:whole\s+)?population\b",
    re.I,
)
_SPREAD = re.compile(r"\bstandard\s+deviation|\bvariance\b|\bstd\.?\s*dev\b", re.I)

_STATISTICS: dict[str, Kind] = {
    "stdev": "sample",
    "variance": "sample",
    "pstdev": "population",
    "pvariance": "population",
}
"""The ``statistics`` module's functions by the kind they compute."""
_NUMPY = frozenset({"std", "var", "nanstd", "nanvar"})
"""numpy's, population unless ``ddof=1`` (pandas' ``Series.std`` is the sample's: a method call is not judged)."""


def asked_spread(task: str) -> Kind | None:
    """The standard deviation or variance ``task`` names: the sample's, the population's, or None (neither said)."""
    if not _SPREAD.search(task):
        return None
    sample, population = bool(_SAMPLE.search(task)), bool(_POPULATION.search(task))
    if sample == population:
        return None
    return "sample" if sample else "population"


def spread_hint(task: str) -> str:
    """The sentence a program's prompt gets when the task names which standard deviation it wants (else empty)."""
    kind = asked_spread(task)
    if kind is None:
        return ""
    return prompts.SPREAD_SAMPLE if kind == "sample" else prompts.SPREAD_POPULATION


def wrong_spread(program: str, task: str) -> str | None:
    """The call in ``program`` that computes the other kind of spread than ``task`` asks for, or None.

    ``statistics.pstdev`` where the sample's is asked, ``statistics.stdev`` where the population's is, and numpy's
    ``std``/``var`` called as functions (``np.std(x)``), whose ``ddof`` (0 unless given) says the kind.
    """
    asked = asked_spread(task)
    if asked is None:
        return None
    try:
        tree = parse_module(program)
    except (SyntaxError, ValueError):
        return None
    imported = [(a.name, a.asname or a.name) for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    numpy = {alias for name, alias in imported if name == "numpy"}
    statistics = {alias for name, alias in imported if name == "statistics"}
    from_statistics = {
        a.asname or a.name: a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == "statistics"
        for a in n.names
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, kind = node.func, None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id in statistics and func.attr in _STATISTICS:
                kind = _STATISTICS[func.attr]
            elif func.value.id in numpy and func.attr in _NUMPY and (ddof := _ddof(node)) is not None:
                kind = "sample" if ddof == 1 else "population"
        elif isinstance(func, ast.Name) and from_statistics.get(func.id) in _STATISTICS:
            kind = _STATISTICS[from_statistics[func.id]]
        if kind is not None and kind != asked:
            return ast.unparse(node)
    return None


def _ddof(call: ast.Call) -> int | None:
    """The ``ddof`` a numpy call gives as a constant (0 when it gives none; None when it is not a constant)."""
    for keyword in call.keywords:
        if keyword.arg == "ddof":
            value = keyword.value
            return value.value if isinstance(value, ast.Constant) and isinstance(value.value, int) else None
    return 0
