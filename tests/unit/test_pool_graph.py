"""The memory pool inside whole runs (fake experts with footprints): waiting and LRU eviction under a small
budget, preloading the next slots' models, and emergency eviction of a run-away generation that re-queues its
slot without losing any output."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver

from experts.pool.pooled import clear_backends
from experts.pool.residency import pool
from graph import build_graph
from graph.persistence import serializer
from state import Passport, SlotStatus
from state.framework import load_framework_file
from state.io import RunInput, RunOptions
from tests.scopes import persona_scopes

CODER_MODEL = "qwen2.5-coder-1.5b"  # python_coder's own model (a true expert); general_reasoning a persona here
OVERHEAD_MB = 1024  # the cpu profile's overhead: --memory-limit = overhead + the models' budget


@pytest.fixture(autouse=True)
def _fresh_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # every shipped expert has a model of its own (docs/models.md): two models take turns here only with a persona
    monkeypatch.setenv("COE_EXPERT_SCOPES", str(persona_scopes(tmp_path, "general_reasoning")))
    clear_backends()
    yield
    clear_backends()


def _run(tmp_path: Path, slots: list[dict[str, Any]], script: dict[str, Any], **ctx: Any) -> Passport:
    fw_path = tmp_path / "fw.yaml"
    fw_path.write_text(yaml.safe_dump({"id": "pool", "title": "Pool test", "slots": slots}), encoding="utf-8")
    script_path = tmp_path / "script.yaml"
    script_path.write_text(yaml.safe_dump(script), encoding="utf-8")
    fw = load_framework_file(str(fw_path))
    options = RunOptions(framework=fw.model_dump(mode="json"), framework_source=str(fw_path))
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    graph = build_graph(InMemorySaver(serde=serializer()))
    context = {"backend": "fake", "fake_script": str(script_path), "profile": "cpu", **ctx}
    graph.invoke(RunInput(task="Write a small tool", options=options).model_dump(mode="json"), config, context=context)
    return Passport.model_validate(graph.get_state(config).values)


def _models() -> dict[str, dict[str, Any]]:
    return {m["model"]: m for m in pool().status()["models"]}


def _slot(sid: str, expert: str, deps: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": sid,
        "title": f"Part {sid}",
        "description": f"Write part {sid}.",
        "expert": expert,
        "deps": deps or [],
    }


def test_two_models_that_do_not_fit_together_take_turns_and_every_slot_completes(tmp_path: Path) -> None:
    slots = [_slot(f"c{i}", "python_coder") for i in range(2)] + [_slot(f"g{i}", "general_reasoning") for i in range(2)]
    script = {
        "default": {"delay": 0.3},
        "models": {"base": {"memory_mb": 300, "load_delay": 0.05}, CODER_MODEL: {"memory_mb": 300}},
    }
    state = _run(tmp_path, slots, script, memory_limit_mb=OVERHEAD_MB + 400, max_parallel=4)
    assert {s: st.status for s, st in state.slot_states.items()} == dict.fromkeys(
        ["c0", "c1", "g0", "g1"], SlotStatus.DONE
    )
    assert state.routing["c0"].model == CODER_MODEL and state.routing["g0"].model is None
    models = _models()
    base, coder = models["fake:base"], models[f"fake:{CODER_MODEL}"]
    assert base["evictions"] + coder["evictions"] == 1 and base["loads"] == coder["loads"] == 1
    assert pool().status()["waits"] >= 1  # the second model's slots waited while the first was in use
    # ... so one model's two slots ran together, and the other's only after them.
    done = {sid: st.finished_at for sid, st in state.slot_states.items()}
    first, second = sorted([["c0", "c1"], ["g0", "g1"]], key=lambda pair: max(done[s] for s in pair))  # type: ignore[type-var]
    assert min(done[s] for s in second) > max(done[s] for s in first)  # type: ignore[operator]


def test_the_next_slots_model_is_preloaded_while_the_current_slot_runs(tmp_path: Path) -> None:
    slots = [_slot("first", "general_reasoning"), _slot("second", "python_coder", deps=["first"])]
    script = {
        "rules": [{"slot": "first", "delay": 1.0}],
        "models": {"base": {"memory_mb": 100}, CODER_MODEL: {"memory_mb": 100, "load_delay": 0.5}},
    }
    state = _run(tmp_path, slots, script, memory_limit_mb=OVERHEAD_MB + 1000)
    assert state.slot_states["second"].status == SlotStatus.DONE
    coder = _models()[f"fake:{CODER_MODEL}"]
    assert coder["preloads"] == 1 and coder["loads"] == 1 and coder["hits"] == 1  # the slot found it loaded


def test_no_preloading_under_a_profile_without_it(tmp_path: Path) -> None:
    slots = [_slot("first", "general_reasoning"), _slot("second", "python_coder", deps=["first"])]
    script = {"rules": [{"slot": "first", "delay": 0.3}], "models": {CODER_MODEL: {"memory_mb": 100}}}
    _run(tmp_path, slots, script, profile="cpu-small")
    coder = _models()[f"fake:{CODER_MODEL}"]
    assert coder["preloads"] == 0 and coder["loads"] == 1


def test_a_run_away_generation_is_stopped_and_its_slot_runs_again_while_the_other_slot_finishes(
    tmp_path: Path,
) -> None:
    slots = [_slot("runaway", "python_coder"), _slot("steady", "general_reasoning")]
    script = {
        "rules": [
            {"slot": "runaway", "first_calls": [{"delay": 4.0, "grow_mb": 600}]},
            {"slot": "steady", "delay": 1.5},
        ],
        "models": {"base": {"memory_mb": 50}, CODER_MODEL: {"memory_mb": 50}},
    }
    state = _run(tmp_path, slots, script, memory_limit_mb=OVERHEAD_MB + 400, max_parallel=2)
    assert state.slot_states["runaway"].status == SlotStatus.DONE
    assert state.slot_states["runaway"].evictions == 1
    assert state.slot_states["steady"].status == SlotStatus.DONE and state.slot_states["steady"].evictions == 0
    assert "runaway" in state.results and "steady" in state.results
    assert [e.slot_id for e in state.ledger if e.action == "evicted"] == ["runaway"]
    assert any("memory pressure" in n.message and n.slot_id == "runaway" for n in state.notices)
    coder = _models()[f"fake:{CODER_MODEL}"]
    assert coder["emergency_evictions"] == 1 and coder["loads"] == 2
    assert pool().status()["peak_measured_mb"] > 0.95 * 400


@pytest.mark.slow  # four 3-second runaways
def test_a_slot_that_keeps_running_away_fails_with_advice_after_three_evictions(tmp_path: Path) -> None:
    slots = [_slot("runaway", "python_coder")]
    script = {"rules": [{"slot": "runaway", "delay": 3.0, "grow_mb": 500}], "models": {CODER_MODEL: {"memory_mb": 50}}}
    state = _run(tmp_path, slots, script, memory_limit_mb=OVERHEAD_MB + 300)
    st = state.slot_states["runaway"]
    assert st.status == SlotStatus.FAILED and st.evictions == 4
    assert st.error is not None and "--memory-limit" in st.error and "4 times" in st.error


def test_a_model_larger_than_the_budget_fails_its_slot_with_a_clear_error(tmp_path: Path) -> None:
    slots = [_slot("big", "python_coder"), _slot("small", "general_reasoning")]
    script = {"models": {CODER_MODEL: {"memory_mb": 900}, "base": {"memory_mb": 10}}}
    state = _run(tmp_path, slots, script, memory_limit_mb=OVERHEAD_MB + 500)
    assert state.slot_states["big"].status == SlotStatus.FAILED
    assert "needs about 900 MiB" in (state.slot_states["big"].error or "")
    assert state.slot_states["small"].status == SlotStatus.DONE
