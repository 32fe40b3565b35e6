"""The models experts run on: the pool (memory budget, residency, breakers), its backends, bundled models."""

from experts.models.breaker import Admission, BreakerPolicy, breakers
from experts.models.bundled import BUNDLED_MODELS, DEFAULT_MODEL, resolve_model_path
from experts.models.endpoint import Endpoint
from experts.models.health import health_checks
from experts.models.memory import process_rss_bytes, trim_heap
from experts.models.pool import BACKENDS, PooledModel, clear_backends, get_backend, model_unavailable, preload
from experts.models.protocol import ChatMessage, ExpertBackend, Generation, GenerationRequest
from experts.models.residency import ModelPool, pool, reset_pool

__all__ = [
    "BACKENDS",
    "BUNDLED_MODELS",
    "DEFAULT_MODEL",
    "Admission",
    "BreakerPolicy",
    "ChatMessage",
    "Endpoint",
    "ExpertBackend",
    "Generation",
    "GenerationRequest",
    "ModelPool",
    "PooledModel",
    "breakers",
    "clear_backends",
    "get_backend",
    "health_checks",
    "model_unavailable",
    "pool",
    "preload",
    "process_rss_bytes",
    "reset_pool",
    "resolve_model_path",
    "trim_heap",
]
