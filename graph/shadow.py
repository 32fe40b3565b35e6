"""Shadow runs: a candidate version answers real slots its expert served, after the fact, and the answers compete.

``coe experts shadow ID VERSION`` takes the newest saved runs' slots that the expert served (done, with checked
answers, with no dependencies: a slot that read other slots' work cannot be replayed without them), and has the
candidate version answer each one again as a one-slot framework through the compiled graph (the same persona
switch as an exam, :func:`experts.catalog.versions.serving`; a throw-away in-memory thread). Both answers are
scored by the slot's checks (:func:`engine.slots.selection.score`, as best-of-N scores candidates); for a tie
the judge prompt picks, on the base model, asked in both orders (a pick that follows the order is a tie). The
candidate's answers never reach a document; each comparison is kept in
``$COE_HOME/experts/.shadow/<id>@<version>.jsonl`` for ``coe experts versions`` and ``promote``.

It runs when the operator runs it (spare time), never inside a user's run: an automatic share of live slots is
not built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from engine.slots.selection import judge, score
from experts.catalog.versions import keep_shadow, serving
from experts.pool.pooled import get_backend
from graph.one_slot import run_one_slot, scratch_graph
from graph.persistence import list_threads, open_checkpointer
from state.context import RunContext, resolve_settings
from state.errors import ConfigError
from state.framework import SlotSpec, slot_text
from state.passport import Passport

__all__ = ["ShadowResult", "shadow"]

THREADS_READ = 200
"""How many of the newest saved runs are searched for the expert's slots."""


@dataclass(frozen=True)
class ShadowResult:
    """One real slot answered again by the candidate, and which answer won."""

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


def shadow(
    expert_id: str,
    version: str,
    *,
    checkpoint: str | None = None,
    slots: int = 5,
    context: RunContext | dict[str, Any] | None = None,
    progress: Callable[[ShadowResult], None] | None = None,
) -> list[ShadowResult]:
    """Have candidate ``version`` of ``expert_id`` answer up to ``slots`` real slots again; keep each comparison.

    Raises:
        ConfigError: no such candidate, or no saved slot of the expert to replay.
    """
    with open_checkpointer(checkpoint) as saver:
        found = _served_slots(saver, expert_id, version, slots)
    if not found:
        raise ConfigError(
            expert_id, f"no saved run has a finished slot of {expert_id} without dependencies to answer again"
        )
    results = []
    with serving(expert_id, version):
        for thread_id, state, spec in found:
            result = _replay(thread_id, state, spec, expert_id, context)
            keep_shadow(expert_id, version, asdict(result))
            results.append(result)
            if progress is not None:
                progress(result)
    return results


def _served_slots(saver: Any, expert_id: str, version: str, limit: int) -> list[tuple[str, Passport, SlotSpec]]:
    graph = scratch_graph(saver)
    found: list[tuple[str, Passport, SlotSpec]] = []
    for thread_id in list_threads(saver, THREADS_READ):
        values = graph.get_state({"configurable": {"thread_id": thread_id}}).values
        if not values or values.get("framework") is None:
            continue
        state = Passport.model_validate(values)
        assert state.framework is not None
        for spec in state.framework.slots:
            decision = state.routing.get(spec.id)
            result = state.results.get(spec.id)
            if (
                decision is not None
                and decision.expert == expert_id
                and decision.version != version
                and not spec.deps
                and result is not None
                and result.quality is not None
            ):
                found.append((thread_id, state, spec))
        if len(found) >= limit:
            break
    return found[:limit]


def _replay(
    thread_id: str, state: Passport, spec: SlotSpec, expert_id: str, context: RunContext | dict[str, Any] | None
) -> ShadowResult:
    served = state.results[spec.id]
    assert served.quality is not None
    slot = spec.model_dump(mode="json", exclude={"deps", "can_reference", "reference_hints"})
    slot["expert"] = expert_id
    title = f"Shadow of {expert_id}: {spec.title}"
    replay, seconds = run_one_slot(
        scratch_graph(), state.task, slot, title, source=f"shadow:{expert_id}", context=context
    )
    mine = replay.results.get(spec.id)
    served_score = score(served.quality.checks)
    if mine is None or mine.quality is None:
        mine_score, failed = 0.0, ["the candidate delivered no checked answer"]
    else:
        mine_score, failed = score(mine.quality.checks), [c.name for c in mine.quality.failed_checks]
    winner, judged = _winner(served_score, mine_score, served.raw, mine.raw if mine else "", spec, context)
    decision = state.routing[spec.id]
    return ShadowResult(
        thread_id=thread_id,
        slot_id=spec.id,
        served_version=decision.version or "?",
        served_score=served_score,
        candidate_score=mine_score,
        winner=winner,
        judged=judged,
        seconds=seconds,
        failed_checks=failed,
    )


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
