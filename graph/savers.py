"""The asynchronous checkpointers the LangGraph server gets: the library's, with what langgraph-api calls on top.

langgraph-api calls more of a checkpointer than a graph does: ``adelete_for_runs`` when a run is rolled back
(``multitask_strategy="rollback"``; without it the server answered HTTP 500 and left the first run ``running``
and every later run ``pending``), ``aprune`` to keep a thread's history short, ``acopy_thread`` for
``threads.copy`` (its generic fallback, replaying every checkpoint, serves both stores). The library's
``AsyncSqliteSaver`` has neither of the first two, ``AsyncPostgresSaver`` has ``aprune``; these subclasses add the
rest in the stores' own SQL. A run's checkpoints are the ones whose metadata carries its ``run_id`` (the server
puts it there); the writes of a deleted checkpoint go with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

if TYPE_CHECKING:
    import aiosqlite
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.serde.base import SerializerProtocol

__all__ = ["PRUNE_STRATEGIES", "SQLITE_KEEP_LATEST", "ServerPostgresSaver", "ServerSqliteSaver"]

PRUNE_STRATEGIES = ("keep_latest", "delete", "delete_all")
"""``keep_latest`` keeps each thread's newest checkpoint per namespace; ``delete`` (the Postgres saver's name) and
``delete_all`` (langgraph-api's) delete the threads' checkpoints."""


SQLITE_KEEP_LATEST = (
    "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id < ("
    " SELECT MAX(c.checkpoint_id) FROM checkpoints c"
    " WHERE c.thread_id = checkpoints.thread_id AND c.checkpoint_ns = checkpoints.checkpoint_ns)",
    "DELETE FROM writes WHERE thread_id = ? AND NOT EXISTS ("
    " SELECT 1 FROM checkpoints c WHERE c.thread_id = writes.thread_id"
    " AND c.checkpoint_ns = writes.checkpoint_ns AND c.checkpoint_id = writes.checkpoint_id)",
)
"""One thread's history cut to its newest checkpoint per namespace, with that checkpoint's pending writes."""


def _ids(values: Sequence[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"{what} must be a sequence of ids, not a str")
    return [str(v) for v in values]


class ServerSqliteSaver(AsyncSqliteSaver):
    """``AsyncSqliteSaver`` with ``adelete_for_runs`` and ``aprune``, and storage faults as user errors.

    A file found damaged, locked past the busy timeout, full or unwritable in the middle of a server's run raises
    the :class:`~state.errors.ConfigError` naming the file and what to do (the CLI's saver does the same), not
    sqlite3's bare error. ``faults`` makes the context that maps them: :func:`graph.persistence.sqlite_errors`
    for the file (the opener passes it; this module does not import the opener's).
    """

    def __init__(
        self,
        conn: aiosqlite.Connection,
        faults: Callable[[], AbstractContextManager[None]],
        *,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(conn, serde=serde)
        self.faults = faults

    async def setup(self) -> None:
        """Create the tables if needed, with storage faults reported as user errors."""
        with self.faults():
            await super().setup()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``AsyncSqliteSaver.aget_tuple``, with storage faults reported as user errors."""
        with self.faults():
            return await super().aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - the library's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``AsyncSqliteSaver.alist``, with storage faults reported as user errors."""
        with self.faults():
            async for item in super().alist(config, filter=filter, before=before, limit=limit):
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``AsyncSqliteSaver.aput``, with storage faults reported as user errors."""
        with self.faults():
            return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """``AsyncSqliteSaver.aput_writes``, with storage faults reported as user errors."""
        with self.faults():
            await super().aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """``AsyncSqliteSaver.adelete_thread``, with storage faults reported as user errors."""
        with self.faults():
            await super().adelete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints the given runs wrote, and their pending writes."""
        runs = _ids(run_ids, "run_ids")
        if not runs:
            return
        marks = ",".join("?" * len(runs))
        mine = f"json_extract(CAST(metadata AS TEXT), '$.run_id') IN ({marks})"
        with self.faults():
            await self._delete_for_runs(mine, runs)

    async def _delete_for_runs(self, mine: str, runs: list[str]) -> None:
        async with self.lock, self.conn.cursor() as cur:
            await cur.execute(
                "DELETE FROM writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN "
                f"(SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE {mine})",
                runs,
            )
            await cur.execute(f"DELETE FROM checkpoints WHERE {mine}", runs)
            await self.conn.commit()

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each thread's newest checkpoint per namespace, or (``delete``) delete the threads' history."""
        threads = _ids(thread_ids, "thread_ids")
        if strategy not in PRUNE_STRATEGIES:
            raise ValueError(f"unknown prune strategy {strategy!r}; allowed: {', '.join(PRUNE_STRATEGIES)}")
        if not threads:
            return
        marks = ",".join("?" * len(threads))
        with self.faults():
            async with self.lock, self.conn.cursor() as cur:
                if strategy == "keep_latest":
                    for thread in threads:
                        for sql in SQLITE_KEEP_LATEST:
                            await cur.execute(sql, (thread,))
                else:
                    await cur.execute(f"DELETE FROM checkpoints WHERE thread_id IN ({marks})", threads)
                    await cur.execute(f"DELETE FROM writes WHERE thread_id IN ({marks})", threads)
                await self.conn.commit()


class ServerPostgresSaver(AsyncPostgresSaver):
    """``AsyncPostgresSaver`` with ``adelete_for_runs``; ``aprune`` also takes langgraph-api's ``delete_all``."""

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints the given runs wrote, their pending writes and the values only they referenced."""
        runs = _ids(run_ids, "run_ids")
        if not runs:
            return
        async with self._cursor() as cur, cur.connection.transaction():
            await cur.execute(
                "DELETE FROM checkpoint_writes w USING checkpoints c WHERE c.metadata->>'run_id' = ANY(%s) "
                "AND w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns "
                "AND w.checkpoint_id = c.checkpoint_id",
                (runs,),
            )
            await cur.execute(
                "DELETE FROM checkpoints WHERE metadata->>'run_id' = ANY(%s) "
                "RETURNING thread_id, checkpoint_ns, checkpoint->'channel_versions' AS versions",
                (runs,),
            )
            freed = {
                (row["thread_id"], row["checkpoint_ns"], channel, str(version))
                for row in await cur.fetchall()
                for channel, version in (row["versions"] or {}).items()
            }
            if freed:  # a value goes only when no checkpoint left refers to it (statements after the delete see it)
                await cur.executemany(
                    "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND b.checkpoint_ns = %s "
                    "AND b.channel = %s AND b.version = %s AND NOT EXISTS (SELECT 1 FROM checkpoints c "
                    "WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
                    "AND c.checkpoint->'channel_versions'->>b.channel = b.version)",
                    sorted(freed),
                )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """The library's prune; langgraph-api's ``delete_all`` is its ``delete``."""
        await super().aprune(thread_ids, strategy="delete" if strategy == "delete_all" else strategy)
