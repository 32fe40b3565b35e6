"""Node ``guard``: validate the run input, resolve settings, and stamp the run's identity.

Everything a user can get wrong is checked by :func:`validate_run`, before any model is loaded, and reported as
a :class:`~state.errors.UserError` that names the field and the allowed values. The CLI calls the same function
before it saves anything, so a run the CLI starts cannot fail in the guard: its settings are recorded by the
guard's first step, and a resume always runs with them. A run that passes starts verifying its bound models' files
in the background (:func:`~experts.catalog.prepare_models`), so routing finds them ready.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime
from pydantic import ValidationError

from engine.assists.injection import describe, find_instructions
from experts.backends.fake import load_script
from experts.catalog import Catalog, load_catalog, prepare_models
from experts.models import BUNDLED_MODELS, resolve_model_path
from experts.pool import pool
from state.context import RunContext, resolve_settings
from state.enums import Mode, RunStatus
from state.errors import ConfigError, FrameworkError, InputError
from state.framework import Framework, parse_framework
from state.io import MAX_TASK_CHARS, RunOptions, first_surrogate
from state.passport import RESET, LedgerEntry, Mission, Notice, Passport, Refusal, RunInfo, utcnow
from state.paths import LOCAL_USER, user_kb_dir
from state.settings import Settings
from state.turns import Turn, TurnSlot


def check_task(task: object) -> str:
    """Return the stripped task or raise :class:`InputError` naming the ``task`` field."""
    if not isinstance(task, str):
        raise InputError("task", f"must be a string, got {type(task).__name__}")
    stripped = task.strip()
    if not stripped:
        raise InputError("task", "is empty; describe what you want done")
    if len(stripped) > MAX_TASK_CHARS:
        raise InputError("task", f"is {len(stripped)} characters long; the limit is {MAX_TASK_CHARS}")
    if "\x00" in stripped:
        at = stripped.index("\x00")
        raise InputError("task", f"contains a NUL character at position {at}; a task is text, remove it")
    bad = first_surrogate(stripped)
    if bad is not None:
        raise InputError(
            "task", f"is not valid Unicode at position {bad} (bytes that are not UTF-8?); send it as UTF-8 text"
        )
    return stripped


def check_mode(mode: object) -> Mode:
    """Return the mode or raise :class:`InputError` listing the allowed values."""
    try:
        return Mode(str(mode))
    except ValueError:
        allowed = ", ".join(m.value for m in Mode)
        raise InputError("mode", f"unknown mode {mode!r}; allowed: {allowed}") from None


def check_options(options: object) -> RunOptions:
    """Return the run options or raise :class:`InputError` naming the option that is wrong."""
    if isinstance(options, RunOptions):
        return options
    try:
        return RunOptions.model_validate({} if options is None else options)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        allowed = ", ".join(RunOptions.model_fields)
        hint = f"; allowed: {allowed}" if first["type"] in ("extra_forbidden", "model_type") else ""
        raise InputError(f"options.{where}" if where else "options", first["msg"] + hint) from None


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


def check_backend(settings: Settings) -> None:
    """Check the files the backend settings name, cheaply (no hashing, no loading), before any expensive step.

    A bundled model's name is checked when it is loaded (its packages are verified then); a path must name a
    GGUF file whose header reads whole (about 0.15 s for a 150k-token vocabulary), so a typo or a damaged file
    is not found after the planner has run. The fake backend's script must load.

    Raises:
        UserError: naming the setting and the path.
    """
    if settings.backend == "fake" and settings.fake_script:
        load_script(settings.fake_script)
    if settings.backend != "llama":
        return
    for spec in (settings.model_path, settings.planner_model):
        if spec and spec.strip() and spec.strip() not in BUNDLED_MODELS:
            resolve_model_path(spec)


@dataclass(frozen=True)
class ValidRun:
    """A run input that passed every check, and the settings it runs with."""

    task: str
    mode: Mode
    options: RunOptions
    framework: Framework | None
    settings: Settings


def validate_run(task: object, mode: object, options: object, context: RunContext | dict[str, Any] | None) -> ValidRun:
    """Every check of a run's input and settings, with the limits the later steps enforce.

    Raises:
        UserError: the first problem found, naming the field, file or setting.
    """
    checked_task = check_task(task)
    checked_mode = check_mode(mode)
    checked_options = check_options(options)
    framework = check_framework(checked_options, load_catalog())
    settings = resolve_settings(context)
    check_backend(settings)
    return ValidRun(checked_task, checked_mode, checked_options, framework, settings)


OPERATOR_SETTINGS = (
    "kb_path",
    "model_path",
    "planner_model",
    "memory_check_model",
    "fake_script",
    "remote_url",
    "n_threads",
    "profile",
    "memory_limit_mb",
)
"""Run settings that name the server's files, reach out of it or size the whole process: on a server with API
keys only its operator sets them (environment variables), never a user's run context. A bundled model's name is
still a user's choice for the settings in :data:`MODEL_SETTINGS`."""

