"""Node ``execute_slots``: one scheduling round of the slot DAG.

Each call (one super-step): mark slots whose dependencies failed as blocked, dispatch every ready slot (and
re-dispatch slots that were running in a process that died), wait until at least one running slot finishes,
and return the finished slots as a partial update. The graph loops on this node until no slot is pending or
running; see :mod:`engine.scheduler` for why dispatch works this way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import StreamWriter

from engine.figures import compute_figures, figures_constraint, wants_figures
from engine.scheduler import Finished, SlotScheduler, release, scheduler_for
from engine.slots.contracts import contract_for
from engine.slots.job import SlotJob
from engine.slots.run import ProgressSink, SlotOutcome, generation_settings, run_slot
from engine.slots.sandbox import SandboxLimits
from engine.slots.streaming import Listeners, node_stream
from experts.backends import ExpertBackend
from experts.catalog import GENERAL_EXPERT, Catalog, escalation_binding, load_catalog, resolve_binding
from experts.catalog.versions import pinned
from experts.embedding import get_embedder
from experts.pool import Admitted, BreakerPolicy, admit, get_backend, preload, trim_heap
from experts.routing.lesson_check import Lesson
from memory.routing_lessons import RoutingLessons
from memory.store import FactMemory
from state.context import RunContext
from state.enums import SlotStatus
from state.errors import GenerationStopped, RunFailure
from state.figures import TaskFigures
from state.framework import Framework, SlotSpec, ancestors, descendants
from state.passport import LedgerEntry, Notice, PlannedPassport, SlotState, utcnow
from state.result import SlotResult
from state.settings import Settings

logger = logging.getLogger(__name__)

NODE = "execute_slots"
FINAL = (SlotStatus.DONE, SlotStatus.FAILED, SlotStatus.BLOCKED)
MAX_EVICTIONS = 3
"""A slot stopped under memory pressure is queued again at most this many times; the next stop fails it."""


@dataclass
class _Round:
    """One scheduling round of a run: what was dispatched, and what it has collected so far."""

    state: PlannedPassport
    statuses: dict[str, SlotState]
    sched: SlotScheduler
    changed: dict[str, SlotState] = field(default_factory=dict)
    ledger: list[LedgerEntry] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    assists: dict[str, Any] = field(default_factory=dict)
    figures: TaskFigures | None = None
    """The task's figures, computed in this round (the run's first with a slot to start)."""

    @property
    def waiting(self) -> bool:
        """Whether a slot is running: the round waits for one to finish."""
        fw = self.state.framework
        return bool(self.sched.running()) or any(self.statuses[s.id].status == SlotStatus.IN_PROGRESS for s in fw.slots)


def execute_slots(state: PlannedPassport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Dispatch ready slots, wait for at least one to finish, return what finished."""
    rnd = _dispatch(state, runtime)
    return _finish(rnd, rnd.sched.wait(runtime.stream_writer)) if rnd.waiting else _update(rnd)


