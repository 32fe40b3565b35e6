"""The remote expert backend: a slot sent to any OpenAI-compatible chat completions server.

Works with llama-server (llama.cpp), llama-cpp-python's ``python -m llama_cpp.server``, vLLM and Ollama.
``base_url`` is the server's OpenAI base URL, the part before ``/chat/completions``: usually it ends in
``/v1`` (``http://127.0.0.1:8000/v1``; Ollama: ``http://127.0.0.1:11434/v1``).

Each call is one blocking ``POST {base_url}/chat/completions`` (not streamed) with ``model``, ``messages``,
``max_tokens``, ``temperature`` and ``seed``. Connection errors, 429 and 5xx answers are retried a bounded
number of times with exponential backoff (a ``Retry-After`` header is honoured, capped); other 4xx answers
and read timeouts are not (resending a generation that timed out would only double the wait). Every failure
raises :class:`RemoteBackendError`, a :class:`~state.errors.BackendError` naming the URL and the status, so
the slot records a readable error.

Model names. A true expert's own model binding (a bundled name such as ``qwen2.5-coder-1.5b``) is sent as
the request's ``model``; the base model sends ``remote_model`` (else ``model_path``; with neither, the field
is left out and single-model servers use what they loaded). llama-server and llama-cpp-python answer every
name with their loaded model; vLLM and Ollama need the name to be one they serve (run with
``true_experts=false`` to send every slot to ``remote_model``).

Grammars. llama-server and llama-cpp-python's server accept a GBNF ``grammar`` field. With
``grammar="auto"`` (the default) the grammar is sent; a server that rejects the field (a 400/422 answer that
mentions ``grammar``, as OpenAI's API does) gets the request again without it, and the backend stops sending
grammars (``supports_grammar()`` then returns False). Servers that silently ignore unknown fields (vLLM,
Ollama) cannot be detected: their output is unconstrained and the outline check and its retries catch it.

The API key comes only from ``$COE_REMOTE_API_KEY``, read when the backend is created, and is sent as
``Authorization: Bearer``; it is never part of the run's settings, so it never reaches a checkpoint.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Literal

import httpx

from experts.models.protocol import Generation, GenerationRequest
from state.errors import BackendError, ConfigError
from state.settings import Settings, process_env

__all__ = ["API_KEY_ENV", "GrammarPolicy", "RemoteBackend", "RemoteBackendError"]

logger = logging.getLogger(__name__)

API_KEY_ENV = "COE_REMOTE_API_KEY"
"""Environment variable holding the remote server's API key (never recorded in the Passport)."""

GrammarPolicy = Literal["auto", "always", "never"]

_MAX_BACKOFF = 8.0
_MAX_RETRY_AFTER = 30.0


class RemoteBackendError(BackendError):
    """A remote server could not be reached, answered with an error, or sent an unreadable answer."""

    def __init__(self, url: str, message: str, *, status: int | None = None, slot_id: str | None = None) -> None:
        self.url = url
        self.status = status
        super().__init__(message, slot_id=slot_id)


