"""A checkpoint store that cannot be used is a user error: exit 2, one line naming the file and what to do.

Driven through the CLI the way a user meets them: ``--checkpoint`` naming a directory, an unwritable path, a
file of random bytes, a truncated checkpoint file, a locked file (at open and in the middle of a run), a
read-only directory or file, and one damaged run among healthy ones.
"""

from __future__ import annotations

import ctypes
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import graph.persistence
from cli.main import app
from state.errors import ConfigError
from tests.conftest import FIXTURES, read_calls

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def _cp(path: Path | str) -> list[str]:
    return ["--checkpoint", f"sqlite://{path}"]


def _commands(path: Path | str) -> list[list[str]]:
    """Every command that opens the store: a new run, a resume, the listing, a show."""
    return [
        ["run", "Explain TLS", "--backend", "fake", *_cp(path)],
        ["resume", "t-1", *_cp(path)],
        ["threads", *_cp(path)],
        ["show", "t-1", *_cp(path)],
    ]


def _assert_user_error(args: list[str], *needles: str, alone: bool = True) -> str:
    """Exit 2 with one ``error: checkpoint: ...`` line holding ``needles`` (``alone``: and nothing else)."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (args, result.output)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == [lines[-1]] and (len(lines) == 1 or not alone), result.stderr
    assert errors[0].startswith("error: checkpoint: "), errors[0]
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def _real_run(path: Path, thread: str = "t-1", task: str = "Explain TLS") -> None:
    result = runner.invoke(app, ["run", task, "--backend", "fake", "--thread-id", thread, *_cp(path)])
    assert result.exit_code == 0, result.output


def test_a_directory_is_named_with_a_file_to_use_instead(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for args in _commands(folder):
        _assert_user_error(args, f"{folder} is a directory", f"sqlite://{folder / 'runs.sqlite'}")


def test_an_unwritable_path(tmp_path: Path) -> None:
    for args in _commands("/proc/coe/x.sqlite"):  # /proc refuses new directories and files, also to root
        _assert_user_error(args, "/proc/coe", "--checkpoint sqlite:///other.sqlite")
    for args in _commands("/proc/x.sqlite"):
        _assert_user_error(args, "cannot write /proc/x.sqlite", "fix the permissions")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    for args in _commands(blocker / "x.sqlite"):
        _assert_user_error(args, f"{blocker} is a file, not a directory")


def test_a_file_of_random_bytes(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(os.urandom(16384))
    for args in _commands(junk):
        _assert_user_error(args, f"{junk} is damaged", "restore it from a backup", "sqlite:///other.sqlite")
    assert junk.stat().st_size == 16384  # nothing was written over it


def test_a_truncated_or_overwritten_checkpoint_file(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    _real_run(db)
    _real_run(db, "t-2", "Explain SSH")
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0  # all in the main file
    data = db.read_bytes()
    truncated, overwritten = tmp_path / "truncated.sqlite", tmp_path / "overwritten.sqlite"
    truncated.write_bytes(data[: len(data) // 2])
    overwritten.write_bytes(os.urandom(100) + data[100:])  # the header overwritten
    for args in _commands(truncated):
        _assert_user_error(args, f"{truncated} is damaged (database disk image is malformed)")
    for args in _commands(overwritten):
        _assert_user_error(args, f"{overwritten} is damaged (file is not a database)")


def _saved(db: Path) -> dict[str, Any]:
    """What ``coe show`` reads of thread t-1: its status, where it goes on, each slot's status (failure detail)."""
    shown = json.loads(runner.invoke(app, ["show", "t-1", "--json", *_cp(db)]).stdout)
    slots = {sid: st["status"] for sid, st in shown["slot_states"].items()}
    return {"status": shown["status"], "next": shown["next"], "slots": slots}


def _lock(db: Path, how: str, ready: threading.Event, release: threading.Event) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(how)
    ready.set()
    release.wait(30)
    conn.execute("COMMIT")
    conn.close()


