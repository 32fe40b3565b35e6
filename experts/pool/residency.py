"""Which models are in memory: reservations, reference counts, LRU eviction, preloading, emergency eviction.

Every generation goes through :meth:`ModelPool.acquire` / :meth:`ModelPool.release` (the handle returned by
:func:`experts.pool.pooled.get_backend` does it), so the pool knows which models are in use at every moment:

* **Reservation.** Loading a model first reserves its estimated footprint (:mod:`experts.models.footprint`:
  weights + KV cache + compute). A model that does not fit waits, on a condition variable, until a release
  or an unload frees memory. A model larger than the whole budget fails at once with an error that names
  the model, its estimate and the budget.
* **Reference counts and LRU.** A model in use (a generation holds it) is never evicted. When a load needs
  room, idle models are unloaded, least recently used first, and only if that makes enough room.
  Faux experts share the base model's entry; a true expert's GGUF is an entry of its own.
* **Preloading.** :meth:`ModelPool.preload` loads a model in the background while reservations stay under the
  preload threshold (80% of the pool by default); it never evicts.
* **Emergency eviction.** A monitor samples the memory the process really uses beyond what it used before
  its first model was loaded. Past the emergency threshold (95%), the largest model in use is stopped: its
  generations raise :class:`~state.errors.GenerationStopped` (``evicted``), it is unloaded once they have
  let go, and their slots are re-queued from scratch by ``execute_slots``. Other models keep running;
  no stored output is touched.
* **Shutdown.** :meth:`ModelPool.shutdown` (Ctrl+C) stops every generation (``cancelled``) and unloads.

A reservation covers a generation, not a whole slot: it is released when the generation's text is returned,
so a slot's assist consultations (which may need another model) never wait on the slot's own model.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from experts.pool.process_memory import process_rss_bytes
from state.errors import GenerationStopped, MemoryBudgetError

__all__ = ["ModelPool", "PoolEntry", "Resident", "pool", "reset_pool"]

logger = logging.getLogger(__name__)

MIB = 1024 * 1024
_MONITOR_INTERVAL_S = 0.1


@runtime_checkable
class Resident(Protocol):
    """A backend that holds memory while loaded (llama.cpp, the fake with a footprint)."""

    @property
    def loaded(self) -> bool:
        """Whether its weights are in memory."""
        ...

    def footprint_bytes(self) -> int:
        """The memory it will hold once loaded (an estimate made without loading)."""
        ...

    def load(self) -> None:
        """Load now (blocking)."""
        ...

    def unload(self) -> None:
        """Free the memory; the next ``load`` loads again. Only called when no generation holds it."""
        ...

    def cancel(self) -> None:
        """Stop the generation in progress, and any that start before ``unload``, with GenerationStopped."""
        ...


State = Literal["unloaded", "loading", "loaded"]


@dataclass
class PoolEntry:
    """One model the pool knows, and what happened to it."""

    key: tuple[object, ...]
    label: str
    backend: Any
    footprint: int
    state: State = "unloaded"
    refs: int = 0
    last_used: float = 0.0
    doomed: bool = False
    """Emergency: new users wait, current ones are stopped, and it is unloaded when they have let go."""
    hits: int = 0
    """Acquisitions that found it loaded."""
    loads: int = 0
    preloads: int = 0
    evictions: int = 0
    emergency_evictions: int = 0
    load_seconds: float | None = None
    dispatch_ns: list[int] = field(default_factory=list)
    """Time each acquisition took to hand the model over (the pool's dispatch overhead), last 1000."""


class ModelPool:
    """The process-wide set of loaded models under one memory budget (thread-safe)."""

    def __init__(
        self,
        budget_bytes: int | None = None,
        *,
        preload: bool = True,
        preload_threshold: float = 0.8,
        emergency_threshold: float = 0.95,
        usage_probe: Callable[[], int] | None = None,
    ) -> None:
        """Create an empty pool.

        Args:
            budget_bytes: Memory the models may hold together; None for no limit.
            preload: Whether :meth:`preload` loads anything.
            preload_threshold: Preloading stops once reservations pass this share of the budget.
            emergency_threshold: Measured use past this share of the budget stops the largest model in use.
            usage_probe: Measures the memory the models use now; default: the process's resident memory minus
                what it was when the pool had no model loaded.
        """
        self._cond = threading.Condition()
        self._entries: dict[tuple[object, ...], PoolEntry] = {}
        self.budget = budget_bytes
        self.preload_enabled = preload
        self.preload_threshold = preload_threshold
        self.emergency_threshold = emergency_threshold
        self._probe = usage_probe
        self._baseline: int | None = None
        self._closed = False
        self._monitor: threading.Thread | None = None
        self._peak_usage = 0
        self._waits = 0
        self.on_change: Callable[[], None] | None = None

    # --- configuration ----------------------------------------------------------------------------------

    def configure(
        self, budget_bytes: int | None, *, preload: bool, preload_threshold: float, emergency_threshold: float
    ) -> None:
        """Set the budget and thresholds (the last run to set them wins: the memory is the process's)."""
        with self._cond:
            changed = budget_bytes != self.budget
            self.budget = budget_bytes
            self.preload_enabled = preload
            self.preload_threshold = preload_threshold
            self.emergency_threshold = emergency_threshold
            if changed:
                self._cond.notify_all()

    def entry(self, key: tuple[object, ...], label: str, create: Callable[[], Any]) -> PoolEntry:
        """The entry for ``key``, creating its backend (which loads nothing yet) on first use."""
        with self._cond:
            found = self._entries.get(key)
            if found is not None:
                return found
        backend = create()  # may verify a model file: outside the lock
        footprint = backend.footprint_bytes() if isinstance(backend, Resident) else 0
        with self._cond:
            found = self._entries.get(key)
            if found is None:
                found = PoolEntry(key=key, label=label, backend=backend, footprint=footprint)
                if not isinstance(backend, Resident):
                    found.state = "loaded"  # nothing to load (a remote server, the plain fake)
                self._entries[key] = found
            return found

    # --- use ----------------------------------------------------------------------------------------------

    def acquire(self, entry: PoolEntry, *, timeout: float | None = None) -> None:
        """Hold ``entry``'s model for one generation, loading it (and waiting for room) if needed.

        Raises:
            MemoryBudgetError: If the model is larger than the whole budget.
            GenerationStopped: If the pool is shutting down.
            TimeoutError: If ``timeout`` seconds pass without room.
        """
        started = time.perf_counter_ns()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                self._check_open(entry)
                if not entry.doomed and entry.state == "loaded":
                    entry.refs += 1
                    entry.hits += 1
                    entry.last_used = time.monotonic()
                    self._record_dispatch(entry, started)
                    return
                if not entry.doomed and entry.state == "unloaded":
                    self._check_fits_at_all(entry)
                    if self._room_for(entry.footprint):
                        entry.state = "loading"
                        entry.refs += 1
                        break
                self._waits += 1
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no memory for {entry.label} within {timeout} s")
                self._cond.wait(timeout=1.0 if remaining is None else min(1.0, remaining))
        try:
            self._load(entry)
        except BaseException:
            with self._cond:
                entry.refs -= 1
                self._cond.notify_all()
            raise
        with self._cond:
            entry.last_used = time.monotonic()
            self._record_dispatch(entry, started)
        self._start_monitor()
        self._changed()

    def release(self, entry: PoolEntry) -> None:
        """Let go of ``entry``'s model; a doomed model is unloaded when its last user lets go."""
        unloaded = False
        with self._cond:
            entry.refs -= 1
            entry.last_used = time.monotonic()
            if entry.refs == 0 and (entry.doomed or self._closed) and isinstance(entry.backend, Resident):
                if entry.state == "loaded":
                    self._unload(entry)
                    unloaded = True
                if entry.doomed:
                    entry.doomed = False
                    entry.emergency_evictions += 1
            self._cond.notify_all()
        if unloaded:
            self._changed()

    def preload(self, entry: PoolEntry) -> bool:
        """Start loading ``entry``'s model in the background; returns whether a load was started.

        Only when preloading is on and the model fits under the preload threshold without evicting anything.
        """
        with self._cond:
            if not self.preload_enabled or self._closed or entry.state != "unloaded" or entry.doomed:
                return False
            if self.budget is not None and self._reserved() + entry.footprint > self.preload_threshold * self.budget:
                return False
            entry.state = "loading"
            entry.refs += 1
        thread = threading.Thread(target=self._preload, args=(entry,), name=f"coe-preload-{entry.label}", daemon=True)
        thread.start()
        return True

    def reopen(self) -> None:
        """Accept generations again after :meth:`shutdown` (a new run in the same process does this)."""
        with self._cond:
            self._closed = False

    def shutdown(self) -> None:
        """Stop every generation (they raise GenerationStopped ``cancelled``) and unload idle models.

        The pool stays closed (every acquisition fails at once, so queued slots end quickly) until
        :meth:`reopen`: a new run's ``guard`` node reopens it; resuming a run in the same process after a
        shutdown needs ``pool().reopen()`` first.
        """
        with self._cond:
            self._closed = True
            busy = [e for e in self._entries.values() if e.refs > 0]
            self._cond.notify_all()
        for entry in busy:
            if isinstance(entry.backend, Resident):
                entry.backend.cancel()
        self.unload_idle()

    def settle(self, timeout: float = 60.0) -> bool:
        """Wait until no model is loading (a preload may outlive its run); returns False on timeout.

        The CLI calls this before it reports and exits, so that the process does not end while a background
        thread is inside llama.cpp's loader (its daemon thread would be cut off during interpreter shutdown).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while any(e.state == "loading" for e in self._entries.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(timeout=min(1.0, remaining))
        return True

    def unload_idle(self) -> int:
        """Unload every model no generation holds; returns how many were unloaded."""
        count = 0
        with self._cond:
            for entry in self._entries.values():
                if entry.refs == 0 and entry.state == "loaded" and isinstance(entry.backend, Resident):
                    self._unload(entry)
                    count += 1
            self._cond.notify_all()
        if count:
            self._changed()
        return count

    def forget(self) -> None:
        """Unload idle models and forget every entry (used entries keep their backends until released)."""
        self.unload_idle()
        with self._cond:
            self._entries.clear()
            self._closed = False
            self._peak_usage = 0
            self._waits = 0

    # --- observation --------------------------------------------------------------------------------------

    def reserved(self) -> int:
        """Bytes reserved by loaded and loading models."""
        with self._cond:
            return self._reserved()

    def usage(self) -> int:
        """Memory the models use now, as measured (see ``usage_probe``)."""
        if self._probe is not None:
            return self._probe()
        with self._cond:
            baseline = self._baseline
        return max(0, process_rss_bytes() - baseline) if baseline is not None else 0

    def status(self) -> dict[str, Any]:
        """A JSON-ready snapshot: budget, reservations, measured use, and every model's counters."""
        usage = self.usage()
        with self._cond:
            models = [
                {
                    "model": e.label,
                    "state": "evicting" if e.doomed else e.state,
                    "in_use": e.refs,
                    "reserved_mb": round(e.footprint / MIB, 1) if e.state != "unloaded" else 0.0,
                    "footprint_mb": round(e.footprint / MIB, 1),
                    "hits": e.hits,
                    "loads": e.loads,
                    "preloads": e.preloads,
                    "evictions": e.evictions,
                    "emergency_evictions": e.emergency_evictions,
                    "load_seconds": None if e.load_seconds is None else round(e.load_seconds, 3),
                    "last_used_s_ago": None if not e.last_used else round(time.monotonic() - e.last_used, 1),
                }
                for e in sorted(self._entries.values(), key=lambda e: e.label)
            ]
            return {
                "budget_mb": None if self.budget is None else round(self.budget / MIB, 1),
                "reserved_mb": round(self._reserved() / MIB, 1),
                "measured_mb": round(usage / MIB, 1),
                "peak_measured_mb": round(self._peak_usage / MIB, 1),
                "preload": self.preload_enabled,
                "preload_threshold": self.preload_threshold,
                "emergency_threshold": self.emergency_threshold,
                "waits": self._waits,
                "models": models,
            }

    # --- internals ----------------------------------------------------------------------------------------

    def _check_open(self, entry: PoolEntry) -> None:
        if self._closed:
            raise GenerationStopped(f"{entry.label}: the process is stopping", reason="cancelled")

    def _check_fits_at_all(self, entry: PoolEntry) -> None:
        if self.budget is not None and entry.footprint > self.budget:
            raise MemoryBudgetError(
                f"model {entry.label} needs about {entry.footprint / MIB:.0f} MiB but the models' memory budget is "
                f"{self.budget / MIB:.0f} MiB; raise --memory-limit (COE_MEMORY_LIMIT_MB), pick a larger --profile, "
                "or lower the context length (COE_N_CTX)"
            )

    def _reserved(self) -> int:
        return sum(e.footprint for e in self._entries.values() if e.state != "unloaded")

    def _room_for(self, need: int) -> bool:
        """Whether ``need`` bytes fit, unloading idle models (least recently used first) if that makes room."""
        if self.budget is None or self._reserved() + need <= self.budget:
            return True
        idle = sorted(
            (
                e
                for e in self._entries.values()
                if e.state == "loaded" and e.refs == 0 and isinstance(e.backend, Resident)
            ),
            key=lambda e: e.last_used,
        )
        if self._reserved() - sum(e.footprint for e in idle) + need > self.budget:
            return False  # evicting every idle model would not be enough: evict nothing, wait
        for victim in idle:
            if self._reserved() + need <= self.budget:
                break
            logger.info("evicting %s (idle, least recently used) for %s", victim.label, _mib(need))
            self._unload(victim)
            victim.evictions += 1
        return True

    def _unload(self, entry: PoolEntry) -> None:
        """Unload (lock held). The backend's own lock is free: nobody holds the model."""
        entry.backend.unload()
        entry.state = "unloaded"
        if all(e.state == "unloaded" for e in self._entries.values()):
            self._baseline = None

    def _load(self, entry: PoolEntry) -> None:
        with self._cond:
            if self._baseline is None and all(e.state == "unloaded" or e is entry for e in self._entries.values()):
                self._baseline = process_rss_bytes()
        t0 = time.perf_counter()
        try:
            entry.backend.load()
        except BaseException:
            with self._cond:
                entry.state = "unloaded"
                self._cond.notify_all()
            raise
        with self._cond:
            entry.state = "loaded"
            entry.loads += 1
            entry.load_seconds = time.perf_counter() - t0
            self._cond.notify_all()

    def _preload(self, entry: PoolEntry) -> None:
        try:
            self._load(entry)
            with self._cond:
                entry.preloads += 1
            logger.info("preloaded %s in %.2f s", entry.label, entry.load_seconds or 0.0)
        except Exception as exc:  # a failed preload is not an error: the slot loads (and reports) on demand
            logger.warning("preloading %s failed: %s", entry.label, exc)
        finally:
            with self._cond:
                entry.refs -= 1
                entry.last_used = time.monotonic()
                self._cond.notify_all()
            self._start_monitor()
            self._changed()

    def _record_dispatch(self, entry: PoolEntry, started_ns: int) -> None:
        entry.dispatch_ns.append(time.perf_counter_ns() - started_ns)
        if len(entry.dispatch_ns) > 1000:
            del entry.dispatch_ns[:500]

    def _start_monitor(self) -> None:
        with self._cond:
            if self.budget is None or (self._monitor is not None and self._monitor.is_alive()):
                return
            self._monitor = threading.Thread(target=self._watch, name="coe-pool-monitor", daemon=True)
            self._monitor.start()

    def _watch(self) -> None:
        """Sample measured use while a model is loaded; past the emergency threshold, stop the largest user."""
        while True:
            with self._cond:
                if self.budget is None or not any(e.state != "unloaded" for e in self._entries.values()):
                    self._monitor = None
                    return
                budget = self.budget
            usage = self.usage()
            victim: PoolEntry | None = None
            with self._cond:
                self._peak_usage = max(self._peak_usage, usage)
                if usage > self.emergency_threshold * budget and not any(e.doomed for e in self._entries.values()):
                    holders = [e for e in self._entries.values() if e.refs > 0 and e.state == "loaded"]
                    holders = [e for e in holders if isinstance(e.backend, Resident)]
                    if holders:
                        victim = max(holders, key=lambda e: e.footprint)
                        victim.doomed = True
            if victim is not None:
                logger.warning(
                    "memory use %s passed %.0f%% of the %s budget: stopping %s; its slots run again",
                    _mib(usage),
                    100 * self.emergency_threshold,
                    _mib(budget),
                    victim.label,
                )
                victim.backend.cancel()
                self._changed()
            time.sleep(_MONITOR_INTERVAL_S)

    def _changed(self) -> None:
        if self.on_change is not None:
            with contextlib.suppress(Exception):
                self.on_change()


def _mib(n: int) -> str:
    return f"{n / MIB:.0f} MiB"


_pool = ModelPool()
_pool_lock = threading.Lock()


def pool() -> ModelPool:
    """The process's model pool."""
    return _pool


def reset_pool() -> None:
    """Replace the process's pool with an empty one (tests); models of the old one are unloaded when idle."""
    global _pool
    with _pool_lock:
        old, _pool = _pool, ModelPool()
    old.forget()
