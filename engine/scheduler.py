"""Readiness-based slot dispatch that survives LangGraph's super-step barrier.

LangGraph runs nodes in super-steps: a step ends when its slowest task ends, so a Send-per-slot design makes
a slot wait for unrelated slots of the same "wave". Instead, ``execute_slots`` hands slots to a per-run
:class:`SlotScheduler` whose worker threads live across super-steps. Each ``execute_slots`` step dispatches
every slot whose dependencies are done, then waits until at least one running slot finishes, and returns
that result as a partial update, so every finished slot is checkpointed within one super-step of finishing
while the others keep running. A slot therefore starts as soon as its own dependencies are done.

Slots that were running in a process that died are not known to the scheduler of the new process; the node
sees them as stale and runs them again. Finished slots are in the checkpoint and never re-run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

logger = logging.getLogger(__name__)

ProgressEvent = dict[str, Any]


@dataclass
class Finished:
    """A slot's work has ended (successfully or not); ``outcome`` is whatever the work function returned."""

    slot_id: str
    outcome: Any


@dataclass
class SlotScheduler:
    """Worker threads and completion queue of one run (keyed by its run id)."""

    run_id: str
    max_parallel: int
    _running: dict[str, Future[Any]] = field(default_factory=dict)
    _finished: dict[str, Finished] = field(default_factory=dict)
    _events: list[ProgressEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cancelled = threading.Event()
        """Set by :meth:`cancel`: the run's generations stop (each request carries it)."""
        self._cond = threading.Condition()
        self._pool = ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix=f"coe-slot-{self.run_id[:8]}")

    def known(self, slot_id: str) -> bool:
        """Whether this process is running (or has just finished) the slot."""
        with self._cond:
            return slot_id in self._running or slot_id in self._finished

    def running(self) -> set[str]:
        """Slot ids currently executing in this process."""
        with self._cond:
            return set(self._running)

    def submit(self, slot_id: str, work: Callable[[Callable[[ProgressEvent], None]], Any]) -> None:
        """Start ``work(emit)`` for a slot in a worker thread. ``emit`` queues progress events."""
        with self._cond:
            if slot_id in self._running or slot_id in self._finished:
                return
            future = self._pool.submit(work, self._emit)
            self._running[slot_id] = future
        future.add_done_callback(partial(self._done, slot_id))

    def _emit(self, event: ProgressEvent) -> None:
        with self._cond:
            self._events.append(event)
            self._cond.notify_all()

    def _done(self, slot_id: str, future: Future[Any]) -> None:
        exc = future.exception()
        if exc is not None:
            # Work functions report failures as outcomes; an exception here is a harness bug.
            logger.error("slot %s: unexpected error in slot worker", slot_id, exc_info=exc)
        with self._cond:
            self._running.pop(slot_id, None)
            self._finished[slot_id] = Finished(slot_id, exc if exc is not None else future.result())
            self._cond.notify_all()

    def wait(self, on_event: Callable[[ProgressEvent], None]) -> list[Finished]:
        """Block until at least one slot finished (or nothing runs); forward progress events meanwhile.

        Returns every finished slot not yet collected, and forgets them.
        """
        while True:
            with self._cond:
                while not self._events and not self._finished and self._running:
                    self._cond.wait(timeout=5.0)
                events, self._events = self._events, []
                finished, self._finished = list(self._finished.values()), {}
                idle = not self._running
            for event in events:
                on_event(event)
            if finished or idle:
                return finished

    def cancel(self) -> None:
        """The run was cancelled: stop its generations and start nothing more."""
        self.cancelled.set()
        self.shutdown()

    def shutdown(self) -> None:
        """Stop accepting work; running slots finish in the background."""
        self._pool.shutdown(wait=False, cancel_futures=True)


_schedulers: dict[str, SlotScheduler] = {}
_registry_lock = threading.Lock()


def scheduler_for(run_id: str, max_parallel: int) -> SlotScheduler:
    """The scheduler of a run in this process (created on first use)."""
    with _registry_lock:
        sched = _schedulers.get(run_id)
        if sched is None:
            sched = SlotScheduler(run_id=run_id, max_parallel=max_parallel)
            _schedulers[run_id] = sched
        return sched


def release(run_id: str) -> None:
    """Forget a run's scheduler once all its slots are final."""
    with _registry_lock:
        sched = _schedulers.pop(run_id, None)
    if sched is not None:
        sched.shutdown()