def test_a_file_locked_by_another_process_at_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph.persistence, "BUSY_SECONDS", 0.3)
    db = tmp_path / "locked.sqlite"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.close()  # a new file, not yet in WAL mode
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_lock, args=(db, "BEGIN EXCLUSIVE", ready, release))
    holder.start()
    try:
        assert ready.wait(10)
        _assert_user_error(_commands(db)[0], f"{db} is locked by another process", "retry when it is done")
    finally:
        release.set()
        holder.join()
    _real_run(db)  # once the other process is done, the file works


def test_a_file_locked_in_the_middle_of_a_run_stops_it_resumably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(graph.persistence, "BUSY_SECONDS", 0.3)
    monkeypatch.setenv("COE_LEASE_SECONDS", "0.5")  # this process stays alive: its unreleased lease must expire
    db, calls, script = tmp_path / "runs.sqlite", tmp_path / "calls.jsonl", tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"calls_log": str(calls), "rules": [{"slot": "B", "delay": 2.0}]}))
    ready, release = threading.Event(), threading.Event()

    def lock_while_b_runs() -> None:
        deadline = time.monotonic() + 30
        while not {"B", "C"} <= set(read_calls(calls)) and time.monotonic() < deadline:
            time.sleep(0.02)
        # C (a root, beside A) has answered: its result is saved within moments, well before B's (2 s), so the
        # lock falls on B's save, not on C's (on a loaded machine the lock could come first and C ran twice)
        time.sleep(0.5)
        _lock(db, "BEGIN IMMEDIATE", ready, release)  # another writer holds the file when B's result is saved

    holder = threading.Thread(target=lock_while_b_runs)
    holder.start()
    run = ["run", "Plan", "--backend", "fake", "--fake-script", str(script)]
    try:
        _assert_user_error(
            [*run, "--framework", str(FIXTURES / "branchy.yaml"), "--thread-id", "t-1", *_cp(db)],
            f"{db} is locked by another process",
            alone=False,  # the run's progress came first
        )
        assert ready.is_set()
    finally:
        release.set()
        holder.join()
    done_before = set(read_calls(calls))
    assert "B" in done_before and "D" not in done_before
    time.sleep(0.6)
    script.write_text(yaml.safe_dump({"calls_log": str(calls)}))
    resumed = runner.invoke(app, ["resume", "t-1", "--json", *_cp(db)])
    assert resumed.exit_code == 0, (resumed.output, _saved(db), read_calls(calls))
    assert json.loads(resumed.stdout)["status"] == "completed"
    assert read_calls(calls).count("A") == read_calls(calls).count("C") == 1  # saved before the lock: not run again