MODEL_SETTINGS = ("model_path", "planner_model", "memory_check_model")
"""Operator settings that also take a bundled model's name (a name reads no file the user chose)."""


def refuse_operator_settings(context: RunContext | dict[str, Any] | None, user: str | None) -> None:
    """Refuse a server user's run context that sets one of :data:`OPERATOR_SETTINGS`, reading nothing.

    It looks at the context's values only: no file a setting names is opened, validated or resolved first, so
    the answer is the same whether the path exists, is a directory, or is another user's file (the server's
    files cannot be probed through the error messages). ``user`` None or :data:`~state.paths.LOCAL_USER` (the
    CLI, an embedding application, an open server): nothing is refused.

    Raises:
        ConfigError: naming the run context field, "set by the server's operator".
    """
    if user is None or user == LOCAL_USER:
        return
    given = context if isinstance(context, dict) else (context.model_dump(exclude_none=True) if context else {})
    for name in OPERATOR_SETTINGS:
        value = given.get(name)
        if value is None or (name in MODEL_SETTINGS and str(value).strip() in BUNDLED_MODELS):
            continue
        raise ConfigError(
            f"run context field {name}",
            "is set by the server's operator on a server with API keys (an environment variable of the server)"
            + ("; each user has a knowledge base of their own" if name == "kb_path" else ""),
            field=name,
        )


def confine_to_user(settings: Settings, context: RunContext | dict[str, Any] | None, user: str | None) -> Settings:
    """The settings of a run made by ``user`` of a server with API keys: that user's own knowledge base.

    ``user`` None or :data:`~state.paths.LOCAL_USER` (the CLI, an embedding application, an open server): as is.

    Raises:
        ConfigError: the run context sets one of :data:`OPERATOR_SETTINGS` (:func:`refuse_operator_settings`;
            the guard calls it before anything else, this is the same check for direct callers).
    """
    if user is None or user == LOCAL_USER:
        return settings
    refuse_operator_settings(context, user)
    return settings.model_copy(update={"kb_path": str(user_kb_dir(user))})


def _server_user() -> str | None:
    """The authenticated user of a run on the LangGraph server (``langgraph_auth_user_id``), else None."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a run
        return None
    user = configurable.get("langgraph_auth_user_id")
    return str(user) if user else None


INPUT_DEFAULTS: dict[str, Any] = {"task": "", "mode": Mode.AUTONOMOUS, "options": RunOptions()}
"""What each input field is reset to when the guard refuses it."""


def _refused_input(state: Passport) -> dict[str, Any] | None:
    """The update that refuses the input, or None when its fields pass their checks.

    A refused field goes back to its default and the refusal is recorded. The refused value is not kept: the
    fields of an input persist on a thread, so a value kept would refuse the next input on the thread too, when
    that input does not send the field again. A broken catalog is no fault of the input: it raises.
    """
    checks: dict[str, Any] = {
        "task": lambda: check_task(state.task),
        "mode": lambda: check_mode(state.mode),
        "options": lambda: check_framework(check_options(state.options), load_catalog()),
    }
    for field, check in checks.items():
        try:
            check()
        except InputError as exc:
            refusal = Refusal(field=exc.field, message=str(exc)[len(exc.field) + 2 :])
        except FrameworkError as exc:
            refusal = Refusal(field=f"{field}.framework", message="; ".join(exc.errors))
        else:
            continue
        return {"refused": refusal, field: INPUT_DEFAULTS[field]}
    return None


def guard(state: Passport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Validate input and settings; record mission, settings, run identity and any given framework.

    A refused input field is recorded (``refused``) for the node ``refuse_input`` to raise, so the thread stays
    readable and usable by the next input; a bad setting (context, environment, files) raises here, and the run
    can be resumed with better settings.
    """
    user = _server_user()
    # First of all, before any setting is resolved or any file it names is read (the error would tell a server
    # user about the server's files): settings only the operator may give.
    refuse_operator_settings(runtime.context, user)
    refused = _refused_input(state)
    if refused is not None:
        return refused
    valid = validate_run(state.task, state.mode, state.options, runtime.context)
    task, mode, framework = valid.task, valid.mode, valid.framework
    settings = confine_to_user(valid.settings, runtime.context, user)
    prepare_models(settings, load_catalog())  # the model files verified beside scope and planning, not in routing
    pool().reopen()  # a new run: generations are accepted again after an earlier run's shutdown (Ctrl+C)
    info = runtime.execution_info
    thread_id = info.thread_id if info is not None and info.thread_id else str(uuid.uuid4())
    run = RunInfo(thread_id=thread_id, run_id=str(uuid.uuid4()), created_at=utcnow(), user=user or LOCAL_USER)
    mission = Mission(
        task=task,
        mode=mode,
        constraints=list(valid.options.constraints),
        success_criteria=list(valid.options.success_criteria),
    )
    ledger, notices = _intake(task, mode, settings)
    update: dict[str, Any] = {
        # The input was read into the mission, the settings and the framework; it is cleared so that the thread's
        # next input (a follow-up, often only {"task": ...}) does not inherit this one's mode and options.
        "mode": Mode.AUTONOMOUS,
        "options": RunOptions(),
        "refused": None,
        "run": run,
        "mission": mission,
        "settings": settings,
        "framework": framework,
        "status": RunStatus.RUNNING,
        "updated_at": utcnow(),
        "ledger": ledger,
        "notices": notices,
    }
    earlier = finished_turn(state)
    if earlier is not None and earlier.status in (RunStatus.RUNNING, RunStatus.PENDING):
        # the earlier run never finished (it waited for an answer, or stopped half-way): said, not silently dropped
        abandoned = f"turn {earlier.number} ({earlier.task[:80]!r}) had not finished; it is abandoned for this input"
        ledger.append(LedgerEntry(agent="harness", action="abandon_run", outputs_summary=abandoned))
        notices.append(Notice(level="warning", source="guard", message=abandoned))
    if earlier is not None:  # a follow-up: the earlier run becomes a turn, and this run starts from a clean slate
        update.update(_follow_up_reset(earlier, notices))
        ledger.append(
            LedgerEntry(
                agent="harness",
                action="follow_up",
                inputs_summary=f"turn {earlier.number + 1} of the thread",
                outputs_summary=f"turn {earlier.number} ({earlier.status.value}, {len(earlier.results)} results) "
                "kept as working memory",
            )
        )
    return update


