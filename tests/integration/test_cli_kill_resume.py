"""kill -9 in the middle of `coe run`, then `coe resume`: finished slots are not run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURES, POSTGRES_URL, read_calls

ROOT = Path(__file__).resolve().parents[2]


def _coe(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def _kill_and_resume(url: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    script = tmp_path / "script.yaml"
    # D (which needs A, B, C) is slow, so the process is killed while D runs and A, B, C are saved.
    script.write_text(
        yaml.safe_dump({"calls_log": str(calls), "rules": [{"slot": "C", "delay": 0.3}, {"slot": "D", "delay": 30}]})
    )
    env = {
        **os.environ,
        "COE_HOME": str(tmp_path / "home"),
        "COE_BACKEND": "fake",
        "COE_FAKE_SCRIPT": str(script),
    }
    thread = f"kill-{uuid.uuid4()}"
    base = ["--checkpoint", url]
    proc = _coe(
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
        _wait_for(lambda: "D" in read_calls(calls), timeout=60)
        time.sleep(0.3)  # let the super-step that recorded A, B and C commit
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert sorted(read_calls(calls)) == ["A", "B", "C", "D"]

    # Resume with a fast D.
    script.write_text(yaml.safe_dump({"calls_log": str(calls)}))
    resumed = _coe("resume", thread, "--json", *base, env=env)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert sorted(read_calls(calls)) == ["A", "B", "C", "D", "D"], "only the unfinished slot may run again"
    summary = json.loads(out)
    assert summary["status"] == "completed"
    assert [s["status"] for s in summary["slots"]] == ["done"] * 4
    for title in ("Requirements", "Design", "Risks", "Plan"):
        assert f"## {title}" in summary["document"]

    show = subprocess.run(
        [sys.executable, "-m", "cli", "show", thread, *base],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert show.returncode == 0, show.stderr
    assert "status:  completed" in show.stdout
    assert show.stdout.count("| generate |") == 4  # the ledger holds one finished generation per slot


def test_kill_9_then_resume_sqlite(tmp_path: Path) -> None:
    _kill_and_resume(f"sqlite://{tmp_path / 'runs.sqlite'}", tmp_path)


@pytest.mark.integration
@pytest.mark.postgres
def test_kill_9_then_resume_postgres(tmp_path: Path) -> None:
    _kill_and_resume(POSTGRES_URL, tmp_path)
