"""The checkpointer factory: one setting chooses where runs are saved.

URL forms (``--checkpoint`` > ``COE_CHECKPOINT_URL`` > the default file):

* ``sqlite:///abs/path/file.sqlite`` or ``sqlite://relative/file.sqlite``; default: ``checkpoints.sqlite`` in
  the user's data directory (``platformdirs.user_data_dir("coe")``, or ``$COE_HOME`` when set);
* ``postgresql://user@host:port/db`` (also ``postgres://``);
* ``memory``: in-process only, lost when the process ends (tests).

The same factory serves the CLI, embedders (``with open_checkpointer(url) as saver: build_graph(saver)``) and
the LangGraph server (``server_checkpointer`` in ``langgraph.json``).

Storage faults are user errors (:class:`~state.errors.ConfigError`, CLI exit 2) that name the file and what to
do: a path that is a directory or cannot be written, a damaged file ("file is not a database", "database disk
image is malformed"), a file locked past the busy timeout, a full disk. They are caught when the store is
opened and, for SQLite, whenever the saver touches the file later (:class:`CheckedSqliteSaver`), so a file that
turns out damaged in the middle of a run is reported the same way. A saved run whose checkpoint cannot be
decoded is reported by :func:`load_run`, naming the thread.

Concurrent first use is safe: several processes may open a new SQLite file at once (switching it to WAL is
retried while another process holds it), and on PostgreSQL the schema set-up (``PostgresSaver.setup``, our
lease table) runs under a session advisory lock (:func:`pg_setup_lock`), so processes starting together on a
new database take turns instead of failing on duplicate types, migration rows or deadlocks. The lock is taken
with ``pg_try_advisory_lock`` in a loop, never a blocking ``pg_advisory_lock``: the set-up creates indexes
``CONCURRENTLY``, which waits for every open transaction of the database, a blocked lock call included.
"""

from __future__ import annotations

import functools
import random
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from state.errors import ConfigError, UserError
from state.files import exclusive_lock
from state.passport import MOVED_STATE_TYPES, STATE_TYPES, Passport
from state.paths import checkpoint_url

if TYPE_CHECKING:
    from langgraph.types import StateSnapshot
    from psycopg import AsyncConnection, Connection

    from graph.builder import CoeGraph

SCHEMES = ("sqlite://", "postgresql://", "postgres://", "memory")

BUSY_SECONDS = 10.0
"""How long a SQLite statement waits for another process' lock before the file is reported locked."""
SETUP_WAIT_SECONDS = 120.0
"""How long a process waits while another one sets up the PostgreSQL tables."""
SETUP_LOCK_KEY = int.from_bytes(b"coesetup", "big")
"""The PostgreSQL advisory lock key that serialises schema set-up (per database)."""

_NEW_FILE = "start a new file with --checkpoint sqlite:///other.sqlite"


def resolve_url(url: str | None = None) -> str:
    """Apply the precedence: explicit URL > ``COE_CHECKPOINT_URL`` > default (:func:`state.paths.checkpoint_url`)."""
    return checkpoint_url(url)


def serializer() -> JsonPlusSerializer:
    """The checkpoint serializer, with the Passport's classes allow-listed."""
    return JsonPlusSerializer(allowed_msgpack_modules=[*STATE_TYPES, *MOVED_STATE_TYPES])


def _check(url: str) -> str:
    if not url.startswith(SCHEMES):
        raise ConfigError(
            "checkpoint URL", f"unsupported {url!r}; use one of: sqlite:///PATH, postgresql://..., memory"
        )
    return url


# --- SQLite ---------------------------------------------------------------------------------------------------


