"""The model pool's interface: the handles runs generate with, one per model, shared by every run of the process.

``get_backend(settings, model)`` returns a :class:`PooledModel`: the backend for that model (llama.cpp
in-process, a remote OpenAI-compatible server, or the scripted fake), created lazily on the first slot that
needs it and never at import time, and reused by every run in the process. Each generation holds the model in
the process's :class:`~experts.pool.residency.ModelPool`, which loads it under the memory budget, keeps it while it
is used and evicts it when idle and room is needed. Each backend guards its own model with a lock, so callers
may generate from several threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Literal

from experts.backends.endpoint import Endpoint
from experts.backends.protocol import Generation, GenerationRequest
from experts.models.bundled import resolve_model_path
from experts.pool import residency, status
from experts.pool.residency import ModelPool, PoolEntry
from state.errors import ConfigError, GenerationStopped, ModelUnavailableError
from state.settings import Settings, process_env

__all__ = [
    "BACKENDS",
    "PooledModel",
    "clear_backends",
    "configure_pool",
    "get_backend",
    "model_unavailable",
    "preload",
]

BackendName = Literal["llama", "fake", "remote"]
BACKENDS: tuple[str, ...] = ("llama", "fake", "remote")


class PooledModel:
    """The handle ``get_backend`` returns: an expert backend whose generations hold its model in the pool.

    Each generation acquires the model in the process's :class:`~experts.pool.residency.ModelPool` (loading it,
    waiting for memory, counting its use) and releases it when the text is returned.
    """

    def __init__(self, entry: PoolEntry, owner: ModelPool) -> None:
        self.entry = entry
        self._pool = owner
        self.name: str = entry.backend.name

    @property
    def backend(self) -> Any:
        """The backend itself (a LlamaBackend, RemoteBackend or FakeBackend)."""
        return self.entry.backend

    def supports_grammar(self) -> bool:
        """Whether the backend honours ``GenerationRequest.grammar``."""
        return bool(self.entry.backend.supports_grammar())

    def load(self) -> None:
        """Load the model now (waiting for memory like a generation would), then let it go idle."""
        self._pool.acquire(self.entry)
        self._pool.release(self.entry)

    def generate(self, request: GenerationRequest) -> Generation:
        """Acquire the model, generate, release it (blocking; thread-safe).

        Raises:
            GenerationStopped: ``evicted`` when memory pressure stopped it (run the slot again), ``cancelled``
                when the process is stopping.
            MemoryBudgetError: If the model can never fit the budget.
        """
        self._pool.acquire(self.entry)
        try:
            return self.entry.backend.generate(request)  # type: ignore[no-any-return]
        except GenerationStopped as exc:
            reason = "evicted" if self.entry.doomed else "cancelled"
            raise GenerationStopped(
                f"{self.entry.label}: generation stopped ({'memory pressure' if reason == 'evicted' else 'stopping'})",
                reason=reason,
                slot_id=request.slot_id,
            ) from exc
        finally:
            self._pool.release(self.entry)


_handles: dict[tuple[object, ...], PooledModel] = {}
_handles_lock = threading.Lock()


def get_backend(settings: Settings, model: str | None = None) -> PooledModel:
    """Return the pooled backend for these settings; nothing is loaded until a generation needs it.

    The first call for a model creates its backend (resolving and verifying a GGUF file); the pool loads it
    on the first generation, or earlier when :func:`preload` is asked to. The settings also configure the
    pool's budget (from the hardware profile and ``memory_limit_mb``).

    Args:
        settings: The run's settings (backend, base model, context size, threads, memory budget).
        model: A true expert's own model (bundled name or GGUF path); None for the base model. On the remote
            backend it is the model name sent to the server.
    """
    if settings.backend not in BACKENDS:
        raise ConfigError(
            "settings",
            f"unknown backend {settings.backend!r}; allowed: {', '.join(BACKENDS)}",
            field="backend",
        )
    owner = configure_pool(settings)
    key, label, create = _backend_factory(settings, model)
    with _handles_lock:
        handle = _handles.get(key)
        if handle is None or handle._pool is not owner:
            handle = PooledModel(owner.entry(key, label, create), owner)
            _handles[key] = handle
        return handle


def preload(settings: Settings, model: str | None = None) -> bool:
    """Start loading a model in the background if the pool allows it (see :meth:`ModelPool.preload`)."""
    if model is not None and model_unavailable(settings, model) is not None:
        return False
    handle = get_backend(settings, model)
    return handle._pool.preload(handle.entry)


def configure_pool(settings: Settings) -> ModelPool:
    """Set the process's pool budget and thresholds from a run's settings; returns the pool."""
    owner = residency.pool()
    budget = None
    if settings.memory_mb is not None:
        budget = (settings.memory_mb - settings.memory_overhead_mb) * 1024 * 1024
    owner.on_change = status.publish_soon
    owner.configure(
        budget,
        preload=settings.preload,
        preload_threshold=settings.preload_threshold,
        emergency_threshold=settings.emergency_threshold,
    )
    return owner


def _backend_factory(settings: Settings, model: str | None) -> tuple[tuple[object, ...], str, Callable[[], Any]]:
    """The pool key, a label and a constructor of the backend for ``model`` under ``settings``."""
    # Each backend's module is imported by the first model of that backend: the remote one imports httpx (0.2 s),
    # which runs that never use it (and commands such as coe route) should not pay.
    key: tuple[object, ...]
    endpoint = Endpoint.parse(model)
    if endpoint is not None:  # an expert's own server, whatever the run's backend
        from experts.backends.remote import API_KEY_ENV, RemoteBackend

        on_it = settings.model_copy(update={"remote_url": endpoint.url})
        key_env = endpoint.key_env or API_KEY_ENV
        secret = process_env(key_env, named_by="an expert's endpoint")
        key = ("endpoint", endpoint.url, endpoint.model, settings.remote_timeout, settings.remote_retries, secret)
        sent = endpoint.model or ""  # "" sends the default name, never the run's local model path
        return key, f"remote:{endpoint.label}", lambda: RemoteBackend.from_settings(on_it, sent, key_env)
    if settings.backend == "remote":
        from experts.backends.remote import API_KEY_ENV, RemoteBackend

        name = model if model is not None else (settings.remote_model or settings.model_path)
        key = (
            "remote",
            settings.remote_url,
            name,
            settings.remote_timeout,
            settings.remote_retries,
            process_env(API_KEY_ENV),
        )
        return key, f"remote:{name or 'default'}", lambda: RemoteBackend.from_settings(settings, model)
    if model is not None:
        settings = settings.model_copy(update={"model_path": model})
    if settings.backend == "fake":
        from experts.backends.fake import FakeBackend  # see above

        script = settings.fake_script
        mtime = os.stat(script).st_mtime_ns if script and os.path.exists(script) else None
        label = f"fake:{settings.model_path or 'base'}"
        return ("fake", script, mtime, settings.model_path), label, lambda: FakeBackend.from_settings(settings)
    from experts.backends.llama import LlamaBackend  # see above

    key = (
        "llama",
        settings.model_path,
        settings.n_ctx,
        settings.n_threads,
        settings.gpu_offload,
        settings.prefix_cache,
    )
    label = settings.model_path or "base model"
    return key, label, lambda: LlamaBackend.from_settings(settings)


def model_unavailable(settings: Settings, model: str) -> str | None:
    """Why ``model`` (a bundled name or GGUF path) cannot be loaded by the settings' backend, or None.

    Only the llama backend loads model files; other backends stand in for any model (a remote server is sent
    the model's name and answers for it, or fails the slot with an error naming the model).
    """
    if settings.backend != "llama" or Endpoint.parse(model) is not None:
        return None
    try:
        resolve_model_path(model)
    except ModelUnavailableError as exc:
        return str(exc)
    return None


def clear_backends() -> None:
    """Unload every idle model and forget every backend (models in use are freed once released)."""
    with _handles_lock:
        _handles.clear()
    residency.pool().forget()