async def aexecute_slots(state: PlannedPassport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The same round when the graph runs asynchronously (the LangGraph server): a cancelled run stops its slots.

    The server cancels a run's task (``runs.cancel``, a rollback, a client gone with ``on_disconnect="cancel"``);
    the wait is where the task sits, so the cancellation lands here: the run's generations are stopped (each
    raises ``GenerationStopped``, llama.cpp within one operation) and its scheduler is dropped, so a later run of
    the thread runs the unfinished slots again from the checkpoint.
    """
    rnd = await asyncio.to_thread(_dispatch, state, runtime)  # nothing blocking runs on the server's event loop
    if not rnd.waiting:
        return await asyncio.to_thread(_update, rnd)
    try:
        finished = await asyncio.to_thread(rnd.sched.wait, runtime.stream_writer)
    except asyncio.CancelledError:
        rnd.sched.cancel()
        release(state.run.run_id)
        logger.info("run %s cancelled: its generations were stopped", state.run.run_id)
        raise
    return await asyncio.to_thread(_finish, rnd, finished)


def _finish(rnd: _Round, finished: list[Finished]) -> dict[str, Any]:
    _collect(rnd, finished)
    return _update(rnd)


def _dispatch(state: PlannedPassport, runtime: Runtime[RunContext]) -> _Round:
    """Block what cannot run, dispatch every ready slot (and those a dead process left running)."""
    fw = state.framework
    statuses = {sid: st.model_copy() for sid, st in state.slot_states.items()}
    for spec in fw.slots:
        statuses.setdefault(spec.id, SlotState())
    rnd = _Round(state, statuses, scheduler_for(state.run.run_id, state.settings.max_parallel))
    _block_dependents(fw, statuses, rnd.changed, rnd.ledger)
    shared = _Shared.of(state, runtime)
    ready = [spec for spec in fw.slots if _ready(spec, rnd)]
    if ready and state.figures is None and len(fw.slots) > 1:
        rnd.figures = _figures(rnd, shared, runtime.stream_writer)
    for spec in ready:
        _submit(spec, rnd, shared, runtime.stream_writer)
    _preload_next(fw, statuses, state, state.settings)
    return rnd


@dataclass
class _Shared:
    """What every slot dispatched in one round shares: the run's listeners, memory, lessons, catalog, backends."""

    stream: Listeners | None
    """Where each candidate's tokens go (``stream_mode="messages"``)."""
    memory: dict[str, tuple[str, SlotResult]]
    facts: FactMemory | None
    lessons: tuple[Lesson, ...]
    catalog: Catalog
    policy: BreakerPolicy
    backends: dict[str | None, ExpertBackend] = field(default_factory=dict)

    @classmethod
    def of(cls, state: PlannedPassport, runtime: Runtime[RunContext]) -> _Shared:
        """The round's shared parts, from the run's state and runtime."""
        settings, store, user = state.settings, runtime.store, state.run.user
        return cls(
            stream=node_stream(),
            memory=_memory(state),
            facts=FactMemory(store, user, get_embedder) if store is not None else None,
            lessons=tuple(RoutingLessons(store, user).kept()) if store is not None else (),
            catalog=_run_catalog(state),
            policy=BreakerPolicy(settings.breaker_failures, settings.breaker_window_s, settings.breaker_cooldown_s),
        )

    def backend(self, settings: Settings, model: str | None) -> ExpertBackend:
        """The backend of ``model``, one per model in a round."""
        if model not in self.backends:
            self.backends[model] = get_backend(settings, model)
        return self.backends[model]


def _run_catalog(state: PlannedPassport) -> Catalog:
    """The catalog with the expert versions the run was routed to (a catalog change reaches later runs only)."""
    catalog, gone = pinned(load_catalog(), {d.expert: d.version for d in state.routing.values() if d.version})
    for line in gone:
        logger.warning("%s", line)
    return catalog


def _ready(spec: SlotSpec, rnd: _Round) -> bool:
    """Whether a slot is dispatched now: pending with its dependencies done, or left running by a dead process."""
    st = rnd.statuses[spec.id]
    deps_done = all(rnd.statuses[d].status == SlotStatus.DONE for d in spec.deps)
    stale = st.status == SlotStatus.IN_PROGRESS and not rnd.sched.known(spec.id)
    if stale:
        rnd.ledger.append(
            LedgerEntry(
                agent="harness",
                action="requeue",
                slot_id=spec.id,
                inputs_summary="slot was running when the previous process stopped; running it again",
            )
        )
    return (st.status == SlotStatus.PENDING and deps_done) or stale


def _submit(spec: SlotSpec, rnd: _Round, shared: _Shared, write: StreamWriter) -> None:
    """Admit one slot to an expert and hand it to the scheduler."""
    state, settings, catalog = rnd.state, rnd.state.settings, shared.catalog
    decision = state.routing.get(spec.id)
    routed = decision.expert if decision is not None else rnd.statuses[spec.id].expert or GENERAL_EXPERT
    # the model route_slots bound before any slot ran, else the expert's binding now
    routed_model = decision.model if decision is not None else resolve_binding(settings, catalog.get(routed)).model
    generalist = partial(_model_of, settings, catalog, GENERAL_EXPERT)
    admitted = admit(spec.id, routed, routed_model, settings, shared.policy, GENERAL_EXPERT, generalist)
    rnd.ledger.extend(admitted.ledger)
    if admitted.warning is not None:
        rnd.notices.append(Notice(level="warning", source=NODE, slot_id=spec.id, message=admitted.warning))
    expert = admitted.expert
    # the breaker may have sent the slot to the generalist
    model = routed_model if expert == routed else _model_of(settings, catalog, expert)
    backend = shared.backend(settings, model)
    job = _job(spec, expert, model, rnd, shared)
    rnd.sched.submit(spec.id, partial(_run_guarded, job, backend, settings, admitted))
    new = rnd.statuses[spec.id].model_copy(
        update={"status": SlotStatus.IN_PROGRESS, "expert": expert, "started_at": utcnow()}
    )
    rnd.statuses[spec.id] = rnd.changed[spec.id] = new
    write({"event": "slot_dispatched", "slot": spec.id, "title": spec.title, "expert": expert})


