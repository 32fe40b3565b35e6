"""What callers send (the narrow input schema) and what they get back (the output schema)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from state.enums import Mode, RunStatus, SlotStatus

MAX_TASK_CHARS = 8_000
"""The upper bound on a task's length (characters), and on a slot's description (the task of a one-slot plan).

About 2,300 tokens: with the bundled models' 4,096-token context it leaves room for the instructions and an
answer. The guard and :class:`~state.framework.SlotSpec` share it, so a task the guard accepts is never refused
by a later step."""


def first_surrogate(text: str) -> int | None:
    """The position of the first character that stands for a byte that was not UTF-8 (a lone surrogate), or None.

    Python turns such bytes of ``argv`` or a file into lone surrogates; the guard refuses them in a task, the CLI in
    every text argument.
    """
    return next((at for at, char in enumerate(text) if "\ud800" <= char <= "\udfff"), None)


def unknown_keys(name: str, schema: type[BaseModel], given: Any) -> str | None:
    """``name: unknown key(s) ...; allowed: ...`` when the mapping ``given`` holds a key ``schema`` does not take.

    LangGraph keeps only the input schema's keys of a run's input and the server keeps only the context schema's,
    so a typo (``max_token``) would be ignored without a word; the server and the compiled graph refuse it with
    this message. Anything but a mapping is left to the schema's own validation.
    """
    if not isinstance(given, dict):
        return None
    unknown = sorted(str(k) for k in given if k not in schema.model_fields)
    if not unknown:
        return None
    return f"{name}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(schema.model_fields)}"


class RunOptions(BaseModel):
    """Optional run inputs beyond the task and mode."""

    model_config = ConfigDict(extra="forbid")

    framework: dict[str, Any] | None = Field(
        default=None,
        description="A framework to run instead of choosing one (same schema as a --framework YAML file).",
    )
    framework_source: str | None = Field(
        default=None, description="Where the framework came from (a file path), used in error messages."
    )
    constraints: list[str] = Field(default_factory=list, description="Hard constraints the answer must respect.")
    success_criteria: list[str] = Field(default_factory=list)
    abandon: bool = Field(
        default=False,
        description="Start this input on a thread whose earlier run waits for an answer or stopped half-way: that "
        "run is abandoned, and the new run records it. Without it the server (and coe run) refuse such an input: "
        "answer or resume the earlier run instead (coe resume).",
    )


class RunInput(BaseModel):
    """The narrow input schema: all a caller may send to start a run."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description=f"The task, in plain language (at most {MAX_TASK_CHARS} characters).")
    mode: Mode = Field(default=Mode.AUTONOMOUS, description="interactive, confirm or autonomous.")
    options: RunOptions = Field(default_factory=RunOptions)


class SlotSummary(BaseModel):
    """One slot as a caller sees it after the run."""

    id: str
    title: str
    expert: str | None
    status: SlotStatus
    attempts: int
    error: str | None = None
    blocked_by: list[str] = Field(default_factory=list)
    deliverable: str | None = None
    """What the slot delivers (code, prose, plan, table, data); None when it did not run."""
    checks_passed: bool | None = None
    """Its kept answer passed every hard check (None: no answer to check)."""
    failed_checks: list[str] = Field(default_factory=list)
    candidates: int = 0
    """Answers drawn for it (the kept one included)."""


class RunSummary(BaseModel):
    """The machine-readable summary of a finished run."""

    thread_id: str
    run_id: str
    status: RunStatus
    title: str
    framework_source: str
    slots: list[SlotSummary]
    warnings: list[str] = Field(default_factory=list)
    unresolved: list[str] = Field(default_factory=list)


class RunOutput(BaseModel):
    """The output schema: the assembled document and the summary."""

    document: str | None = None
    status: RunStatus = RunStatus.PENDING
    summary: RunSummary | None = None