def _sqlite_advice(path: Path, exc: sqlite3.Error) -> str | None:
    """One line naming the file, what is wrong and what to do; None for errors that are not the file's fault."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # the primary result code
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return f"{path} is damaged ({exc}): restore it from a backup, or {_NEW_FILE}"
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return (
            f"{path} is locked by another process ({exc}, waited {BUSY_SECONDS:g} s): retry when it is done, "
            f"or {_NEW_FILE}"
        )
    if code in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        if path.is_dir():
            return f"{path} is a directory: name a file in it, e.g. --checkpoint sqlite://{path / 'runs.sqlite'}"
        return (
            f"cannot write {path} ({exc}): fix the permissions of the file and its directory (both must be "
            f"writable), or {_NEW_FILE}"
        )
    if code == sqlite3.SQLITE_FULL:
        return f"cannot write {path}: the disk is full ({exc}): free some space, or {_NEW_FILE} on another disk"
    if code == sqlite3.SQLITE_IOERR:
        return f"cannot read or write {path}: the disk reported an error ({exc}): check the disk, or {_NEW_FILE}"
    return None


@contextmanager
def sqlite_errors(path: Path) -> Iterator[None]:
    """Turn a storage fault of the SQLite file at ``path`` into a :class:`ConfigError` naming it and what to do.

    Errors that are not the file's fault (a constraint, a programming error) pass through unchanged.
    """
    try:
        yield
    except sqlite3.Error as exc:
        advice = _sqlite_advice(path, exc)
        if advice is None:
            raise
        raise ConfigError("checkpoint", advice) from exc


class CheckedSqliteSaver(SqliteSaver):
    """A ``SqliteSaver`` whose storage faults are user errors naming the file (see :func:`sqlite_errors`).

    Every read and write of ``SqliteSaver`` goes through ``cursor()`` (and ``setup()``), so a file that is found
    damaged or locked in the middle of a run is reported like one found so at open time.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, *, serde: JsonPlusSerializer | None = None) -> None:
        super().__init__(conn, serde=serde)
        self.path = path

    def setup(self) -> None:
        """Create the tables if needed (``SqliteSaver.setup``), with storage faults reported as user errors."""
        with sqlite_errors(self.path):
            super().setup()

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """``SqliteSaver.cursor``, with storage faults reported as user errors."""
        with sqlite_errors(self.path), super().cursor(transaction) as cur:
            yield cur


def _sqlite_path(url: str) -> Path:
    path = Path(url[len("sqlite://") :])
    if not str(path) or str(path) == ".":
        raise ConfigError("checkpoint URL", f"{url!r} names no file; use sqlite:///path/to/file.sqlite")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        reason = f"{blocker} is a file, not a directory" if blocker else exc.strerror or str(exc)
        raise ConfigError(
            "checkpoint", f"cannot create the directory {path.parent} for {path} ({reason}): {_NEW_FILE}"
        ) from None
    return path