def test_a_run_stopped_between_a_result_and_its_checkpoint_is_resumable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file locked after a round's result was saved but before the checkpoint after it.

    LangGraph's snapshot then has no ``next`` (the round's task reads as finished); the run is still stopped:
    ``coe threads`` and ``coe show`` say so, and ``coe resume`` goes on from the saved result.
    """
    db, calls, script = tmp_path / "runs.sqlite", tmp_path / "calls.jsonl", tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"calls_log": str(calls), "rules": [{"slot": "B", "delay": 0.5}]}))
    put = graph.persistence.CheckedSqliteSaver.put

    def put_unless_c_is_done(self: graph.persistence.CheckedSqliteSaver, *args: Any) -> Any:
        if "C" in read_calls(calls) and "B" in read_calls(calls):  # the round that finished C saved its result
            raise ConfigError("checkpoint", f"{db} is locked by another process")
        return put(self, *args)

    monkeypatch.setattr(graph.persistence.CheckedSqliteSaver, "put", put_unless_c_is_done)
    run = ["run", "Plan", "--backend", "fake", "--fake-script", str(script), "--thread-id", "t-1", *_cp(db)]
    _assert_user_error(
        [*run, "--framework", str(FIXTURES / "branchy.yaml")], f"{db} is locked by another process", alone=False
    )
    monkeypatch.setattr(graph.persistence.CheckedSqliteSaver, "put", put)  # the stopped run released its lease

    listed = runner.invoke(app, ["threads", "--json", *_cp(db)])
    assert [row["status"] for row in json.loads(listed.stdout)] == ["stopped"], listed.output
    saved = _saved(db)
    assert saved["next"] == ["execute_slots"] and saved["slots"]["C"] == "done"
    resumed = runner.invoke(app, ["resume", "t-1", "--json", *_cp(db)])
    assert resumed.exit_code == 0, resumed.output
    assert "already finished" not in resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    assert read_calls(calls).count("C") == 1  # its saved result was used


def failures_opening_together(threads: int, files: int, open_one: Callable[[int], None]) -> list[str]:
    """Each of ``threads`` threads calls ``open_one(k)`` for k in range(files), all threads at once for each k."""
    together = threading.Barrier(threads)
    failures: list[str] = []

    def open_each() -> None:
        for k in range(files):
            together.wait(timeout=60)
            try:
                open_one(k)
            except Exception as exc:  # any failure, reported below (an exception would end this thread only)
                failures.append(repr(exc))

    workers = [threading.Thread(target=open_each) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return failures


@pytest.mark.slow  # 1,600 files opened
def test_threads_opening_new_files_together_all_succeed(tmp_path: Path) -> None:
    """Switching a new file to WAL fails at once ("database is locked") when another connection switches it too.

    Without the retry about one new file in thirty failed here; 8 threads open 200 new files, each at once.
    """
    from langgraph.checkpoint.base import empty_checkpoint

    def open_one(k: int) -> None:
        with graph.persistence.open_checkpointer(f"sqlite://{tmp_path / f'{k}.sqlite'}") as saver:
            saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {})

    assert failures_opening_together(8, 200, open_one) == []


def test_one_unreadable_run_does_not_hide_the_others(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    _real_run(db, "good", "Explain TLS")
    _real_run(db, "bad", "Explain SSH")
    conn = sqlite3.connect(db)
    conn.execute("UPDATE checkpoints SET checkpoint = X'c1c1c1' WHERE thread_id = 'bad'")
    conn.commit()
    conn.close()
    listed = runner.invoke(app, ["threads", *_cp(db)])
    assert listed.exit_code == 0, listed.output
    assert [line.split()[0] for line in listed.stdout.splitlines()] == ["good"]
    assert listed.stderr.count("\n") == 1 and listed.stderr.startswith("bad  unreadable: ")
    assert f"the saved run 'bad' in {db} cannot be read" in listed.stderr
    rows = json.loads(runner.invoke(app, ["threads", "--json", *_cp(db)]).stdout)
    assert [(r["thread_id"], r["status"]) for r in rows] == [("bad", "unreadable"), ("good", "completed")]
    assert "cannot be read" in rows[0]["error"]
    for command in (["show", "bad"], ["resume", "bad"]):
        _assert_user_error([*command, *_cp(db)], f"the saved run 'bad' in {db} cannot be read")
    assert runner.invoke(app, ["show", "good", *_cp(db)]).exit_code == 0


def _without_root_overrides() -> Callable[[], None] | None:
    """For root: drop the capabilities that ignore file permissions from the child (as a normal user runs it)."""
    if os.geteuid() != 0:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2

    def drop() -> None:
        for cap in (cap_dac_override, cap_dac_read_search):
            if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return drop


@pytest.mark.slow  # a `coe` process per command
@pytest.mark.parametrize("what", ["read-only directory", "read-only file"])
def test_a_read_only_place(tmp_path: Path, what: str) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "runs.sqlite"
    if what == "read-only file":
        _real_run(db)
        db.chmod(0o444)
    folder.chmod(0o555)
    try:
        for args in _commands(db):
            out = subprocess.run(
                [sys.executable, "-m", "cli", *args],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                preexec_fn=_without_root_overrides(),
            )
            assert out.returncode == 2, (args, out.stderr)
            assert "Traceback" not in out.stderr
            assert f"error: checkpoint: cannot write {db} (" in out.stderr and "fix the permissions" in out.stderr
    finally:
        folder.chmod(0o755)


def test_stores_opened_together_on_a_new_file_all_succeed(tmp_path: Path) -> None:
    """The store's set-up runs migrations that are not idempotent (``ALTER TABLE ... ADD COLUMN``): two processes
    setting up one new file at once failed with "duplicate column name: expires_at" (seen in CI's kill matrix).
    """

    def open_one(k: int) -> None:
        with graph.persistence.open_store(f"sqlite://{tmp_path / f'{k}.sqlite'}") as store:
            store.put(("t",), "k", {"v": 1})

    assert failures_opening_together(4, 40, open_one) == []
