"""Shadow runs: a candidate version answers real slots its expert served, after the fact, and the answers compete.

Two ways in, one comparison:

* **A share of live slots** (:mod:`experts.catalog.shadow_queue`): with ``coe experts shadow ID VERSION --share
  0.2``, a fifth of the slots the expert serves are queued when their run ends (:mod:`engine.shadow_offer`), and
  answered in spare time: by the server's idle worker (:mod:`server.shadow_worker`, which stops a job as soon as
  a user's run starts and puts it back) or by ``coe experts shadow --queued`` (:func:`drain`), which answers
  nothing while a run holds a thread lease in the store.
* **On demand**: ``coe experts shadow ID VERSION`` takes the newest saved runs' slots that the expert served (done,
  with checked answers, with no dependencies: a slot that read other slots' work cannot be replayed without them).

Either way the candidate answers the slot as a one-slot framework through the compiled graph, on a throw-away
in-memory thread; the framework's source ``shadow:<id>@<version>`` routes it to that version (the run's own pin,
not a process-wide switch, so a user's run beside it is served by the current version). Both answers are scored
by the slot's checks (:func:`engine.slots.selection.score`, as best-of-N scores candidates); for a tie the judge
prompt picks, on the base model, asked in both orders (a pick that follows the order is a tie). The candidate's
answers never reach a document; each comparison is kept in ``$COE_HOME/experts/.shadow/<id>@<version>.jsonl`` for
``coe experts versions`` and ``promote``. A share with an automatic rule promotes the candidate once it has
answered enough slots and won by the margin (:func:`auto_promote`; the exam conditions of ``promote`` hold).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from engine.shadow_offer import replayable, shadow_job
from engine.slots.selection import judge, score
from experts.catalog.shadow_queue import finish, put_back, share, take
from experts.catalog.versions import candidate, keep_shadow, promote, shadow_source, shadow_tally
from experts.pool.pooled import get_backend
from graph.lease import live_leases
from graph.one_slot import arun_one_slot, run_one_slot, scratch_graph
from graph.persistence import list_threads, open_checkpointer
from state.context import RunContext, resolve_settings
from state.errors import ConfigError
from state.framework import SlotSpec, slot_text
from state.passport import Passport, PlannedPassport

__all__ = ["ShadowResult", "aanswer", "answer", "auto_promote", "drain", "runs_in_flight", "shadow"]

logger = logging.getLogger(__name__)

THREADS_READ = 200
"""How many of the newest saved runs are searched for the expert's slots."""

Context = RunContext | dict[str, Any] | None


@dataclass(frozen=True)
class ShadowResult:
    """One real slot answered again by the candidate, and which answer won."""

    expert: str
    version: str
    thread_id: str
    slot_id: str
    served_version: str
    served_score: float
    candidate_score: float
    winner: str
    """``candidate``, ``served`` or ``tie`` (equal checks and no judge's pick)."""
    judged: bool
    seconds: float
    failed_checks: list[str]
    """The hard checks the candidate's answer failed."""
    promoted: bool = False
    """This comparison completed the share's automatic promotion rule, and the candidate was promoted."""


def shadow(
    expert_id: str,
    version: str,
    *,
    checkpoint: str | None = None,
    slots: int = 5,
    context: Context = None,
    progress: Callable[[ShadowResult], None] | None = None,
) -> list[ShadowResult]:
    """Have candidate ``version`` of ``expert_id`` answer up to ``slots`` saved real slots again; keep each comparison.

    Raises:
        ConfigError: no such candidate, or no saved slot of the expert to replay.
    """
    candidate(expert_id, version, "to shadow")
    with open_checkpointer(checkpoint) as saver:
        jobs = _served_slots(saver, expert_id, version, slots)
    if not jobs:
        raise ConfigError(
            expert_id, f"no saved run has a finished slot of {expert_id} without dependencies to answer again"
        )
    results = []
    for job in jobs:
        results.append(answer(job, context))
        if progress is not None:
            progress(results[-1])
    return results


def drain(
    *,
    limit: int | None = None,
    checkpoint: str | None = None,
    context: Context = None,
    progress: Callable[[ShadowResult], None] | None = None,
) -> tuple[list[ShadowResult], str]:
    """Answer the queued shadow jobs, oldest first, while no run is in flight in the store.

    Before each job the store's thread leases are read (:func:`runs_in_flight`): a run holding one stops the
    drain, and the jobs left wait for the next (:func:`~experts.catalog.shadow_queue.take` drops a job whose
    candidate is gone).

    Returns:
        The comparisons made, and why the drain stopped (``queue empty``, ``limit reached``, ``a run is in flight``).
    """
    results: list[ShadowResult] = []
    while limit is None or len(results) < limit:
        if runs_in_flight(checkpoint):
            return results, "a run is in flight"
        taken = take()
        if taken is None:
            return results, "queue empty"
        job_id, job = taken
        try:
            result = answer(job, context)
        except BaseException:
            put_back(job_id)
            raise
        finish(job_id)
        results.append(result)
        if progress is not None:
            progress(result)
    return results, "limit reached"


