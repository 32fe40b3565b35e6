"""The server's shadow worker: a candidate's queued live slots, answered while the server has nothing else to do.

A task on the server's event loop, started with the app (:data:`server.http_app.app`'s lifespan). Every
:data:`POLL_SECONDS` it looks at the process's graph runs (:data:`graph.builder.activity`): when none is in flight
and none has ended for ``COE_SHADOW_IDLE_SECONDS`` (default 60; 0 turns the worker off), it takes the oldest
queued job (:mod:`experts.catalog.shadow_queue`) and has the candidate answer it (:func:`graph.shadow.aanswer`,
marked :data:`graph.builder.BACKGROUND` so it is not counted as a user's run). While it answers, a user's run
that starts cancels it at the next poll: its generations stop (the run's cancel, as ``runs.cancel`` stops a run)
and the job goes back to the queue for the next idle spell. So a user waits at most one poll for the cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from experts.catalog.shadow_queue import finish, put_back, take
from graph.builder import BACKGROUND, activity
from graph.shadow import aanswer
from state.errors import ConfigError
from state.settings import process_env

__all__ = ["IDLE_ENV", "POLL_SECONDS", "ShadowWorker", "idle_seconds", "lifespan"]

logger = logging.getLogger(__name__)

IDLE_ENV = "COE_SHADOW_IDLE_SECONDS"
IDLE_DEFAULT = 60.0
POLL_SECONDS = 1.0


def idle_seconds() -> float:
    """How long the server must have been idle before the worker answers a job (``COE_SHADOW_IDLE_SECONDS``).

    Raises:
        ConfigError: not a number, or negative.
    """
    raw = process_env(IDLE_ENV)
    if raw is None:
        return IDLE_DEFAULT
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(IDLE_ENV, f"must be seconds (0 turns the shadow worker off), got {raw!r}") from None
    if value < 0:
        raise ConfigError(IDLE_ENV, f"must not be negative, got {raw!r}")
    return value


class ShadowWorker:
    """Answers queued shadow jobs one at a time in the server's idle time, yielding to every user's run."""

    def __init__(self, idle: float, *, poll: float = POLL_SECONDS, context: dict[str, Any] | None = None) -> None:
        self.idle = idle
        self.poll = poll
        self.context = context
        self.answered = 0
        self.yielded = 0
        """Jobs stopped half-way because a user's run started (put back in the queue)."""

    async def run(self) -> None:
        """Poll until cancelled (the server stopping)."""
        while True:
            await asyncio.sleep(self.poll)
            if activity.in_flight() or activity.idle_seconds() < self.idle:
                continue
            try:
                taken = await asyncio.to_thread(take)
            except Exception as exc:  # a queue that cannot be read must not stop the worker (sqlite3, OSError)
                logger.warning("shadow queue not read: %s", exc)
                continue
            if taken is not None:
                await self._answer(*taken)

    async def _answer(self, job_id: int, job: dict[str, Any]) -> None:
        task = asyncio.create_task(self._background(job))
        while not task.done():
            await asyncio.wait({task}, timeout=self.poll)
            if not task.done() and activity.in_flight():
                task.cancel()
        try:
            result = task.result()
        except asyncio.CancelledError:
            self.yielded += 1
            await asyncio.to_thread(put_back, job_id)
            logger.info("shadow job %s yielded to a user's run; it waits for the next idle spell", job_id)
            return
        except Exception:
            await asyncio.to_thread(finish, job_id)  # a job that fails would fail again: dropped, logged
            logger.exception("shadow job %s (%s v%s) failed and was dropped", job_id, job["expert"], job["version"])
            return
        await asyncio.to_thread(finish, job_id)
        self.answered += 1
        logger.info(
            "shadow: %s v%s answered %s/%s -> %s",
            result.expert,
            result.version,
            result.thread_id,
            result.slot_id,
            result.winner,
        )

    async def _background(self, job: dict[str, Any]) -> Any:
        BACKGROUND.set(True)  # this task's own context: its graph runs are not a user's
        return await aanswer(job, self.context)


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """Run the shadow worker for the server's life (unless ``COE_SHADOW_IDLE_SECONDS`` is 0)."""
    idle = idle_seconds()
    if idle <= 0:
        yield
        return
    worker = asyncio.create_task(ShadowWorker(idle).run())
    try:
        yield
    finally:
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