def _figures(rnd: _Round, shared: _Shared, write: StreamWriter) -> TaskFigures | None:
    """The task's figures, computed once before its parts are written, when it has numbers and a quantity.

    The program comes from the biggest installed model (:func:`engine.figures.compute_figures`); a backend error
    leaves the run without figures, said in the ledger.
    """
    state, settings = rnd.state, rnd.state.settings
    if not settings.calculate or not wants_figures(state.mission.task):
        return None
    bigger = escalation_binding(settings, shared.catalog, None)
    model = bigger.model if bigger is not None else None
    t0 = time.perf_counter()
    try:
        figures = compute_figures(
            state.mission.task,
            shared.backend(settings, model),
            model or "base model",
            SandboxLimits(timeout_s=settings.check_timeout_s),
            cancel=rnd.sched.cancelled,
        )
    except GenerationStopped:
        raise
    except Exception as exc:  # a backend's own error type is unknown: the parts are written without figures
        figures = TaskFigures(model=model or "base model", note=f"no program: {type(exc).__name__}: {exc}"[:300])
    rnd.ledger.append(
        LedgerEntry(
            agent=figures.model,
            action="calculate_figures",
            inputs_summary="a Python program that prints the task's figures, run in the sandbox",
            outputs_summary=(figures.note + "; " + "; ".join(f"{f.name}: {f.value}" for f in figures.figures))[:500],
            duration_ms=int((time.perf_counter() - t0) * 1000),
        )
    )
    write({"event": "figures_computed", "figures": len(figures.figures), "note": figures.note})
    return figures


def _model_of(settings: Settings, catalog: Catalog, expert: str) -> str | None:
    """The model ``expert`` is bound to now."""
    return resolve_binding(settings, catalog.get(expert)).model


def _job(spec: SlotSpec, expert: str, model: str | None, rnd: _Round, shared: _Shared) -> SlotJob:
    """Everything the slot's prompt may contain, and the expert, model and budget it runs with."""
    state, settings, fw = rnd.state, rnd.state.settings, rnd.state.framework
    scope = shared.catalog.get(expert)
    decision = state.routing.get(spec.id)
    if decision is not None and decision.deliverable is not None and decision.expert == expert:
        declared = spec.model_copy(update={"deliverable": decision.deliverable, "language": decision.language})
        contract = contract_for(declared, expert)  # the deliverable route_slots recorded
    else:  # not routed, or the breaker gave it to another expert: its declared deliverable, else the runner's
        contract = contract_for(spec, expert)
    if contract.deliverable == "data" and len(fw.slots) > 1:
        # a data file of a plan is the file: its second section wrote the next part's code (mp5-feature-flags:
        # flags.json, then "2. flags.py with load_flags(path) ...", cut off, which the JSON check then read too)
        contract = replace(contract, max_items=1)
    max_tokens, temperature = generation_settings(scope, settings)
    if "max_tokens" not in settings.explicit:
        max_tokens = max(max_tokens, contract.max_tokens)  # the budget fits the deliverable
    told = tuple(state.completion.feedback.get(spec.id, ())) if state.completion is not None else ()
    return SlotJob(
        spec=spec,
        task=state.mission.task,
        constraints=(
            *state.mission.constraints,
            *_figure_facts(rnd),
            *state.agreement.get(spec.id, ()),
            *told,
        ),
        feedback=told,
        expert=expert,
        persona=scope.persona,
        references={r: (fw.slot(r).title, state.results[r]) for r in spec.can_reference if r in state.results},
        beside=_finished_beside(state, spec.id),
        figures_task=settings.calculate and wants_figures(state.mission.task),
        task_figures=tuple(figures.figures) if (figures := rnd.figures or state.figures) is not None else (),
        others=tuple(s.title for s in fw.slots if s.id != spec.id and s.title != spec.title),
        max_tokens=max_tokens,
        temperature=temperature,
        mode=state.mission.mode,
        contract=contract,
        n_ctx=settings.n_ctx,
        escalation=_escalation(settings, shared, model),
        model=model or "base model",
        cancel=rnd.sched.cancelled,
        stream=shared.stream,
        memory=shared.memory,
        earlier_task=state.turns[-1].task if state.turns else "",
        facts=shared.facts,
        lessons=shared.lessons,
    )


