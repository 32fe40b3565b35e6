"""One runner per thread: a lease, kept in the checkpoint store, that a run takes before it streams.

Two processes that run (or resume) the same thread at once would both run its remaining slots. A run therefore
takes the thread's lease first and gives it back when it ends; a second runner is refused at once with
:class:`ThreadBusyError` (a user error: the CLI exits 2), which names the holder and when its lease expires::

    from graph import build_graph, open_checkpointer
    from graph.lease import thread_lease

    with open_checkpointer(url) as saver, thread_lease(saver, thread_id) as lease:
        for chunk in build_graph(saver).stream(payload, {"configurable": {"thread_id": thread_id}}):
            lease.check()  # raises LeaseLostError if another runner took the thread over

The lease is a row of the table ``coe_leases`` in the same store (the SQLite file or the PostgreSQL database;
created on first use, under the set-up lock of :mod:`graph.persistence` on PostgreSQL): the thread id, a
random token, the holder (host, pid, when it took the lease) and an expiry. While the holder runs, a background
thread renews the expiry every third of the lease time; the lease time is the ``seconds`` argument, else
``COE_LEASE_SECONDS``, else 30 s. A holder that stops renewing (kill -9, a lost machine) loses the thread once
the expiry passes; on the same host, a holder whose process is gone is taken over at once. Times are the
database's clock on PostgreSQL (holders on several hosts agree) and the local clock for a SQLite file.

The memory checkpointer lives in one process and needs no lease (``thread_lease`` gives a lease that holds
nothing); other savers are refused with a :class:`~state.errors.ConfigError`.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from graph.persistence import pg_setup_lock, sqlite_errors, store_name
from state.errors import ConfigError, UserError
from state.settings import process_env

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection

__all__ = [
    "LEASE_SECONDS_ENV",
    "Holder",
    "Lease",
    "LeaseLostError",
    "ThreadBusyError",
    "clean_stale_leases",
    "lease_seconds",
    "live_leases",
    "thread_lease",
]

logger = logging.getLogger(__name__)

LEASE_SECONDS_ENV = "COE_LEASE_SECONDS"
DEFAULT_SECONDS = 30.0

_DDL = """CREATE TABLE IF NOT EXISTS coe_leases (
    thread_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
)"""
_SELECT = "SELECT host, pid, started_at, expires_at, token FROM coe_leases WHERE thread_id = ?"
_INSERT = (
    "INSERT INTO coe_leases (thread_id, token, host, pid, started_at, expires_at) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (thread_id) DO NOTHING"
)
_TAKE_OVER = (
    "UPDATE coe_leases SET token = ?, host = ?, pid = ?, started_at = ?, expires_at = ? "
    "WHERE thread_id = ? AND token = ?"
)
_RENEW = "UPDATE coe_leases SET expires_at = ? WHERE thread_id = ? AND token = ?"
_RELEASE = "DELETE FROM coe_leases WHERE thread_id = ? AND token = ?"


def lease_seconds(seconds: float | None = None) -> float:
    """The lease time: the argument, else ``COE_LEASE_SECONDS``, else 30 s; a :class:`ConfigError` if not > 0."""
    source = "lease seconds"
    if seconds is None:
        raw = process_env(LEASE_SECONDS_ENV)
        if raw is None:
            return DEFAULT_SECONDS
        try:
            seconds, source = float(raw), LEASE_SECONDS_ENV
        except ValueError:
            raise ConfigError(LEASE_SECONDS_ENV, f"{raw!r} is not a number of seconds (e.g. 30)") from None
    if not 0 < seconds < 86400:  # also rejects NaN
        raise ConfigError(source, f"{seconds} is not a number of seconds between 0 and 86400 (e.g. 30)")
    return seconds


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t).astimezone().isoformat(sep=" ", timespec="seconds")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this host still runs (a zombie does not); True when it cannot be known."""
    if sys.platform == "win32":
        return True  # os.kill would terminate it there
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


@dataclass(frozen=True)
class Holder:
    """Who holds a thread's lease: host, pid, when it took the lease and when the lease expires (epoch s)."""

    host: str
    pid: int
    started_at: float
    expires_at: float

    def describe(self) -> str:
        """``pid 1234 on host h since 2026-11-25 10:00:00+00:00``."""
        return f"pid {self.pid} on host {self.host} since {_clock(self.started_at)}"

    def gone(self) -> bool:
        """The holder ran on this host and its process has ended (kill -9): its lease need not be waited for."""
        return self.host == socket.gethostname() and not _alive(self.pid)


