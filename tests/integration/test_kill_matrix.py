"""The kill -9 matrix: SIGKILL ``coe run`` at 16 points of a six-slot run (13 on Postgres), resume each.

Every case starts ``coe run --framework tests/fixtures/wide.yaml`` as its own process on the fake backend,
kills it with SIGKILL at one point, reads the saved state (``next`` node, slots saved as done), then runs a plain
``python -m cli resume THREAD``. Each resumed run must complete; no slot saved as done may be called again
(the fake backend's calls log counts every call); every other slot runs exactly once more; the ledger holds one
generation per slot; and the document has the same headings, in the same order, as an uninterrupted run.

How the points are hit exactly:

* points inside a slot: the fake backend sleeps 30 s for the named slots and the test kills the process as
  soon as the calls log shows the slots it waits for (the log is written before the sleep);
* points between or inside the harness' nodes last milliseconds, so the killed process is
  ``tests/integration/paused_cli.py``: the same ``coe`` command with one hook that stops at a named place
  (start or end of a node, end of a slot's work) and signals the test, which then sends SIGKILL.

The cases run in a small thread pool (each on its own thread id) to keep the matrix fast.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, POSTGRES_URL, read_calls
from tests.integration.cli_proc import (
    coe,
    coe_env,
    coe_run,
    headings,
    kill_9,
    wait_while_running,
    write_fake_script,
)

pytestmark = pytest.mark.slow

FRAMEWORK = FIXTURES / "wide.yaml"
SLOTS = ("A", "B", "C", "D", "E", "F")
TASK = "Plan a web service"
SLOW = 30.0
"""A delayed slot sleeps this long: far longer than any case needs, so the kill always lands inside it."""
WORKERS = 4


@dataclass(frozen=True)
class KillPoint:
    """Where to kill, and what the saved state must look like afterwards."""

    name: str
    next: str
    """The node LangGraph will run next, read from the saved state after the kill."""
    done: str = ""
    """Slots saved as done at the kill."""
    called: str = ""
    """Slots the fake backend was called for before the kill."""
    pause: str | None = None
    """A ``paused_cli`` hook; None: the plain command, killed once every slot in ``called`` is in the calls log."""
    slow: str = ""
    """Slots the fake backend answers only after ``SLOW`` seconds in the killed process."""
    twin: bool = False
    """Leaves the same saved state as the point before it (they differ only in the killed process' memory):
    run on SQLite only, since what a second backend adds is how it saves."""


POINTS = (
    KillPoint("in guard", "guard", pause="enter:guard"),
    KillPoint("in scope", "scope", pause="enter:scope"),
    KillPoint("in select_template", "select_template", pause="enter:select_template"),
    KillPoint("in adapt_template", "adapt_template", pause="enter:adapt_template"),
    KillPoint("in route_slots", "route_slots", pause="enter:route_slots"),
    KillPoint("in confirm_plan", "confirm_plan", pause="enter:confirm_plan"),
    KillPoint("first slot running", "execute_slots", called="A", slow="A"),
    KillPoint("first slot finished, not saved", "execute_slots", called="A", pause="slot_done:A", twin=True),
    KillPoint("between super-steps, first slot saved", "execute_slots", "A", "A", pause="enter:execute_slots#2"),
    KillPoint("three parallel slots running", "execute_slots", "A", "ABCD", slow="BCD"),
    KillPoint("one parallel slot saved, two running", "execute_slots", "AC", "ABCD", "enter:execute_slots#3", "BD"),
    KillPoint("join slot running beside a parallel slot", "execute_slots", "ABC", "ABCDE", slow="DE"),
    KillPoint("last slot running", "execute_slots", "ABCDE", "ABCDEF", slow="F"),
    KillPoint("last slot finished, not saved", "execute_slots", "ABCDE", "ABCDEF", pause="slot_done:F", twin=True),
    KillPoint("in check_parts", "check_parts", "ABCDEF", "ABCDEF", pause="enter:check_parts"),
    KillPoint("in assemble", "assemble", "ABCDEF", "ABCDEF", pause="enter:assemble"),
    KillPoint("assemble finished, not saved", "assemble", "ABCDEF", "ABCDEF", pause="leave:assemble", twin=True),
)

POSTGRES_POINTS = tuple(p for p in POINTS if not p.twin)


@dataclass
class Outcome:
    """What one case observed."""

    thread: str
    next: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    called: list[str] = field(default_factory=list)
    resume_rc: int | None = None
    resume_err: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    calls_after: list[str] = field(default_factory=list)
    generations: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    error: BaseException | None = None


def _saved(url: str, thread: str) -> tuple[list[str], list[str], list[Any]]:
    """The saved run: next nodes, slots saved as done, ledger."""
    from graph import build_graph, open_checkpointer
    from state.enums import SlotStatus
    from state.passport import Passport

    with open_checkpointer(url) as saver:
        snapshot = build_graph(saver).get_state({"configurable": {"thread_id": thread}})
    assert snapshot.values, f"nothing saved for {thread}"
    state = Passport.model_validate(snapshot.values)
    done = sorted(s for s, st in state.slot_states.items() if st.status == SlotStatus.DONE)
    return list(snapshot.next), done, list(state.ledger)


def _case(point: KillPoint, url: str, tmp: Path) -> Outcome:
    tmp.mkdir(parents=True)
    calls = tmp / "calls.jsonl"
    script = write_fake_script(tmp / "script.yaml", calls, {s: SLOW for s in point.slow})
    env = coe_env(tmp / "home", script)
    out = Outcome(thread=f"matrix-{uuid.uuid4()}")
    start = time.monotonic()
    try:
        args = ["run", TASK, "--framework", str(FRAMEWORK), "--thread-id", out.thread, "--checkpoint", url]
        marker = tmp / "paused"
        if point.pause is not None:
            proc = coe(
                "--pause",
                point.pause,
                "--marker",
                str(marker),
                "--",
                *args,
                env=env,
                module="tests.integration.paused_cli",
            )
        else:
            proc = coe(*args, env=env)
        try:
            reached = lambda: set(point.called) <= set(read_calls(calls))  # noqa: E731
            if point.pause is not None:
                wait_while_running(proc, marker.exists, 90, f"pause {point.pause}")
            # Paused or not, the slot workers dispatched before the point must have called the backend: a worker
            # thread may start after the main thread reached the pause (seen once in CI, on a loaded machine).
            wait_while_running(proc, reached, 90, f"calls {point.called}")
            kill_9(proc)
        finally:
            if proc.returncode is None:
                proc.kill()
                proc.communicate(timeout=30)
        out.called = sorted(read_calls(calls))
        out.next, out.done, _ = _saved(url, out.thread)

        write_fake_script(script, calls)  # the resumed process answers every slot at once
        resumed = coe_run("resume", out.thread, "--json", "--checkpoint", url, env=env)
        out.resume_rc, out.resume_err = resumed.returncode, resumed.stderr
        if resumed.returncode == 0:
            out.summary = json.loads(resumed.stdout)
        out.calls_after = sorted(read_calls(calls)[len(out.called) :])
        _, _, ledger = _saved(url, out.thread)
        for entry in ledger:
            if entry.action == "generate" and entry.slot_id:
                out.generations[entry.slot_id] = out.generations.get(entry.slot_id, 0) + 1
    except BaseException as exc:  # reported by the case's own test
        out.error = exc
    out.seconds = time.monotonic() - start
    return out


def _reference(url: str, tmp: Path, thread: str) -> list[str]:
    """Headings of an uninterrupted run of the same plan."""
    tmp.mkdir(parents=True)
    calls = tmp / "calls.jsonl"
    env = coe_env(tmp / "home", write_fake_script(tmp / "script.yaml", calls))
    done = coe_run(
        "run", TASK, "--framework", str(FRAMEWORK), "--thread-id", thread, "--json", "--checkpoint", url, env=env
    )
    assert done.returncode == 0, done.stderr
    assert sorted(read_calls(calls)) == list(SLOTS)
    return headings(json.loads(done.stdout)["document"])


@dataclass
class Matrix:
    """All cases of one backend, run in parallel once per module."""

    reference: list[str]
    outcomes: dict[str, Outcome]
    seconds: float
    threads: list[str]
    """Every thread the matrix saved (the reference run's included)."""


def _matrix(url: str, tmp: Path, points: tuple[KillPoint, ...]) -> Matrix:
    start = time.monotonic()
    ref_thread = f"matrix-ref-{uuid.uuid4()}"
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        ref = pool.submit(_reference, url, tmp / "reference", ref_thread)
        futures = {p.name: pool.submit(_case, p, url, tmp / f"case{i:02d}") for i, p in enumerate(points)}
        outcomes = {name: f.result() for name, f in futures.items()}
        reference = ref.result()
    threads = [ref_thread, *(o.thread for o in outcomes.values())]
    return Matrix(reference, outcomes, time.monotonic() - start, threads)


@pytest.fixture(scope="module")
def sqlite_matrix(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    tmp = tmp_path_factory.mktemp("kill-matrix-sqlite")
    return _matrix(f"sqlite://{tmp / 'runs.sqlite'}", tmp, POINTS)


@pytest.fixture(scope="module")
def postgres_matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    matrix = _matrix(POSTGRES_URL, tmp_path_factory.mktemp("kill-matrix-postgres"), POSTGRES_POINTS)
    yield matrix
    from graph.persistence import open_checkpointer

    with open_checkpointer(POSTGRES_URL) as saver:  # leave the shared test database as we found it
        for thread in matrix.threads:
            saver.delete_thread(thread)


def _check(point: KillPoint, matrix: Matrix) -> None:
    out = matrix.outcomes[point.name]
    if out.error is not None:
        raise out.error
    # The kill landed where it was aimed.
    assert out.next == [point.next], f"next after the kill: {out.next}"
    assert out.done == sorted(point.done), f"slots saved as done at the kill: {out.done}"
    assert out.called == sorted(point.called), f"fake backend calls before the kill: {out.called}"
    # The resumed run completes, runs every unsaved slot exactly once and no saved slot again.
    assert out.resume_rc == 0, out.resume_err
    assert out.summary["status"] == "completed"
    assert [s["status"] for s in out.summary["slots"]] == ["done"] * len(SLOTS)
    assert out.calls_after == sorted(set(SLOTS) - set(point.done)), f"calls after resume: {out.calls_after}"
    assert out.generations == dict.fromkeys(SLOTS, 1), f"ledger generations per slot: {out.generations}"
    assert headings(out.summary["document"]) == matrix.reference


def _distinct(matrix: Matrix) -> set[tuple[str, ...]]:
    """Distinct saved states reached at the kills: (next node, slots done, slots called)."""
    return {
        (*o.next, "".join(o.done), "".join(o.called)) for o in matrix.outcomes.values() if o.error is None and o.next
    }


def _report(backend: str, matrix: Matrix) -> None:
    """Per-case timings (shown with ``pytest -s``)."""
    print(f"\nkill matrix on {backend}: {len(matrix.outcomes)} cases in {matrix.seconds:.1f} s ({WORKERS} at a time)")
    for name, o in matrix.outcomes.items():
        print(f"  {o.seconds:5.1f} s  {name:<42} next={','.join(o.next)} done={''.join(o.done) or '-'}")


@pytest.mark.parametrize("point", POINTS, ids=[p.name for p in POINTS])
def test_kill_point_sqlite(point: KillPoint, sqlite_matrix: Matrix) -> None:
    _check(point, sqlite_matrix)


def test_matrix_reaches_ten_distinct_points_sqlite(sqlite_matrix: Matrix) -> None:
    _report("sqlite", sqlite_matrix)
    assert len(_distinct(sqlite_matrix)) >= 10, sorted(_distinct(sqlite_matrix))


@pytest.mark.postgres
@pytest.mark.parametrize("point", POSTGRES_POINTS, ids=[p.name for p in POSTGRES_POINTS])
def test_kill_point_postgres(point: KillPoint, postgres_matrix: Matrix) -> None:
    _check(point, postgres_matrix)


@pytest.mark.postgres
def test_matrix_reaches_ten_distinct_points_postgres(postgres_matrix: Matrix) -> None:
    _report("postgres", postgres_matrix)
    assert len(_distinct(postgres_matrix)) >= 10, sorted(_distinct(postgres_matrix))
