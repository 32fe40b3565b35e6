"""The model pool under a budget: reservations, waiting, reference counts, LRU, preloading, emergency eviction."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from experts.backends.protocol import ChatMessage, Generation, GenerationRequest
from experts.pool.pooled import PooledModel
from experts.pool.residency import MIB, ModelPool, PoolEntry
from state.errors import GenerationStopped, MemoryBudgetError


class Model:
    """A pretend model: a footprint, a load time, and a generation that can be held open and stopped."""

    name = "test"

    def __init__(self, label: str, mb: int, load_s: float = 0.0) -> None:
        self.label = label
        self.mb = mb
        self.load_s = load_s
        self._loaded = False
        self.loads = 0
        self.unloads = 0
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Event()
        self._stop = threading.Event()

    @property
    def loaded(self) -> bool:
        return self._loaded

    def footprint_bytes(self) -> int:
        return self.mb * MIB

    def load(self) -> None:
        time.sleep(self.load_s)
        self._loaded = True
        self.loads += 1

    def unload(self) -> None:
        assert self._loaded, f"{self.label} unloaded while not loaded"
        self._loaded = False
        self.unloads += 1
        self._stop.clear()

    def cancel(self) -> None:
        self._stop.set()

    def supports_grammar(self) -> bool:
        return False

    def generate(self, request: GenerationRequest) -> Generation:
        assert self._loaded, f"{self.label} generated while not loaded"
        self.started.set()
        while not self.release.wait(0.01):
            if self._stop.is_set():
                raise GenerationStopped("stopped", "stopped", slot_id=request.slot_id)
        return Generation(text=f"from {self.label}")


REQUEST = GenerationRequest(messages=(ChatMessage("user", "hi"),), max_tokens=8)


def _entry(pool: ModelPool, model: Model) -> PoolEntry:
    return pool.entry((model.label,), model.label, lambda: model)


def _handle(pool: ModelPool, model: Model) -> PooledModel:
    return PooledModel(_entry(pool, model), pool)


def test_models_load_on_first_use_and_stay_loaded_while_they_fit() -> None:
    pool = ModelPool(1000 * MIB)
    a, b = Model("a", 400), Model("b", 400)
    assert _handle(pool, a).generate(REQUEST).text == "from a"
    assert _handle(pool, b).generate(REQUEST).text == "from b"
    _handle(pool, a).generate(REQUEST)
    assert (a.loads, b.loads, a.unloads, b.unloads) == (1, 1, 0, 0)
    status = {m["model"]: m for m in pool.status()["models"]}
    assert status["a"]["hits"] == 1 and status["a"]["loads"] == 1 and status["b"]["hits"] == 0
    assert pool.reserved() == 800 * MIB


def test_least_recently_used_idle_model_is_evicted_for_room() -> None:
    pool = ModelPool(1000 * MIB)
    a, b, c = Model("a", 400), Model("b", 400), Model("c", 400)
    _handle(pool, a).generate(REQUEST)
    _handle(pool, b).generate(REQUEST)
    _handle(pool, a).generate(REQUEST)  # b is now the least recently used
    _handle(pool, c).generate(REQUEST)
    assert b.unloads == 1 and a.unloads == 0 and c.loaded and a.loaded
    assert {m["model"]: m["evictions"] for m in pool.status()["models"]} == {"a": 0, "b": 1, "c": 0}


def test_model_in_use_is_never_evicted_and_the_newcomer_waits_without_spinning() -> None:
    pool = ModelPool(1000 * MIB)
    a, b = Model("a", 600), Model("b", 600)
    a.release.clear()
    results: dict[str, str] = {}
    ta = threading.Thread(target=lambda: results.update(a=_handle(pool, a).generate(REQUEST).text))
    ta.start()
    assert a.started.wait(5)
    tb = threading.Thread(target=lambda: results.update(b=_handle(pool, b).generate(REQUEST).text))
    tb.start()
    time.sleep(0.3)
    assert not b.loaded and a.unloads == 0 and "b" not in results  # b waits: a is in use
    assert pool.status()["waits"] <= 3  # one wait per wake-up (1 s timeout or a notify), not a busy loop
    a.release.set()
    ta.join(5)
    tb.join(5)
    assert results == {"a": "from a", "b": "from b"}
    assert a.unloads == 1 and b.loaded


def test_waiting_slot_gives_up_after_its_timeout() -> None:
    pool = ModelPool(1000 * MIB)
    a, b = Model("a", 600), Model("b", 600)
    ea, eb = _entry(pool, a), _entry(pool, b)
    pool.acquire(ea)
    with pytest.raises(TimeoutError, match="no memory for b"):
        pool.acquire(eb, timeout=0.2)
    pool.release(ea)
    pool.acquire(eb, timeout=1)  # a is idle now: evicted for b
    assert a.unloads == 1


def test_model_larger_than_the_budget_fails_at_once_naming_both() -> None:
    pool = ModelPool(500 * MIB)
    with pytest.raises(MemoryBudgetError, match=r"model big needs about 600 MiB .* budget is 500 MiB.*--memory-limit"):
        _handle(pool, Model("big", 600)).generate(REQUEST)


def test_eviction_only_when_it_makes_enough_room() -> None:
    """Two idle small models cannot make room for a big one while a third is in use: nothing is evicted."""
    pool = ModelPool(1000 * MIB)
    busy, s1, big = Model("busy", 500), Model("s1", 200), Model("big", 700)
    _handle(pool, s1).generate(REQUEST)
    eb = _entry(pool, busy)
    pool.acquire(eb)
    with pytest.raises(TimeoutError):
        pool.acquire(_entry(pool, big), timeout=0.2)
    assert s1.unloads == 0  # evicting it would not have been enough
    pool.release(eb)


def test_preload_loads_in_the_background_below_the_threshold_only() -> None:
    pool = ModelPool(1000 * MIB, preload_threshold=0.8)
    a, b, c = Model("a", 500, load_s=0.2), Model("b", 200), Model("c", 200)
    ea = _entry(pool, a)
    t0 = time.perf_counter()
    assert pool.preload(ea)
    assert time.perf_counter() - t0 < 0.1  # did not wait for the load
    assert not pool.preload(ea)  # already loading
    pool.acquire(ea)  # waits for the preload to finish, then a hit
    pool.release(ea)
    assert a.loads == 1
    assert pool.preload(_entry(pool, b))  # 700 of 1000 MiB: under 80%
    deadline = time.monotonic() + 5
    while not b.loaded and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pool.preload(_entry(pool, c))  # 900 MiB would pass 80%: not preloaded, nothing evicted
    assert not c.loaded and a.unloads == 0 and b.unloads == 0
    assert {m["model"]: m["preloads"] for m in pool.status()["models"]} == {"a": 1, "b": 1, "c": 0}


def test_settle_waits_for_a_preload_in_flight() -> None:
    pool = ModelPool(1000 * MIB)
    a = Model("a", 100, load_s=0.3)
    assert pool.preload(_entry(pool, a))
    assert pool.settle(timeout=5) and a.loaded
    slow = Model("slow", 100, load_s=2.0)
    assert pool.preload(_entry(pool, slow))
    assert not pool.settle(timeout=0.1)


def test_preload_off_does_nothing() -> None:
    pool = ModelPool(1000 * MIB, preload=False)
    assert not pool.preload(_entry(pool, Model("a", 100)))


def test_emergency_stops_the_largest_model_in_use_and_unloads_it_others_continue() -> None:
    small, large = Model("small", 200), Model("large", 500)
    runaway = threading.Event()
    # The large model's generation runs away: use climbs past 95% until it is unloaded.
    pool = ModelPool(1000 * MIB, usage_probe=lambda: (960 if runaway.is_set() and large.loaded else 300) * MIB)
    small.release.clear()
    large.release.clear()
    outcomes: dict[str, Any] = {}

    def run(name: str, model: Model) -> None:
        try:
            outcomes[name] = _handle(pool, model).generate(REQUEST).text
        except GenerationStopped as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=run, args=(n, m)) for n, m in (("small", small), ("large", large))]
    for t in threads:
        t.start()
    assert small.started.wait(5) and large.started.wait(5)
    runaway.set()
    threads[1].join(5)
    stopped = outcomes["large"]
    assert isinstance(stopped, GenerationStopped) and stopped.reason == "evicted"
    assert large.unloads == 1 and not large.loaded
    assert "small" not in outcomes and small.loaded  # the other generation goes on
    small.release.set()
    threads[0].join(5)
    assert outcomes["small"] == "from small"
    large.release.set()
    runaway.clear()
    assert _handle(pool, large).generate(REQUEST).text == "from large"  # reloaded on demand
    status = {m["model"]: m for m in pool.status()["models"]}
    assert status["large"]["emergency_evictions"] == 1 and status["large"]["loads"] == 2


def test_shutdown_cancels_generations_and_unloads() -> None:
    pool = ModelPool(1000 * MIB)
    a = Model("a", 100)
    a.release.clear()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            _handle(pool, a).generate(REQUEST)
        except GenerationStopped as exc:
            outcome["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    assert a.started.wait(5)
    pool.shutdown()
    t.join(5)
    assert outcome["error"].reason == "cancelled"
    assert not a.loaded
    with pytest.raises(GenerationStopped, match="stopping"):
        _handle(pool, Model("b", 100)).generate(REQUEST)
    pool.configure(1000 * MIB, preload=True, preload_threshold=0.8, emergency_threshold=0.95)
    with pytest.raises(GenerationStopped):  # configuring does not reopen: queued slots of the stopped run end
        _handle(pool, Model("c", 100)).generate(REQUEST)
    pool.reopen()  # a new run
    a.release.set()
    assert _handle(pool, a).generate(REQUEST).text == "from a"


def test_failed_load_releases_its_reservation() -> None:
    pool = ModelPool(1000 * MIB)
    broken = Model("broken", 600)

    def fail() -> None:
        raise OSError("bad file")

    broken.load = fail  # type: ignore[method-assign]
    with pytest.raises(OSError):
        _handle(pool, broken).generate(REQUEST)
    assert pool.reserved() == 0
    _handle(pool, Model("ok", 600)).generate(REQUEST)


def test_warm_dispatch_is_recorded() -> None:
    pool = ModelPool(1000 * MIB)
    handle = _handle(pool, Model("a", 100))
    for _ in range(20):
        handle.generate(REQUEST)
    assert len(handle.entry.dispatch_ns) == 20