def _intake(task: str, mode: Mode, settings: Settings) -> tuple[list[LedgerEntry], list[Notice]]:
    """The ledger's first entries and the run's first notices: the task accepted, instruction-like text flagged.

    Such text is recorded, not refused: the person may be asking about it, or pasting it to be worked on.
    """
    ledger = [
        LedgerEntry(
            agent="harness",
            action="accept_task",
            inputs_summary=f"{len(task)} chars, mode {mode.value}",
            outputs_summary=f"backend {settings.backend}, max_parallel {settings.max_parallel}",
        )
    ]
    notices: list[Notice] = []
    findings = find_instructions(task)
    if findings:
        found = describe(findings)
        ledger.append(LedgerEntry(agent="harness", action="flag_instructions", inputs_summary=found[:500]))
        notices.append(
            Notice(
                level="warning",
                source="guard",
                message=f"the task holds instruction-like text: {found}; it runs as the task, and text from "
                "documents and other experts is never followed as instructions",
            )
        )
    return ledger, notices


def _follow_up_reset(earlier: Turn, notices: list[Notice]) -> dict[str, Any]:
    """The update that keeps the earlier run as a turn and clears what belonged to it (this run's notices kept)."""
    return {
        "turns": [earlier],
        "scope": None,
        "template": None,
        "adaptation": None,
        "approval": None,
        "document": None,
        "summary": None,
        "slot_states": {RESET: None},
        "results": {RESET: None},
        "routing": {RESET: None},
        "assists": {RESET: None},
        "figures": None,
        "agreement": {RESET: None},
        "first_writings": {RESET: None},
        "part_rounds": 0,
        "completion": None,
        "defaults": [RESET],
        "notices": [RESET, *notices],
    }


def finished_turn(state: Passport) -> Turn | None:
    """The thread's previous run as a turn, when a new input arrives on a thread that already ran (else None)."""
    if state.run is None or state.mission is None:
        return None
    fw = state.framework
    slots = fw.slots if fw is not None else []
    by_slot = {s.id: state.routing[s.id].expert if s.id in state.routing else s.expert for s in slots}
    experts = list(dict.fromkeys(e for e in by_slot.values() if e is not None))
    ids = set(by_slot)
    return Turn(
        number=len(state.turns) + 1,
        run_id=state.run.run_id,
        task=state.mission.task,
        status=state.status,
        started_at=state.run.created_at,
        finished_at=state.updated_at,
        document=state.document or "",
        slots=[TurnSlot(id=s.id, title=s.title, expert=by_slot[s.id]) for s in slots],
        results={k: v for k, v in state.results.items() if k in ids},
        experts=experts,
    )
