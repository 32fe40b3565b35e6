"""The remote expert backend: slots sent to an OpenAI-compatible server (llama-server, vLLM, Ollama ...).

The client is langchain-openai's ``ChatOpenAI``; ours on top: ``max_tokens`` and the GBNF ``grammar`` in
``extra_body`` (a server that rejects the field gets requests without it), no Authorization header without a
key, and streaming for a generation that is watched, cancellable or time-limited; a cancel also cuts the HTTP
exchange itself, even before the first byte of the answer (:class:`_Exchange`). Retries are the openai SDK's;
every failure is a :class:`RemoteBackendError` naming the URL and the status. The key comes only from the
environment, so it never reaches a checkpoint. Usage: docs/models.md; why: docs/decisions/models.md.
"""

from __future__ import annotations

import contextvars
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import httpx
import openai
from langchain_core.messages import AIMessageChunk
from langchain_openai import ChatOpenAI

from experts.backends.protocol import Generation, GenerationRequest
from state.errors import BackendError, ConfigError, GenerationStopped
from state.settings import Settings, process_env

__all__ = ["API_KEY_ENV", "DEFAULT_MODEL_NAME", "GrammarPolicy", "RemoteBackend", "RemoteBackendError"]

logger = logging.getLogger(__name__)

API_KEY_ENV = "COE_REMOTE_API_KEY"
"""Environment variable holding the remote server's API key (never recorded in the Passport)."""
DEFAULT_MODEL_NAME = "default"
"""The ``model`` sent when no name is configured (llama.cpp's servers answer any name with their model)."""

GrammarPolicy = Literal["auto", "always", "never"]

_NO_KEY = "coe-no-api-key"
"""The openai SDK needs a key; this one is taken off the request before it is sent."""


class RemoteBackendError(BackendError):
    """A remote server could not be reached, answered with an error, or sent an unreadable answer."""

    def __init__(self, url: str, message: str, *, status: int | None = None, slot_id: str | None = None) -> None:
        self.url = url
        self.status = status
        super().__init__(message, slot_id=slot_id)


class _TimedOut(openai.OpenAIError):
    """A read, write or pool timeout, raised past the SDK's retry loop (it retries only what is not an OpenAIError)."""


class _Cancelled(openai.OpenAIError):
    """The run was cancelled during the HTTP exchange; an OpenAIError, so the SDK does not retry it."""


class _Exchange:
    """One cancellable generation's HTTP exchange: its own connections, shut down when ``cancel`` is set.

    While the block runs, a watcher thread waits for ``cancel``; the transport opens this generation's
    connections on a transport of their own and records their sockets (httpx's ``trace`` extension). A cancel
    shuts the sockets down, which wakes a read blocked on the server (a close from another thread would not) and
    tells the server its client is gone.
    """

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.sockets: list[Any] = []
        self.transports: list[httpx.BaseTransport] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="coe-remote-cancel", daemon=True)

    def __enter__(self) -> _Exchange:
        self._token = _EXCHANGE.set(self)
        self._watcher.start()
        return self

    def __exit__(self, *exc: object) -> None:
        _EXCHANGE.reset(self._token)
        self._done.set()
        self._watcher.join(timeout=5)
        for transport in self.transports:
            transport.close()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """The trace hook (an httpx request extension): remember the socket of each connection this exchange opens."""
        if event == "connection.connect_tcp.complete" and info.get("return_value") is not None:
            sock = info["return_value"].get_extra_info("socket")
            with self._lock:
                self.sockets.append(sock)
            if self.cancel.is_set():
                self._cut()

    def _watch(self) -> None:
        while not self._done.is_set():
            if self.cancel.wait(0.05):
                self._cut()
                return

    def _cut(self) -> None:
        with self._lock:
            for sock in self.sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:  # already closed
                    pass


_EXCHANGE: contextvars.ContextVar[_Exchange | None] = contextvars.ContextVar("coe_remote_exchange", default=None)
"""The cancellable exchange the current generation runs in (set by ``_ask``, read by the transport)."""