class ThreadBusyError(UserError):
    """Another process runs this thread now; the message names it and when its lease expires."""

    def __init__(self, thread_id: str, holder: Holder) -> None:
        self.thread_id = thread_id
        self.holder = holder
        super().__init__(
            f"thread {thread_id} is being run by {holder.describe()}; wait for it or, if that process is gone, "
            f"retry after {_clock(holder.expires_at)}"
        )


class LeaseLostError(UserError):
    """This process stopped renewing its lease long enough for another runner to take the thread over."""

    def __init__(self, thread_id: str, holder: Holder | None, seconds: float) -> None:
        self.thread_id = thread_id
        self.holder = holder
        who = holder.describe() if holder else "another runner"
        super().__init__(
            f"thread {thread_id} was taken over by {who}: this process did not renew its lease for {seconds:g} s "
            f"({LEASE_SECONDS_ENV}); it stops here, its saved progress is kept"
        )


class _Store(Protocol):
    """The table operations a lease needs, on one store."""

    where: str

    def ensure_table(self) -> None: ...

    def now(self) -> float: ...

    def execute(self, sql: str, params: Sequence[object]) -> tuple[list[tuple[Any, ...]], int]: ...


class _SqliteStore:
    """The lease table in the saver's SQLite file, on the saver's connection and lock."""

    def __init__(self, saver: SqliteSaver) -> None:
        self.saver = saver
        self.where = store_name(saver)

    def ensure_table(self) -> None:
        self.execute(_DDL, ())

    def now(self) -> float:
        return time.time()

    def execute(self, sql: str, params: Sequence[object]) -> tuple[list[tuple[Any, ...]], int]:
        conn = self.saver.conn
        with self.saver.lock, sqlite_errors(Path(self.where)):
            cur = conn.execute(sql, tuple(params))
            try:
                rows, count = cur.fetchall(), cur.rowcount
            finally:
                cur.close()
            if conn.in_transaction:
                conn.commit()
        return rows, count


class _PostgresStore:
    """The lease table in the saver's PostgreSQL database; times are the database's clock."""

    def __init__(self, saver: PostgresSaver) -> None:
        self.saver = saver
        self.where = store_name(saver)

    @contextmanager
    def _conn(self) -> Iterator[Connection[Any]]:
        from psycopg import Connection, OperationalError

        try:
            if isinstance(self.saver.conn, Connection):
                with self.saver.lock:
                    yield self.saver.conn
            else:
                with self.saver.conn.connection() as conn:
                    yield conn
        except OperationalError as exc:
            raise ConfigError("checkpoint", f"{self.where}: {str(exc).strip().splitlines()[0]}") from exc

    def ensure_table(self) -> None:
        rows, _ = self.execute("SELECT to_regclass('coe_leases') IS NOT NULL", ())
        if not rows[0][0]:
            with self._conn() as conn, pg_setup_lock(conn, self.where):
                conn.execute(_DDL)

    def now(self) -> float:
        rows, _ = self.execute("SELECT extract(epoch FROM clock_timestamp())::float8", ())
        return float(rows[0][0])

    def execute(self, sql: str, params: Sequence[object]) -> tuple[list[tuple[Any, ...]], int]:
        from psycopg.rows import tuple_row

        with self._conn() as conn, conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(sql.replace("?", "%s"), tuple(params))
            return (cur.fetchall() if cur.description else []), cur.rowcount


def _store(saver: BaseCheckpointSaver[str]) -> _Store | None:
    from langgraph.checkpoint.postgres import PostgresSaver

    if isinstance(saver, SqliteSaver):
        return _SqliteStore(saver)
    if isinstance(saver, PostgresSaver):
        return _PostgresStore(saver)
    if isinstance(saver, InMemorySaver):
        return None
    raise ConfigError(
        "checkpoint",
        f"thread leases work with SqliteSaver, PostgresSaver and InMemorySaver, not {type(saver).__name__}",
    )


def _holder(store: _Store, thread_id: str) -> tuple[Holder, str] | None:
    rows, _ = store.execute(_SELECT, (thread_id,))
    if not rows:
        return None
    host, pid, started, expires, token = rows[0]
    return Holder(str(host), int(pid), float(started), float(expires)), str(token)


