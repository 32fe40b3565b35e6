"""The unit conversions a task's numbers need: a quantity given in one unit, priced or asked in another.

Both figure programs of a server-room task ("14 machines drawing 350 W each ... 720 hours a month and 0.28 per kWh")
multiplied watts by hours by the price per kWh and agreed on a monthly cost of 987,840.00, a thousand times the
987.84 it is (multipart_set3_server): two programs agreeing is no check when both skip the same conversion. A
:class:`Conversion` is found where the task gives a number in one unit (``350 W``, ``90 minutes``, ``500 MB``) and
names a rate or a result in another unit of the same kind (``per kWh``, ``an hour``, ``in GB``). The program's
prompt says which conversion it needs (:func:`conversion_hint`), and a program that writes neither the factor nor a
converted value confirms nothing (:func:`unconverted`), as a program that leaves out the task's numbers does.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

import engine.prompts as prompts
from state.python_ast import parse_module

__all__ = [
    "Compound",
    "Conversion",
    "compounds",
    "conversion_hint",
    "conversions",
    "converted_values",
    "percent_hint",
    "percent_unscaled",
    "split_compounds",
    "unconverted",
    "written_numbers",
]


@dataclass(frozen=True)
class _Unit:
    kind: str
    scale: float
    """Relative to the kind's base unit (W and Wh share one: a kW for an hour is a kWh, so only the prefix counts)."""
    shown: str


_UNITS: dict[str, _Unit] = {}


def _add(kind: str, scale: float, shown: str, *spellings: str) -> None:
    for spelling in (shown, *spellings):
        _UNITS[spelling.lower()] = _Unit(kind, scale, shown)


_add("power or energy", 1, "W", "watt", "watts")
_add("power or energy", 1, "Wh", "watt-hour", "watt-hours", "watt hours")
_add("power or energy", 1e3, "kW", "kilowatt", "kilowatts")
_add("power or energy", 1e3, "kWh", "kilowatt-hour", "kilowatt-hours", "kilowatt hours")
_add("power or energy", 1e6, "MW", "megawatt", "megawatts")
_add("power or energy", 1e6, "MWh", "megawatt-hour", "megawatt-hours")
_add("mass", 1e-3, "mg", "milligram", "milligrams")
_add("mass", 1, "g", "gram", "grams")
_add("mass", 1e3, "kg", "kilogram", "kilograms", "kilo", "kilos")
_add("length", 1e-3, "mm", "millimetre", "millimetres", "millimeter", "millimeters")
_add("length", 1e-2, "cm", "centimetre", "centimetres", "centimeter", "centimeters")
_add("length", 1, "m", "metre", "metres", "meter", "meters")
_add("length", 1e3, "km", "kilometre", "kilometres", "kilometer", "kilometers")
_add("length", 0.0254, "inch", "inches")
_add("length", 0.3048, "ft", "foot", "feet")
_add("length", 0.9144, "yd", "yard", "yards")
_add("length", 1609.344, "mile", "miles")
_add("mass", 453.59237, "lb", "lbs")  # not "pounds": "in pounds" is most often money
_add("volume", 1e-3, "ml", "millilitre", "millilitres", "milliliter", "milliliters")
_add("volume", 1, "l", "litre", "litres", "liter", "liters")
_add("data", 1e6, "MB", "megabyte", "megabytes")
_add("data", 1e9, "GB", "gigabyte", "gigabytes")
_add("data", 1e12, "TB", "terabyte", "terabytes")
_add("time", 1, "s", "sec", "secs", "second", "seconds")
_add("time", 60, "min", "mins", "minute", "minutes")
_add("time", 3600, "h", "hr", "hrs", "hour", "hours")

_BINARY = "data"
"""Data may be counted in powers of 1,024 (a GB of 1,024 MB): a program using 1024 converts too."""

_UNIT_WORD = "|".join(sorted((re.escape(s) for s in _UNITS), key=len, reverse=True))
# a number then its unit ("350 W", "90 minutes", "2.5kg"); single letters only right after a number
_GIVEN = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?(" + _UNIT_WORD + r")(?![\w-])", re.I)
# a rate or a result named in a unit: "per kWh", "0.28/kWh", "an hour", "in GB", "how many kilometres"
_NAMED = re.compile(r"(\bper|/|\ban?|\bin|\binto|\bmany)\s?(" + _UNIT_WORD + r")(?![\w-])", re.I)
_RATIO = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(" + _UNIT_WORD + r")\s?(?:/|per\s)\s?(" + _UNIT_WORD + r")(?![\w-])", re.I
)
"""A ratio of two units ("15 mg/kg", "5 ml per l"): where both are of one kind, a dose by weight, not a conversion
between them (numeric_heldout3's paracetamol dose: the program that printed the right 285.76 mg was set aside
for 'mg with kg unconverted')."""
_MAP_SCALE = re.compile(r"\b(?:represents?|stands? for|to scale|scale of|on (?:a|the) map)\b", re.I)
"""A map or drawing whose own scale relates two lengths (a GSM8K problem's "1/4 inch represents 8 miles")."""
_SINGLE_LETTERS = frozenset({"w", "g", "m", "l", "s", "h"})
"""Units of one letter are read after a number ("350 W") or as a rate's ("per h", "/W"), never after "a" or "in"."""


