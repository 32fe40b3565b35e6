"""The Passport round-trips through every checkpointer, also when another process reads it back."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
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


def test_sqlite_round_trip_and_second_process(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'cp.sqlite'}"
    state = _run(url, "sq")
    assert state.status == RunStatus.COMPLETED
    _check_second_process(url, "sq", state)


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_round_trip_and_second_process() -> None:
    thread = f"pg-{uuid.uuid4()}"
    state = _run(POSTGRES_URL, thread)
    assert state.status == RunStatus.COMPLETED
    _check_second_process(POSTGRES_URL, thread, state)


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
