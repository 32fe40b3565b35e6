"""Node ``guard``: validate the run input, resolve settings, and stamp the run's identity.

Everything a user can get wrong is checked here, before any model is loaded, and reported as a
:class:`~state.errors.UserError` that names the field and the allowed values.
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from experts.catalog import Catalog, load_catalog
from experts.models import pool
from state.context import RunContext, resolve_settings
from state.enums import Mode, RunStatus
from state.errors import InputError
from state.framework import Framework, parse_framework
from state.io import MAX_TASK_CHARS, RunOptions
from state.passport import LedgerEntry, Mission, Passport, RunInfo, utcnow


def check_task(task: object) -> str:
    """Return the stripped task or raise :class:`InputError` naming the ``task`` field."""
    if not isinstance(task, str):
        raise InputError("task", f"must be a string, got {type(task).__name__}")
    stripped = task.strip()
    if not stripped:
        raise InputError("task", "is empty; describe what you want done")
    if len(stripped) > MAX_TASK_CHARS:
        raise InputError("task", f"is {len(stripped)} characters long; the limit is {MAX_TASK_CHARS}")
    return stripped


def check_mode(mode: object) -> Mode:
    """Return the mode or raise :class:`InputError` listing the allowed values."""
    try:
        return Mode(str(mode))
    except ValueError:
        allowed = ", ".join(m.value for m in Mode)
        raise InputError("mode", f"unknown mode {mode!r}; allowed: {allowed}") from None


def check_framework(options: RunOptions, catalog: Catalog) -> Framework | None:
    """Validate an inline framework (e.g. from ``--framework FILE``), including its expert ids."""
    if options.framework is None:
        return None
    source = options.framework_source or "options.framework"
    fw = parse_framework(options.framework, source=source)
    for spec in fw.slots:
        if spec.expert is not None and spec.expert not in catalog:
            raise InputError(
                f"{source}: slots[{spec.id}].expert",
                f"unknown expert id {spec.expert!r}; allowed: {', '.join(catalog.ids)}",
            )
    return fw


def guard(state: Passport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Validate input and settings; record mission, settings, run identity and any given framework."""
    task = check_task(state.task)
    mode = check_mode(state.mode)
    framework = check_framework(state.options, load_catalog())
    settings = resolve_settings(runtime.context)
    pool().reopen()  # a new run: generations are accepted again after an earlier run's shutdown (Ctrl+C)
    info = runtime.execution_info
    thread_id = info.thread_id if info is not None and info.thread_id else str(uuid.uuid4())
    run = RunInfo(thread_id=thread_id, run_id=str(uuid.uuid4()), created_at=utcnow())
    mission = Mission(
        task=task,
        mode=mode,
        constraints=list(state.options.constraints),
        success_criteria=list(state.options.success_criteria),
    )
    return {
        "run": run,
        "mission": mission,
        "settings": settings,
        "framework": framework,
        "status": RunStatus.RUNNING,
        "updated_at": utcnow(),
        "ledger": [
            LedgerEntry(
                agent="harness",
                action="accept_task",
                inputs_summary=f"{len(task)} chars, mode {mode.value}",
                outputs_summary=f"backend {settings.backend}, max_parallel {settings.max_parallel}",
            )
        ],
    }
