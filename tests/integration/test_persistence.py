"""The Passport round-trips through every checkpointer, also when another process reads it back."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from graph import build_graph, open_checkpointer
from graph.persistence import resolve_url
from state import Passport, RunStatus, SlotStatus
from state.errors import ConfigError
from state.framework import load_framework_file
from state.io import RunInput, RunOptions
from state.result import SlotResult
from tests.conftest import FIXTURES, POSTGRES_URL

ROOT = Path(__file__).resolve().parents[2]

READER = """
import json, sys
from graph import build_graph, open_checkpointer
from state import Passport
with open_checkpointer(sys.argv[1]) as saver:
    values = build_graph(saver).get_state({"configurable": {"thread_id": sys.argv[2]}}).values
p = Passport.model_validate(values)
assert type(values["results"]["A"]).__name__ == "SlotResult", type(values["results"]["A"])
print(json.dumps(p.model_dump(mode="json")))
"""


def _run(url: str, thread: str) -> Passport:
    fw = load_framework_file(str(FIXTURES / "branchy.yaml"))
    payload = RunInput(
        task="Plan a service",
        options=RunOptions(framework=fw.model_dump(mode="json"), framework_source="branchy"),
    ).model_dump(mode="json")
    with open_checkpointer(url) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": thread}}
        graph.invoke(payload, config, context={"backend": "fake"})
        values = graph.get_state(config).values
    # Nested models come back as models, not dicts.
    assert isinstance(values["results"]["A"], SlotResult)
    assert values["slot_states"]["A"].status == SlotStatus.DONE
    return Passport.model_validate(values)


def _check_second_process(url: str, thread: str, first: Passport) -> None:
    out = subprocess.run(
        [sys.executable, "-c", READER, url, thread],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == first.model_dump(mode="json")


def test_memory_round_trip() -> None:
    state = _run("memory", "mem")
    assert state.status == RunStatus.COMPLETED and state.document


@pytest.mark.slow
def test_sqlite_round_trip_and_second_process(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'cp.sqlite'}"
    state = _run(url, "sq")
    assert state.status == RunStatus.COMPLETED
    _check_second_process(url, "sq", state)


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_round_trip_and_second_process() -> None:
    thread = f"pg-{uuid.uuid4()}"
    state = _run(POSTGRES_URL, thread)
    assert state.status == RunStatus.COMPLETED
    _check_second_process(POSTGRES_URL, thread, state)


def _follow_up(url: str, thread: str) -> Passport:
    """A second input on a thread that ran: a follow-up turn, read back by a second process."""
    _run(url, thread)
    with open_checkpointer(url) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": thread}}
        graph.invoke({"task": "Now list the open questions of that plan"}, config, context={"backend": "fake"})
        state = Passport.model_validate(graph.get_state(config).values)
    [turn] = state.turns
    assert turn.task == "Plan a service" and sorted(turn.results) == ["A", "B", "C", "D"]
    assert state.status == RunStatus.COMPLETED and state.mission is not None
    assert state.mission.task.startswith("Now list") and "A" not in state.results  # this turn's own results only
    _check_second_process_turns(url, thread, state)
    return state


def _check_second_process_turns(url: str, thread: str, state: Passport) -> None:
    reader = READER.replace('values["results"]["A"]', 'values["turns"][0].results["A"]')
    out = subprocess.run(
        [sys.executable, "-c", reader, url, thread], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == state.model_dump(mode="json")


@pytest.mark.slow
def test_a_follow_up_turn_round_trips_on_sqlite(tmp_path: Path) -> None:
    _follow_up(f"sqlite://{tmp_path / 'cp.sqlite'}", "turns")


@pytest.mark.slow
@pytest.mark.postgres
def test_a_follow_up_turn_round_trips_on_postgres() -> None:
    _follow_up(POSTGRES_URL, f"pg-turns-{uuid.uuid4()}")


def test_default_url_is_a_sqlite_file_in_the_data_dir(tmp_path: Path) -> None:
    assert resolve_url(None) == f"sqlite://{tmp_path / 'coe-home' / 'checkpoints.sqlite'}"


def test_env_url_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COE_CHECKPOINT_URL", "memory")
    assert resolve_url(None) == "memory"
    assert resolve_url("sqlite:///x.db") == "sqlite:///x.db"


def test_bad_scheme_lists_the_allowed_forms() -> None:
    with pytest.raises(ConfigError, match="sqlite:///PATH, postgresql://..., memory"):
        with open_checkpointer("mysql://x"):
            pass


def test_unreachable_postgres_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot connect to PostgreSQL"):
        with open_checkpointer("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"):
            pass


FIRST_USE = """
import asyncio, sys, time
from langgraph.checkpoint.base import empty_checkpoint
from graph.lease import thread_lease
from graph.persistence import open_async_checkpointer, open_checkpointer