class Lease:
    """A thread's lease held by this process, renewed in the background until released (see the module doc)."""

    def __init__(self, thread_id: str, seconds: float, store: _Store | None) -> None:
        self.thread_id = thread_id
        self.seconds = seconds
        self.holder: Holder | None = None
        self._store = store
        self._token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._lost = False
        self._thief: Holder | None = None
        self._renewer: threading.Thread | None = None

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if another runner took the thread over (call it between steps)."""
        if self._lost:
            raise LeaseLostError(self.thread_id, self._thief, self.seconds)

    def _acquire(self) -> None:
        store = self._store
        if store is None:
            return
        store.ensure_table()
        host, pid = socket.gethostname(), os.getpid()
        for _ in range(5):  # each pass either takes the lease, refuses, or lost a race and looks again
            now = store.now()
            mine = (self._token, host, pid, now, now + self.seconds)
            held = _holder(store, self.thread_id)
            if held is None:
                _, taken = store.execute(_INSERT, (self.thread_id, *mine))
            elif held[0].expires_at <= now or held[0].gone():
                _, taken = store.execute(_TAKE_OVER, (*mine, self.thread_id, held[1]))
                if taken:
                    logger.info("thread %s: took over the lease of %s", self.thread_id, held[0].describe())
            else:
                raise ThreadBusyError(self.thread_id, held[0])
            if taken:
                self.holder = Holder(host, pid, now, now + self.seconds)
                self._renewer = threading.Thread(
                    target=self._renew, args=(store,), name=f"coe-lease-{self.thread_id}", daemon=True
                )
                self._renewer.start()
                return
        held = _holder(store, self.thread_id)
        if held is not None:
            raise ThreadBusyError(self.thread_id, held[0])
        raise ConfigError("checkpoint", f"thread {self.thread_id}: the lease kept changing hands; retry")

    def _renew(self, store: _Store) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                _, renewed = store.execute(_RENEW, (store.now() + self.seconds, self.thread_id, self._token))
                if not renewed:
                    held = _holder(store, self.thread_id)
                    self._thief = held[0] if held else None
                    self._lost = True
                    logger.error("%s", LeaseLostError(self.thread_id, self._thief, self.seconds))
                    return
            except UserError as exc:  # a store fault: the lease is renewed at the next tick, or it expires
                logger.warning("thread %s: could not renew the lease: %s", self.thread_id, exc)

    def _release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=self.seconds)
        if self._store is None or self.holder is None or self._lost:
            return
        try:
            self._store.execute(_RELEASE, (self.thread_id, self._token))
        except UserError as exc:  # the lease expires by itself
            logger.warning("thread %s: could not release the lease (it expires by itself): %s", self.thread_id, exc)


_ALL_ROWS = "SELECT thread_id, host, pid, started_at, expires_at, token FROM coe_leases"


def _rows(store: _Store) -> list[tuple[str, Holder, str]]:
    """Every lease row: thread id, holder, token (none when the table was never made)."""
    if isinstance(store, _PostgresStore):
        found, _ = store.execute("SELECT to_regclass('coe_leases') IS NOT NULL", ())
        if not found[0][0]:
            return []
    else:
        found, _ = store.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'coe_leases'", ())
        if not found:
            return []
    rows, _ = store.execute(_ALL_ROWS, ())
    return [(str(t), Holder(str(h), int(p), float(s), float(e)), str(k)) for t, h, p, s, e, k in rows]


def live_leases(saver: BaseCheckpointSaver[str]) -> dict[str, Holder]:
    """The threads being run now: thread id -> holder of every lease that is live.

    Live: not expired, and its holder's process still runs (a lease of a killed process on this host is not).
    Reads only; nothing for the memory checkpointer (its runs live in one process).
    """
    store = _store(saver)
    if store is None:
        return {}
    now = store.now()
    return {tid: holder for tid, holder, _ in _rows(store) if holder.expires_at > now and not holder.gone()}


def clean_stale_leases(saver: BaseCheckpointSaver[str]) -> list[str]:
    """Delete the lease rows nobody holds any more; return their thread ids.

    Nobody holds a row that expired, or whose process on this host is gone (a run killed with kill -9 leaves its
    row behind). A row renewed or taken over meanwhile is left alone (the delete names its token).
    """
    store = _store(saver)
    if store is None:
        return []
    now = store.now()
    cleaned: list[str] = []
    for tid, holder, token in _rows(store):
        if holder.expires_at <= now or holder.gone():
            _, count = store.execute(_RELEASE, (tid, token))
            if count:
                cleaned.append(tid)
    return cleaned


@contextmanager
def thread_lease(saver: BaseCheckpointSaver[str], thread_id: str, *, seconds: float | None = None) -> Iterator[Lease]:
    """Hold ``thread_id``'s lease in ``saver``'s store for the block; :class:`ThreadBusyError` if another has it.

    ``seconds``: how long the lease outlives its last renewal (default: ``COE_LEASE_SECONDS``, else 30 s).
    """
    lease = Lease(thread_id, lease_seconds(seconds), _store(saver))
    lease._acquire()
    try:
        yield lease
    finally:
        lease._release()
