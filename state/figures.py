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
    """The figures both programs printed (the first program's names and values): the ones the parts are given."""
    second_program: str = ""
    second_output: str = ""
    unconfirmed: list[Figure] = Field(default_factory=list)
    """The first program's figures that the second did not print (within 1%): not given to the parts."""
