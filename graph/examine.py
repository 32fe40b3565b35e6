"""Examining an expert: run each task of its exam through the compiled graph, as one slot the expert takes.

Each task runs as ``coe run`` runs a task with a one-slot framework naming the expert (so the expert's persona,
model binding, output contract and its slot checks all apply, as in a real run), on a throw-away in-memory
thread. The delivered document is then scored against the task's checks (:func:`engine.exam_checks
.exam_failures`). The record (score, bar, time, the model the expert ran on, its version) is kept in
``$COE_HOME/experts/exams/<id>@<version>.json``; an expert whose last exam of its current version scored under its bar
is kept out of routing until it passes (:func:`experts.catalog.sources.load_catalog`).

The framework's source is ``exam:<id>``, which lets a benched expert take its own exam's slot.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from engine.exam_checks import exam_failures
from experts.catalog import load_catalog
from experts.catalog.exams import ANSWER_KEPT, EXAM_SOURCE, Exam, ExamRecord, TaskResult, load_exam, write_record
from experts.catalog.versions import serving
from graph.one_slot import run_one_slot, scratch_graph
from state.context import RunContext, resolve_settings
from state.errors import ConfigError

__all__ = ["examine"]


def examine(
    expert_id: str,
    context: RunContext | dict[str, Any] | None = None,
    *,
    version: str | None = None,
    progress: Callable[[TaskResult], None] | None = None,
    record: bool = True,
) -> ExamRecord:
    """Take ``expert_id``'s exam and keep the record.

    Args:
        expert_id: The expert examined.
        context: Run settings (backend, model, ...), as a run's context.
        version: A candidate version to examine instead of the current one (it serves the exam's slots).
        progress: Called with each task's result as it finishes.
        record: Keep the record (and so bench or restore the expert); off for a dry look.

    Raises:
        ConfigError: the expert is unknown, has no exam, or its exam is invalid; no such candidate version.
    """
    if version is not None:
        with serving(expert_id, version):
            return _examine(expert_id, context, progress, record)
    return _examine(expert_id, context, progress, record)


def _examine(
    expert_id: str,
    context: RunContext | dict[str, Any] | None,
    progress: Callable[[TaskResult], None] | None,
    record: bool,
) -> ExamRecord:
    catalog = load_catalog()
    scope = catalog.get(expert_id)
    path = catalog.exams.get(expert_id)
    if path is None:
        where = catalog.origin(expert_id).path
        raise ConfigError(str(where), f"expert {expert_id!r} has no exam; write exam.yaml (see docs/experts.md)")
    exam = load_exam(path, expert_id)
    settings = resolve_settings(context)
    graph = scratch_graph()
    results: list[TaskResult] = []
    models: set[str] = set()
    started = time.perf_counter()
    for task in exam.tasks:
        result, model = _take(graph, exam, task.id, expert_id, context)
        results.append(result)
        if model:
            models.add(model)
        if progress is not None:
            progress(result)
    passed = sum(r.passed for r in results)
    score = passed / len(results)
    done = ExamRecord(
        expert=expert_id,
        version=scope.version,
        model=", ".join(sorted(models)) or "none",
        backend=settings.backend,
        score=round(score, 4),
        bar=exam.bar,
        passed=score >= exam.bar,
        seconds=round(time.perf_counter() - started, 1),
        taken_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        tasks=results,
    )
    if record:
        write_record(done)
    return done


def _take(
    graph: Any, exam: Exam, task_id: str, expert_id: str, context: RunContext | dict[str, Any] | None
) -> tuple[TaskResult, str | None]:
    task = next(t for t in exam.tasks if t.id == task_id)
    spec = {"id": "answer", "title": f"Exam task {task.id}", "description": task.task, "expert": expert_id}
    title = f"Exam of {expert_id}: {task.id}"
    state, seconds = run_one_slot(graph, task.task, spec, title, source=f"{EXAM_SOURCE}{expert_id}", context=context)
    decision = state.routing.get("answer")
    model = None
    if decision is not None:
        model = f"{'base model' if decision.model is None else decision.model} ({decision.binding})"
        if decision.expert != expert_id:  # it must be the expert's own answer that is scored
            failed = [f"the slot went to {decision.expert}, not {expert_id}: {decision.reason}"]
            return TaskResult(
                id=task.id, passed=False, failed=failed, seconds=seconds, status=state.status.value
            ), model
    document = state.document or ""
    failures = exam_failures(document, task.checks, task.task)
    slot = state.slot_states.get("answer")
    if state.status.value == "failed":
        failures.insert(0, f"the run failed: {(slot.error if slot else None) or 'no document'}")
    answer = document[:ANSWER_KEPT]
    return TaskResult(
        id=task.id, passed=not failures, failed=failures, seconds=seconds, status=state.status.value, answer=answer
    ), model
