r"""Arithmetic in an answer is computed by the harness, not trusted to the model's digits.

Small models set up a calculation correctly far more often than they carry it out ("12 inches is 12 * 2.54
centimeters", or "= 30.6"). :func:`compute` finds the calculations an answer writes and evaluates them exactly:

* ``[[12 * 2.54]]``, the form the direct-answer prompt asks for, becomes ``30.48`` (``^`` is a power there);
* ``12 * 2.54 = 30.6`` has its result checked, and a wrong one replaced (``12 * 2.54 = 30.48``);
* ``12 * 2.54`` left without a result, at the end of a clause, gets one (``12 * 2.54 = 30.48``).

LaTeX steps are read too: ``\frac{25000}{1.47746} \approx 17039.13`` (a present value the finance expert got
wrong, numeric_heldout2) becomes ``\frac{25000}{1.47746} \approx 16920.93``, with ``\times``, ``\cdot``
and ``^{8}`` read as Python's operators. A LaTeX step, and any step written with ``≈``, agrees when its result is
within a thousandth of the value or right to the digits it shows: a model writes a rounded value there, and
only a wrong one is corrected. A corrected result of three significant digits or more is corrected wherever the
answer states it again (the boxed ``17039.13`` two lines on is the same wrong number).

Only numbers, parentheses and ``+ - * / // % **`` (and ``x`` or ``×`` for times, ``÷`` for division) are
evaluated, with Python's own arithmetic on the parsed expression (never ``eval``); powers are bounded so that no
expression can run away. Every change is returned, for the ledger.

Three more forms are read, each seen stating a wrong figure with nothing to flag it:

* a chain, ``\frac{16}{30} \times 41,600 = \frac{657,600}{30} = 21,920`` (multipart_set4_first, the new hire's
  first pay: 16 x 41,600 is 665,600, so the chain's last step is right and its result wrong): every link of
  a chain must have one value, and where a later link differs from the first the result is the first's
  (``\frac{16}{30} \times 41,600 = 22,186.67``), the broken links dropped and the change in the ledger;
* a figure and then its working in brackets, units and currency signs read as nothing:
  ``$1,296 (4,200 kWh * $0.30/kWh)`` (multipart_set4_first, the solar payback: 1,260);
* a product or quotient whose numbers carry units, ``14 * 350 W = 49,000`` (the server room's memo: 4,900) and
  ``0.999 * 43200 minutes = 41760`` (a runbook's error budget: 43,156.8); sums are left alone (their terms may
  be in different units: "2 hours + 30 minutes").
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from state.python_ast import parse_expression

__all__ = ["compute", "compute_all", "evaluate", "latex_value"]

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_OP = r"(?:\*\*|//|[-+*/%×÷x])"
_EXPR = rf"\(?\s*-?{_NUM}\s*\)?(?:\s*{_OP}\s*\(?\s*-?{_NUM}\s*\)?)+"
_BRACKETS = re.compile(r"\[\[\s*([^\[\]]{1,200}?)\s*\]\]")
_WITH_RESULT = re.compile(rf"(?<![\w.])({_EXPR})\s*(=|≈)\s*(-?{_NUM})(?!\d|[.,]\d)")
_CURRENCY = r"[$£€]"
_MONEY_STEP = re.compile(
    rf"(?<![\w.])({_CURRENCY}\s?{_NUM}(?:\s*{_OP}\s*{_CURRENCY}?\s?{_NUM})+)\s*(=|≈)\s*(-?)({_CURRENCY})\s?(-?{_NUM})"
    r"(?!\d|[.,]\d)"
)
"""A step in money, a currency sign on its numbers: ``$225.79 * 12 = $2,711.48`` (2,709.48; multipart_set3_units2,
the server room's memo), which the plain step's pattern does not read."""
_END = r"(?![\d]|[.,]\d)(?!\s*[=≈])"
"""An expression ends where no digit (or decimal part) goes on, and no result follows."""
_WITHOUT_RESULT = re.compile(rf"(?<![\w.=])({_EXPR}){_END}(?=\s*(?:[.,;:!?)]|\s+(?:[a-zA-Z%°]|$)|$))")
_BRACED = r"\{(?:[^{}]|\{[^{}]*\})*\}"
_LATEX_UNIT = r"(?:\s*/?\s*\\(?:text|mathrm)\s*\{[^{}]*\})?"
"""A unit after a LaTeX number (``4900 \\text{ W} \\times 720 \\text{ hours/month}``, ``£5.28/\\text{kg}``): read
as nothing."""
_LATEX_MONEY = r"(?:\\?[$£€]\s?)?"
"""A currency sign before a LaTeX number (``1.2 \\text{ kg} \\times £5.28/\\text{kg} = £6.704``: 6.336, a unit price
the generalist worked out on the 0.5B, numeric_heldout3): read as nothing."""
_LATEX_TERM = (
    rf"(?:-?\\[dt]?frac\s*{_BRACED}\s*{_BRACED}|\(\s*-?{_NUM}(?:\s*[-+]\s*{_NUM})?\s*\)|-?{_LATEX_MONEY}{_NUM})"
    rf"{_LATEX_UNIT}"
)
_LATEX_POWER = r"(?:\s*\^\s*(?:\{\s*-?\d+(?:\.\d+)?\s*\}|\d+))"
_LATEX_OP = r"(?:\\times|\\cdot|[-+*/×÷])"
_LATEX_EXPR = rf"{_LATEX_TERM}{_LATEX_POWER}?(?:\s*{_LATEX_OP}\s*{_LATEX_TERM}{_LATEX_POWER}?)*"
_LATEX_STEP = re.compile(
    rf"({_LATEX_EXPR})\s*(=|\\approx|≈)\s*{_LATEX_MONEY}(-?{_NUM})"
    r"(?!\d|[.,]\d|\s*(?:\^|\\times|\\cdot|[*/×÷]|\\frac))"
)
_CHAIN = re.compile(
    rf"({_LATEX_EXPR})((?:\s*=\s*{_LATEX_EXPR})+?)\s*(=|\\approx|≈)\s*(-?{_NUM})"
    r"(?!\d|[.,]\d|\s*(?:\^|\\times|\\cdot|[*/×÷]|\\frac|=))"
)
r"""A chain of equal expressions and its result: ``a \times b = \frac{c}{d} = e``."""
_UNIT_WORD = r"(?:\s*/?\s*[A-Za-z][A-Za-z/]*)?"
_WORKING_NUMBER = rf"(?:{_CURRENCY}\s?)?{_NUM}{_UNIT_WORD}"
_WORKING = rf"{_WORKING_NUMBER}(?:\s*(?:[*×]|\sx\s)\s*{_WORKING_NUMBER})+"
_FIGURE_WORKING = re.compile(rf"(?<![\w.])({_CURRENCY})\s?({_NUM})(?!\d|[.,]\d)\s*\(\s*({_WORKING})\s*\)")
"""A sum of money and its working in brackets: ``$1,296 (4,200 kWh * $0.30/kWh)``."""
_UNIT_WORDS = r"(?:\s*/?\s*[A-Za-z][A-Za-z/]*){0,2}"
_UNIT_TERM = rf"(?:{_CURRENCY}\s?)?{_NUM}{_UNIT_WORDS}"
_UNIT_STEP = re.compile(
    rf"(?<![\w.$£€])({_UNIT_TERM}(?:\s*(?:[*×/÷]|\sx\s)\s*{_UNIT_TERM})+)\s*=\s*({_CURRENCY})?\s?(-?{_NUM})"
    r"(?!\d|[.,]\d)"
)
"""A product or quotient whose numbers carry units: ``14 * 350 W = 49,000`` (4,900; the server room's memo)."""
_STEP_TOLERANCE = 1e-3
"""A LaTeX or ``≈`` step's result within this share of the value agrees (a rounded intermediate carried on)."""
_PROPAGATED_DIGITS = 3
"""A corrected result with this many significant digits or more is corrected wherever it is stated again."""
_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def evaluate(expression: str) -> float | None:
    """The value of an arithmetic expression, or None when it is not one (or divides by zero, or runs away)."""
    text = expression.replace("×", "*").replace("÷", "/").replace(",", "")
    text = re.sub(r"(?<=[\d)\s])x(?=[\s(\d])", "*", text)
    try:
        tree = parse_expression(text.strip())
        value = _eval(tree.body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, TypeError):
        return None
    return value


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
            raise ValueError("power too large")
        return _OPS[type(node.op)](left, right)
    raise ValueError(f"not arithmetic: {ast.dump(node)[:40]}")


def _show(value: float) -> str:
    """A result as a person writes it: no float noise (``30.48``, not ``30.480000000000004``), no ``.0``."""
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
    try:
        shown = Decimal(repr(round(value, 10))).normalize()
    except InvalidOperation:
        return repr(value)
    return format(shown, "f")


def _same(written: str, value: float) -> bool:
    """The written result is the value, or the value rounded to the digits it shows (762.05 for 762.048).

    A model writes money to the cent; "= 30.6" for 30.48 is still wrong (30.5 to its one decimal), and a whole
    number must be the value itself.
    """
    try:
        number = float(written.replace(",", ""))
    except ValueError:
        return False
    if abs(number - value) <= max(1e-9, abs(value) * 1e-6) or _show(number) == _show(value):
        return True
    if "." not in written:
        return False  # "3 * 2.5 = 8" is not 7.5 rounded: a whole number claims to be the value
    try:
        shown = Decimal(written.replace(",", ""))
        step = Decimal(1).scaleb(-_decimals(written))
        return Decimal(repr(value)).quantize(step, ROUND_HALF_UP) == shown
    except (InvalidOperation, ValueError):
        return False


def latex_value(expression: str) -> float | None:
    r"""The value of a LaTeX arithmetic expression (``\frac{a}{b}``, ``\times``, ``\cdot``, ``^{n}``), or None."""
    text = expression.replace("\\left", "").replace("\\right", "").replace("\\,", "")
    text = re.sub(r"/?\s*\\(?:text|mathrm)\s*\{[^{}]*\}", "", text)  # "£5.28/\text{kg}": a rate's unit
    text = re.sub(r"\\?[$£€]", "", text)
    text = re.sub(r"\\times|\\cdot", "*", text)
    text = re.sub(r"\^\s*\{([^{}]*)\}", r"**(\1)", text).replace("^", "**")
    for _ in range(4):  # nested fractions, innermost first
        text, n = re.subn(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"((\1)/(\2))", text)
        if not n:
            break
    if "\\" in text or "{" in text:
        return None
    return evaluate(text)


_OPERATOR_BEFORE = re.compile(r"(?:[\d)}]\s*[-+*/×÷^]|\\times|\\cdot|[{^])\s*$|[\w.^{}]$")
"""Text before a step that makes it the end of a longer expression ("189.99 \\times (1 - 0.20) = ...") or of a
name ("a_1 + 5"); a bullet's dash ("- 12 * 2.54 = 30.6") is neither."""
_CONTINUES = re.compile(r"\s*(?:[-+*/×÷^]\s*[\d(\\]|\\times|\\cdot|\\frac)")
"""Text after a step's result that makes the result the start of the next expression ("= 189.99 \\times 0.80")."""


_UNIT_THEN_RESULT = re.compile(r"\s+[A-Za-z%°$€£][\w/%°]*\.?\s*(?:=|≈|is\b)")
"""A unit word and then the result of the expression before it ("43200 minutes = 43156.8")."""


def _inside_longer(text: str, m: re.Match[str]) -> bool:
    """Whether a step (expression, relation, result) is part of a longer chain, not a calculation of its own."""
    return _OPERATOR_BEFORE.search(text[: m.start()]) is not None or _CONTINUES.match(text, m.end()) is not None


def _units(expression: str) -> set[str]:
    r"""The LaTeX units an expression writes (``\text{ liters}``), as words."""
    return {unit.strip() for unit in re.findall(r"\\(?:text|mathrm)\s*\{([^{}]*)\}", expression)}


_RATE_UNIT = re.compile(r"/\s*\\(?:text|mathrm)\s*\{([^{}]*)\}")


def _rate_unmatched(expression: str) -> bool:
    r"""Whether a rate's unit (``£3.60/\text{kg}``) is not the unit of another term (``750 \text{ g}``).

    Then the step needs a conversion the arithmetic cannot see, and its product is no check of the written result.
    """
    rates = {unit.strip() for unit in _RATE_UNIT.findall(expression)}
    return bool(rates - _units(_RATE_UNIT.sub("", expression)))


def _without_units(expression: str) -> str:
    """An expression's currency signs and unit words taken out (``x`` between spaces stays: it is "times")."""
    return re.sub(rf"{_CURRENCY}|/?\s*\b(?!x\b)[A-Za-z][A-Za-z/]*\b", "", expression)


def _decimals(written: str) -> int:
    return len(written.split(".")[1]) if "." in written else 0


def _agrees_rounded(written: str, value: float) -> bool:
    """A step's result as a model writes it: within :data:`_STEP_TOLERANCE`, or right to the digits it shows."""
    number = float(written.replace(",", ""))
    if abs(number - value) <= max(1e-9, abs(value) * _STEP_TOLERANCE):
        return True
    return bool(abs(number - value) <= 10.0 ** -_decimals(written))  # 1.4775 for 1.47745544, one in its last digit


def _shown_like(written: str, value: float) -> str:
    """A corrected result written as the wrong one was: its decimals and its thousands commas.

    Six decimals at most; two when it showed none and the value needs some.
    """
    places = min(_decimals(written), 6)
    if places == 0 and not float(value).is_integer():
        places = 2
    return f"{value:,.{places}f}" if "," in written else f"{value:.{places}f}"


def _significant(written: str) -> int:
    return len(written.replace(",", "").replace(".", "").replace("-", "").lstrip("0"))


def compute(text: str) -> tuple[str, list[str]]:
    """``text`` with its calculations computed (see the module docstring), and a line per change."""
    [computed], changes = compute_all([text])
    return computed, changes


def compute_all(texts: list[str]) -> tuple[list[str], list[str]]:
    """Texts of one answer (its sections) computed as one: a wrong result corrected in one is corrected in all."""
    changes: list[str] = []
    wrong: dict[str, str] = {}
    steps = [_steps(text, changes, wrong) for text in texts]
    if not wrong:
        return steps, changes
    pattern = re.compile(
        r"(?<![\d.,])(?:" + "|".join(re.escape(w) for w in sorted(wrong, key=len, reverse=True)) + r")(?!\d|[.,]\d)"
    )

    def restated(m: re.Match[str]) -> str:
        changes.append(f"corrected {m.group(0)} to {wrong[m.group(0)]} where the answer states it again")
        return wrong[m.group(0)]

    again = [pattern.sub(restated, text) for text in steps]
    # a step that used a corrected result ("3,528,000 - 2,721,600 = -14,112" once both were corrected) is computed
    # once more; what it corrects is not carried further
    return [_steps(text, changes, {}) for text in again], changes


def _steps(text: str, changes: list[str], wrong: dict[str, str]) -> str:
    """``text`` with its steps computed; each change appended to ``changes``, each wrong result to ``wrong``."""

    def bracket(m: re.Match[str]) -> str:
        value = evaluate(m.group(1).replace("^", "**"))  # a power as a calculator writes it: no XOR in brackets
        if value is None:
            return m.group(0)
        changes.append(f"computed [[{m.group(1)}]] = {_show(value)}")
        return _show(value)

    def with_result(m: re.Match[str]) -> str:
        if _inside_longer(text, m):
            return m.group(0)
        value = evaluate(m.group(1))
        if value is None or m.group(2) == "≈" or _same(m.group(3), value):
            return m.group(0)
        changes.append(f"corrected {m.group(1).strip()} = {m.group(3)} to {_show(value)}")
        if _significant(m.group(3)) >= _PROPAGATED_DIGITS:  # the NPV's "(-2,068.31)" below its corrected sum
            wrong[m.group(3)] = _show(value)
        return f"{m.group(1).rstrip()} = {_show(value)}"

    def without_result(m: re.Match[str]) -> str:
        expression = m.group(1)
        if _UNIT_THEN_RESULT.match(m.string, m.end()):
            return expression  # "0.999 * 43200 minutes = 43156.8 minutes": its result follows its unit
        operators = set(re.findall(rf"(?<=[\d)\s]){_OP}(?=[\s(\d-])", expression))
        if not operators or operators == {"-"}:
            return expression  # "3-5 days", "2023 - 2024", "3.11 - 2": ranges and versions, not calculations
        if operators == {"/"} and not re.search(r"\s/\s", expression):
            return expression  # "11/23": a date or a fraction as written, not a division to carry out
        value = evaluate(expression)
        if value is None:
            return expression
        changes.append(f"computed {expression.strip()} = {_show(value)}")
        return f"{expression.rstrip()} = {_show(value)}"

    def corrected(written: str, value: float, step: Callable[[str], str]) -> str:
        """``value`` written as ``written`` was; the change recorded (``step(right)``), and chased where restated."""
        right = _shown_like(written, value)
        changes.append(f"corrected {step(right)}")
        if _significant(written) >= _PROPAGATED_DIGITS:
            wrong[written] = right
        return right

    def unit_step(m: re.Match[str]) -> str:
        expression, currency, written = m.groups()
        if not re.search(rf"{_CURRENCY}|\d\s*/?\s*[A-Za-wyz]", expression):
            return m.group(0)  # plain numbers: with_result reads them
        if _inside_longer(text, m) or re.search(r"(?:[-+*/×÷]|\sx)\s*$", text[: m.start()]):
            return m.group(0)  # the end of a longer expression ("4,200 kWh * $0.30/kWh + 4,200 kWh * ...")
        value = evaluate(_without_units(expression))
        if value is None or _same(written, value):
            return m.group(0)
        right = corrected(written, value, lambda r: f"{expression.strip()} = {currency or ''}{written} to {r}")
        return m.group(0)[: m.start(3) - m.start()] + right

    def money_step(m: re.Match[str]) -> str:
        expression, relation, sign, currency, written = m.groups()
        if relation == "≈" or _inside_longer(text, m):
            return m.group(0)
        value = evaluate(re.sub(_CURRENCY, "", expression))
        if value is None or _same(sign + written, value):
            return m.group(0)
        minus = "-" if value < 0 else ""
        right = corrected(
            written, abs(value), lambda r: f"{expression.strip()} = {sign}{currency}{written} to {minus}{currency}{r}"
        )
        return m.group(0)[: m.start(3) - m.start()] + f"{minus}{currency}{right}"  # its spacing and line breaks kept

    def latex_step(m: re.Match[str]) -> str:
        expression, relation, written = m.groups()
        latex = "\\" in expression or "^" in expression
        if not latex and relation == "=":
            return m.group(0)  # plain arithmetic with "=": with_result's exact rule
        if not re.search(rf"{_LATEX_OP}|\\[dt]?frac|\^", expression):
            return m.group(0)  # a number restated ("= 1.05 \approx 1.1"), no calculation
        if _inside_longer(text, m) or _rate_unmatched(expression):
            return m.group(0)
        value = latex_value(expression)
        if value is None or _agrees_rounded(written, value):
            return m.group(0)
        right = corrected(written, value, lambda r: f"{expression.strip()} {relation} {written} to {r}")
        return m.group(0)[: m.start(3) - m.start()] + right

    def chain(m: re.Match[str]) -> str:
        first, links, relation, written = m.groups()
        if not re.search(rf"{_LATEX_OP}|\\[dt]?frac|\^", first) or _inside_longer(text, m):
            return m.group(0)  # a number restated, or the end of a longer expression
        parts = [link for link in re.split(r"\s*=\s*", links) if link.strip()]
        if any(_units(link) != _units(first) for link in parts):
            return m.group(0)  # "\frac{1}{2} \text{ gallon} = \frac{1}{2} \times 3.78541 \text{ liters}": a conversion
        value = latex_value(first)
        read = [latex_value(link) for link in parts]
        values = [v for v in read if v is not None]
        if value is None or len(values) < len(read) or _agrees_rounded(written, value):
            return m.group(0)  # a link that does not read, or a chain that ends on its right value
        if all(abs(v - value) <= max(1e-9, abs(value) * _STEP_TOLERANCE) for v in values):
            return m.group(0)  # the links agree: the last step is checked as a step of its own
        said = m.group(0).strip()
        right = corrected(written, value, lambda r: f"{said} to {first.strip()} = {r}: the chain's links differ")
        return f"{first.rstrip()} = {right}"

    def figure_working(m: re.Match[str]) -> str:
        currency, written, working = m.groups()
        value = evaluate(_without_units(working))
        if value is None or _same(written, value):
            return m.group(0)
        right = corrected(written, value, lambda r: f"{currency}{written} ({working.strip()}) to {currency}{r}")
        return m.group(0).replace(written, right, 1)

    text = _BRACKETS.sub(bracket, text)
    text = _CHAIN.sub(chain, text)
    text = _FIGURE_WORKING.sub(figure_working, text)
    text = _LATEX_STEP.sub(latex_step, text)
    text = _MONEY_STEP.sub(money_step, text)
    text = _UNIT_STEP.sub(unit_step, text)
    text = _WITH_RESULT.sub(with_result, text)
    return _WITHOUT_RESULT.sub(without_result, text)
