"""Circuit breakers per expert: an expert that keeps failing is given a rest, its slots go to the generalist.

One breaker per expert id (per endpoint for a true expert with its own server: see ``breaker_key`` in
:mod:`experts.pool.admission`), process-wide (a server process serves many runs; a failing expert should not be
hammered by each of them). A breaker is:

- **closed**: slots run on the expert; backend failures are timestamped, and ``failures`` of them within the
  last ``window_s`` seconds open it;
- **open**: slots do not run on the expert (the caller falls back to ``general_reasoning``); after
  ``cooldown_s`` seconds the next admission turns it half-open;
- **half-open**: exactly one trial slot runs on the expert, the others still fall back; the trial's success
  closes the breaker (and forgets the failures), its failure re-opens it for another cooldown.

Only backend failures count (a generation that raised); a non-compliant outline is the expert answering badly,
not the expert being unavailable. The key is the expert id, not the model: the ledger, the routing and
``coe experts status`` speak of experts, and the fallback is another expert. Faux experts share the base
model, so a dead base model trips each of them (and the generalist) separately; that is the price of the
simpler key, and the generalist's own breaker then says so. A true expert on its own server is the exception:
its breaker is the endpoint's (``endpoint <url>``), shared by every expert on that server, and health checks
(:mod:`experts.pool.health`) open and close it without a slot having to fail.

All methods are thread-safe (slot workers record outcomes in parallel). The clock is injectable for tests.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from state.passport import utcnow

__all__ = [
    "Admission",
    "BreakerPolicy",
    "BreakerRegistry",
    "BreakerSnapshot",
    "BreakerState",
    "breakers",
]


class BreakerState(StrEnum):
    """Where a breaker stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerPolicy:
    """When a breaker opens and how long it rests (from the run's settings)."""

    failures: int = 5
    """Failures within the window that open the breaker; 0 disables breaking."""
    window_s: float = 60.0
    cooldown_s: float = 30.0
    """Seconds an open breaker waits before it lets one trial through (half-open)."""


@dataclass(frozen=True)
class Admission:
    """The answer to "may this slot run on the expert?"."""

    expert: str
    allowed: bool
    trial: bool
    """This slot is the half-open trial: report its outcome with ``trial=True``."""
    state: BreakerState
    """The breaker's state after the admission (half_open for a trial)."""
    failures: int
    """Failures within the window at admission time."""


@dataclass(frozen=True)
class BreakerSnapshot:
    """A breaker as ``coe experts status`` shows it."""

    expert: str
    state: BreakerState
    failures: int
    """Failures within the window now."""
    trips: int
    """How often the breaker opened (including re-openings after a failed trial)."""
    opened_at: datetime | None
    """Wall-clock time of the last opening (None: never opened, or closed again)."""
    retry_in_s: float | None
    """Seconds until an open breaker allows its half-open trial (None unless open)."""
    trial_running: bool
    last_error: str | None
    health: str | None = None
    """The last health check of an endpoint's breaker (``up: ...`` / ``down: ...``; None: never checked)."""


@dataclass
class _Breaker:
    failures: deque[float] = field(default_factory=deque)
    state: BreakerState = BreakerState.CLOSED
    opened_at: float | None = None
    opened_wall: datetime | None = None
    trips: int = 0
    trial_running: bool = False
    last_error: str | None = None
    health: str | None = None

    def close(self) -> None:
        self.state = BreakerState.CLOSED
        self.failures.clear()
        self.opened_at = self.opened_wall = None
        self.trial_running = False

    def prune(self, now: float, window_s: float) -> None:
        while self.failures and now - self.failures[0] > window_s:
            self.failures.popleft()

    def open(self, now: float) -> None:
        self.state = BreakerState.OPEN
        self.opened_at = now
        self.opened_wall = utcnow()
        self.trips += 1
        self.trial_running = False


