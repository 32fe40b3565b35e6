"""kill -9 in the middle of `coe run`, then `coe resume`: finished slots are not run again.

The one-point smoke test; tests/integration/test_kill_matrix.py kills at 15 points on both backends.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, POSTGRES_URL, read_calls
from tests.integration.cli_proc import coe, coe_env, coe_run, kill_9, wait_while_running, write_fake_script

pytestmark = pytest.mark.slow


def _kill_and_resume(url: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    # D (which needs A, B, C) is slow, so the process is killed while D runs and A, B, C are saved.
    script = write_fake_script(tmp_path / "script.yaml", calls, {"C": 0.3, "D": 30})
    env = coe_env(tmp_path / "home", script)
    thread = f"kill-{uuid.uuid4()}"
    base = ["--checkpoint", url]
    proc = coe(
        "run",
        "Plan a web service",
        "--framework",
        str(FIXTURES / "branchy.yaml"),
        "--thread-id",
        thread,
        *base,
        env=env,
    )
    try:
        wait_while_running(proc, lambda: "D" in read_calls(calls), 60, "slot D started")
        time.sleep(0.3)  # nothing more happens: D sleeps; A, B and C were saved before D was dispatched
        kill_9(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert sorted(read_calls(calls)) == ["A", "B", "C", "D"]

    # Resume with a fast D.
    write_fake_script(script, calls)
    resumed = coe_run("resume", thread, "--json", *base, env=env)
    out = resumed.stdout
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(read_calls(calls)) == ["A", "B", "C", "D", "D"], "only the unfinished slot may run again"
    summary = json.loads(out)
    assert summary["status"] == "completed"
    assert [s["status"] for s in summary["slots"]] == ["done"] * 4
    for title in ("Requirements", "Design", "Risks", "Plan"):
        assert f"## {title}" in summary["document"]

    show = coe_run("show", thread, *base, env=env)
    assert show.returncode == 0, show.stderr
    assert "status:  completed" in show.stdout
    assert show.stdout.count("| generate |") == 4  # the ledger holds one finished generation per slot


def test_kill_9_then_resume_sqlite(tmp_path: Path) -> None:
    _kill_and_resume(f"sqlite://{tmp_path / 'runs.sqlite'}", tmp_path)


@pytest.mark.postgres
def test_kill_9_then_resume_postgres(tmp_path: Path) -> None:
    _kill_and_resume(POSTGRES_URL, tmp_path)


def test_kill_9_in_a_follow_up_turn_loses_neither_turn(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    script = write_fake_script(tmp_path / "script.yaml", calls)
    env = coe_env(tmp_path / "home", script)
    thread = f"turns-{uuid.uuid4()}"
    base = ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}", "--framework", str(FIXTURES / "branchy.yaml")]
    first = coe_run("run", "Plan a web service", "--thread", thread, "--json", *base, env=env)
    assert first.returncode == 0, first.stderr
    write_fake_script(script, calls, {"D": 30})  # turn 2's last slot is slow: the process dies in it
    proc = coe("run", "Now plan its monitoring", "--thread", thread, *base, env=env)
    try:
        wait_while_running(proc, lambda: read_calls(calls).count("D") == 2, 60, "turn 2's slot D started")
        kill_9(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate(timeout=10)
    write_fake_script(script, calls)
    resumed = coe_run("resume", thread, "--json", "--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    assert sorted(read_calls(calls)) == sorted(["A", "B", "C", "D"] * 2 + ["D"])  # only turn 2's D ran again
    shown = coe_run("show", thread, "--json", "--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}", env=env)
    state = json.loads(shown.stdout)
    [turn] = state["turns"]
    assert turn["number"] == 1 and turn["task"] == "Plan a web service" and turn["status"] == "completed"
    assert state["mission"]["task"] == "Now plan its monitoring" and state["status"] == "completed"