@dataclass(frozen=True)
class Conversion:
    """A quantity the task gives in ``given`` that a rate or result names in ``named``: values scale by ``factor``."""

    given: str
    named: str
    factor: float
    """``named``'s size in ``given`` units (1000 for W to kWh, 60 for minutes to hours), always above 1."""
    values: tuple[float, ...]
    """The task's numbers in the ``given`` unit."""

    @property
    def bigger(self) -> str:
        """The larger of the two units ("kWh" of W and kWh)."""
        return self.named if _UNITS[self.named.lower()].scale > _UNITS[self.given.lower()].scale else self.given

    @property
    def smaller(self) -> str:
        """The smaller of the two units."""
        return self.given if self.bigger == self.named else self.named

    @property
    def shown_factor(self) -> str:
        """The factor as the prompt writes it ("1,000")."""
        return _shown(self.factor)


def conversions(task: str) -> list[Conversion]:
    """The conversions ``task`` needs: one per pair of a given unit and a named unit of one kind, at another scale.

    A one-letter symbol is a unit after a number ("350 W", "5 m") or after "per" or "/", never after "a" or "in";
    "M", "S" and "L" never are (a million, sizes). A conversion is found only against a rate or a result ("90
    minutes at 3.00 an hour", "how many hours"): two lengths the task merely lists need none.
    """
    given: dict[str, tuple[_Unit, list[float]]] = {}
    for match in _GIVEN.finditer(task):
        unit = _unit(match.group(2))
        if unit is None or (unit.shown == "s" and not task[match.end(1)].isspace()):
            continue  # "the 1990s" is no time
        entry = given.setdefault(unit.shown, (unit, []))
        entry[1].append(float(match.group(1).replace(",", "")))
    named: dict[str, _Unit] = {}
    for match in _NAMED.finditer(task):
        lead, word = match.group(1).lower(), match.group(2)
        if word.lower() in _SINGLE_LETTERS and lead not in {"per", "/"}:
            continue  # "a m", "in s" are words; "per h" and "/W" are units
        unit = _unit(word)
        if unit is not None:
            named.setdefault(unit.shown, unit)
    pairs = [
        (top, bottom)
        for match in _RATIO.finditer(task)
        if (top := _unit(match.group(1))) is not None and (bottom := _unit(match.group(2))) is not None
    ]
    ratios = {frozenset((top.shown, bottom.shown)) for top, bottom in pairs}
    # the tops of ratios of one kind ("mg" of "15 mg/kg"): a dose, not a unit the task's other masses go to
    doses = {top.shown for top, bottom in pairs if top.kind == bottom.kind}
    out = []
    for unit, values in given.values():
        for other in named.values():
            if other.kind != unit.kind or other.scale == unit.scale or {unit.shown, other.shown} in ratios:
                continue
            if unit.kind == "length" and _MAP_SCALE.search(task):
                continue  # "1/4 inch represents 8 miles": the map's own scale, not a conversion
            if other.shown in doses:
                continue  # "15 mg/kg ... 46 lb ... how many mg": the lb go to kg, not to mg
            factor = max(other.scale, unit.scale) / min(other.scale, unit.scale)
            out.append(Conversion(unit.shown, other.shown, factor, tuple(dict.fromkeys(values))))
    return out


def _unit(word: str) -> _Unit | None:
    lowered = word.lower()
    if word in {"M", "S", "L"}:
        return None  # "5 M" is five million, "S" a size, "L" a size or a litre: too unsure
    return _UNITS.get(lowered)


def conversion_hint(found: list[Conversion]) -> str:
    """The sentence a program's prompt gets for each conversion (empty when none is needed)."""
    if not found:
        return ""
    said = "; ".join(
        prompts.UNITS_CONVERSION.format(
            values=_listed(c.values),
            given=c.given,
            named=c.named,
            bigger=c.bigger,
            factor=c.shown_factor,
            smaller=c.smaller,
        )
        for c in found
    )
    return prompts.UNITS_HINT.format(conversions=said)


def converted_values(found: list[Conversion]) -> list[float]:
    """Every value a converting program may write: the factors (and their inverses) and the converted numbers."""
    out: list[float] = []
    for c in found:
        factors = [c.factor]
        if _UNITS[c.given.lower()].kind == _BINARY:
            factors.append(1024.0 ** round(math.log(c.factor, 1000)))
        for factor in factors:
            out += [factor, 1 / factor]
            out += [v / factor for v in c.values] + [v * factor for v in c.values]
        if c.factor == 3600:
            out += [60.0, 1 / 60]  # seconds to hours by way of minutes
    return out


def unconverted(program: str, found: list[Conversion]) -> list[Conversion]:
    """The conversions ``program`` (Python source) writes no trace of: neither the factor nor a converted value.

    A program that writes ``1000`` may use it for something else, so this is a necessary sign, not proof; one that
    writes none of them has not converted (multipart_set3_server's two programs).
    """
    written = written_numbers(program)
    if written is None:
        return found
    return [c for c in found if not any(_near(w, v) for w in written for v in converted_values([c]))]