def runs_in_flight(checkpoint: str | None = None) -> int:
    """How many threads of the store (default: ``coe run``'s) a run holds a live lease on."""
    with open_checkpointer(checkpoint) as saver:
        return len(live_leases(saver))


def _served_slots(saver: Any, expert_id: str, version: str, limit: int) -> list[dict[str, Any]]:
    graph = scratch_graph(saver)
    found: list[dict[str, Any]] = []
    for thread_id in list_threads(saver, THREADS_READ):
        values = graph.get_state({"configurable": {"thread_id": thread_id}}).values
        if not values or values.get("framework") is None:
            continue
        state = PlannedPassport.model_validate(values)
        for spec in state.framework.slots:
            decision = state.routing.get(spec.id)
            served = decision is not None and decision.expert == expert_id and decision.version != version
            if served and replayable(state, spec.id):
                found.append(shadow_job(state, spec.id, version))
        if len(found) >= limit:
            break
    return found[:limit]


def answer(job: dict[str, Any], context: Context = None) -> ShadowResult:
    """Have the job's candidate answer its slot again; score, keep the comparison, apply the promotion rule."""
    slot, title, source = _one_slot(job)
    replay, seconds = run_one_slot(scratch_graph(), job["task"], slot, title, source=source, context=context)
    winner, judged, mine, failed = _compare(job, replay, context)
    return _kept(job, mine, winner, judged, seconds, failed)


async def aanswer(job: dict[str, Any], context: Context = None) -> ShadowResult:
    """:func:`answer` on the event loop: cancelling the task stops the candidate's generations (the server's worker)."""
    slot, title, source = _one_slot(job)
    replay, seconds = await arun_one_slot(scratch_graph(), job["task"], slot, title, source=source, context=context)
    winner, judged, mine, failed = await asyncio.to_thread(_compare, job, replay, context)
    return await asyncio.to_thread(_kept, job, mine, winner, judged, seconds, failed)  # files: off the loop


def _one_slot(job: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    title = f"Shadow of {job['expert']}: {job['slot'].get('title', job['slot_id'])}"
    return job["slot"], title, shadow_source(job["expert"], job["version"])


def _compare(job: dict[str, Any], replay: Passport, context: Context) -> tuple[str, bool, float, list[str]]:
    mine = replay.results.get(job["slot_id"])
    if mine is None or mine.quality is None:
        mine_score, failed = 0.0, ["the candidate delivered no checked answer"]
    else:
        mine_score, failed = score(mine.quality.checks), [c.name for c in mine.quality.failed_checks]
    spec = SlotSpec.model_validate(job["slot"])
    winner, judged = _winner(
        job["served_score"], mine_score, job["served_raw"], mine.raw if mine else "", spec, context
    )
    return winner, judged, mine_score, failed


def _kept(
    job: dict[str, Any], mine: float, winner: str, judged: bool, seconds: float, failed: list[str]
) -> ShadowResult:
    result = ShadowResult(
        expert=job["expert"],
        version=job["version"],
        thread_id=job["thread_id"],
        slot_id=job["slot_id"],
        served_version=job["served_version"],
        served_score=job["served_score"],
        candidate_score=mine,
        winner=winner,
        judged=judged,
        seconds=seconds,
        failed_checks=failed,
    )
    keep_shadow(job["expert"], job["version"], asdict(result))
    if auto_promote(job["expert"], job["version"]) is not None:
        result = ShadowResult(**{**asdict(result), "promoted": True})
    return result


def auto_promote(expert_id: str, version: str) -> dict[str, Any] | None:
    """Promote the candidate when its share's rule is met: enough slots scored, won by the margin; else None.

    The conditions of :func:`experts.catalog.versions.promote` hold as for a promotion by hand (a passing exam no
    lower than the current version's): a rule met by a candidate they refuse is logged, and it stays a candidate.
    """
    rule = share(expert_id, version)
    if rule is None or rule.promote_after is None:
        return None
    tally = shadow_tally(expert_id, version)
    if tally["slots"] < rule.promote_after or tally["candidate"] - tally["served"] < rule.margin:
        return None
    try:
        step = promote(expert_id, version, rule=rule.line())
    except ConfigError as exc:
        logger.warning("shadow rule met for %s v%s, but it is not promoted: %s", expert_id, version, exc)
        return None
    logger.info("%s v%s promoted by its shadow rule (%s)", expert_id, version, rule.line())
    return step


def _winner(
    served: float, candidate: float, served_text: str, candidate_text: str, spec: SlotSpec, context: Any
) -> tuple[str, bool]:
    """The higher check score wins; equal scores go to the judge, asked in both orders.

    A pick that changes with the order is the order's, not the answers': a tie.
    """
    if served != candidate:
        return ("candidate" if candidate > served else "served"), False
    backend = get_backend(resolve_settings(context), None)
    shown = [("served", served_text), ("candidate", candidate_text)]
    picks = {judge(order, slot_text(spec), backend) for order in (shown, shown[::-1])}
    pick = picks.pop() if len(picks) == 1 else None
    return (pick, True) if pick is not None else ("tie", False)
