r"""One named quantity, one value: an answer that gives the same figure two different values.

review_whole_dec07, fin-npv: the finance expert worked the net present value out step by step, ``\text{NPV} =
3636.37 + 3305.79 + 3005.26 - 10000 = -52.58``, and two paragraphs on concluded "The NPV of the project is negative
(-236.88)"; its programs had failed, every check passed, and the reader was left to pick one. :func:`stated_values`
reads where the prose binds a named quantity to a value, and :func:`one_value_check` fails an answer that binds one
name to two values that do not agree (within 1%, or the same but for the sign a word like "negative" carries).

A name is an acronym (``NPV``, ``IRR``, ``BMI``) or a figure's phrase (a word such as "monthly" or "net" before
a word such as "payment" or "value": "the monthly payment", "net present value"). It is bound where the prose
writes ``NAME = ... = VALUE`` (the value a chain ends on) or ``NAME is VALUE`` ("was", "will be", "comes to", a
colon; "of the project" and words such as "approximately" or "negative" between). Read as no binding: a name
written with a subscript (``PV_1``: each year's own), a sentence with a number before the name (a condition:
"after a 20% rise, the final price is $120", "in year 2, the PV is ..."), a table's rows (a row per scenario), and
a value an operator follows (an expression, not a result).

A value is compared only with values in its unit (the word after it, if any: "100 minutes" and "1.67 hours" are
not two times). Over the 1,080 documents saved by the benchmarks (harness, bare and reference alike), 129
bindings are read; of
the answers' own texts the check fails fin-npv's alone (two whole documents more bind a name to the expert's
value and to the one the harness's computed section printed: that section says so itself). A 20% rise and a 20%
fall, each ending on "the final price is", are read as two conditions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.slots.checks.text import without_code
from state.quality import CheckResult

__all__ = ["Stated", "one_value_check", "same_value", "stated_values"]

_NOT_QUANTITIES = frozenset(
    {"AI", "AM", "API", "CPU", "EU", "EUR", "GB", "GBP", "HTTP", "ID", "IT", "KB", "MB", "OK", "PM", "SQL"}
    | {"UK", "URL", "US", "USA", "USD"}
)
"""Capitals that name a unit, a currency or a technology, not a figure ("the API is 2.0" binds nothing)."""
_MODIFIER = (
    r"(?:monthly|total|final|future|present|net|annual|yearly|weekly|daily|average|overall|gross|taxable|"
    r"initial|remaining|estimated|expected|break-even|payback)"
)
_HEAD = (
    r"(?:payments?|value|amount|cost|interest|profit|price|balance|revenue|income|salary|savings|return|fee|"
    r"distance|time|speed|dose|budget|tax|period|point|sum|pay|rent|bill|loss|margin|total)"
)
_NAME = re.compile(
    rf"(?<![\w\\])(?:(?P<acronym>[A-Z]{{2,6}})|(?i:(?P<phrase>(?:{_MODIFIER}\s+){{1,2}}{_HEAD})))\b(?!_)"
)
_NUMBER = r"-?\s?[$€£]?\s?-?\d[\d,]*+(?:\.\d+)?+"
"""A number whole (possessive: ``1,260 + 134.4`` is never read as its first digit, ``1,``)."""
_CHAIN = re.compile(r"\s*(?:\([^)]{0,30}\))?\s*=")
"""An equals sign after the name (a parenthesis may stand between: ``NPV (at 10%) =``)."""
_COPULA = re.compile(
    r"\s*(?:\([A-Za-z ]{1,30}\)\s*)?(?:of\s+(?:the|this|your|our)\s+[A-Za-z ]{1,25}?\s+)?"
    r"(?:is|was|will be|would be|comes to|equals|amounts to|:)\s*"
    r"(?:negative|positive|approximately|about|roughly|around|only|just|\\approx|≈|,|\s)*\(?\s*"
    rf"(?P<value>{_NUMBER})(?P<percent>\s*%)?(?![\d.]*\s*[-+*/^×÷x=]\s*[\d(])(?:\s+(?P<unit>[A-Za-z][\w/]*))?"
)
_RESULT = re.compile(
    rf"\s*(?:\\approx|≈)?\s*(?P<value>{_NUMBER})(?P<percent>\s*\\?%)?(?:\s+(?P<unit>[A-Za-z][\w/]*))?"
    r"(?:\s+[A-Za-z][\w/]*)?\s*[.,;)]?\s*"
)
"""The value a chain ends on, and up to two unit words after it (``= 1,260 dollars/year``)."""
_NOT_UNITS = frozenset(
    "a an and as at because but by for from if in is it of on or over per so than that the then this to was "
    "when which while with".split()
)
"""Words after a value that are no unit: "the NPV is -52.58 and ..." states it without one."""
_BEFORE = re.compile(r"\d")
_CONCLUDES = re.compile(r"\b(?:so|therefore|thus|hence|which means)\b|;", re.I)
_CLAUSE_END = re.compile(r"(?<=\d)\.\s|\s(?:and|which|so|while)\s|[;,]\s(?=[A-Za-z])")
_MARKUP = (
    (re.compile(r"\\(?:text|mathrm|boxed)\{([^{}]*)\}"), r"\1"),
    (re.compile(r"\\[\[\]()]|\\,|\$\$"), " "),
    (re.compile(r"\*\*|__"), ""),
)
"""LaTeX's text, boxes and delimiters, and Markdown's bold: ``**Simple Payback Period**: 5 years`` binds the
payback, and "The average speed of the car is \\(\\boxed{90}\\) km/h" binds the speed (the same answer had worked
it out as "= 54 km/h", 2026-12-07)."""
_TOLERANCE = 0.01


@dataclass(frozen=True)
class Stated:
    """A named quantity bound to a value in the prose, and the line that binds it."""

    name: str
    """Lower-cased: ``npv``, ``monthly payment``."""
    value: float
    line: str
    percent: bool = False
    """Written with a percent sign: ``15%`` agrees with ``0.15`` as well as with ``15``."""
    unit: str = ""
    """The word after the value, lower-cased ("km/h", "minutes"); '' when none. Values in two units are not
    compared: "the total time is 100 minutes" and "1.67 hours" are one time."""

    @property
    def label(self) -> str:
        """The name as a reader writes it: ``NPV``, ``monthly payment``."""
        return self.name.upper() if self.name.isalpha() else self.name

    @property
    def shown(self) -> str:
        """The value as the check says it: ``-52.58``, ``1,800``, ``15%``."""
        value = self.value
        written = f"{value:,.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{int(value):,}"
        return written + "%" * self.percent


def stated_values(text: str) -> list[Stated]:
    """Where the prose of ``text`` (its code blocks and tables left out) binds a named quantity to a value."""
    prose = without_code(text)
    for pattern, replacement in _MARKUP:
        prose = pattern.sub(replacement, prose)
    found: list[Stated] = []
    for line in prose.splitlines():
        if line.lstrip().startswith("|"):
            continue
        for m in _NAME.finditer(line):
            acronym = m.group("acronym")
            if acronym in _NOT_QUANTITIES or _BEFORE.search(_sentence_before(line[: m.start()])):
                continue
            bound = _bound(line[m.end() :])
            if bound is not None and (value := _value(bound.group("value"))) is not None:
                name = " ".join((acronym or m.group("phrase")).lower().split())
                unit = (bound.group("unit") or "").lower()
                unit = "" if unit in _NOT_UNITS else unit
                found.append(Stated(name, value, line.strip(), bool(bound.group("percent")), unit))
    return found


def one_value_check(text: str) -> CheckResult:
    """``numbers.one_value``: no named quantity is given two values that disagree."""
    first: dict[tuple[str, str], Stated] = {}
    for stated in stated_values(text):
        seen = first.setdefault((stated.name, stated.unit), stated)
        if not same_value(seen, stated):
            return CheckResult(
                name="numbers.one_value",
                passed=False,
                detail=f"the answer gives the {stated.label} as {seen.shown} and as {stated.shown}: work it out "
                "once and state one value",
            )
    return CheckResult(name="numbers.one_value", passed=True)


def _sentence_before(text: str) -> str:
    """The part of ``text`` (what precedes a name on its line) in the name's own sentence and clause.

    A clause that draws a conclusion starts afresh: "The annual savings are 1,260.00, so the payback period is
    3.2 years" binds the payback; "So, after a 20% rise, the final price is $120" is a condition still.
    """
    sentence = re.split(r"(?<=[.!?:])\s+", text)[-1]
    return _CONCLUDES.split(sentence)[-1]


def _bound(after: str) -> re.Match[str] | None:
    """The value (and its percent sign) the words ``after`` a name bind it to, or ``None``."""
    if (chain := _CHAIN.match(after)) is not None:
        clause = _CLAUSE_END.split(after[chain.end() :])[0]
        return _RESULT.fullmatch(clause.split("=")[-1])
    return _COPULA.match(after)


def _value(written: str) -> float | None:
    try:
        return float(re.sub(r"[\s$€£,]", "", written))
    except ValueError:
        return None


def same_value(one: Stated, other: Stated) -> bool:
    """Within 1% of each other, the sign aside ("negative (52.58)" states -52.58), a percentage as its fraction too."""
    return any(
        abs(abs(a) - abs(b)) <= _TOLERANCE * max(abs(a), abs(b)) for a in _readings(one) for b in _readings(other)
    )


def _readings(stated: Stated) -> tuple[float, ...]:
    return (stated.value, stated.value / 100) if stated.percent else (stated.value,)
