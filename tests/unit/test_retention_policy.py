"""Retention policy on an in-memory saver: which runs are finished, the cutoff, unfinished runs kept, compaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.persistence import serializer
from graph.retention import describe_thread, prune_runs, retention_days
from state import Passport
from state.errors import ConfigError
from tests.integration.retention_runs import FINISHED, UNFINISHED, checkpoints, config, populate


@pytest.fixture
def saver() -> InMemorySaver:
    return InMemorySaver(serde=serializer())


def test_runs_are_classified_by_next_node_and_pending_interrupts(saver: InMemorySaver, tmp_path: Path) -> None:
    expected = populate(saver, tmp_path)
    for thread, status in expected.items():
        info = describe_thread(saver, thread)
        assert info is not None and info.status == status, thread
        assert info.finished == (thread in FINISHED)
        assert info.updated_at is not None and info.updated_at.tzinfo is not None
    assert describe_thread(saver, "no-such-thread") is None


def test_only_finished_runs_older_than_the_cutoff_are_deleted(saver: InMemorySaver, tmp_path: Path) -> None:
    populate(saver, tmp_path)
    month = timedelta(days=30)
    now = datetime.now(UTC)

    young = prune_runs(saver, month, now=now + timedelta(days=29))
    assert young.deleted == [] and len(young.kept) == 5

    dry = prune_runs(saver, month, now=now + timedelta(days=31), dry_run=True)
    assert sorted(i.thread_id for i in dry.deleted) == sorted(FINISHED)
    assert all(checkpoints(saver, t) > 0 for t in [*FINISHED, *UNFINISHED])  # the dry run changed nothing

    done = prune_runs(saver, month, now=now + timedelta(days=31))
    assert sorted(i.thread_id for i in done.deleted) == sorted(FINISHED)
    assert sorted(i.thread_id for i in done.kept) == sorted(UNFINISHED)
    assert all(checkpoints(saver, t) == 0 for t in FINISHED)
    assert all(checkpoints(saver, t) > 0 for t in UNFINISHED)

    everything = prune_runs(saver, month, now=now + timedelta(days=31), keep_unfinished=False)
    assert sorted(i.thread_id for i in everything.deleted) == sorted(UNFINISHED)
    assert all(checkpoints(saver, t) == 0 for t in UNFINISHED) and not saver.writes


def test_compaction_keeps_the_latest_checkpoint_of_finished_runs_only(saver: InMemorySaver, tmp_path: Path) -> None:
    populate(saver, tmp_path)
    before = {t: checkpoints(saver, t) for t in [*FINISHED, *UNFINISHED]}
    graph = build_graph(saver)
    document = Passport.model_validate(graph.get_state(config("done")).values).document

    report = prune_runs(saver, timedelta(days=30), compact=True)
    assert report.deleted == [] and sorted(i.thread_id for i in report.compacted) == sorted(FINISHED)
    assert all(before[t] > 1 and checkpoints(saver, t) == 1 for t in FINISHED)
    assert all(checkpoints(saver, t) == before[t] for t in UNFINISHED)
    snapshot = graph.get_state(config("done"))
    assert snapshot.next == () and Passport.model_validate(snapshot.values).document == document


def test_retention_days_precedence_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="COE_RETENTION_DAYS"):
        retention_days(None)
    monkeypatch.setenv("COE_RETENTION_DAYS", "14")
    assert retention_days(None) == 14.0
    assert retention_days(0.5) == 0.5  # the option wins over the environment
    monkeypatch.setenv("COE_RETENTION_DAYS", "two weeks")
    with pytest.raises(ConfigError, match="not a number"):
        retention_days(None)
    with pytest.raises(ConfigError, match=">= 0"):
        retention_days(-1)
    with pytest.raises(ConfigError, match=">= 0"):
        retention_days(float("nan"))
