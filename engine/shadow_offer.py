"""After a run: offer the slots its experts served to their candidate versions' shadow share.

A slot is offered when its expert has a candidate with a share in force (:mod:`experts.catalog.shadow_queue`),
the slot is done with checked answers and has no dependencies (a slot that read other slots' work cannot be
answered again without them), and the hash of its names falls in the share. An offered slot is queued with what
the shadow worker needs (the task, the slot, the served answer and its check score); the run does nothing else
for it, and nothing the candidate writes reaches the run's document. Exam and shadow runs offer nothing.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from engine.slots.selection import score
from experts.catalog.shadow_queue import enqueue, offered, shares
from state.enums import SlotStatus
from state.passport import PlannedPassport

__all__ = ["NOT_OFFERED", "offer_slots", "replayable", "shadow_job"]

logger = logging.getLogger(__name__)

NOT_OFFERED = ("exam:", "shadow:")
"""Framework sources of runs that are themselves an expert's test: their slots are never offered."""


def offer_slots(state: PlannedPassport) -> list[str]:
    """Queue the run's slots that fall in a candidate's share; returns ``"<slot> for <expert> v<version>"`` each.

    A queue that cannot be written (a read-only home, a locked file) is logged and skipped: the run is not
    failed for a shadow run.
    """
    fw = state.framework
    if fw.source.startswith(NOT_OFFERED):
        return []
    try:
        active = shares()
    except OSError as exc:
        logger.warning("shadow shares not read: %s", exc)
        return []
    queued: list[str] = []
    for spec in fw.slots:
        decision = state.routing.get(spec.id)
        if decision is None or decision.expert not in active or not replayable(state, spec.id):
            continue
        for version, given in active[decision.expert].items():
            if version == decision.version or not offered(state.run.thread_id, spec.id, version, given.share):
                continue
            try:
                added = enqueue(shadow_job(state, spec.id, version))
            except (OSError, sqlite3.Error) as exc:
                logger.warning("slot %s not queued for %s v%s: %s", spec.id, decision.expert, version, exc)
                continue
            if added:
                queued.append(f"{spec.id} for {decision.expert} v{version}")
    return queued


def replayable(state: PlannedPassport, slot_id: str) -> bool:
    """Whether a slot of the run can be answered again alone: routed, done with checked answers, no dependencies."""
    slot_state = state.slot_states.get(slot_id)
    result = state.results.get(slot_id)
    return (
        slot_id in state.routing
        and not state.framework.slot(slot_id).deps
        and result is not None
        and result.quality is not None
        and slot_state is not None
        and slot_state.status == SlotStatus.DONE
    )


def shadow_job(state: PlannedPassport, slot_id: str, version: str) -> dict[str, Any]:
    """What a shadow worker needs to have candidate ``version`` answer slot ``slot_id`` of the run again."""
    spec = state.framework.slot(slot_id)
    decision = state.routing[slot_id]
    served = state.results[slot_id]
    assert served.quality is not None
    slot = spec.model_dump(mode="json", exclude={"deps", "can_reference", "reference_hints"})
    slot["expert"] = decision.expert
    return {
        "expert": decision.expert,
        "version": version,
        "thread_id": state.run.thread_id,
        "slot_id": slot_id,
        "task": state.task,
        "slot": slot,
        "served_version": decision.version or "?",
        "served_score": score(served.quality.checks),
        "served_raw": served.raw,
    }