def written_numbers(program: str) -> list[float] | None:
    """The numbers ``program`` (Python source) writes as constants, in order; None when it does not parse."""
    try:
        tree = parse_module(program)
    except SyntaxError:
        return None
    return [
        float(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool)
    ]


_PERCENT = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*(?:%|percent\b|per\s+cent\b)", re.I)
_SCALES = (100.0, 0.01, 1200.0, 1 / 1200)
"""What turns a percentage into a fraction (a year's into a month's): a program that writes one of them scaled it."""


def _percentages(task: str) -> list[float]:
    found = (float(p.replace(",", "")) for p in _PERCENT.findall(task))
    return list(dict.fromkeys(p for p in found if 0 < p != 100))


def percent_hint(task: str) -> str:
    """The sentence a program's prompt gets when the task gives percentages (else empty): they go in as fractions."""
    found = _percentages(task)
    if not found:
        return ""
    p = found[0]
    return prompts.PERCENT_HINT.format(percent=_shown(p), fraction=f"{p / 100:.10g}")


def percent_unscaled(program: str, task: str) -> float | None:
    """A percentage of the task that ``program`` writes as its number and grows by, never made a fraction; or None.

    A car loan "at 7.9% APR, treated as 7.9%/12 interest per month": two programs of the 1.5B wrote
    ``monthly_interest_rate = 7.9 / 12`` into ``(1 + monthly_interest_rate) ** 60`` and agreed on a payment of
    12,179.17 a month for 18,500 borrowed (374.23 is right, 2026-12-08). Only a program that adds or takes the rate
    from 1 (``1 + r``, ``1 - d``) is judged, and one that writes 100, 0.01, 1,200 or the fraction itself anywhere
    has scaled it (a necessary sign, as for units).
    """
    found = _percentages(task)
    written = written_numbers(program) if found else None
    if written is None:
        return None
    tree = parse_module(program)  # it parsed for its numbers
    if any(_near(w, v) for w in written for v in (*_SCALES, *(p / 100 for p in found), *(p / 1200 for p in found))):
        return None
    grows = any(
        isinstance(n, ast.BinOp)
        and isinstance(n.op, ast.Add | ast.Sub)
        and any(isinstance(side, ast.Constant) and side.value == 1 for side in (n.left, n.right))
        and not all(isinstance(side, ast.Constant) for side in (n.left, n.right))
        for n in ast.walk(tree)
    )
    return next((p for p in found if p in written), None) if grows else None


@dataclass(frozen=True)
class Compound:
    """A quantity the task writes in two units of one kind ("1 hour 40 minutes"): its two numbers and their ratio."""

    written: str
    whole: float
    """The bigger unit's number (1 hour)."""
    part: float
    """The smaller unit's number (40 minutes)."""
    factor: float
    """How many of the smaller unit make one of the bigger (60)."""

    @property
    def totals(self) -> tuple[float, float]:
        """The whole quantity in the smaller unit and in the bigger one (100 minutes, 1.6667 hours)."""
        return self.whole * self.factor + self.part, self.whole + self.part / self.factor


_COMPOUND = re.compile(
    rf"(?<![\w.])(\d+(?:\.\d+)?)\s?({_UNIT_WORD})\s*,?\s*(?:and\s+)?(\d+(?:\.\d+)?)\s?({_UNIT_WORD})(?![\w-])", re.I
)


def compounds(task: str) -> list[Compound]:
    """The quantities ``task`` writes in two units of one kind, the bigger first ("1 hour 40 minutes", "2 kg 300 g")."""
    found = []
    for m in _COMPOUND.finditer(task):
        big, small = _unit(m.group(2)), _unit(m.group(4))
        if big is None or small is None or big.kind != small.kind or big.scale <= small.scale:
            continue
        found.append(Compound(m.group(0), float(m.group(1)), float(m.group(3)), big.scale / small.scale))
    return found


def split_compounds(program: str, found: list[Compound]) -> list[Compound]:
    """The compounds whose smaller number ``program`` writes and whose bigger one it leaves out (nor writes a total).

    "A car travels 150 km in 1 hour 40 minutes. What is its average speed in km/h?": two programs of the 1.5B wrote
    ``hours = 40 / 60`` and agreed on 225.0 km/h (it is 90), outvoting the answer that said 90 (2026-12-07).
    """
    written = written_numbers(program) or []
    return [
        c
        for c in found
        if any(_close(w, c.part) for w in written)
        and not any(_close(w, v) or abs(w - v) <= 1e-3 * abs(v) for w in written for v in (c.whole, *c.totals))
    ]


def _near(a: float, b: float) -> bool:
    """Within 1%: a program writes an imperial factor rounded.

    1.609 or 0.6214 for a mile's 1.609344 km; the 2.2 lb a dose task gives for a kilogram's 2.20462.
    """
    return abs(a - b) <= 1e-9 + 1e-2 * abs(b)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 + 1e-6 * abs(b)


def _listed(values: tuple[float, ...]) -> str:
    return ", ".join(_shown(v) for v in values)


def _shown(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:g}"