def _finished_beside(state: PlannedPassport, slot_id: str) -> dict[str, SlotResult]:
    """The other slots finished so far: their modules are there for this slot's checks (``SlotJob.beside``)."""
    done = {sid for sid, st in state.slot_states.items() if st.status == SlotStatus.DONE}
    return {sid: result for sid, result in state.results.items() if sid != slot_id and sid in done}


def _figure_facts(rnd: _Round) -> tuple[str, ...]:
    figures = rnd.figures or rnd.state.figures
    return (figures_constraint(figures),) if figures is not None and figures.figures else ()


def _memory(state: PlannedPassport) -> dict[str, tuple[str, SlotResult]]:
    """The previous turn's results, as every slot of a follow-up run sees them (none on a thread's first run)."""
    if not state.turns:
        return {}
    last = state.turns[-1]
    asked = last.task if len(last.task) <= 100 else last.task[:97] + "..."
    titles = {s.id: s.title for s in last.slots}
    label = f"earlier turn {last.number}, asked {asked!r}"
    return {
        f"turn{last.number}.{slot_id}": (f"{label}: {titles.get(slot_id, slot_id)}", result)
        for slot_id, result in last.results.items()
    }


def _collect(rnd: _Round, finished: list[Finished]) -> None:
    fw = rnd.state.framework
    for one in finished:
        _record(one, fw, rnd.statuses, rnd.changed, rnd.results, rnd.assists, rnd.ledger, rnd.notices)
    _block_dependents(fw, rnd.statuses, rnd.changed, rnd.ledger)


def _update(rnd: _Round) -> dict[str, Any]:
    fw = rnd.state.framework
    if all(rnd.statuses[s.id].status in FINAL for s in fw.slots):
        release(rnd.state.run.run_id)
        trim_heap()  # a long-running process would otherwise keep the generations' freed heap memory
    update: dict[str, Any] = {"slot_states": rnd.changed, "updated_at": utcnow()}
    if rnd.results:
        update["results"] = rnd.results
    if rnd.assists:
        update["assists"] = rnd.assists
    if rnd.ledger:
        update["ledger"] = rnd.ledger
    if rnd.notices:
        update["notices"] = rnd.notices
    if rnd.figures is not None:
        update["figures"] = rnd.figures
    return update


def _escalation(settings: Settings, shared: _Shared, model: str | None) -> tuple[str, ExpertBackend] | None:
    """The bigger model a slot on ``model`` may draw its last candidate from (None: none is installed)."""
    bigger = escalation_binding(settings, shared.catalog, model)
    if bigger is None or bigger.model is None:
        return None
    return bigger.model, shared.backend(settings, bigger.model)


def _preload_next(fw: Framework, statuses: dict[str, SlotState], state: PlannedPassport, settings: Settings) -> None:
    """Preload the models of the slots that come next.

    Those are pending slots whose unfinished dependencies are all running. The pool loads their models in the
    background while reservations stay under the preload threshold.
    """
    if not settings.preload:
        return
    wanted: list[str | None] = []
    for spec in fw.slots:
        if statuses[spec.id].status != SlotStatus.PENDING:
            continue
        deps = [statuses[d].status for d in spec.deps]
        if deps and all(d in (SlotStatus.DONE, SlotStatus.IN_PROGRESS) for d in deps):
            decision = state.routing.get(spec.id)
            model = decision.model if decision is not None else None
            if model not in wanted:
                wanted.append(model)
    for model in wanted:
        if preload(settings, model):
            logger.info("preloading %s for the next slots", model or "the base model")


def _run_guarded(
    job: SlotJob, backend: ExpertBackend, settings: Settings, admitted: Admitted, emit: ProgressSink
) -> SlotOutcome:
    """Run a slot (in a worker thread) and tell its breaker how it went (:meth:`~experts.pool.Admitted.report`)."""
    with admitted.guard():
        outcome = run_slot(job, backend, settings, emit)
        admitted.report(answered=outcome.result is not None, error=outcome.error, requeued=bool(outcome.requeue))
        return outcome


