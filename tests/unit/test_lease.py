"""The thread lease in one process, on a SQLite file: refused while held, renewed, released, expired, lost."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from graph.lease import DEFAULT_SECONDS, LeaseLostError, ThreadBusyError, lease_seconds, thread_lease
from graph.persistence import open_checkpointer
from state.errors import ConfigError


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.sqlite"


@pytest.fixture
def two(db: Path) -> Iterator[tuple[BaseCheckpointSaver[str], BaseCheckpointSaver[str]]]:
    """Two savers on one file, as two processes would have."""
    with open_checkpointer(f"sqlite://{db}") as a, open_checkpointer(f"sqlite://{db}") as b:
        yield a, b


def _rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT thread_id, token, host, pid FROM coe_leases").fetchall()


def _plant(db: Path, thread: str, host: str, pid: int, expires_in: float) -> None:
    """A lease row as another holder would have left it."""
    now = time.time()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO coe_leases VALUES (?, 'theirs', ?, ?, ?, ?)", (thread, host, pid, now - 60, now + expires_in)
        )


def test_a_second_runner_is_refused_naming_the_holder(two: tuple[BaseCheckpointSaver[str], ...], db: Path) -> None:
    a, b = two
    with thread_lease(a, "t", seconds=5) as lease:
        assert lease.holder is not None and lease.holder.pid == os.getpid()
        with pytest.raises(ThreadBusyError) as refused, thread_lease(b, "t", seconds=5):
            pytest.fail("a held thread was leased twice")
        message = str(refused.value)
        assert message.startswith(f"thread t is being run by pid {os.getpid()} on host {socket.gethostname()} since ")
        assert "; wait for it or, if that process is gone, retry after " in message
        assert (refused.value.holder.host, refused.value.holder.started_at) == (
            socket.gethostname(),
            lease.holder.started_at,
        )
        with thread_lease(b, "other", seconds=5):  # another thread is free
            assert len(_rows(db)) == 2
    assert _rows(db) == []  # released
    with thread_lease(b, "t", seconds=5):
        pass


def test_the_holder_renews_its_lease_while_it_runs(two: tuple[BaseCheckpointSaver[str], ...]) -> None:
    a, b = two
    with thread_lease(a, "t", seconds=0.4):
        time.sleep(1.2)  # three lease times: without renewal the lease would have expired twice
        with pytest.raises(ThreadBusyError), thread_lease(b, "t", seconds=0.4):
            pass


def test_an_expired_lease_of_another_host_is_taken_over(two: tuple[BaseCheckpointSaver[str], ...], db: Path) -> None:
    a, _ = two
    with thread_lease(a, "warmup"):
        pass  # creates the table
    _plant(db, "t", "elsewhere", 4242, expires_in=0.5)
    with pytest.raises(ThreadBusyError, match="being run by pid 4242 on host elsewhere since "), thread_lease(a, "t"):
        pass
    time.sleep(0.6)
    with thread_lease(a, "t") as lease:
        assert lease.holder is not None and lease.holder.pid == os.getpid()
        assert [(r[2], r[3]) for r in _rows(db)] == [(socket.gethostname(), os.getpid())]


def test_a_lease_whose_process_is_gone_is_taken_over_at_once(
    two: tuple[BaseCheckpointSaver[str], ...], db: Path
) -> None:
    a, _ = two
    with thread_lease(a, "warmup"):
        pass
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _plant(db, "t", socket.gethostname(), int(gone.stdout), expires_in=3600)
    with thread_lease(a, "t") as lease:  # no wait for the hour: the holder's process has ended
        assert lease.holder is not None and lease.holder.pid == os.getpid()
    _plant(db, "u", socket.gethostname(), os.getppid(), expires_in=3600)  # a live process keeps its lease
    with pytest.raises(ThreadBusyError, match=f"pid {os.getppid()} "), thread_lease(a, "u"):
        pass


def test_a_lease_taken_over_is_reported_and_not_released(two: tuple[BaseCheckpointSaver[str], ...], db: Path) -> None:
    a, _ = two
    with thread_lease(a, "t", seconds=0.3) as lease:
        with sqlite3.connect(db) as conn:  # another runner took the thread over (this one stalled past expiry)
            conn.execute("UPDATE coe_leases SET token = 'thief', host = 'elsewhere', pid = 7")
        deadline = time.monotonic() + 5
        with pytest.raises(LeaseLostError, match="thread t was taken over by pid 7 on host elsewhere since "):
            while time.monotonic() < deadline:
                lease.check()
                time.sleep(0.02)
    assert [(r[1], r[2]) for r in _rows(db)] == [("thief", "elsewhere")]  # the new holder keeps it


def test_the_memory_saver_needs_no_lease() -> None:
    """An in-memory run lives and dies with its process: two runs of one thread both enter, nothing is held."""
    saver = InMemorySaver()
    with thread_lease(saver, "t") as first, thread_lease(saver, "t") as second:
        first.check()
        second.check()
        assert first.holder is None and second.holder is None  # no lease taken, so no holder to name
        renewers = [t.name for t in threading.enumerate() if t.name.startswith("coe-lease-")]
        assert renewers == []  # and none renewed in the background


def test_lease_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lease_seconds() == DEFAULT_SECONDS == 30
    monkeypatch.setenv("COE_LEASE_SECONDS", "2.5")
    assert lease_seconds() == 2.5
    assert lease_seconds(9) == 9  # the argument wins
    for bad in ("soon", "0", "-1", "nan", "1e9"):
        monkeypatch.setenv("COE_LEASE_SECONDS", bad)
        with pytest.raises(ConfigError, match="COE_LEASE_SECONDS"):
            lease_seconds()
    with pytest.raises(ConfigError, match="lease seconds"):
        lease_seconds(0)


def test_a_bad_lease_time_is_a_user_error_of_coe_run(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    monkeypatch.setenv("COE_LEASE_SECONDS", "soon")
    result = CliRunner().invoke(app, ["run", "Explain TLS", "--backend", "fake", "--checkpoint", f"sqlite://{db}"])
    assert result.exit_code == 2 and "COE_LEASE_SECONDS: 'soon' is not a number of seconds" in result.stderr
