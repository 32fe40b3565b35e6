"""The execute_slots node called directly: partial updates, blocking, re-queueing of stale slots."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from engine.scheduler import release
from nodes.execute_slots import execute_slots
from state import Passport, SlotStatus
from state.context import resolve_settings
from state.framework import load_framework_file
from state.passport import Mission, RunInfo, SlotState, utcnow
from tests.conftest import FIXTURES


def _state(**slot_states: SlotState) -> Passport:
    fw = load_framework_file(str(FIXTURES / "branchy.yaml"))
    states = {s.id: SlotState() for s in fw.slots} | slot_states
    return Passport(
        task="t",
        run=RunInfo(thread_id="x", run_id=str(uuid.uuid4()), created_at=utcnow()),
        mission=Mission(task="t"),
        settings=resolve_settings({"backend": "fake"}, env={}),
        framework=fw,
        slot_states=states,
    )


def _drain(state: Passport) -> Passport:
    """Apply execute_slots updates until nothing is pending or running (what the graph loop does)."""
    for _ in range(20):
        update: dict[str, Any] = execute_slots(state, Runtime())
        merged = state.model_dump()
        for key in ("slot_states", "results"):
            merged[key] = {**merged[key], **{k: v.model_dump() for k, v in update.get(key, {}).items()}}
        merged["ledger"] = merged["ledger"] + [e.model_dump() for e in update.get("ledger", [])]
        state = Passport.model_validate(merged)
        if all(st.status not in (SlotStatus.PENDING, SlotStatus.IN_PROGRESS) for st in state.slot_states.values()):
            return state
    raise AssertionError("did not converge")


def test_first_round_dispatches_only_ready_slots_and_returns_a_partial_update() -> None:
    state = _state()
    events: list[Any] = []
    update = execute_slots(state, Runtime(stream_writer=events.append))
    assert set(update) <= {"slot_states", "results", "assists", "ledger", "notices", "updated_at"}
    # A and C have no deps; B and D must not have been dispatched yet.
    assert "B" not in update["slot_states"] and "D" not in update["slot_states"]
    finished = set(update.get("results", {}))
    assert finished and finished <= {"A", "C"}
    assert set(update["assists"]) == finished  # every finished slot reports its assists (none here)
    assert {e["slot"] for e in events if e["event"] == "slot_dispatched"} == {"A", "C"}
    assert state.run is not None
    release(state.run.run_id)


def test_stale_in_progress_slot_from_a_dead_process_is_requeued() -> None:
    done = SlotState(status=SlotStatus.DONE)
    state = _state(A=done, C=done, B=SlotState(status=SlotStatus.IN_PROGRESS))
    # B is "in progress" in the checkpoint, but no scheduler in this process knows it: it is run again.
    from state.outline import parse_output

    state = state.model_copy(
        update={"results": {sid: parse_output("## Outline\n1. a\n2. b\n3. c\n", sid, "g") for sid in "AC"}}
    )
    final = _drain(state)
    assert final.slot_states["B"].status == SlotStatus.DONE
    assert [e.slot_id for e in final.ledger if e.action == "requeue"] == ["B"]
    assert final.slot_states["D"].status == SlotStatus.DONE


def test_failed_dependency_blocks_pending_descendants() -> None:
    state = _state(A=SlotState(status=SlotStatus.FAILED, error="x"))
    final = _drain(state)
    assert final.slot_states["B"].status == SlotStatus.BLOCKED and final.slot_states["B"].blocked_by == ["A"]
    # D is downstream of B (blocked) and of A (failed): the failed root is named.
    assert final.slot_states["D"].blocked_by == ["A"]
    assert final.slot_states["C"].status == SlotStatus.DONE
