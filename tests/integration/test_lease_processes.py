"""One runner per thread, across processes: `coe run`/`coe resume` take the thread's lease (graph/lease.py).

A second runner of a running thread exits 2 naming the holder; a holder killed with SIGKILL is taken over (at
once on this host, after the lease time from another host); two resumes started together run each remaining
slot once; SIGTERM stops a run like Ctrl+C (exit 130, resumable, lease released).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from graph.lease import ThreadBusyError, thread_lease
from graph.persistence import open_checkpointer
from tests.conftest import FIXTURES, POSTGRES_URL, read_calls
from tests.integration.cli_proc import (
    ROOT,
    coe,
    coe_env,
    coe_run,
    kill_9,
    wait_for,
    wait_while_running,
    write_fake_script,
)

pytestmark = pytest.mark.slow

LEASE_SECONDS = "1.5"
"""Short leases keep the tests fast: a holder renews every 0.5 s, a dead one's lease expires after 1.5 s."""


def _start(url: str, tmp_path: Path, delays: dict[str, float]) -> tuple[subprocess.Popen[str], str, dict[str, str]]:
    """Start `coe run` of the branchy plan (slots A, B, C, then D) and wait until D runs."""
    calls = tmp_path / "calls.jsonl"
    env = coe_env(tmp_path / "home", write_fake_script(tmp_path / "script.yaml", calls, delays))
    env["COE_LEASE_SECONDS"] = LEASE_SECONDS
    thread = f"lease-{uuid.uuid4()}"
    framework = str(FIXTURES / "branchy.yaml")
    proc = coe(
        "run", "Plan a web service", "--framework", framework, "--thread-id", thread, "--checkpoint", url, env=env
    )
    wait_while_running(proc, lambda: "D" in read_calls(calls), 60, "slot D started")
    return proc, thread, env


def _fast_d(tmp_path: Path, delay: float = 0.0) -> None:
    write_fake_script(tmp_path / "script.yaml", tmp_path / "calls.jsonl", {"D": delay} if delay else None)


def _leases(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM coe_leases").fetchone()[0])


def test_a_second_runner_is_refused_and_a_killed_holder_is_taken_over(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'runs.sqlite'}"
    proc, thread, env = _start(url, tmp_path, {"D": 60})
    try:
        for args in (["resume", thread], ["run", "Plan", "--thread-id", thread]):
            started = time.monotonic()
            refused = coe_run(*args, "--checkpoint", url, env=env)
            assert refused.returncode == 2, refused.stderr
            assert time.monotonic() - started < 15  # at once, not after the holder's run
            line = refused.stderr.strip().splitlines()[-1]
            assert line.startswith(f"error: thread {thread} is being run by pid {proc.pid} on host "), line
            assert "; wait for it or, if that process is gone, retry after " in line
        kill_9(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert sorted(read_calls(tmp_path / "calls.jsonl")) == ["A", "B", "C", "D"]  # the refused runners ran nothing
    _fast_d(tmp_path)
    resumed = coe_run("resume", thread, "--json", "--checkpoint", url, env=env)  # at once: the holder is gone
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    assert sorted(read_calls(tmp_path / "calls.jsonl")) == ["A", "B", "C", "D", "D"]  # only D, stopped, again


def _two_resumes_at_once(url: str, tmp_path: Path) -> None:
    proc, thread, env = _start(url, tmp_path, {"D": 60})
    kill_9(proc)
    _fast_d(tmp_path, delay=4.0)  # the winner is still running when the other one asks
    first = coe("resume", thread, "--json", "--checkpoint", url, env=env)
    second = coe("resume", thread, "--json", "--checkpoint", url, env=env)
    results = [p.communicate(timeout=120) for p in (first, second)]
    codes = sorted(p.returncode for p in (first, second))
    assert codes == [0, 2], [err[-2000:] for _, err in results]
    loser = results[[first.returncode, second.returncode].index(2)][1]
    assert f"error: thread {thread} is being run by pid " in loser
    assert sorted(read_calls(tmp_path / "calls.jsonl")) == ["A", "B", "C", "D", "D"]  # no slot ran twice more


def test_two_resumes_at_once_run_each_slot_once_sqlite(tmp_path: Path) -> None:
    _two_resumes_at_once(f"sqlite://{tmp_path / 'runs.sqlite'}", tmp_path)


@pytest.mark.postgres
def test_two_resumes_at_once_run_each_slot_once_postgres(tmp_path: Path) -> None:
    _two_resumes_at_once(POSTGRES_URL, tmp_path)


HOLDER = """
import socket, sys, time
socket.gethostname = lambda: "elsewhere"  # a holder on another machine
from graph.lease import ThreadBusyError, thread_lease
from graph.persistence import open_checkpointer
with open_checkpointer(sys.argv[1]) as saver:
    while True:  # the killed run's lease is on this host's name, not "elsewhere": it must expire first
        try:
            with thread_lease(saver, sys.argv[2], seconds=float(sys.argv[3])):
                print("held", flush=True)
                time.sleep(600)
        except ThreadBusyError:
            time.sleep(0.1)
"""


def test_the_lease_of_a_killed_holder_on_another_host_expires(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    url = f"sqlite://{db}"
    proc, thread, env = _start(url, tmp_path, {"D": 60})
    kill_9(proc)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, thread, LEASE_SECONDS],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n", holder.communicate()[1]
        time.sleep(2 * float(LEASE_SECONDS))  # the holder renews: its lease outlives the lease time
        refused = coe_run("resume", thread, "--checkpoint", url, env=env)
        assert refused.returncode == 2 and f"being run by pid {holder.pid} on host elsewhere" in refused.stderr
        kill_9(holder)
    finally:
        if holder.returncode is None:
            holder.kill()
            holder.communicate(timeout=10)
    killed_at = time.monotonic()
    _fast_d(tmp_path)
    wait_for(lambda: coe_run("resume", thread, "--checkpoint", url, env=env).returncode == 0, 30, "resume")
    assert time.monotonic() - killed_at >= float(LEASE_SECONDS) - 0.5  # the lease had to expire first
    assert sorted(read_calls(tmp_path / "calls.jsonl")) == ["A", "B", "C", "D", "D"]
    assert _leases(db) == 0


def test_sigterm_stops_like_ctrl_c(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    url = f"sqlite://{db}"
    proc, thread, env = _start(url, tmp_path, {"D": 60})
    assert _leases(db) == 1
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err[-2000:]
    assert f"interrupted; resume with: coe resume {thread}" in err
    assert "Traceback" not in err
    assert _leases(db) == 0  # released, not left to expire
    _fast_d(tmp_path)
    resumed = coe_run("resume", thread, "--json", "--checkpoint", url, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    assert sorted(read_calls(tmp_path / "calls.jsonl")) == ["A", "B", "C", "D", "D"]


@pytest.mark.postgres
def test_postgres_lease_refuses_renews_and_releases() -> None:
    thread = f"lease-{uuid.uuid4()}"
    with open_checkpointer(POSTGRES_URL) as a, open_checkpointer(POSTGRES_URL) as b:
        with thread_lease(a, thread, seconds=0.6) as lease:
            time.sleep(1.5)  # renewed meanwhile
            with pytest.raises(ThreadBusyError, match=f"thread {thread} is being run by pid "), thread_lease(b, thread):
                pass
            lease.check()
        with thread_lease(b, thread, seconds=0.6):  # released
            pass
        conn = a.conn
        assert conn.execute("SELECT count(*) AS n FROM coe_leases WHERE thread_id = %s", (thread,)).fetchone()["n"] == 0
