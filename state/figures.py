"""The figures a multi-part task's numbers give, computed once by a program before its parts are written."""

from __future__ import annotations

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