def _record(
    finished: Finished,
    fw: Framework,
    statuses: dict[str, SlotState],
    changed: dict[str, SlotState],
    results: dict[str, Any],
    assists: dict[str, Any],
    ledger: list[LedgerEntry],
    notices: list[Notice],
) -> None:
    prev = statuses[finished.slot_id]
    outcome = finished.outcome
    if not isinstance(outcome, SlotOutcome):
        error = f"internal error in slot worker: {outcome!r}"
        new = prev.model_copy(update={"status": SlotStatus.FAILED, "error": error, "finished_at": utcnow()})
        notices.append(Notice(level="error", source=NODE, slot_id=finished.slot_id, message=error))
    elif outcome.result is not None:
        results[finished.slot_id] = outcome.result
        assists[finished.slot_id] = outcome.assists
        waiting = any(r.awaiting_user and r.status == "unresolved" for r in outcome.assists)
        new = prev.model_copy(
            update={
                "status": SlotStatus.AWAITING_USER if waiting else SlotStatus.DONE,
                "attempts": prev.attempts + outcome.attempts,
                "started_at": outcome.started_at,
                "finished_at": outcome.finished_at,
                "error": None,
            }
        )
    elif outcome.requeue == "cancelled":  # the process is stopping (Ctrl+C): a resumed run runs it
        new = prev.model_copy(update={"status": SlotStatus.PENDING, "error": None})
    elif outcome.requeue and prev.evictions < MAX_EVICTIONS:
        new = prev.model_copy(update={"status": SlotStatus.PENDING, "evictions": prev.evictions + 1, "error": None})
        message = f"stopped under memory pressure ({outcome.error}); queued to run again from scratch"
        notices.append(Notice(level="warning", source=NODE, slot_id=finished.slot_id, message=message))
    elif outcome.requeue:
        error = (
            f"stopped under memory pressure {prev.evictions + 1} times; raise --memory-limit or pick a larger "
            f"--profile (last: {outcome.error})"
        )
        new = prev.model_copy(
            update={
                "status": SlotStatus.FAILED,
                "evictions": prev.evictions + 1,
                "error": error,
                "finished_at": utcnow(),
            }
        )
        notices.append(Notice(level="error", source=NODE, slot_id=finished.slot_id, message=error))
    else:  # the backend failed: reported under this node's name
        error = str(RunFailure(NODE, outcome.error or "the backend failed", slot_id=finished.slot_id))
        new = prev.model_copy(
            update={
                "status": SlotStatus.FAILED,
                "attempts": prev.attempts + outcome.attempts,
                "error": error,
                "started_at": outcome.started_at,
                "finished_at": outcome.finished_at,
            }
        )
        notices.append(Notice(level="error", source=NODE, slot_id=finished.slot_id, message=error))
    if isinstance(outcome, SlotOutcome):
        ledger.extend(outcome.ledger)
        notices.extend(outcome.notices)
    statuses[finished.slot_id] = changed[finished.slot_id] = new


def _block_dependents(
    fw: Framework, statuses: dict[str, SlotState], changed: dict[str, SlotState], ledger: list[LedgerEntry]
) -> None:
    """Mark every pending slot downstream of a failed or blocked slot as blocked (naming the culprits)."""
    broken = [sid for sid, st in statuses.items() if st.status in (SlotStatus.FAILED, SlotStatus.BLOCKED)]
    for sid in sorted(descendants(fw, broken)):
        st = statuses[sid]
        if st.status != SlotStatus.PENDING:
            continue
        culprits = sorted(
            d for d in ancestors(fw, sid) if statuses[d].status in (SlotStatus.FAILED, SlotStatus.BLOCKED)
        )
        direct = [c for c in culprits if statuses[c].status == SlotStatus.FAILED] or culprits
        new = st.model_copy(update={"status": SlotStatus.BLOCKED, "blocked_by": direct})
        statuses[sid] = changed[sid] = new
        ledger.append(
            LedgerEntry(
                agent="harness",
                action="block",
                slot_id=sid,
                outputs_summary="blocked by " + ", ".join(direct),
            )
        )