def _wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (a no-op when it already is).

    Switching needs the file to itself: SQLite answers "database is locked" at once, without waiting, when
    another process opens the same new file at that moment, so the switch is retried for ``BUSY_SECONDS``.
    """
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.01, 0.05))  # jitter: processes started together drift apart


def _open_sqlite(path: Path) -> sqlite3.Connection:
    """Connect to the file, in WAL mode, mapping every storage fault to a :class:`ConfigError`."""
    with sqlite_errors(path):
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=BUSY_SECONDS)
        try:
            _wal(conn)
            # WAL + NORMAL: a commit survives a crash or kill -9 of the process (only a power loss can drop the
            # last commits) and costs no fsync per checkpoint; FULL made runs 5x slower on a busy disk.
            conn.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            conn.close()
            raise
    return conn


# --- PostgreSQL -----------------------------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _pg_schema_current(conn: Connection[Any], migrations: int) -> bool:
    from psycopg.rows import tuple_row

    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute("SELECT to_regclass('checkpoint_migrations') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return False
        row = cur.execute("SELECT max(v) FROM checkpoint_migrations").fetchone()
        return row is not None and row[0] == migrations - 1


@contextmanager
def pg_setup_lock(conn: Connection[Any], where: str) -> Iterator[None]:
    """Hold the session advisory lock that serialises schema set-up on this database (``conn``: autocommit)."""
    from psycopg.rows import tuple_row

    deadline = time.monotonic() + SETUP_WAIT_SECONDS
    with conn.cursor(row_factory=tuple_row) as cur:
        while not (row := cur.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK_KEY,)).fetchone()) or not row[0]:
            if time.monotonic() > deadline:
                raise ConfigError(
                    "checkpoint", f"{where}: another process held the table set-up for {SETUP_WAIT_SECONDS:.0f} s"
                )
            time.sleep(random.uniform(0.02, 0.08))  # jitter: processes started together drift apart
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))


async def _apg_schema_current(conn: AsyncConnection[Any], migrations: int) -> bool:
    from psycopg.rows import tuple_row

    async with conn.cursor(row_factory=tuple_row) as cur:
        row = await (await cur.execute("SELECT to_regclass('checkpoint_migrations') IS NOT NULL")).fetchone()
        if not row or not row[0]:
            return False
        row = await (await cur.execute("SELECT max(v) FROM checkpoint_migrations")).fetchone()
        return row is not None and row[0] == migrations - 1


@asynccontextmanager
async def _apg_setup_lock(conn: AsyncConnection[Any], where: str) -> AsyncIterator[None]:
    """:func:`pg_setup_lock` on an async connection."""
    import asyncio

    from psycopg.rows import tuple_row

    deadline = time.monotonic() + SETUP_WAIT_SECONDS
    async with conn.cursor(row_factory=tuple_row) as cur:
        while True:
            row = await (await cur.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK_KEY,))).fetchone()
            if row and row[0]:
                break
            if time.monotonic() > deadline:
                raise ConfigError(
                    "checkpoint", f"{where}: another process held the table set-up for {SETUP_WAIT_SECONDS:.0f} s"
                )
            await asyncio.sleep(random.uniform(0.02, 0.08))  # jitter: processes started together drift apart
    try:
        yield
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))


@contextmanager
def connection_lost(saver: BaseCheckpointSaver[str], thread_id: str) -> Iterator[None]:
    """Turn a PostgreSQL connection lost in the middle of a run into a :class:`ConfigError` naming the database.

    The server restarted, the network dropped, an administrator ended the session: psycopg raises
    ``OperationalError`` (or ``InterfaceError`` on a connection already closed) from whichever step wrote next.
    What was saved before stays saved; the message says so and how to go on. Other errors pass unchanged.
    """
    from psycopg import InterfaceError, OperationalError

    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        try:
            where = store_name(saver)
        except (OperationalError, InterfaceError):  # a closed connection no longer says where it led
            where = "the PostgreSQL database"
        raise ConfigError(
            "checkpoint",
            f"lost the connection to {where} in the middle of the run ({_first_line(exc)}): what was saved "
            f"before is kept; when the database is back, coe resume {thread_id} goes on",
        ) from exc


def _pg_setup_failed(url: str, exc: Exception) -> ConfigError:
    return ConfigError("checkpoint", f"cannot set up the checkpoint tables in {_redact(url)}: {_first_line(exc)}")


# --- the openers ----------------------------------------------------------------------------------------------


@contextmanager
def open_checkpointer(url: str | None = None) -> Iterator[BaseCheckpointSaver[str]]:
    """Open a synchronous checkpointer for ``invoke``/``stream`` (tables are created if needed)."""
    url = _check(resolve_url(url))
    if url == "memory":
        yield InMemorySaver(serde=serializer())
    elif url.startswith("sqlite://"):
        path = _sqlite_path(url)
        conn = _open_sqlite(path)
        try:
            saver = CheckedSqliteSaver(conn, path, serde=serializer())
            saver.setup()
            yield saver
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Error

        with _pg_connection(url) as pg_conn:
            pg = PostgresSaver(pg_conn, serde=serializer())
            try:
                if not _pg_schema_current(pg_conn, len(pg.MIGRATIONS)):
                    with pg_setup_lock(pg_conn, _redact(url)):
                        pg.setup()
            except Error as exc:
                raise _pg_setup_failed(url, exc) from exc
            yield pg


@contextmanager
def _pg_connection(url: str) -> Iterator[Any]:
    """A synchronous PostgreSQL connection as the checkpointer and the store use it (autocommit, dict rows)."""
    from psycopg import Connection, OperationalError
    from psycopg.rows import dict_row

    try:
        pg_conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    except OperationalError as exc:
        raise ConfigError("checkpoint URL", f"cannot connect to PostgreSQL at {_redact(url)}: {exc}") from None
    with pg_conn:
        yield pg_conn


@contextmanager
def open_store(url: str | None = None) -> Iterator[BaseStore]:
    """Open the long-term memory store that goes with a checkpoint URL (tables are created if needed).

    SQLite: the same file as the checkpoints (the store's tables beside them); PostgreSQL: the same database;
    ``memory``: an in-process store. Facts are kept per user (:mod:`memory.store`). The in-process store, and the
    SQLite one where Python's sqlite3 can load sqlite-vec, have a vector index on the bundled embedder
    (:func:`experts.embedding.store_index.store_index`); the PostgreSQL one has none (it would need pgvector),
    and facts are then searched by the project's own scan.
    """
    from experts.embedding.store_index import store_index

    url = _check(resolve_url(url))
    if url == "memory":
        yield InMemoryStore(index=store_index())  # type: ignore[arg-type]  # IndexConfig is a TypedDict
    elif url.startswith("sqlite://"):
        from langgraph.store.sqlite import SqliteStore

        path = _sqlite_path(url)
        conn = _open_sqlite(path)
        try:
            # sqlite-vec is an extension: a Python built without extension loading keeps the store unindexed
            index = store_index() if hasattr(conn, "enable_load_extension") else None
            sqlite_store = SqliteStore(conn, index=index)  # type: ignore[arg-type]
            # Its migrations are not idempotent (ADD COLUMN) nor serialised: one process at a time sets up a file.
            with exclusive_lock(path.with_name(f"{path.name}.setup-lock")), sqlite_errors(path):
                sqlite_store.setup()
            yield sqlite_store
        finally:
            conn.close()
    else:
        from langgraph.store.postgres import PostgresStore
        from psycopg import Error

        with _pg_connection(url) as pg_conn:
            pg_store = PostgresStore(pg_conn)
            try:
                with pg_setup_lock(pg_conn, _redact(url)):
                    pg_store.setup()
            except Error as exc:
                raise _pg_setup_failed(url, exc) from exc
            yield pg_store


@asynccontextmanager
async def open_async_checkpointer(url: str | None = None) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """Open an asynchronous checkpointer for ``ainvoke``/``astream`` and the LangGraph server."""
    url = _check(resolve_url(url))
    if url == "memory":
        yield InMemorySaver(serde=serializer())
    elif url.startswith("sqlite://"):
        import asyncio

        import aiosqlite

        from graph.savers import ServerSqliteSaver

        path = _sqlite_path(url)
        # The WAL switch and the storage checks, with their retry and clear errors, off the event loop.
        await asyncio.to_thread(lambda: _open_sqlite(path).close())
        with sqlite_errors(path):
            conn = await aiosqlite.connect(str(path), timeout=BUSY_SECONDS)
        try:
            with sqlite_errors(path):
                await conn.execute("PRAGMA synchronous=NORMAL")
                saver = ServerSqliteSaver(conn, functools.partial(sqlite_errors, path), serde=serializer())
                await saver.setup()
            yield saver
        finally:
            await conn.close()
    else:
        from psycopg import AsyncConnection, Error, OperationalError
        from psycopg.rows import dict_row

        from graph.savers import ServerPostgresSaver

        try:
            apg_conn = await AsyncConnection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        except OperationalError as exc:
            raise ConfigError("checkpoint URL", f"cannot connect to PostgreSQL at {_redact(url)}: {exc}") from None
        async with apg_conn:
            apg = ServerPostgresSaver(apg_conn, serde=serializer())
            try:
                if not await _apg_schema_current(apg_conn, len(apg.MIGRATIONS)):
                    async with _apg_setup_lock(apg_conn, _redact(url)):
                        await apg.setup()
            except Error as exc:
                raise _pg_setup_failed(url, exc) from exc
            yield apg


@asynccontextmanager
async def server_checkpointer() -> AsyncIterator[BaseCheckpointSaver[str]]:
    """Checkpointer factory for ``langgraph.json``: honours ``COE_CHECKPOINT_URL`` like the CLI."""
    async with open_async_checkpointer() as saver:
        yield saver


# --- reading saved runs ---------------------------------------------------------------------------------------


def store_name(saver: BaseCheckpointSaver[str]) -> str:
    """Where a saver keeps its checkpoints, for messages: the SQLite file, the PostgreSQL URL, or its type."""
    from langgraph.checkpoint.postgres import PostgresSaver

    if isinstance(saver, CheckedSqliteSaver):
        return str(saver.path)
    if isinstance(saver, SqliteSaver):
        rows = saver.conn.execute("PRAGMA database_list").fetchall()
        return next((str(r[2]) for r in rows if r[1] == "main" and r[2]), "an in-memory SQLite database")
    if isinstance(saver, PostgresSaver):
        from psycopg import Connection

        if isinstance(saver.conn, Connection):
            info = saver.conn.info
            return f"PostgreSQL database {info.dbname} on {info.host}:{info.port}"
        return "a PostgreSQL connection pool"
    if isinstance(saver, InMemorySaver):
        return "memory"
    return type(saver).__name__


def load_run(graph: CoeGraph, thread_id: str) -> tuple[StateSnapshot, Passport | None]:
    """The latest snapshot of one thread and its Passport (None when nothing is saved).

    A checkpoint that cannot be decoded (a damaged row, a blob of another version) raises a :class:`ConfigError`
    naming the thread and the store, never the decoder's traceback; storage faults are already user errors.
    """
    try:
        snapshot = graph.get_state({"configurable": {"thread_id": thread_id}})
        state = Passport.model_validate(snapshot.values) if snapshot.values else None
    except UserError:
        raise
    except Exception as exc:  # any decoding failure of one saved run: reported, naming it
        where = store_name(graph.checkpointer) if isinstance(graph.checkpointer, BaseCheckpointSaver) else "?"
        raise ConfigError(
            "checkpoint",
            f"the saved run {thread_id!r} in {where} cannot be read ({type(exc).__name__}: {_first_line(exc)}): "
            "restore the store from a backup, or run the task again as a new run",
        ) from exc
    return snapshot, state


def resume_points(snapshot: StateSnapshot) -> list[str]:
    """The nodes a resume of this snapshot goes on from; empty when the run is over.

    ``snapshot.next`` alone says a stopped run is over when it stopped between saving a node's result and saving
    the checkpoint after it (a file locked or a process killed in between): the node's task reads as finished,
    and the nodes after it are only known once that checkpoint is written. LangGraph's resume applies the saved
    result and goes on, so such a task counts here as where the run goes on.
    """
    return list(snapshot.next) or [task.name for task in snapshot.tasks]


_THREADS_SQL = (
    "SELECT thread_id FROM checkpoints WHERE checkpoint_ns = '' "
    "GROUP BY thread_id ORDER BY MAX(checkpoint_id) DESC LIMIT {limit}"
)


def list_threads(saver: BaseCheckpointSaver[str], limit: int) -> list[str]:
    """Thread ids with a saved run, newest first (checkpoint ids are time-ordered), at most ``limit``.

    Reads the checkpoint table directly: ``saver.list()`` would load every checkpoint of every thread.
    """
    from langgraph.checkpoint.postgres import PostgresSaver

    if isinstance(saver, SqliteSaver):
        with saver.cursor(transaction=False) as cur:
            return [str(r[0]) for r in cur.execute(_THREADS_SQL.format(limit="?"), (limit,)).fetchall()]
    if isinstance(saver, PostgresSaver):
        from psycopg import Connection

        if isinstance(saver.conn, Connection):
            rows = saver.conn.execute(_THREADS_SQL.format(limit="%s"), (limit,)).fetchall()
        else:
            with saver.conn.connection() as conn:
                rows = conn.execute(_THREADS_SQL.format(limit="%s"), (limit,)).fetchall()
        return [str(r["thread_id"]) for r in rows]
    if isinstance(saver, InMemorySaver):
        newest = {tid: max(ns.get("", {}) or [""]) for tid, ns in saver.storage.items()}
        return sorted(newest, key=lambda t: newest[t], reverse=True)[:limit]
    raise ConfigError("checkpoint URL", f"listing runs is not supported for {type(saver).__name__}")


def _redact(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}" if ":" in creds else url
    return url
