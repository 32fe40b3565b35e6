"""The model pool: backends by expert, the memory budget and residency, circuit breakers, health checks, admission."""

from experts.pool.admission import Admitted, admit, breaker_key
from experts.pool.breaker import Admission, BreakerPolicy, breakers
from experts.pool.health import health_checks
from experts.pool.pooled import BACKENDS, PooledModel, clear_backends, get_backend, model_unavailable, preload
from experts.pool.process_memory import process_rss_bytes, trim_heap
from experts.pool.residency import ModelPool, pool, reset_pool

__all__ = [
    "BACKENDS",
    "Admission",
    "Admitted",
    "BreakerPolicy",
    "ModelPool",
    "PooledModel",
    "admit",
    "breaker_key",
    "breakers",
    "clear_backends",
    "get_backend",
    "health_checks",
    "model_unavailable",
    "pool",
    "preload",
    "process_rss_bytes",
    "reset_pool",
    "trim_heap",
]
