"""Checkpoint retention: delete finished runs older than a cutoff, optionally compact the finished runs kept.

The policy (``coe prune``; docs/decisions.md, "Checkpoint retention"):

* A run is *finished* when its graph has nothing left to do: no ``next`` node and no pending interrupt (status
  completed, partial, failed or rejected). A run that stopped half-way (killed, a node failed) or waits for an
  answer is *unfinished*: ``coe resume`` can still continue it, so it is kept unless the caller passes
  ``keep_unfinished=False``.
* A run's age is the time since its last update (``Passport.updated_at``, else its latest checkpoint's time).
* A run held by a live lease (:mod:`graph.lease`: a process is running it now) is *running*: never deleted nor
  compacted, whatever its age and ``keep_unfinished``. Each delete is made holding the thread's lease, so a run
  that starts between the listing and the delete is not deleted either.
* Deleting uses the checkpointer's own ``delete_thread`` (checkpoints, pending writes and, on Postgres, blobs).
* Lease rows nobody holds any more (a run killed with kill -9 leaves its row) are deleted.
* Compacting keeps only the latest checkpoint of a finished run: its state, document and ledger stay readable
  (``coe show``; ``coe resume`` prints the result) while the step-by-step history (``get_state_history``, time
  travel) goes. Postgres has ``PostgresSaver.prune(strategy="keep_latest")``; ``SqliteSaver`` does not
  implement ``prune`` (langgraph-checkpoint-sqlite 3.1), so for SQLite the same rule is two DELETE statements
  in one transaction. Unfinished runs are never compacted: resuming needs their pending writes.

Nothing here runs on its own: ``coe prune`` (or a scheduled job calling it) applies the policy.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from graph.lease import ThreadBusyError, clean_stale_leases, live_leases, thread_lease
from graph.persistence import resume_points
from graph.savers import SQLITE_KEEP_LATEST
from state.enums import RunStatus
from state.errors import ConfigError
from state.settings import process_env

if TYPE_CHECKING:
    from langgraph.checkpoint.sqlite import SqliteSaver

logger = logging.getLogger(__name__)

ENV_DAYS = "COE_RETENTION_DAYS"
FINISHED = frozenset({RunStatus.COMPLETED, RunStatus.PARTIAL, RunStatus.FAILED, RunStatus.REJECTED})
_ALL = 2**62
"""``list_threads`` limit that means every thread."""


@dataclass(frozen=True)
class ThreadInfo:
    """What retention needs to know about one saved run."""

    thread_id: str
    status: str
    """completed / partial / failed / rejected, or waiting (for an answer) / stopped (resumable) / pending, or
    running (a live lease: a process runs it now)."""
    finished: bool
    updated_at: datetime | None


@dataclass
class RetentionReport:
    """What a prune did (or, in a dry run, would do)."""

    cutoff: datetime
    dry_run: bool
    deleted: list[ThreadInfo] = field(default_factory=list)
    compacted: list[ThreadInfo] = field(default_factory=list)
    kept: list[ThreadInfo] = field(default_factory=list)
    stale_leases: list[str] = field(default_factory=list)
    """Threads whose left-over lease row was deleted (none in a dry run)."""


def retention_days(days: float | None) -> float:
    """The retention period in days: the argument, else ``COE_RETENTION_DAYS``; a usage error when neither."""
    if days is not None:
        value, source = days, "--older-than"
    else:
        raw = process_env(ENV_DAYS)
        if raw is None:
            raise ConfigError("retention", f"give --older-than DAYS or set {ENV_DAYS}")
        try:
            value, source = float(raw), ENV_DAYS
        except ValueError:
            raise ConfigError(ENV_DAYS, f"{raw!r} is not a number of days") from None
    if not value >= 0:  # also rejects NaN
        raise ConfigError(source, f"{value} is not a number of days >= 0")
    return value


def describe_thread(saver: BaseCheckpointSaver[str], thread_id: str) -> ThreadInfo | None:
    """Status and age of one saved run (None when the thread has no checkpoint)."""
    from graph.builder import build_graph
    from state.passport import Passport

    snapshot = build_graph(saver).get_state({"configurable": {"thread_id": thread_id}})
    if not snapshot.values and snapshot.created_at is None:
        return None
    saved = _parse_ts(snapshot.created_at)
    if not snapshot.values:
        return ThreadInfo(thread_id, RunStatus.PENDING.value, False, saved)
    state = Passport.model_validate(snapshot.values)
    status = state.status
    stopped = bool(resume_points(snapshot))
    finished = not stopped and not snapshot.interrupts and status in FINISHED
    if snapshot.interrupts:
        label = "waiting"
    elif stopped:
        label = "stopped"
    else:
        label = status.value
    return ThreadInfo(thread_id, label, finished, state.updated_at or saved)


def prune_runs(
    saver: BaseCheckpointSaver[str],
    older_than: timedelta,
    *,
    now: datetime | None = None,
    keep_unfinished: bool = True,
    compact: bool = False,
    dry_run: bool = False,
) -> RetentionReport:
    """Apply the retention policy to every run saved in ``saver``.

    Deletes finished runs last updated before ``now - older_than`` (and unfinished ones too when
    ``keep_unfinished`` is False); with ``compact``, drops the intermediate checkpoints of the finished runs
    that are kept. ``dry_run`` reports the same choices and changes nothing.
    """
    from graph.persistence import list_threads

    cutoff = (now or datetime.now(UTC)) - older_than
    report = RetentionReport(cutoff=cutoff, dry_run=dry_run)
    running = live_leases(saver)
    for thread_id in list_threads(saver, _ALL):
        info = describe_thread(saver, thread_id)
        if info is None:
            continue
        if thread_id in running:  # a process runs it now: whatever its saved state says, it is not over
            report.kept.append(ThreadInfo(thread_id, "running", False, info.updated_at))
            continue
        old = info.updated_at is not None and info.updated_at < cutoff
        if old and (info.finished or not keep_unfinished):
            report.deleted.append(info)
        elif compact and info.finished:
            report.compacted.append(info)
        else:
            report.kept.append(info)
    if dry_run:
        return report
    for info in list(report.deleted):
        try:
            with thread_lease(saver, info.thread_id):  # a run that started since the listing keeps its thread
                saver.delete_thread(info.thread_id)
        except ThreadBusyError:
            report.deleted.remove(info)
            report.kept.append(ThreadInfo(info.thread_id, "running", False, info.updated_at))
            continue
        logger.info("deleted run %s (%s, last updated %s)", info.thread_id, info.status, info.updated_at)
    compact_threads(saver, [i.thread_id for i in report.compacted])
    report.stale_leases = clean_stale_leases(saver)
    return report


def compact_threads(saver: BaseCheckpointSaver[str], thread_ids: Iterable[str]) -> None:
    """Keep only the latest checkpoint (per namespace) of each thread, with its pending writes."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    ids = list(thread_ids)
    if not ids:
        return
    if isinstance(saver, PostgresSaver):
        saver.prune(ids, strategy="keep_latest")
    elif isinstance(saver, SqliteSaver):
        for thread_id in ids:
            _compact_sqlite(saver, thread_id)
    elif isinstance(saver, InMemorySaver):
        for thread_id in ids:
            _compact_memory(saver, thread_id)
    else:
        raise ConfigError("checkpoint URL", f"compacting runs is not supported for {type(saver).__name__}")


def _compact_sqlite(saver: SqliteSaver, thread_id: str) -> None:
    with saver.lock:
        conn = saver.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sql in SQLITE_KEEP_LATEST:
                conn.execute(sql, (thread_id,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def _compact_memory(saver: InMemorySaver, thread_id: str) -> None:
    namespaces = saver.storage.get(thread_id, {})
    kept: set[tuple[str, str]] = set()
    for ns, checkpoints in namespaces.items():
        if not checkpoints:
            continue
        latest = max(checkpoints)
        for checkpoint_id in [c for c in checkpoints if c != latest]:
            del checkpoints[checkpoint_id]
        kept.add((ns, latest))
    for key in [k for k in saver.writes if k[0] == thread_id and (k[1], k[2]) not in kept]:
        del saver.writes[key]


def _parse_ts(ts: str | None) -> datetime | None:
    if not ts:
        return None
    parsed = datetime.fromisoformat(ts)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
