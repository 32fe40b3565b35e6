"""The examples a task gives, which the check of a Python answer runs.

``>>>`` doctests, ``call == value`` lines and HumanEval's other ways of stating one (``f(x) ==> 3``, ``f(x) = 3``,
``f(x) # => 'No'``, ``Input: a = 1`` / ``Output: 2``, "For lst = [...] the output should be 6").
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from engine.slots.checks.text import without_code
from experts.routing.aspects import named_functions
from state.python_ast import parse_expression, parse_module


@dataclass(frozen=True)
class Examples:
    """Examples given by the task: doctests (``>>>``) and ``call == value`` lines, and the functions it names."""

    doctests: tuple[str, ...] = ()
    """Each a doctest text: ``>>> expr`` and the expected output lines."""
    asserts: tuple[tuple[str, str], ...] = ()
    """``(call, value)`` pairs: the call must equal the value."""
    functions: tuple[str, ...] = ()
    """Function names the task defines or asks for (``def name(``)."""
    named: tuple[str, ...] = ()
    """Those and the functions its words name with their parameters ("I want parking_fee(minutes) in tariff.py"):
    what the answer must define."""

    @property
    def count(self) -> int:
        """How many examples there are."""
        return len(self.doctests) + len(self.asserts)


def _literal(text: str) -> bool:
    try:
        ast.literal_eval(text.strip())
    except (SyntaxError, ValueError):
        return False
    return True


def extract_examples(task: str) -> Examples:
    """The examples a task gives and the functions it defines.

    Examples are ``>>>`` doctests, ``call == value`` lines (and HumanEval's other arrows), and inputs stated
    with their output.
    """
    functions = tuple(dict.fromkeys(re.findall(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", task, re.M)))
    doctests: list[str] = []
    comparisons: list[tuple[str, str]] = []
    lines = task.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith(">>> "):
            source = [line]
            i += 1
            while i < len(lines) and lines[i].strip().startswith("... "):
                source.append(lines[i].strip())
                i += 1
            want: list[str] = []
            while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(">>>"):
                if lines[i].strip() in ('"""', "'''"):
                    break
                want.append(lines[i].strip())
                i += 1
            left, eq, right = source[0][4:].partition(" == ")
            if not want and len(source) == 1 and eq and _literal(right):
                # ">>> f(19) == 'xix'" with no output line states a fact; run as a doctest it would expect nothing
                # printed and fail on the True a correct function prints
                comparisons.append((left.strip(), right.strip()))
                continue
            doctests.append("\n".join(source + want) + "\n")
            continue
        i += 1
    asserts: list[tuple[str, str]] = list(comparisons)
    for line in _statements(lines):
        m = _ARROW.match(line)
        if m is None or ">>>" in line:
            continue
        call, value = m.group(1), _stated_value(m.group(2).rstrip(".,;"))
        if value is None or (functions and call.split("(", 1)[0] not in functions):
            continue
        try:
            parse_expression(call)
        except SyntaxError:
            continue
        asserts.append((call, value))
    if len(functions) == 1:  # "Input: a = 1 / Output: 2" does not name its function: only one can be meant
        asserts += _input_output_examples(lines, functions[0], _parameters(task, functions[0]))
    return Examples(tuple(doctests), tuple(asserts), functions, _named(task, functions))


def _statements(lines: list[str]) -> list[str]:
    """The task's lines, and each ``assert`` a line gives after its words, as a line of its own.

    "Your code should pass this test: assert f(3) == 9" gives ``assert f(3) == 9``.
    """
    out: list[str] = []
    for line in lines:
        out.append(line)
        inline = _INLINE_ASSERT.search(line)
        if inline is not None and inline.start() > 0 and line[: inline.start()].strip():
            out.append(line[inline.start() :])
    return out


_INLINE_ASSERT = re.compile(r"(?<=[:.;]\s)assert\s+(?=[A-Za-z_])")
"""An ``assert`` after a sentence's colon or end, on the same line as the words before it."""
_ARROW = re.compile(
    r"^\s*(?:[*•-]\s*|assert\s+|for\s+)?([A-Za-z_]\w*\(.*\))\s*(?:#\s*)?(?:==>|==|➞|=>|->|=|returns|should return)"
    r"\s*(.+?)\s*$"
)
"""A stated example: ``f(x) == 3``, ``f(x) ==> 3``, ``f(x) = 3``, ``f(x) # => 3``, ``f(x) -> 3``, ``f(x) ➞ 3``,
after a bullet, an ``assert`` or a ``for`` as HumanEval writes some."""
_FOR_INPUT = re.compile(r"^\s*for\s+(.+?),?\s+the\s+(?:output|result)\s+(?:should\s+be|is)\s+(.+?)\s*$", re.I)
"""``For lst = [1,2,3] the output should be 6``."""
_INPUT = re.compile(r"^\s*input\s*:\s*(.*?)\s*$", re.I)
_OUTPUT = re.compile(r"^\s*output\s*:\s*(.+?)\s*$", re.I)
_WORDS_FOR_LITERALS = {"true": "True", "false": "False", "none": "None", "null": "None"}
"""Values written in the words of other languages (``is_simple_power(3, 2) => false``)."""


def _input_output_examples(lines: list[str], function: str, parameters: list[str] | None) -> list[tuple[str, str]]:
    """``(call, value)`` of the examples stated as an input and an output.

    ``For arr = [1,2,3], k = 2 the output should be 6`` on one line, or ``Input: arr = [1,2,3], k = 2`` (or one
    ``name : value`` a line below it) then ``Output: 6``.
    """
    if parameters is None:
        return []
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        stated = _FOR_INPUT.match(lines[i])
        given = _INPUT.match(lines[i])
        i += 1
        if stated is not None:
            arguments, value = stated.group(1), stated.group(2)
        elif given is not None:
            inputs = [given.group(1)]
            while i < len(lines) and len(inputs) < 8 and _OUTPUT.match(lines[i]) is None:
                inputs.append(lines[i].strip())
                i += 1
            output = _OUTPUT.match(lines[i]) if i < len(lines) else None
            if output is None:
                continue
            i += 1
            arguments = ", ".join(re.sub(r"^(\w+)\s*:\s*", r"\1 = ", s) for s in inputs if s)
            value = output.group(1)
        else:
            continue
        call = _call(function, parameters, arguments)
        stated_value = _stated_value(value.rstrip(".,;"))
        if call is not None and stated_value is not None:
            found.append((call, stated_value))
    return found


def _call(function: str, parameters: list[str], arguments: str) -> str | None:
    """``function`` called with ``arguments`` (``a = 1, b = [2]`` or literals), or None if they do not fit it.

    Named arguments that are its parameters are passed by name; literals, or names of their own as many as its
    parameters (HumanEval/115 says ``bucket_capacity`` for ``capacity``), in the order given.
    """
    try:
        parsed = parse_expression(f"_({arguments})").body
    except SyntaxError:
        return None
    if not isinstance(parsed, ast.Call) or (parsed.args and parsed.keywords):
        return None
    values = [*parsed.args, *(k.value for k in parsed.keywords)]
    if not values or not all(_literal(ast.unparse(v)) for v in values):
        return None
    names = [k.arg for k in parsed.keywords]
    if names and all(n in parameters for n in names):
        listed = ", ".join(f"{k.arg}={ast.unparse(k.value)}" for k in parsed.keywords)
    elif len(values) == len(parameters):
        listed = ", ".join(ast.unparse(v) for v in values)
    else:
        return None
    return f"{function}({listed})"


def _parameters(task: str, function: str) -> list[str] | None:
    """The parameter names of ``def function(...)`` in ``task``, or None if its signature does not parse."""
    m = re.search(rf"^\s*def\s+{re.escape(function)}\s*(\(.*?\))\s*(?:->[^:]*)?:", task, re.M | re.S)
    if m is None:
        return None
    try:
        tree = parse_module(f"def _{m.group(1)}: pass")
    except SyntaxError:
        return None
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):  # the one statement parsed is that def; this narrows its type
        return None
    return [a.arg for a in [*definition.args.posonlyargs, *definition.args.args]]


def _stated_value(text: str) -> str | None:
    """The literal an example states, or None.

    ``'No' (the name must ...)`` states ``'No'``; ``19 - 5 - 6 = 8`` (a worked sum) states ``8``; ``24 # sum of
    21 + 3`` states ``24``; ``false`` states ``False``.
    """
    text = _WORDS_FOR_LITERALS.get(text.strip(), text)
    for value in (re.sub(r"\s+#.*$", "", text), text, re.sub(r"\s+\([^()]*\)$", "", text), text.rsplit(" = ", 1)[-1]):
        if _literal(value):
            return value.strip()
    return None


def _named(task: str, functions: tuple[str, ...]) -> tuple[str, ...]:
    """``functions`` and the functions ``task``'s words name with their parameters (not a builtin, not a method)."""
    return tuple(dict.fromkeys([*functions, *prose_calls(task)]))


def prose_calls(task: str) -> list[str]:
    """The functions ``task``'s words name with their parameters ("parking_fee(minutes)"), outside its code."""
    return list(named_functions(without_code(task)))  # the task's own code defines what it defines
