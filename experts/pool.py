"""The model pool: one interface for every expert backend, and the process-wide cache of loaded backends.

Backends are created lazily, on the first slot that needs them, never at import time; a backend that holds
a loaded model (llama.cpp) is reused by every run in the process. Each backend guards its own model with a
lock, so callers may generate from several threads.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Literal, Protocol

from state.errors import ConfigError, ModelUnavailableError
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


_cache: dict[tuple[object, ...], ExpertBackend] = {}
_cache_lock = threading.Lock()


def get_backend(settings: Settings, model: str | None = None) -> ExpertBackend:
    """Return the (cached) backend for these settings, creating it on first use.

    Args:
        settings: The run's settings (backend, base model, context size, threads).
        model: A true expert's own model (bundled name or GGUF path); None for the base model. On the remote
            backend it is the model name sent to the server.
    """
    if settings.backend == "remote":
        from experts.remote import API_KEY_ENV, RemoteBackend

        name = model if model is not None else (settings.remote_model or settings.model_path)
        remote_key = (
            "remote",
            settings.remote_url,
            name,
            settings.remote_timeout,
            settings.remote_retries,
            os.environ.get(API_KEY_ENV),
        )
        with _cache_lock:
            backend = _cache.get(remote_key)
            if backend is None:
                backend = RemoteBackend.from_settings(settings, model)
                _cache[remote_key] = backend
            return backend
    if model is not None:
        settings = settings.model_copy(update={"model_path": model})
    if settings.backend not in BACKENDS:
        raise ConfigError(
            "settings",
            f"unknown backend {settings.backend!r}; allowed: {', '.join(BACKENDS)}",
            field="backend",
        )
    if settings.backend == "fake":
        # The fake backend is cheap and reads its script on creation; never cache it, so every run
        # sees the current script file.
        from experts.fake import FakeBackend

        return FakeBackend.from_settings(settings)
    key = (settings.backend, settings.model_path, settings.n_ctx, settings.n_threads)
    with _cache_lock:
        backend = _cache.get(key)
        if backend is None:
            from experts.llama import LlamaBackend

            backend = LlamaBackend.from_settings(settings)
            _cache[key] = backend
        return backend


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
    """Forget every cached backend (their models are freed once no slot holds them)."""
    with _cache_lock:
        _cache.clear()
