"""Circuit breakers at dispatch: a failing expert trips, later slots go to general_reasoning (ledger + notice)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import yaml
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

from engine.scheduler import release
from experts.catalog import GENERAL_EXPERT
from experts.pool.breaker import BreakerPolicy, BreakerState, breakers
from graph import build_graph
from nodes.execute_slots import execute_slots
from state import Passport, SlotStatus
from state.context import resolve_settings
from state.framework import load_framework_file
from state.io import RunInput, RunOptions
from state.passport import Mission, RoutingDecision, RunInfo, SlotState, utcnow

EXPERT = "python_coder"


def _framework(tmp_path: Path, slots: list[dict[str, Any]], name: str = "fw.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"id": "breaker", "title": "Breaker test", "slots": slots}), encoding="utf-8")
    return path


def _run(framework: Path, script: Path, thread: str, **ctx: Any) -> Passport:
    graph = build_graph(InMemorySaver())
    fw = load_framework_file(str(framework))
    options = RunOptions(framework=fw.model_dump(mode="json"), framework_source=str(framework))
    config = {"configurable": {"thread_id": thread}}
    graph.invoke(
        RunInput(task="Write a small tool", options=options).model_dump(mode="json"),
        config,
        context={"backend": "fake", "fake_script": str(script), **ctx},
    )
    return Passport.model_validate(graph.get_state(config).values)


def _systems(log: Path) -> dict[str, str]:
    """Slot id -> the system prompt of its (last) call."""
    return {c["slot"]: c["system"] for c in map(json.loads, log.read_text().splitlines())}


def test_a_failing_expert_trips_and_later_slots_and_runs_fall_back_until_a_trial_succeeds(
    tmp_path: Path, write_script
) -> None:
    log = tmp_path / "calls.jsonl"
    failing = [{"id": f"X{i}", "title": f"Part {i}", "description": "Write it.", "expert": EXPERT} for i in range(5)]
    slots = [
        *failing,
        {"id": "Z", "title": "Gate", "description": "Wait.", "expert": GENERAL_EXPERT},
        {"id": "Y", "title": "Tool", "description": "Write the tool.", "deps": ["Z"], "expert": EXPERT},
    ]
    script = write_script(
        {
            "calls_log": str(log),
            "rules": [*({"slot": s["id"], "fail": "model crashed"} for s in failing), {"slot": "Z", "delay": 0.3}],
        }
    )
    state = _run(_framework(tmp_path, slots), script, "run-1")

    assert all(state.slot_states[f"X{i}"].status == SlotStatus.FAILED for i in range(5))
    assert breakers.snapshot()[EXPERT].state == BreakerState.OPEN
    # Y was dispatched after the trip: it ran on the generalist, and says so.
    y = state.slot_states["Y"]
    assert y.status == SlotStatus.DONE and y.expert == GENERAL_EXPERT
    assert state.results["Y"].expert == GENERAL_EXPERT
    assert state.routing["Y"].expert == EXPERT  # the router's choice is kept
    entry = next(e for e in state.ledger if e.action == "breaker_fallback")
    assert entry.agent == "harness" and entry.slot_id == "Y" and entry.inputs_summary == EXPERT
    assert "circuit breaker is open (5 failures in 60 s)" in entry.outputs_summary
    notice = next(n for n in state.notices if n.slot_id == "Y" and n.source == "execute_slots")
    assert notice.level == "warning" and GENERAL_EXPERT in notice.message
    systems = _systems(log)
    assert systems["Y"] == systems["Z"] != systems["X0"]  # the generalist's persona, not the expert's
    assert state.summary is not None and {s.id: s.expert for s in state.summary.slots}["Y"] == GENERAL_EXPERT

    # The next run in the same process: the breaker is still open, its slot goes to the generalist.
    one = _framework(tmp_path, [{"id": "W", "title": "Tool", "description": "Write it.", "expert": EXPERT}], "one.yaml")
    ok = write_script({"calls_log": str(log), "rules": []}, "ok.yaml")
    second = _run(one, ok, "run-2")
    assert second.slot_states["W"].expert == GENERAL_EXPERT
    assert [e.slot_id for e in second.ledger if e.action == "breaker_fallback"] == ["W"]
    general_system = _systems(log)["W"]

    # With no cooldown the next slot is the half-open trial: it runs on the expert, succeeds, closes the breaker.
    third = _run(one, ok, "run-3", breaker_cooldown_s=0)
    assert third.slot_states["W"].expert == EXPERT and third.slot_states["W"].status == SlotStatus.DONE
    assert not [e for e in third.ledger if e.action.startswith("breaker")]
    assert _systems(log)["W"] != general_system  # the expert's own persona this time
    assert breakers.snapshot()[EXPERT].state == BreakerState.CLOSED


def _state(tmp_path: Path, slots: list[dict[str, Any]], **ctx: Any) -> Passport:
    fw = load_framework_file(str(_framework(tmp_path, slots)))
    return Passport(
        task="t",
        run=RunInfo(thread_id="x", run_id=str(uuid.uuid4()), created_at=utcnow()),
        mission=Mission(task="t"),
        settings=resolve_settings({"backend": "fake", **ctx}, env={}),
        framework=fw,
        slot_states={s.id: SlotState(expert=s.expert) for s in fw.slots},
        routing={
            s.id: RoutingDecision(slot_id=s.id, expert=s.expert or GENERAL_EXPERT, reason="set") for s in fw.slots
        },
    )


def _trip(expert: str) -> None:
    for _ in range(5):
        breakers.record_failure(expert, BreakerPolicy(), "down")


def _dispatch(state: Passport) -> dict[str, Any]:
    update: dict[str, Any] = {"slot_states": {}, "ledger": [], "notices": []}
    seen: dict[str, SlotState] = {}
    for _ in range(10):  # collect until every dispatched slot finished
        part = execute_slots(state, Runtime())
        for key in ("ledger", "notices"):
            update[key] += part.get(key, [])
        seen.update(part.get("slot_states", {}))
        state = state.model_copy(update={"slot_states": {**state.slot_states, **seen}})
        if all(st.status not in (SlotStatus.PENDING, SlotStatus.IN_PROGRESS) for st in state.slot_states.values()):
            break
    assert state.run is not None
    release(state.run.run_id)
    update["slot_states"] = seen
    return update


def test_half_open_sends_one_trial_to_the_expert_and_the_others_to_the_generalist(tmp_path: Path, write_script) -> None:
    _trip(EXPERT)
    slots = [{"id": s, "title": s, "description": "d", "expert": EXPERT} for s in ("A", "B", "C")]
    slow = write_script({"default": {"delay": 0.3}})  # the trial is still running while B and C are dispatched
    update = _dispatch(_state(tmp_path, slots, breaker_cooldown_s=0, fake_script=str(slow)))
    experts = sorted(st.expert or "" for st in update["slot_states"].values())
    assert experts == sorted([EXPERT, GENERAL_EXPERT, GENERAL_EXPERT])
    assert len([e for e in update["ledger"] if e.action == "breaker_fallback"]) == 2
    assert all("half_open" in e.outputs_summary for e in update["ledger"] if e.action == "breaker_fallback")
    assert breakers.snapshot()[EXPERT].state == BreakerState.CLOSED  # the trial succeeded


def test_when_the_generalist_is_open_too_the_slot_runs_on_it_anyway(tmp_path: Path) -> None:
    _trip(EXPERT)
    _trip(GENERAL_EXPERT)
    slots = [
        {"id": "A", "title": "A", "description": "d", "expert": EXPERT},
        {"id": "G", "title": "G", "description": "d", "expert": GENERAL_EXPERT},
    ]
    update = _dispatch(_state(tmp_path, slots))
    assert {sid: st.expert for sid, st in update["slot_states"].items()} == {"A": GENERAL_EXPERT, "G": GENERAL_EXPERT}
    assert all(st.status == SlotStatus.DONE for st in update["slot_states"].values())
    by_slot = {e.slot_id: e for e in update["ledger"] if e.action.startswith("breaker")}
    assert (
        by_slot["A"].action == "breaker_fallback" and "although its breaker is open too" in by_slot["A"].outputs_summary
    )
    assert by_slot["G"].action == "breaker_ignored" and "runs anyway" in by_slot["G"].outputs_summary
    assert {n.slot_id for n in update["notices"] if n.level == "warning"} == {"A", "G"}


def test_non_compliant_answers_do_not_count_and_zero_disables_the_breaker(tmp_path: Path, write_script) -> None:
    slots = [{"id": f"S{i}", "title": f"S{i}", "description": "d", "expert": EXPERT} for i in range(6)]
    bad = write_script({"rules": [{"title": "S", "text": "no structure at all"}]})
    _dispatch(_state(tmp_path, slots, fake_script=str(bad), max_outline_retries=0))
    assert breakers.snapshot()[EXPERT].failures == 0
    failing = write_script({"rules": [{"title": "S", "fail": "down"}]}, "fail.yaml")
    _dispatch(_state(tmp_path, slots, fake_script=str(failing), breaker_failures=0))
    snap = breakers.snapshot()[EXPERT]
    assert snap.failures == 6 and snap.state == BreakerState.CLOSED
