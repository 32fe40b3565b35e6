"""The model pool's interface: one protocol for every expert backend, and the handles runs generate with.

``get_backend(settings, model)`` returns a :class:`PooledModel`: the backend for that model (llama.cpp
in-process, a remote OpenAI-compatible server, or the scripted fake), created lazily on the first slot that
needs it and never at import time, and reused by every run in the process. Each generation holds the model in
the process's :class:`~experts.residency.ModelPool`, which loads it under the memory budget, keeps it while it
is used and evicts it when idle and room is needed. Each backend guards its own model with a lock, so callers
may generate from several threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from experts import residency
from experts.residency import ModelPool, PoolEntry
from state.errors import ConfigError, GenerationStopped, ModelUnavailableError
from state.passport import Settings

BackendName = Literal["llama", "fake", "remote"]
BACKENDS: tuple[str, ...] = ("llama", "fake", "remote")


@dataclass(frozen=True)
class ChatMessage:
    """One chat message sent to an expert."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class GenerationRequest:
    """Everything a backend needs to produce one completion."""

    messages: tuple[ChatMessage, ...]
    max_tokens: int
    temperature: float = 0.0
    grammar: str | None = None
    """A GBNF grammar constraining the output, or None. Backends that cannot honour it ignore it."""
    seed: int = 0
    slot_id: str | None = None
    """Which slot asks (used by the scripted fake backend; informative for others)."""
    slot_title: str | None = None
    attempt: int = 1


@dataclass(frozen=True)
class Generation:
    """A completion and what it cost."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    finish_reason: str = "stop"
    model: str = ""
    extra: dict[str, float] = field(default_factory=dict)


class ExpertBackend(Protocol):
    """What every backend implements. ``generate`` is blocking and thread-safe."""

    name: str

    def generate(self, request: GenerationRequest) -> Generation:
        """Produce one completion (blocking; safe to call from several threads)."""
        ...

    def supports_grammar(self) -> bool:
        """Whether ``GenerationRequest.grammar`` is honoured."""
        ...


class PooledModel:
    """The handle ``get_backend`` returns: an expert backend whose generations hold its model in the pool.

    Each generation acquires the model in the process's :class:`~experts.residency.ModelPool` (loading it,
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
                "execute_slots",
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
    owner.on_change = residency.publish_soon
    owner.configure(
        budget,
        preload=settings.preload,
        preload_threshold=settings.preload_threshold,
        emergency_threshold=settings.emergency_threshold,
    )
    return owner


def _backend_factory(settings: Settings, model: str | None) -> tuple[tuple[object, ...], str, Callable[[], Any]]:
    """The pool key, a label and a constructor of the backend for ``model`` under ``settings``."""
    if settings.backend == "remote":
        from experts.remote import API_KEY_ENV, RemoteBackend

        name = model if model is not None else (settings.remote_model or settings.model_path)
        key: tuple[object, ...] = (
            "remote",
            settings.remote_url,
            name,
            settings.remote_timeout,
            settings.remote_retries,
            os.environ.get(API_KEY_ENV),
        )
        return key, f"remote:{name or 'default'}", lambda: RemoteBackend.from_settings(settings, model)
    if model is not None:
        settings = settings.model_copy(update={"model_path": model})
    if settings.backend == "fake":
        from experts.fake import FakeBackend

        script = settings.fake_script
        mtime = os.stat(script).st_mtime_ns if script and os.path.exists(script) else None
        label = f"fake:{settings.model_path or 'base'}"
        return ("fake", script, mtime, settings.model_path), label, lambda: FakeBackend.from_settings(settings)
    from experts.llama import LlamaBackend

    key = ("llama", settings.model_path, settings.n_ctx, settings.n_threads, settings.gpu_offload)
    label = settings.model_path or "base model"
    return key, label, lambda: LlamaBackend.from_settings(settings)


def model_unavailable(settings: Settings, model: str) -> str | None:
    """Why ``model`` (a bundled name or GGUF path) cannot be loaded by the settings' backend, or None.

    Only the llama backend loads model files; other backends stand in for any model (a remote server is sent
    the model's name and answers for it, or fails the slot with an error naming the model).
    """
    if settings.backend != "llama":
        return None
    from experts.models import resolve_model_path

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
