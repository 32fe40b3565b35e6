"""``coe prune`` on SQLite and Postgres: finished runs go, unfinished and waiting runs stay and still resume."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.types import Command
from typer.testing import CliRunner

from cli.main import app
from graph import build_graph, open_checkpointer
from state import Passport
from state.enums import RunStatus
from tests.conftest import POSTGRES_URL
from tests.integration.retention_runs import FINISHED, checkpoints, config, populate

runner = CliRunner()


def _prune(url: str, *args: str) -> dict[str, object]:
    result = runner.invoke(app, ["prune", *args, "--json", "--checkpoint", url])
    assert result.exit_code == 0, result.output
    payload: dict[str, object] = json.loads(result.stdout)
    return payload


def _ids(rows: object) -> list[str]:
    assert isinstance(rows, list)
    return sorted(str(r["thread_id"]) for r in rows)


def _exercise(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_checkpointer(url) as saver:
        expected = populate(saver, tmp_path)
        before = {t: checkpoints(saver, t) for t in expected}
    finished = sorted(t for t in expected if t in FINISHED)

    dry = _prune(url, "--older-than", "0", "--dry-run")
    assert dry["dry_run"] is True and _ids(dry["deleted"]) == finished and dry["kept"] == 2
    young = _prune(url, "--older-than", "1")
    assert young["deleted"] == [] and young["kept"] == 5
    with open_checkpointer(url) as saver:
        assert {t: checkpoints(saver, t) for t in expected} == before  # neither deleted anything

    compacted = _prune(url, "--older-than", "1", "--compact")
    assert compacted["deleted"] == [] and _ids(compacted["compacted"]) == finished
    with open_checkpointer(url) as saver:
        assert all(before[t] > 1 and checkpoints(saver, t) == 1 for t in finished)
        assert all(checkpoints(saver, t) == before[t] for t in ("waiting", "stopped"))
    show = runner.invoke(app, ["show", "done", "--checkpoint", url])
    assert show.exit_code == 0 and "status:  completed" in show.stdout and "| generate |" in show.stdout

    deleted = _prune(url, "--older-than", "0")
    assert _ids(deleted["deleted"]) == finished and deleted["kept"] == 2
    with open_checkpointer(url) as saver:
        assert all(checkpoints(saver, t) == 0 for t in finished)
        # The runs that were kept still continue: the stopped one runs its slots, the waiting one takes its answer.
        graph = build_graph(saver)
        context = {"backend": "fake"}
        graph.invoke(None, config("stopped"), context=context)
        graph.invoke(Command(resume="approve"), config("waiting"), context=context)
        for thread in ("stopped", "waiting"):
            state = Passport.model_validate(graph.get_state(config(thread)).values)
            assert state.status == RunStatus.COMPLETED and sorted(state.results) == ["A", "B", "C", "D"]

    monkeypatch.setenv("COE_RETENTION_DAYS", "0")  # the setting a scheduled `coe prune` uses
    by_env = _prune(url)
    assert _ids(by_env["deleted"]) == ["stopped", "waiting"] and by_env["kept"] == 0


def test_prune_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _exercise(f"sqlite://{tmp_path / 'runs.sqlite'}", tmp_path, monkeypatch)


def test_prune_without_a_period_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["prune", "--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"])
    assert result.exit_code == 2 and "--older-than DAYS or set COE_RETENTION_DAYS" in result.stderr


@pytest.fixture
def postgres_schema_url() -> Iterator[str]:
    """A URL on a schema of its own: pruning must not see (or delete) other tests' runs in the shared database."""
    from psycopg import connect

    schema = f"retention_{uuid.uuid4().hex[:12]}"
    with connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        sep = "&" if "?" in POSTGRES_URL else "?"
        yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.mark.postgres
def test_prune_postgres(postgres_schema_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _exercise(postgres_schema_url, tmp_path, monkeypatch)
