"""What every expert backend implements, and the messages, requests and completions that pass through it.

Backends (:mod:`experts.backends.llama`, :mod:`experts.backends.remote`, :mod:`experts.backends.fake`) implement
:class:`ExpertBackend`; callers reach them through the model pool (:func:`experts.pool.pooled.get_backend`).
A backend never names the node that calls it: its errors (:class:`~state.errors.BackendError`) name the model
and the slot that asked (``GenerationRequest.slot_id``), and the node reports them under its own name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = ["ChatMessage", "EitherStop", "ExpertBackend", "Generation", "GenerationRequest"]


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
    repeat_penalty: float = 1.0
    """llama.cpp's penalty on tokens among the last 64 (1.0: none). The llama.cpp backend honours it, and the remote
    backend sends it to llama.cpp's servers (``repeat_penalty``, only when not 1.0); the fake backend ignores it."""
    slot_id: str | None = None
    """Which slot asks (used by the scripted fake backend; informative for others)."""
    slot_title: str | None = None
    attempt: int = 1
    time_limit: float | None = None
    """Seconds after which the answer ends where it is, with ``finish_reason`` "time" (None: no limit).
    The llama.cpp and fake backends honour it; the remote backend ignores it (its request timeout still holds)."""
    cancel: threading.Event | None = field(default=None, compare=False, repr=False)
    """Set when the run that asked is cancelled (``runs.cancel`` on the server): this generation stops, raising
    :class:`~state.errors.GenerationStopped`, and the model serves others. The llama.cpp and fake backends honour
    it; the remote backend does not."""
    halt: threading.Event | None = field(default=None, compare=False, repr=False)
    """Set by the caller while the answer is written to end it where it is, with ``finish_reason`` "halted" (what
    was written is kept: the caller saw it go wrong, e.g. a loop, see :class:`engine.slots.loop_watch.LoopWatch`). The
    llama.cpp, fake and remote backends honour it at their next token."""
    shared_prefix: str | None = None
    """The start of the system message that other requests share (an expert's persona and the fixed part of its
    contract), or the system message and the turns after it rendered in the model's chat template (the scope
    reading's labelled turns); None: the whole system message. The llama.cpp backend keeps it read and saves its state
    (:mod:`experts.backends.llama_prefix`); the others ignore it."""
    on_token: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    """Called with each piece of the answer as it is written, in order; the pieces joined are the answer's text.
    The llama.cpp backend calls it per token, the fake backend per word over its scripted delay, the remote backend
    per piece the server streams. It runs on the generating thread: keep it short, and never let it raise."""


class EitherStop:
    """A stop signal set when the backend's own stop (the pool's) or the request's ``cancel`` is set."""

    POLL_SECONDS = 0.02

    def __init__(self, own: threading.Event, request: threading.Event | None) -> None:
        self.own, self.request = own, request

    def is_set(self) -> bool:
        """Whether either is set."""
        return self.own.is_set() or (self.request is not None and self.request.is_set())

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for either; True when one is set."""
        if self.request is None:
            return self.own.wait(timeout)
        end = time.monotonic() + timeout
        while not self.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return False
            self.own.wait(min(left, self.POLL_SECONDS))
        return True


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