class BreakerRegistry:
    """The breakers of all experts, created on first use."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Create an empty registry; ``clock`` returns seconds (monotonic)."""
        self._clock = clock
        self._lock = threading.Lock()
        self._breakers: dict[str, _Breaker] = {}
        self._window_s = BreakerPolicy().window_s

    def admit(self, expert: str, policy: BreakerPolicy) -> Admission:
        """Whether a slot may run on ``expert`` now; an open breaker past its cooldown admits one trial.

        ``expert`` is the breaker's key: an expert id, or ``endpoint <url>`` for an expert on its own server.
        """
        with self._lock:
            now = self._clock()
            b = self._get(expert)
            self._window_s = policy.window_s
            b.prune(now, policy.window_s)
            if policy.failures <= 0 or b.state == BreakerState.CLOSED:
                return Admission(expert, True, False, b.state, len(b.failures))
            if b.state == BreakerState.OPEN and b.opened_at is not None and now - b.opened_at >= policy.cooldown_s:
                b.state = BreakerState.HALF_OPEN
            if b.state == BreakerState.HALF_OPEN and not b.trial_running:
                b.trial_running = True
                return Admission(expert, True, True, b.state, len(b.failures))
            return Admission(expert, False, False, b.state, len(b.failures))

    def record_success(self, expert: str, *, trial: bool = False) -> BreakerState:
        """A slot on ``expert`` produced an answer. The trial's success closes the breaker."""
        with self._lock:
            b = self._get(expert)
            if trial and b.state == BreakerState.HALF_OPEN:
                b.close()
            return b.state

    def record_failure(self, expert: str, policy: BreakerPolicy, error: str = "", *, trial: bool = False) -> bool:
        """A slot on ``expert`` failed in its backend. Returns whether this failure opened the breaker."""
        with self._lock:
            now = self._clock()
            b = self._get(expert)
            b.failures.append(now)
            b.prune(now, policy.window_s)
            b.last_error = error[:300] or b.last_error
            if policy.failures <= 0:
                return False
            if trial and b.state == BreakerState.HALF_OPEN:
                b.open(now)
                return True
            if b.state == BreakerState.CLOSED and len(b.failures) >= policy.failures:
                b.open(now)
                return True
            return False  # open already (a straggler dispatched before the trip), or a non-trial in half-open

    def record_health(
        self, key: str, policy: BreakerPolicy, *, up: bool, detail: str
    ) -> tuple[BreakerState, BreakerState]:
        """A health check of the endpoint behind ``key`` (:mod:`experts.pool.health`); returns (before, after).

        Down opens the breaker at once (an open one starts its cooldown again); up closes an open or half-open
        one. With breaking off (``policy.failures`` 0) the check is only recorded.
        """
        with self._lock:
            b = self._get(key)
            before = b.state
            b.health = f"{'up' if up else 'down'}: {detail}"[:300]
            if policy.failures <= 0:
                return before, b.state
            if up:
                if b.state != BreakerState.CLOSED:
                    b.close()
            else:
                b.last_error = f"health check: {detail}"[:300]
                now = self._clock()
                if b.state == BreakerState.OPEN:
                    b.opened_at = now
                else:
                    b.open(now)
            return before, b.state

    def release_trial(self, expert: str) -> None:
        """The trial ended without a verdict (a harness error): the next admission may start another."""
        with self._lock:
            self._get(expert).trial_running = False

    def snapshot(self, policy: BreakerPolicy | None = None) -> dict[str, BreakerSnapshot]:
        """Every known breaker, by expert id (failures counted in the last window used, or ``policy``'s)."""
        with self._lock:
            now = self._clock()
            window = policy.window_s if policy is not None else self._window_s
            cooldown = (policy or BreakerPolicy()).cooldown_s
            out: dict[str, BreakerSnapshot] = {}
            for expert, b in sorted(self._breakers.items()):
                b.prune(now, window)
                retry = None
                if b.state == BreakerState.OPEN and b.opened_at is not None:
                    retry = max(0.0, cooldown - (now - b.opened_at))
                out[expert] = BreakerSnapshot(
                    expert=expert,
                    state=b.state,
                    failures=len(b.failures),
                    trips=b.trips,
                    opened_at=b.opened_wall,
                    retry_in_s=retry,
                    trial_running=b.trial_running,
                    last_error=b.last_error,
                    health=b.health,
                )
            return out

    def reset(self) -> None:
        """Forget every breaker (tests; a fresh start)."""
        with self._lock:
            self._breakers.clear()

    def _get(self, expert: str) -> _Breaker:
        b = self._breakers.get(expert)
        if b is None:
            b = self._breakers[expert] = _Breaker()
        return b


breakers = BreakerRegistry()
"""The process-wide registry the slot dispatcher uses."""
