"""A candidate's share of live slots: queued as runs end, answered in spare time, promoted by its rule."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from experts.catalog import add_expert, load_catalog
from experts.catalog.shadow_queue import MAX_PENDING, enqueue, offered, pending, set_share, share, take
from experts.catalog.versions import add_candidate, history, shadow_tally
from state.errors import ConfigError
from tests.unit.test_expert_sources import EXAM, RUST_SCOPE, expert_dir
from tests.unit.test_expert_versions import GOOD, examine, fake

runner = CliRunner()
SLOT = {"id": "add", "title": "Add", "description": "Write a Rust add function", "expert": "rust_developer"}


def two_versions(tmp_path: Path) -> None:
    add_expert(expert_dir(tmp_path / "v1", exam_yaml=EXAM))
    add_candidate(expert_dir(tmp_path / "v2", {**RUST_SCOPE, "version": "2.0"}, exam_yaml=EXAM))


def run_task(tmp_path: Path, task: str = "Write a Rust add function") -> Any:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"id": "p", "title": "P", "slots": [SLOT]}), encoding="utf-8")
    return runner.invoke(app, ["run", task, "--framework", str(plan), "--ledger"])


def test_a_share_is_a_stable_fraction_of_slots() -> None:
    names = [(f"thread-{i}", f"s{i % 3}") for i in range(2000)]
    hits = sum(offered(t, s, "2.0", 0.25) for t, s in names)
    assert 400 < hits < 600  # a quarter, by the hash
    assert [offered(t, s, "2.0", 0.25) for t, s in names[:50]] == [offered(t, s, "2.0", 0.25) for t, s in names[:50]]
    assert not any(offered(t, s, "2.0", 0.0) for t, s in names) and all(offered(t, s, "2.0", 1.0) for t, s in names)


def test_a_share_needs_a_candidate_and_sane_numbers(tmp_path: Path) -> None:
    two_versions(tmp_path)
    with pytest.raises(ConfigError, match="no candidate version '3.0' to shadow; candidates: 2.0"):
        set_share("rust_developer", "3.0", 0.5)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        set_share("rust_developer", "2.0", 1.5)
    with pytest.raises(ConfigError, match="at least 1 slot"):
        set_share("rust_developer", "2.0", 0.5, promote_after=0)
    given = set_share("rust_developer", "2.0", 0.2, promote_after=10, margin=3)
    assert given is not None and given.line() == "share 20% of live slots; promoted after 10 slots by a margin of 3"
    assert set_share("rust_developer", "2.0", 0.0) is None and share("rust_developer", "2.0") is None
    bad = runner.invoke(app, ["experts", "shadow", "rust_developer", "2.0", "--share", "2"])
    assert bad.exit_code == 2 and "--share" in bad.output and "between 0 and 1" in bad.output
    lone = runner.invoke(app, ["experts", "shadow", "rust_developer"])
    assert lone.exit_code == 2 and "name the expert and its candidate version" in lone.output


def test_live_slots_are_queued_as_runs_end_answered_later_and_the_rule_promotes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any
) -> None:
    two_versions(tmp_path)
    fake(monkeypatch, write_script, good=5, name="exam.yaml")
    assert examine("rust_developer", "--version", "2.0").exit_code == 0  # the rule promotes only on a passing exam
    set_up = runner.invoke(
        app, ["experts", "shadow", "rust_developer", "2.0", "--share", "1", "--promote-after", "2", "--margin", "2"]
    )
    assert set_up.exit_code == 0
    assert "share 100% of live slots; promoted after 2 slots by a margin of 2" in set_up.output
    monkeypatch.setenv(
        "COE_FAKE_SCRIPT", str(write_script({"rules": [{"title": "^Add$", "text": "fn add"}]}, "bad.yaml"))
    )
    for task in ("Write a Rust add function", "Write a Rust function that adds two integers"):
        ran = run_task(tmp_path, task)
        assert ran.exit_code in (0, 3), ran.output
        assert "queued for shadow runs: add for rust_developer v" in ran.output  # the run's ledger says so
    assert [(j["expert"], j["version"], j["slot_id"]) for j in pending()] == [("rust_developer", "2.0", "add")] * 2
    assert shadow_tally("rust_developer", "2.0")["slots"] == 0  # nothing answered inside the runs

    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": [{"title": "^Add$", "text": GOOD}]}, "good.yaml")))
    drained = runner.invoke(app, ["experts", "shadow", "--queued"])
    assert drained.exit_code == 0, drained.output
    assert "2 queued shadow slot(s)" in drained.output and drained.output.count("-> candidate") == 2
    assert "rust_developer v2.0 promoted by its shadow rule" in drained.output
    assert "answered 2; stopped: queue empty; 0 left" in drained.output
    assert load_catalog().get("rust_developer").version == "2.0"
    [step] = history("rust_developer")
    assert step["rule"] == "share 100% of live slots; promoted after 2 slots by a margin of 2" and not step["forced"]
    shown = runner.invoke(app, ["experts", "versions", "rust_developer"]).output
    assert "promote v1.0 -> v2.0 (by its shadow rule: share 100%" in shown


def test_a_rule_met_by_a_candidate_without_a_passing_exam_does_not_promote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any
) -> None:
    from graph.shadow import drain

    two_versions(tmp_path)
    set_share("rust_developer", "2.0", 1.0, promote_after=1, margin=1)
    monkeypatch.setenv("COE_BACKEND", "fake")
    monkeypatch.setenv(
        "COE_FAKE_SCRIPT", str(write_script({"rules": [{"title": "^Add$", "text": "fn add"}]}, "bad.yaml"))
    )
    assert run_task(tmp_path).exit_code in (0, 3)
    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": [{"title": "^Add$", "text": GOOD}]}, "good.yaml")))
    [result], why = drain()
    assert result.winner == "candidate" and not result.promoted and why == "queue empty"
    assert load_catalog().get("rust_developer").version == "1.0" and not history("rust_developer")


def test_the_shadow_run_is_served_by_the_candidate_it_names_not_a_process_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any
) -> None:
    from graph.one_slot import run_one_slot, scratch_graph

    add_expert(expert_dir(tmp_path / "v1"))
    persona = "You are a Rust developer of the second version.\nYou MAY write Rust.\nYou must REFUSE other work."
    add_candidate(expert_dir(tmp_path / "v2", {**RUST_SCOPE, "version": "2.0", "harness_constraints": persona}))
    monkeypatch.setenv("COE_BACKEND", "fake")
    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": [{"title": "^Add$", "text": GOOD}]})))
    graph = scratch_graph()
    shadowed, _ = run_one_slot(graph, "Write a Rust add function", dict(SLOT), "S", source="shadow:rust_developer@2.0")
    plain, _ = run_one_slot(graph, "Write a Rust add function", dict(SLOT), "S")
    assert shadowed.routing["add"].version == "2.0" and plain.routing["add"].version == "1.0"
    assert load_catalog().get("rust_developer").version == "1.0"  # nothing switched for the process


def test_the_queue_drops_repeats_and_stays_bounded(tmp_path: Path) -> None:
    two_versions(tmp_path)
    job = {"expert": "rust_developer", "version": "2.0", "thread_id": "t", "slot_id": "s"}
    assert enqueue(job) and not enqueue(job)  # a resumed run that ends twice queues its slot once
    for i in range(MAX_PENDING + 5):
        enqueue({**job, "thread_id": f"t{i}"})
    assert len(pending()) == MAX_PENDING
    assert (tmp_path / "coe-home" / "experts" / ".shadow" / "queue.sqlite").stat().st_mode & 0o777 == 0o600


def test_the_cli_drain_waits_while_a_run_holds_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any
) -> None:
    from graph import open_checkpointer
    from graph.lease import thread_lease
    from graph.shadow import drain

    two_versions(tmp_path)
    set_share("rust_developer", "2.0", 1.0)
    monkeypatch.setenv("COE_BACKEND", "fake")
    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": [{"title": "^Add$", "text": GOOD}]})))
    assert run_task(tmp_path).exit_code == 0
    with open_checkpointer(None) as saver, thread_lease(saver, "someone-elses-run"):
        done, why = drain()
    assert done == [] and why == "a run is in flight" and len(pending()) == 1
    done, why = drain()
    assert len(done) == 1 and why == "queue empty" and not pending()


def test_the_server_worker_answers_only_when_idle_and_yields_to_a_users_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import server.shadow_worker as worker_module
    from graph.builder import BACKGROUND, activity

    two_versions(tmp_path)
    enqueue({"expert": "rust_developer", "version": "2.0", "thread_id": "t", "slot_id": "s"})
    started = asyncio.Event()
    seen: list[bool] = []

    async def slow(job: dict[str, Any], context: Any) -> Any:
        seen.append(BACKGROUND.get())
        started.set()
        await asyncio.sleep(30)

    async def scenario() -> tuple[int, int, int]:
        worker = worker_module.ShadowWorker(0.0, poll=0.02)
        task = asyncio.create_task(worker.run())
        await asyncio.wait_for(started.wait(), 5)
        activity._change(+1)  # a user's run starts: the worker stops its job and puts it back
        try:
            for _ in range(200):
                if worker.yielded:
                    break
                await asyncio.sleep(0.02)
            left = len(pending())
        finally:
            activity._change(-1)
        monkeypatch.setattr(worker_module, "aanswer", quick)
        for _ in range(200):
            if worker.answered:
                break
            await asyncio.sleep(0.02)
        task.cancel()
        return worker.yielded, left, worker.answered

    async def quick(job: dict[str, Any], context: Any) -> Any:
        from graph.shadow import ShadowResult

        return ShadowResult("rust_developer", "2.0", "t", "s", "1.0", 100.0, 111.0, "candidate", False, 0.1, [])

    monkeypatch.setattr(worker_module, "aanswer", slow)
    yielded, left, answered = asyncio.run(scenario())
    assert (yielded, left, answered) == (1, 1, 1) and seen == [True]
    assert not pending() and activity.in_flight() == 0


def test_the_worker_waits_for_the_idle_time_and_its_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    import server.shadow_worker as worker_module
    from graph.builder import activity

    monkeypatch.setenv(worker_module.IDLE_ENV, "soon")
    with pytest.raises(ConfigError, match="COE_SHADOW_IDLE_SECONDS: must be seconds"):
        worker_module.idle_seconds()
    monkeypatch.setenv(worker_module.IDLE_ENV, "0")
    assert worker_module.idle_seconds() == 0.0
    monkeypatch.delenv(worker_module.IDLE_ENV)
    assert worker_module.idle_seconds() == worker_module.IDLE_DEFAULT
    activity._change(+1)
    activity._change(-1)
    assert activity.idle_seconds() < 1.0 < worker_module.IDLE_DEFAULT  # a run just ended: not idle yet
    assert take() is None  # and an empty queue gives nothing


def test_a_queued_job_is_self_contained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any) -> None:
    two_versions(tmp_path)
    set_share("rust_developer", "2.0", 1.0)
    monkeypatch.setenv("COE_BACKEND", "fake")
    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": [{"title": "^Add$", "text": GOOD}]})))
    assert run_task(tmp_path).exit_code == 0
    taken = take()
    assert taken is not None
    job = taken[1]
    assert job["task"] == "Write a Rust add function" and job["served_version"] == "1.0"
    assert job["served_score"] > 110 and "fn add" in job["served_raw"] and job["slot"]["expert"] == "rust_developer"
    assert json.loads(json.dumps(job)) == job


def test_a_job_whose_candidate_is_gone_is_dropped_when_taken(tmp_path: Path) -> None:
    from experts.catalog.versions import promote

    two_versions(tmp_path)
    enqueue({"expert": "rust_developer", "version": "2.0", "thread_id": "t", "slot_id": "s"})
    promote("rust_developer", "2.0", force=True)  # no longer a candidate: nothing to answer the job with
    assert take() is None and not pending()