class RemoteBackend:
    """An expert backend that sends each generation to an OpenAI-compatible server.

    ``generate`` is blocking and thread-safe (one shared ``httpx.Client``; the server queues or batches).
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
        backoff: float = 0.5,
        grammar: GrammarPolicy = "auto",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Prepare a backend for one server; nothing is sent until the first ``generate``.

        Args:
            base_url: The OpenAI base URL (``http://host:port/v1``); ``/chat/completions`` is appended.
            model: The ``model`` name sent with each request; None leaves the field out.
            api_key: Sent as ``Authorization: Bearer``; None sends no header.
            timeout: Seconds to wait for an answer (read/write/pool); a generation must finish within it.
            connect_timeout: Seconds to wait for the connection itself.
            retries: Extra attempts after a connection error, a 429 or a 5xx answer.
            backoff: First retry delay in seconds; doubles each retry (capped at 8 s).
            grammar: ``auto`` (send; stop if the server rejects the field), ``always`` or ``never``.
            transport: An httpx transport (tests use ``httpx.MockTransport``).
        """
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError("settings", f"{base_url!r} is not an http(s) URL", field="remote_url")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.retries = retries
        self.backoff = backoff
        self.grammar: GrammarPolicy = grammar
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            headers=headers,
            transport=transport,
        )
        self._grammar_rejected = threading.Event()

    @classmethod
    def from_settings(cls, settings: Settings, model: str | None = None) -> RemoteBackend:
        """Create the backend for a run's settings (``remote_url``, ``remote_model``, timeout, retries).

        Args:
            settings: The run's effective settings.
            model: A true expert's own model binding, sent as the model name; None for the base model.

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
            api_key=process_env(API_KEY_ENV),
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
        self._client.close()

    def generate(self, request: GenerationRequest) -> Generation:
        """Send one chat completion request and wait for the answer (blocking; thread-safe).

        Args:
            request: Messages, limits, sampling settings and an optional GBNF grammar.

        Returns:
            The completion text, token counts from ``usage``, wall time and finish reason.

        Raises:
            RemoteBackendError: Naming the URL (and status) when the server cannot be reached, times out,
                answers with an error after the retries, or sends an answer without a completion.
        """
        body: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
            "stream": False,
        }
        if self.model is not None:
            body["model"] = self.model
        if request.grammar is not None and self.supports_grammar():
            body["grammar"] = request.grammar
        started = time.perf_counter()
        response = self._post(body, request.slot_id)
        if "grammar" in body and self.grammar == "auto" and _rejects_grammar(response):
            logger.warning("%s rejects the grammar field; sending requests without grammars", self.url)
            self._grammar_rejected.set()
            del body["grammar"]
            response = self._post(body, request.slot_id)
        if response.status_code >= 400:
            raise self._status_error(response, request.slot_id)
        seconds = time.perf_counter() - started
        gen = self._generation(response, seconds, request.slot_id)
        if request.on_token is not None and gen.text:
            request.on_token(gen.text)  # not streamed ("stream": false): the whole answer at once
        return gen

    # --- internals ------------------------------------------------------------------------------------

    def _post(self, body: dict[str, Any], slot_id: str | None) -> httpx.Response:
        """POST with bounded retries on connection errors, 429 and 5xx; returns the last response."""
        attempt = 0
        while True:
            try:
                response = self._client.post(self.url, json=body)
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout) and attempt < self.retries:
                    attempt = self._wait(attempt, None, f"connect timeout ({exc})")
                    continue
                raise RemoteBackendError(
                    self.url,
                    f"remote server {self.url} did not answer within {self.timeout:g} s ({type(exc).__name__}); "
                    "raise remote_timeout (COE_REMOTE_TIMEOUT) or lower max_tokens",
                    slot_id=slot_id,
                ) from exc
            except httpx.TransportError as exc:
                if attempt < self.retries:
                    attempt = self._wait(attempt, None, f"{type(exc).__name__}: {exc}")
                    continue
                raise RemoteBackendError(
                    self.url,
                    f"cannot reach remote server {self.url} after {attempt + 1} attempt(s): "
                    f"{type(exc).__name__}: {exc}",
                    slot_id=slot_id,
                ) from exc
            if (response.status_code == 429 or response.status_code >= 500) and attempt < self.retries:
                attempt = self._wait(attempt, response, f"status {response.status_code}")
                continue
            return response

    def _wait(self, attempt: int, response: httpx.Response | None, why: str) -> int:
        delay = min(self.backoff * 2**attempt, _MAX_BACKOFF)
        retry_after = response.headers.get("retry-after") if response is not None else None
        if retry_after is not None:
            try:
                delay = min(max(float(retry_after), 0.0), _MAX_RETRY_AFTER)
            except ValueError:
                pass  # an HTTP date: keep the exponential delay
        logger.warning("%s: %s; retry %d/%d in %.1f s", self.url, why, attempt + 1, self.retries, delay)
        time.sleep(delay)
        return attempt + 1

    def _status_error(self, response: httpx.Response, slot_id: str | None) -> RemoteBackendError:
        status = response.status_code
        detail = _error_detail(response)
        hint = ""
        if status in (401, 403):
            hint = f"; check the API key in ${API_KEY_ENV}"
        elif status == 404:
            hint = (
                f"; does the URL end in /v1, and does the server serve the model {self.model!r}? "
                "(remote_model / COE_REMOTE_MODEL, or true_experts=false)"
            )
        elif status == 429 or status >= 500:
            hint = f" (after {self.retries} retries)"
        return RemoteBackendError(
            self.url,
            f"remote server {self.url} answered {status} {response.reason_phrase}: {detail}{hint}",
            status=status,
            slot_id=slot_id,
        )

    def _generation(self, response: httpx.Response, seconds: float, slot_id: str | None) -> Generation:
        try:
            payload = response.json()
            choice = payload["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise RemoteBackendError(
                self.url,
                f"remote server {self.url} sent no chat completion ({type(exc).__name__}: {exc}): "
                f"{response.text[:200]!r}",
                status=response.status_code,
                slot_id=slot_id,
            ) from exc
        usage = payload.get("usage") or {}
        completion_tokens = int(usage.get("completion_tokens") or 0)
        return Generation(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=completion_tokens,
            seconds=seconds,
            finish_reason=choice.get("finish_reason") or "stop",
            model=str(payload.get("model") or self.model or ""),
            extra={"tokens_per_second": completion_tokens / seconds if seconds > 0 else 0.0},
        )


def _error_detail(response: httpx.Response) -> str:
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


def _rejects_grammar(response: httpx.Response) -> bool:
    """Whether a 400/422 answer says the ``grammar`` field itself is not accepted (not that it is invalid)."""
    if response.status_code not in (400, 422):
        return False
    text = response.text.lower()
    return "grammar" in text and any(word in text for word in _UNKNOWN_FIELD)
