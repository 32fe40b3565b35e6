"""The figures a multi-part task's numbers give, computed once by a program before its parts are written."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field


class Figure(BaseModel):
    """One computed quantity: its name in plain words and its value."""

    model_config = ConfigDict(extra="forbid")

    name: str
    value: float


class TaskFigures(BaseModel):
    """What the figures program did: the model that wrote it, the program, what it printed, the figures read."""

    model_config = ConfigDict(extra="forbid")

    model: str
    note: str
    """What happened, for the ledger ("printed 3 figures", "the program failed: ...")."""
    program: str = ""
    output: str = ""
    figures: list[Figure] = Field(default_factory=list)
    """The figures two programs printed (within 1%; the earlier program's name and value): the parts get these."""
    more_programs: list[str] = Field(default_factory=list)
    """The programs sampled after the first (one, or two when the second left a figure unconfirmed)."""
    more_outputs: list[str] = Field(default_factory=list)
    unconfirmed: list[Figure] = Field(default_factory=list)
    """Figures only one program printed (within 1%): not given to the parts."""


_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])-?\d+(?:\.\d+)?")


def computed_figure(request: str, figures: Sequence[Figure]) -> Figure | None:
    """The figure an assist's request names, or None when it names none or more than one.

    By its value (within 0.5%, three digits or more), else by every word of its name ("the service charge"): a
    model given the task's figures still asked for them ("{{ASSIST:lookup:2762.50}}" for the food cost).
    """
    numbers = [float(n.replace(",", "")) for n in _NUMBER.findall(request)]
    by_value = [
        f
        for f in figures
        if any(len(str(abs(round(n))).lstrip("0")) >= 3 and abs(n - f.value) <= 0.005 * abs(f.value) for n in numbers)
    ]
    if by_value:
        return by_value[0] if len({f.value for f in by_value}) == 1 else None
    words = set(re.findall(r"[a-z]+", request.lower()))
    by_name = [f for f in figures if (named := set(re.findall(r"[a-z]+", f.name.lower()))) and named <= words]
    return by_name[0] if len(by_name) == 1 and not numbers else None
