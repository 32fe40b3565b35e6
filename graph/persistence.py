"""The checkpointer factory: one setting chooses where runs are saved.

URL forms (``--checkpoint`` > ``COE_CHECKPOINT_URL`` > the default file):

* ``sqlite:///abs/path/file.sqlite`` or ``sqlite://relative/file.sqlite``; default: ``checkpoints.sqlite`` in
  the user's data directory (``platformdirs.user_data_dir("coe")``, or ``$COE_HOME`` when set);
* ``postgresql://user@host:port/db`` (also ``postgres://``);
* ``memory``: in-process only, lost when the process ends (tests).

The same factory serves the CLI, embedders (``with open_checkpointer(url) as saver: build_graph(saver)``) and
the LangGraph server (``server_checkpointer`` in ``langgraph.json``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from state.errors import ConfigError
from state.passport import MOVED_STATE_TYPES, STATE_TYPES
from state.paths import checkpoint_url

SCHEMES = ("sqlite://", "postgresql://", "postgres://", "memory")


def resolve_url(url: str | None = None) -> str:
    """Apply the precedence: explicit URL > ``COE_CHECKPOINT_URL`` > default (:func:`state.paths.checkpoint_url`)."""
    return checkpoint_url(url)


def serializer() -> JsonPlusSerializer:
    """The checkpoint serializer, with the Passport's classes allow-listed."""
    return JsonPlusSerializer(allowed_msgpack_modules=[*STATE_TYPES, *MOVED_STATE_TYPES])


def _sqlite_path(url: str) -> Path:
    path = Path(url[len("sqlite://") :])
    if not str(path) or str(path) == ".":
        raise ConfigError("checkpoint URL", f"{url!r} names no file; use sqlite:///path/to/file.sqlite")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _check(url: str) -> str:
    if not url.startswith(SCHEMES):
        raise ConfigError(
            "checkpoint URL", f"unsupported {url!r}; use one of: sqlite:///PATH, postgresql://..., memory"
        )
    return url


@contextmanager
def open_checkpointer(url: str | None = None) -> Iterator[BaseCheckpointSaver[str]]:
    """Open a synchronous checkpointer for ``invoke``/``stream`` (tables are created if needed)."""
    url = _check(resolve_url(url))
    if url == "memory":
        yield InMemorySaver(serde=serializer())
    elif url.startswith("sqlite://"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(str(_sqlite_path(url)), check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a commit survives a crash or kill -9 of the process (only a power loss can drop the
        # last commits) and costs no fsync per checkpoint; FULL made runs 5x slower on a busy disk.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        try:
            saver = SqliteSaver(conn, serde=serializer())
            saver.setup()
            yield saver
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection, OperationalError
        from psycopg.rows import dict_row

        try:
            pg_conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        except OperationalError as exc:
            raise ConfigError("checkpoint URL", f"cannot connect to PostgreSQL at {_redact(url)}: {exc}") from None
        with pg_conn:
            pg = PostgresSaver(pg_conn, serde=serializer())
            pg.setup()
            yield pg


@asynccontextmanager
async def open_async_checkpointer(url: str | None = None) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """Open an asynchronous checkpointer for ``ainvoke``/``astream`` and the LangGraph server."""
    url = _check(resolve_url(url))
    if url == "memory":
        yield InMemorySaver(serde=serializer())
    elif url.startswith("sqlite://"):
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with aiosqlite.connect(str(_sqlite_path(url))) as conn:
            await conn.execute("PRAGMA journal_mode=WAL")
            await conn.execute("PRAGMA synchronous=NORMAL")
            saver = AsyncSqliteSaver(conn, serde=serializer())
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg import AsyncConnection, OperationalError
        from psycopg.rows import dict_row

        try:
            apg_conn = await AsyncConnection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        except OperationalError as exc:
            raise ConfigError("checkpoint URL", f"cannot connect to PostgreSQL at {_redact(url)}: {exc}") from None
        async with apg_conn:
            apg = AsyncPostgresSaver(apg_conn, serde=serializer())
            await apg.setup()
            yield apg


@asynccontextmanager
async def server_checkpointer() -> AsyncIterator[BaseCheckpointSaver[str]]:
    """Checkpointer factory for ``langgraph.json``: honours ``COE_CHECKPOINT_URL`` like the CLI."""
    async with open_async_checkpointer() as saver:
        yield saver


_THREADS_SQL = (
    "SELECT thread_id FROM checkpoints WHERE checkpoint_ns = '' "
    "GROUP BY thread_id ORDER BY MAX(checkpoint_id) DESC LIMIT {limit}"
)


def list_threads(saver: BaseCheckpointSaver[str], limit: int) -> list[str]:
    """Thread ids with a saved run, newest first (checkpoint ids are time-ordered), at most ``limit``.

    Reads the checkpoint table directly: ``saver.list()`` would load every checkpoint of every thread.
    """
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    if isinstance(saver, SqliteSaver):
        return [str(r[0]) for r in saver.conn.execute(_THREADS_SQL.format(limit="?"), (limit,)).fetchall()]
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