class _Transport(httpx.BaseTransport):
    """The HTTP transport under the SDK.

    No placeholder key on the wire; timeouts other than connect not retried; a cancellable generation's exchange
    on connections of its own (:class:`_Exchange`).
    """

    def __init__(self, inner: httpx.BaseTransport, fresh: Callable[[], httpx.BaseTransport] | None = None) -> None:
        self.inner = inner
        self.fresh = fresh

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``."""
        if request.headers.get("authorization") == f"Bearer {_NO_KEY}":
            del request.headers["authorization"]
        exchange = _EXCHANGE.get()
        inner = self.inner
        if exchange is not None:
            if exchange.cancel.is_set():
                raise _Cancelled("the run was cancelled")
            if self.fresh is not None:
                inner = self.fresh()
                exchange.transports.append(inner)
                request.extensions = {**request.extensions, "trace": exchange.trace}
        try:
            return inner.handle_request(request)
        except httpx.TransportError as exc:
            if exchange is not None and exchange.cancel.is_set():
                raise _Cancelled("the run was cancelled") from exc
            if not isinstance(exc, httpx.TimeoutException) or isinstance(exc, httpx.ConnectTimeout):
                raise
            raise _TimedOut(f"{type(exc).__name__}") from exc

    def close(self) -> None:
        """Close the connections."""
        self.inner.close()


class RemoteBackend:
    """An expert backend that sends each generation to an OpenAI-compatible server.

    ``generate`` is blocking and thread-safe (one shared client; the server queues or batches).
    """

    name = "remote"

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 300.0,
        connect_timeout: float = 10.0,
        retries: int = 2,
        grammar: GrammarPolicy = "auto",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Prepare a backend for one server; nothing is sent until the first ``generate``.

        Args:
            base_url: The OpenAI base URL (``http://host:port/v1``); ``/chat/completions`` is appended.
            model: The ``model`` name sent with each request; None sends :data:`DEFAULT_MODEL_NAME`.
            api_key: Sent as ``Authorization: Bearer``; None sends no header.
            timeout: Seconds to wait for an answer (read/write/pool); a generation must finish within it.
            connect_timeout: Seconds to wait for the connection itself.
            retries: Extra attempts after a connection error, a 408/409/429 or a 5xx answer.
            grammar: ``auto`` (send; stop if the server rejects the field), ``always`` or ``never``.
            transport: An httpx transport (tests use ``httpx.MockTransport``).
        """
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError("settings", f"{base_url!r} is not an http(s) URL", field="remote_url")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.retries = retries
        self.grammar: GrammarPolicy = grammar
        self.timeout = timeout
        # (connect, read, write, pool) as a plain tuple: httpx takes it, and so does httpx2, the client openai builds
        # for ChatOpenAI's async side, which refuses an httpx.Timeout since its 2.17
        limits = (min(connect_timeout, timeout), timeout, timeout, timeout)
        fresh = None if transport is not None else httpx.HTTPTransport  # a test's mock serves every request
        self._http = httpx.Client(
            timeout=httpx.Timeout(limits), transport=_Transport(transport or httpx.HTTPTransport(), fresh)
        )
        self.chat = ChatOpenAI(
            base_url=self.base_url,
            api_key=api_key or _NO_KEY,
            model=model or DEFAULT_MODEL_NAME,
            timeout=limits,
            max_retries=retries,
            http_client=self._http,
            stream_usage=False,  # stream_options is not accepted by every server; tokens are counted as they come
        )
        self._grammar_rejected = threading.Event()

    @classmethod
    def from_settings(cls, settings: Settings, model: str | None = None, key_env: str = API_KEY_ENV) -> RemoteBackend:
        """Create the backend for a run's settings (``remote_url``, ``remote_model``, timeout, retries).

        Args:
            settings: The run's effective settings.
            model: A true expert's own model binding, sent as the model name; None for the base model.
            key_env: The environment variable that holds the server's API key.

        Raises:
            ConfigError: If ``remote_url`` is unset or not an http(s) URL.
        """
        if not settings.remote_url:
            raise ConfigError(
                "settings",
                "the remote backend needs the server's OpenAI base URL (e.g. http://127.0.0.1:8000/v1): "
                "set COE_REMOTE_URL or the run context field remote_url",
                field="remote_url",
            )
        name = model if model is not None else (settings.remote_model or settings.model_path)
        return cls(
            settings.remote_url,
            model=name,
            api_key=process_env(key_env, named_by=None if key_env == API_KEY_ENV else "an expert's endpoint"),
            timeout=settings.remote_timeout,
            retries=settings.remote_retries,
        )

    def supports_grammar(self) -> bool:
        """Whether a GBNF grammar is sent: unless the policy is ``never`` or the server rejected the field.

        A server that accepts the field but ignores it (vLLM, Ollama) still counts as supporting it.
        """
        return self.grammar != "never" and not (self.grammar == "auto" and self._grammar_rejected.is_set())

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def generate(self, request: GenerationRequest) -> Generation:
        """Ask the server for one chat completion and wait for it (blocking; thread-safe).

        Args:
            request: Messages, limits, sampling settings and an optional GBNF grammar.

        Returns:
            The completion text, token counts, wall time and finish reason.

        Raises:
            RemoteBackendError: Naming the URL (and status) when the server cannot be reached, times out,
                answers with an error after the retries, or sends an answer without a completion.
            GenerationStopped: When the request's run is cancelled while its answer streams.
        """
        grammar = request.grammar if request.grammar is not None and self.supports_grammar() else None
        try:
            return _alone(self._ask, request, grammar)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            if grammar is None or self.grammar != "auto" or not _rejects_grammar(exc.response):
                raise self._failure(exc, request.slot_id) from exc
            logger.warning("%s rejects the grammar field; sending requests without grammars", self.url)
            self._grammar_rejected.set()
        except (openai.OpenAIError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise self._failure(exc, request.slot_id) from exc
        try:
            return _alone(self._ask, request, None)
        except (openai.OpenAIError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise self._failure(exc, request.slot_id) from exc

    # --- internals ------------------------------------------------------------------------------------

    def _ask(self, request: GenerationRequest, grammar: str | None) -> Generation:
        extra: dict[str, Any] = {"max_tokens": request.max_tokens}
        if grammar is not None:
            extra["grammar"] = grammar
        if request.repeat_penalty != 1.0:  # llama.cpp's servers read it
            extra["repeat_penalty"] = request.repeat_penalty
        messages = [(m.role, m.content) for m in request.messages]
        options: dict[str, Any] = {"temperature": request.temperature, "seed": request.seed, "extra_body": extra}
        started = time.perf_counter()
        if request.on_token is None and request.cancel is None and request.time_limit is None and request.halt is None:
            message = self.chat.invoke(messages, **options)
            seconds = time.perf_counter() - started
            if not isinstance(message.content, str) or "finish_reason" not in message.response_metadata:
                raise ValueError(f"no chat completion in {message.response_metadata!r}")
            usage = message.response_metadata.get("token_usage") or {}
            return self._generation(
                message.content,
                int(usage.get("prompt_tokens") or 0),
                int(usage.get("completion_tokens") or 0),
                seconds,
                message.response_metadata.get("finish_reason") or "stop",
                message.response_metadata.get("model_name"),
            )
        if request.cancel is None:
            return self._stream(request, messages, options, started)
        try:
            with _Exchange(request.cancel):
                return self._stream(request, messages, options, started)
        except (openai.OpenAIError, httpx.TransportError) as exc:
            if not request.cancel.is_set():
                raise
            raise GenerationStopped(
                f"{self.url}: generation stopped, its run was cancelled", "cancelled", slot_id=request.slot_id
            ) from exc

    def _stream(
        self, request: GenerationRequest, messages: Sequence[tuple[str, str]], options: dict[str, Any], started: float
    ) -> Generation:
        pieces: list[str] = []
        finish, served = "stop", None
        stream: Iterator[AIMessageChunk] = self.chat.stream(messages, **options)
        try:
            for chunk in stream:
                if request.cancel is not None and request.cancel.is_set():
                    raise GenerationStopped(
                        f"{self.url}: generation stopped, its run was cancelled", "cancelled", slot_id=request.slot_id
                    )
                piece = chunk.content if isinstance(chunk.content, str) else ""
                finish = chunk.response_metadata.get("finish_reason") or finish
                served = chunk.response_metadata.get("model_name") or served
                if piece:
                    pieces.append(piece)
                    if request.on_token is not None:
                        request.on_token(piece)
                    if request.time_limit is not None and time.perf_counter() - started > request.time_limit:
                        finish = "time"
                        break
                    if request.halt is not None and request.halt.is_set():
                        finish = "halted"
                        break
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # stops reading the server's answer (a cancelled or timed-out generation)
        seconds = time.perf_counter() - started
        # Streamed chunks carry no usage (stream_options is not sent): llama.cpp's servers send one token a chunk.
        return self._generation("".join(pieces), 0, len(pieces), seconds, finish, served)

    def _generation(
        self, text: str, prompt: int, completion: int, seconds: float, finish: str, served: str | None
    ) -> Generation:
        return Generation(
            text=text,
            prompt_tokens=prompt,
            completion_tokens=completion,
            seconds=seconds,
            finish_reason=finish,
            model=str(served or self.model or ""),
            extra={"tokens_per_second": completion / seconds if seconds > 0 else 0.0},
        )

    def _failure(self, exc: Exception, slot_id: str | None) -> RemoteBackendError:
        if isinstance(exc, _TimedOut | openai.APITimeoutError):
            return RemoteBackendError(
                self.url,
                f"remote server {self.url} did not answer within {self.timeout:g} s ({exc}); "
                "raise remote_timeout (COE_REMOTE_TIMEOUT) or lower max_tokens",
                slot_id=slot_id,
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return RemoteBackendError(
                self.url,
                f"cannot reach remote server {self.url} after {self.retries + 1} attempt(s): "
                f"{type(cause).__name__}: {cause}",
                slot_id=slot_id,
            )
        if isinstance(exc, openai.APIStatusError):
            return self._status_error(exc.response, slot_id)
        return RemoteBackendError(
            self.url, f"remote server {self.url} sent no chat completion ({type(exc).__name__}: {exc})", slot_id=slot_id
        )

    def _status_error(self, response: Any, slot_id: str | None) -> RemoteBackendError:
        status = response.status_code
        detail = _error_detail(response)
        hint = ""
        if status in (401, 403):
            hint = f"; check the API key in ${API_KEY_ENV} (or the variable the expert's endpoint names)"
        elif status == 404:
            hint = (
                f"; does the URL end in /v1, and does the server serve the model {self.model!r}? "
                "(remote_model / COE_REMOTE_MODEL, or the expert's endpoint model)"
            )
        elif status in (408, 409, 429) or status >= 500:
            hint = f" (after {self.retries} retries)"
        return RemoteBackendError(
            self.url,
            f"remote server {self.url} answered {status} {response.reason_phrase}: {detail}{hint}",
            status=status,
            slot_id=slot_id,
        )


def _alone(ask: Callable[[GenerationRequest, str | None], Generation], *args: Any) -> Generation:
    """Run ``ask`` outside the caller's context: the chat model must not report to a LangGraph run's callbacks.

    The slot's tokens reach ``stream_mode="messages"`` once, through ``on_token`` (:mod:`engine.slots.streaming`), as
    every backend's do; ChatOpenAI would otherwise also report them to the callbacks it finds in the context.
    """
    return contextvars.Context().run(ask, *args)


def _error_detail(response: Any) -> str:
    """The server's error message: OpenAI's ``{"error": {"message": ...}}``, FastAPI's ``detail``, or text."""
    try:
        payload = response.json()
    except ValueError:
        return response.text[:300] or "(empty body)"
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if error:
            return str(error)[:300]
        if payload.get("detail"):
            return str(payload["detail"])[:300]
    return str(payload)[:300]


_UNKNOWN_FIELD = ("unrecognized", "unknown", "not permitted", "extra", "unsupported", "not supported")


def _rejects_grammar(response: Any) -> bool:
    """Whether a 400/422 answer says the ``grammar`` field itself is not accepted (not that it is invalid)."""
    if response.status_code not in (400, 422):
        return False
    text = response.text.lower()
    return "grammar" in text and any(word in text for word in _UNKNOWN_FIELD)
