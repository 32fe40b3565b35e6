"""Health checks of an expert's own endpoint: they feed that endpoint's circuit breaker.

A true expert whose binding names its own server (:class:`~experts.backends.endpoint.Endpoint`) has a breaker per
endpoint (:mod:`experts.pool.admission`). Before a slot is admitted to it, at most once every ``endpoint_health_s``
seconds per endpoint, the harness asks the server ``GET {url}/models``, which every OpenAI-compatible server
answers (llama-server, llama-cpp-python's server, vLLM, Ollama), with a short timeout. The answer feeds the
breaker (:meth:`~experts.pool.breaker.BreakerRegistry.record_health`):

- **down**: no connection, a timeout, 500, 502, 503 (llama-server while it loads its model), 504, or 401/403 (the
  key is wrong: every slot would fail too). The breaker opens at once: no slot has to fail, and wait out its
  timeout and retries, to find out;
- **up**: any other answer (a server without ``/models`` that answers 404 or 501 is there). An open or half-open
  breaker closes: the server is back, and its slots go to it without waiting for the cooldown's trial slot.

A check is a few milliseconds on a live server and at most ``HEALTH_TIMEOUT_S`` on a dead one. Results are kept
per endpoint URL, process-wide, like the breakers; a check that is not due returns the last one, marked not fresh,
so only fresh results feed the breaker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from experts.backends.endpoint import Endpoint
from state.settings import process_env

__all__ = ["HEALTH_TIMEOUT_S", "Health", "HealthChecks", "health_checks", "probe"]

HEALTH_TIMEOUT_S = 3.0
"""Seconds a health check waits for the server (connect and read)."""
_DOWN = frozenset({401, 403, 500, 502, 503, 504})
"""Answers that mean the slots would fail: a wrong key, a broken server, one still loading its model (503)."""


@dataclass(frozen=True)
class Health:
    """One health check of an endpoint."""

    url: str
    up: bool
    detail: str
    """What the server answered (``HTTP 200 in 4 ms``), or why it is down."""
    fresh: bool = True
    """Made by this call (False: the last check, not due again yet)."""


def probe(endpoint: Endpoint, timeout_s: float = HEALTH_TIMEOUT_S) -> Health:
    """Ask ``endpoint`` for its models once, with the key its slots send; never raises."""
    import httpx  # as the remote backend: only runs with an endpoint pay for its import

    from experts.backends.remote import API_KEY_ENV

    api_key = process_env(endpoint.key_env or API_KEY_ENV, named_by="an expert's endpoint")
    url = endpoint.url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    t0 = time.perf_counter()
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return Health(endpoint.url, False, f"GET {url}: {type(exc).__name__}: {exc}"[:300])
    ms = (time.perf_counter() - t0) * 1000
    status = response.status_code
    up = status not in _DOWN
    return Health(endpoint.url, up, f"GET {url}: HTTP {status} in {ms:.0f} ms")


class HealthChecks:
    """The last health check of each endpoint, and when it is due again (thread-safe)."""

    def __init__(
        self,
        check: Callable[[Endpoint], Health] = probe,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Checks made by ``check`` (tests pass their own), timed by ``clock`` (seconds, monotonic)."""
        self._check = check
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, Health]] = {}

    def check(self, endpoint: Endpoint, interval_s: float) -> Health | None:
        """A fresh check of ``endpoint`` when one is due, else its last one (None: checks are off).

        Two slots dispatched together check once: the first one in checks, the second gets its result.
        """
        if interval_s <= 0:
            return None
        with self._lock:  # held while checking: a dead server's timeout is paid once, not by every slot
            now = self._clock()
            last = self._last.get(endpoint.url)
            if last is not None and now - last[0] < interval_s:
                return replace(last[1], fresh=False)
            health = self._check(endpoint)
            self._last[endpoint.url] = (self._clock(), health)
            return health

    def last(self) -> dict[str, Health]:
        """The last check of every endpoint checked, by URL."""
        with self._lock:
            return {url: h for url, (_, h) in sorted(self._last.items())}

    def reset(self) -> None:
        """Forget every check (tests; a fresh start)."""
        with self._lock:
            self._last.clear()


health_checks = HealthChecks()
"""The process-wide checks the slot dispatcher uses."""
