"""Expert exams: the format of an exam file, and the records of exams taken.

An exam is 5-10 small tasks of the expert's own scope, each with automatic checks (the kinds a slot's checks use:
code that runs, SQL that parses, a number a computation gives, required items present). An added expert carries
it as ``exam.yaml`` in its directory; a shipped expert's is ``exams/<id>.yaml`` beside the scope documents.
:mod:`graph.examine` runs it; the result is kept per expert in ``$COE_HOME/experts/exams/<id>@<version>.json``, and an
expert whose current version's last exam scored under its bar is kept out of routing.

Only the format and the records live here; scoring an answer needs the sandbox (:mod:`engine.exam_checks`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from experts.catalog.scopes import problems
from state.errors import ConfigError
from state.files import atomic_write
from state.paths import user_experts_dir
from state.yaml_text import safe_load

__all__ = [
    "ANSWER_KEPT",
    "EXAM_SOURCE",
    "Exam",
    "ExamChecks",
    "ExamRecord",
    "ExamTask",
    "TaskResult",
    "exam_errors",
    "load_exam",
    "read_record",
    "write_record",
]

ANSWER_KEPT = 6000
"""Characters of each exam answer kept in the record."""
EXAM_SOURCE = "exam:"
"""An exam's one-slot framework has the source ``exam:<id>``: its slot goes to that expert even when benched."""
MIN_TASKS = 5
MAX_TASKS = 10


class ExamChecks(BaseModel):
    """What an answer must show; every check given must hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    contains: list[str] = Field(default_factory=list, description="Each must appear (case-insensitive).")
    any_of: list[str] = Field(default_factory=list, description="At least one must appear (case-insensitive).")
    code: Literal["python", "sql", "yaml", "json", "bash"] | None = Field(
        default=None, description="A fenced block in this language that is valid (python runs, sql parses, ...)."
    )
    asserts: list[str] = Field(default_factory=list, description="Python statements run after the answer's code.")
    number: float | None = Field(default=None, description="A number the answer must state.")
    tolerance: float = Field(default=0.01, ge=0.0, le=0.5, description="Relative tolerance of ``number``.")

    @model_validator(mode="after")
    def _some_check(self) -> ExamChecks:
        if not (self.contains or self.any_of or self.code or self.asserts or self.number is not None):
            raise ValueError("give at least one check: contains, any_of, code, asserts or number")
        if self.asserts and self.code not in (None, "python"):
            raise ValueError("asserts run Python: use them with code: python (or without code)")
        return self


class ExamTask(BaseModel):
    """One exam task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=60)
    task: str = Field(min_length=10, max_length=2000)
    checks: ExamChecks


class Exam(BaseModel):
    """An expert's exam."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expert: str
    bar: float = Field(default=0.6, ge=0.0, le=1.0, description="The share of tasks that must pass.")
    tasks: list[ExamTask] = Field(min_length=MIN_TASKS, max_length=MAX_TASKS)

    @model_validator(mode="after")
    def _unique_ids(self) -> Exam:
        ids = [t.id for t in self.tasks]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"task ids must be unique; repeated: {', '.join(twice)}")
        return self


def exam_errors(path: Path, data: Any, expert_id: str, errors: list[str]) -> Exam | None:
    """Validate an exam's data; each problem is appended to ``errors`` with the file and the field."""
    try:
        exam = Exam.model_validate(data)
    except ValidationError as exc:
        errors += problems(path, exc)
        return None
    if exam.expert != expert_id:
        errors.append(f"{path}: expert: {exam.expert!r} is not the expert it belongs to ({expert_id!r})")
        return None
    return exam


def load_exam(path: Path, expert_id: str) -> Exam:
    """Read and validate an exam file.

    Raises:
        ConfigError: naming the file and every field that is wrong.
    """
    import yaml

    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(str(path), f"cannot read the exam: {exc}") from None
    errors: list[str] = []
    exam = exam_errors(path, data, expert_id, errors)
    if exam is None:
        raise ConfigError(str(path), "invalid exam:\n" + "\n".join(f"  - {e}" for e in errors))
    return exam


class TaskResult(BaseModel):
    """One task's outcome."""

    id: str
    passed: bool
    failed: list[str] = Field(default_factory=list)
    """The checks that failed, each with what was missing."""
    seconds: float = 0.0
    status: str = ""
    """The run's status (completed, completed_with_warnings, failed)."""
    answer: str = ""
    """The delivered document (its first :data:`ANSWER_KEPT` characters), so a failure can be read."""


class ExamRecord(BaseModel):
    """An exam taken: by which version of the expert, on which model, with what score."""

    expert: str
    version: str
    model: str
    """The model the expert's slots ran on (``base model (faux)``, ``qwen2.5-coder-1.5b (true)``)."""
    backend: str
    score: float
    bar: float
    passed: bool
    seconds: float
    taken_at: str
    tasks: list[TaskResult]

    def line(self) -> str:
        """One line for listings: ``passed 5/6 (0.83 >= bar 0.60) on base model (faux), v1, 2026-11-28``."""
        done = sum(t.passed for t in self.tasks)
        verdict = "passed" if self.passed else "FAILED"
        sign = ">=" if self.passed else "<"
        return (
            f"{verdict} {done}/{len(self.tasks)} ({self.score:.2f} {sign} bar {self.bar:.2f}) on {self.model}, "
            f"v{self.version}, {self.taken_at[:10]}"
        )


def _record_path(expert_id: str, version: str) -> Path:
    return user_experts_dir() / "exams" / f"{expert_id}@{version}.json"


def read_record(expert_id: str, version: str) -> ExamRecord | None:
    """The last exam record of one version of an expert, or None (never examined, or unreadable)."""
    try:
        return ExamRecord.model_validate(json.loads(_record_path(expert_id, version).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def write_record(record: ExamRecord) -> Path:
    """Keep ``record`` as the last exam of its expert's version; returns its path."""
    path = _record_path(record.expert, record.version)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: tmp.write_text(record.model_dump_json(indent=2), encoding="utf-8"))
    return path