urls, thread, start, kind = sys.argv[1].split(","), sys.argv[2], float(sys.argv[3]), sys.argv[4]
config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

async def save_async(url):
    async with open_async_checkpointer(url) as saver:
        await saver.aput(config, empty_checkpoint(), {}, {})

for k, url in enumerate(urls):
    time.sleep(max(0.0, start + 0.3 * k - time.time()))  # every process opens store k at the same moment
    if kind == "async":
        asyncio.run(save_async(url))
    else:
        with open_checkpointer(url) as saver, thread_lease(saver, thread):
            saver.put(config, empty_checkpoint(), {}, {})
print("saved")
"""


def _first_use_by_10_processes(*urls: str) -> None:
    """10 processes (half of them through the async opener) open each new store together; each saves a checkpoint.

    Several stores, one after the other, make a race that shows in some of the attempts show in one test.
    """
    start = time.time() + 4  # after every interpreter has imported LangGraph
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", FIRST_USE, ",".join(urls), f"t{i}", str(start), "async" if i % 2 else "sync"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(10)
    ]
    outcomes = [(p.communicate(timeout=180), p.returncode) for p in procs]
    failed = [err[-1500:] for (out, err), rc in outcomes if rc != 0 or out.strip() != "saved"]
    assert failed == [], failed
    for url in urls:
        with open_checkpointer(url) as saver:
            saved = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
        assert saved == {f"t{i}" for i in range(10)}, url


@pytest.mark.slow
def test_sqlite_first_use_by_10_processes(tmp_path: Path) -> None:
    # tests/unit/test_storage_errors.py races 8 threads on 200 new files: the switch to WAL needs its retry.
    _first_use_by_10_processes(*(f"sqlite://{tmp_path / f'new{k}' / 'runs.sqlite'}" for k in range(8)))


@contextmanager
def _fresh_postgres_database() -> Iterator[str]:
    """A brand-new database (created through the test database, dropped after): no table exists yet."""
    from psycopg import connect

    name = f"coe_fresh_{uuid.uuid4().hex[:12]}"
    with connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_first_use_by_10_processes_on_a_new_database() -> None:
    with _fresh_postgres_database() as url:
        _first_use_by_10_processes(url)


@pytest.mark.postgres
def test_facts_are_remembered_in_postgres_per_user() -> None:
    from experts.embedding import get_embedder
    from graph import open_store
    from memory.store import FactMemory

    user = f"pg-user-{uuid.uuid4()}"
    with open_store(POSTGRES_URL) as store:
        fact = FactMemory(store, user, get_embedder()).add("Our fiscal year starts on 1 April.")
    with open_store(POSTGRES_URL) as store:  # another connection reads it back
        memory = FactMemory(store, user, get_embedder())
        assert memory.searched_by == "our own scan (the PostgreSQL store is opened without pgvector)"
        [(found, _)] = memory.search("the month our fiscal year begins", k=1)
        assert found == fact and FactMemory(store, f"other-{user}", get_embedder()).facts() == []
        assert memory.forget(fact.id) == fact and memory.facts() == []
