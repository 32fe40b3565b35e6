"""The remote backend against fake OpenAI-compatible servers (httpx.MockTransport and a local http.server)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from experts.backends.protocol import ChatMessage, GenerationRequest
from experts.backends.remote import RemoteBackend, RemoteBackendError
from experts.pool.pooled import BACKENDS, clear_backends, get_backend, model_unavailable
from state.context import RunContext, resolve_settings
from state.errors import BackendError, ConfigError, GenerationStopped
from tests.unit.local_http import serving

URL = "http://remote.test/v1"
REQUEST = GenerationRequest(
    messages=(ChatMessage("system", "You are terse."), ChatMessage("user", "Say hi")),
    max_tokens=50,
    temperature=0.2,
    seed=3,
    slot_id="s1",
)


def completion(text: str = "## Outline\n1. Hi", **usage: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19, **usage},
    }


class Recorder:
    """A MockTransport handler that answers from a list of (status, body) and records the requests."""

    def __init__(self, *answers: tuple[int, Any]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        status, body = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(body, Exception):
            raise body
        return httpx.Response(status, json=body) if not isinstance(body, str) else httpx.Response(status, text=body)

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


def backend(handler: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> RemoteBackend:
    return RemoteBackend(URL, transport=httpx.MockTransport(handler), **kwargs)


def test_the_timeouts_reach_both_clients_as_a_plain_tuple() -> None:
    # httpx2 (openai's own client, built for ChatOpenAI's async side) refuses an httpx.Timeout since its 2.17
    b = RemoteBackend(URL, timeout=30, connect_timeout=5)
    limits = b._http.timeout
    assert (limits.connect, limits.read, limits.write, limits.pool) == (5, 30, 30, 30)
    assert b.chat.request_timeout == (5, 30, 30, 30)
    assert RemoteBackend(URL, timeout=2, connect_timeout=5)._http.timeout.connect == 2  # never above the whole


def test_success_maps_the_answer_and_usage() -> None:
    rec = Recorder((200, completion()))
    gen = backend(rec, model="qwen").generate(REQUEST)
    assert gen.text == "## Outline\n1. Hi"
    assert (gen.prompt_tokens, gen.completion_tokens, gen.finish_reason) == (12, 7, "length")
    assert gen.model == "served-model" and gen.seconds >= 0
    (request,) = rec.requests
    assert str(request.url) == "http://remote.test/v1/chat/completions" and request.method == "POST"
    body = rec.bodies()[0]
    assert body["model"] == "qwen" and body["max_tokens"] == 50 and body["temperature"] == 0.2
    assert body["seed"] == 3 and body["stream"] is False and "max_completion_tokens" not in body
    assert body["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi"}]
    assert "grammar" not in body and "repeat_penalty" not in body  # 1.0, no penalty: nothing to send
    assert "authorization" not in request.headers


def test_a_repeat_penalty_goes_to_the_server_in_llama_cpps_field() -> None:
    rec = Recorder((200, completion()))
    backend(rec).generate(GenerationRequest(messages=REQUEST.messages, max_tokens=20, repeat_penalty=1.1))
    assert rec.bodies()[0]["repeat_penalty"] == 1.1


def test_missing_usage_counts_zero_and_a_default_model_name_when_unnamed() -> None:
    answer = completion()
    del answer["usage"]
    rec = Recorder((200, answer))
    gen = backend(rec).generate(REQUEST)
    assert (gen.prompt_tokens, gen.completion_tokens) == (0, 0)
    assert rec.bodies()[0]["model"] == "default"


def test_api_key_is_sent_as_bearer() -> None:
    rec = Recorder((200, completion()))
    backend(rec, api_key="sk-secret").generate(REQUEST)
    assert rec.requests[0].headers["authorization"] == "Bearer sk-secret"


def test_grammar_field_is_passed() -> None:
    rec = Recorder((200, completion()))
    b = backend(rec)
    assert b.supports_grammar()
    b.generate(GenerationRequest(messages=REQUEST.messages, max_tokens=20, grammar='root ::= "a"'))
    assert rec.bodies()[0]["grammar"] == 'root ::= "a"'


def test_grammar_policy_never_sends_none() -> None:
    rec = Recorder((200, completion()))
    b = backend(rec, grammar="never")
    assert not b.supports_grammar()
    b.generate(GenerationRequest(messages=REQUEST.messages, max_tokens=20, grammar='root ::= "a"'))
    assert "grammar" not in rec.bodies()[0]


def test_a_server_that_rejects_the_grammar_field_is_asked_again_without_it() -> None:
    rejected = {"error": {"message": "Unrecognized request argument supplied: grammar", "type": "invalid_request"}}
    rec = Recorder((400, rejected), (200, completion()))
    b = backend(rec)
    gen = b.generate(GenerationRequest(messages=REQUEST.messages, max_tokens=20, grammar='root ::= "a"'))
    assert gen.text.startswith("## Outline")
    assert "grammar" in rec.bodies()[0] and "grammar" not in rec.bodies()[1]
    assert not b.supports_grammar()  # remembered: the slot loop stops asking for a grammar


def test_retries_on_503_then_succeeds() -> None:
    rec = Recorder((503, {"error": "loading model"}), (503, {"error": "loading model"}), (200, completion()))
    gen = backend(rec, retries=2).generate(REQUEST)
    assert gen.text and len(rec.requests) == 3


def test_retries_on_429_and_connection_errors() -> None:
    rec = Recorder((429, {"error": "busy"}), (0, httpx.ConnectError("refused")), (200, completion()))
    assert backend(rec, retries=3).generate(REQUEST).text
    assert len(rec.requests) == 3


def test_5xx_after_the_retries_names_url_and_status() -> None:
    rec = Recorder((500, {"error": {"message": "CUDA out of memory"}}))
    with pytest.raises(RemoteBackendError) as info:
        backend(rec, retries=2).generate(REQUEST)
    assert len(rec.requests) == 3
    message = str(info.value)
    assert "http://remote.test/v1/chat/completions" in message and "500" in message
    assert "CUDA out of memory" in message and "after 2 retries" in message and "slot s1" in message
    assert info.value.status == 500 and isinstance(info.value, BackendError)


def test_no_retry_on_400() -> None:
    rec = Recorder((400, {"detail": "max_tokens too large"}))
    with pytest.raises(RemoteBackendError, match=r"answered 400 Bad Request: max_tokens too large") as info:
        backend(rec, retries=5).generate(REQUEST)
    assert len(rec.requests) == 1 and info.value.status == 400


def test_401_and_404_say_what_to_check() -> None:
    with pytest.raises(RemoteBackendError, match="COE_REMOTE_API_KEY"):
        backend(Recorder((401, {"error": "bad key"}))).generate(REQUEST)
    with pytest.raises(RemoteBackendError, match=r"/v1.*'gpt-x'"):
        backend(Recorder((404, "Not Found")), model="gpt-x").generate(REQUEST)


def test_an_answer_without_choices_is_an_error() -> None:
    with pytest.raises(RemoteBackendError, match="sent no chat completion"):
        backend(Recorder((200, {"object": "list"}))).generate(REQUEST)
    with pytest.raises(RemoteBackendError, match="sent no chat completion"):
        backend(Recorder((200, "<html>proxy</html>"))).generate(REQUEST)


def test_connection_refused_names_the_url_after_retries() -> None:
    rec = Recorder((0, httpx.ConnectError("Connection refused")))
    with pytest.raises(RemoteBackendError, match=r"cannot reach remote server http://remote.test/v1/chat/completions"):
        backend(rec, retries=1).generate(REQUEST)
    assert len(rec.requests) == 2


def sse(*pieces: str, finish: str = "stop") -> str:
    """A streamed chat completion: one chunk per piece, then the finish reason, then [DONE]."""

    def event(delta: dict[str, Any], reason: str | None = None) -> str:
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "served-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
        }
        return f"data: {json.dumps(chunk)}\n\n"

    body = event({"role": "assistant", "content": ""}) + "".join(event({"content": p}) for p in pieces)
    return body + event({}, finish) + "data: [DONE]\n\n"


def streaming(text: str) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["stream"] is True and body["max_tokens"] == 50
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})

    return handler


def test_a_watched_generation_streams_each_piece_as_the_server_writes_it() -> None:
    seen: list[str] = []
    request = GenerationRequest(messages=REQUEST.messages, max_tokens=50, slot_id="s1", on_token=seen.append)
    gen = backend(streaming(sse("## Outline", "\n1.", " Hi", finish="length"))).generate(request)
    assert seen == ["## Outline", "\n1.", " Hi"] and gen.text == "## Outline\n1. Hi"
    assert (gen.completion_tokens, gen.finish_reason, gen.model) == (3, "length", "served-model")


def test_a_cancelled_run_stops_reading_the_stream() -> None:
    cancel = threading.Event()
    seen: list[str] = []

    def watch(piece: str) -> None:
        seen.append(piece)
        cancel.set()

    request = GenerationRequest(messages=REQUEST.messages, max_tokens=50, slot_id="s1", on_token=watch, cancel=cancel)
    with pytest.raises(GenerationStopped, match="cancelled") as info:
        backend(streaming(sse("a", "b", "c"))).generate(request)
    assert seen == ["a"] and info.value.reason == "cancelled"


def test_a_time_limit_ends_the_streamed_answer_where_it_is() -> None:
    request = GenerationRequest(messages=REQUEST.messages, max_tokens=50, time_limit=0.0)
    gen = backend(streaming(sse("first", "second"))).generate(request)
    assert gen.text == "first" and gen.finish_reason == "time"


def test_a_halt_ends_the_streamed_answer_where_it_is() -> None:
    halt = threading.Event()
    seen: list[str] = []

    def watch(piece: str) -> None:  # what the loop watch does (engine.slots.loop_watch): it saw enough
        seen.append(piece)
        if len(seen) == 2:
            halt.set()

    request = GenerationRequest(messages=REQUEST.messages, max_tokens=50, on_token=watch, halt=halt)
    gen = backend(streaming(sse("one", " two", " three", " four"))).generate(request)
    assert gen.text == "one two" and gen.finish_reason == "halted" and seen == ["one", " two"]


def test_streamed_tokens_reach_the_graph_once_not_also_through_the_chat_models_callbacks() -> None:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import RunnableLambda

    class Count(BaseCallbackHandler):
        tokens = 0

        def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
            Count.tokens += 1

    b = backend(streaming(sse("x", "y")))
    request = GenerationRequest(messages=REQUEST.messages, max_tokens=50, on_token=lambda piece: None)
    RunnableLambda(lambda _: b.generate(request)).invoke(None, {"callbacks": [Count()]})
    assert Count.tokens == 0


# --- a real socket: http.server in a thread --------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    delay = 0.0
    seen: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        body = json.loads(self.rfile.read(length))
        type(self).seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        time.sleep(type(self).delay)
        payload = json.dumps(completion("## Outline\n1. Real socket")).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.delay = 0.0
    _Handler.seen = []
    with serving(_Handler) as url:
        yield url


def test_over_a_real_socket(server: str) -> None:
    b = RemoteBackend(server + "/", model="m", api_key="k1")
    try:
        gen = b.generate(REQUEST)
    finally:
        b.close()
    assert gen.text == "## Outline\n1. Real socket" and gen.completion_tokens == 7
    ((path, headers, body),) = _Handler.seen
    assert path == "/v1/chat/completions" and headers["authorization"] == "Bearer k1" and body["model"] == "m"


def test_read_timeout_is_not_retried_and_says_what_to_raise(server: str) -> None:
    _Handler.delay = 1.0
    b = RemoteBackend(server, timeout=0.2, retries=3)
    try:
        expected = r"did not answer within 0.2 s \(ReadTimeout\).*COE_REMOTE_TIMEOUT"
        with pytest.raises(RemoteBackendError, match=expected):
            b.generate(REQUEST)
    finally:
        b.close()
    assert len(_Handler.seen) == 1


# --- settings and the pool -------------------------------------------------------------------------------


def test_settings_from_env_and_context() -> None:
    env = {"COE_BACKEND": "remote", "COE_REMOTE_URL": "http://h:1/v1", "COE_REMOTE_TIMEOUT": "30"}
    s = resolve_settings(RunContext(remote_model="qwen", remote_retries=0), env=env)
    assert (s.backend, s.remote_url, s.remote_model, s.remote_timeout, s.remote_retries) == (
        "remote",
        "http://h:1/v1",
        "qwen",
        30.0,
        0,
    )
    assert "remote_api_key" not in s.model_dump()  # the key is read from the environment, never recorded


def test_remote_backend_needs_a_url() -> None:
    with pytest.raises(ConfigError, match="COE_REMOTE_URL"):
        resolve_settings(None, env={"COE_BACKEND": "remote"})
    with pytest.raises(ConfigError, match="COE_REMOTE_URL.*not an http"):
        resolve_settings(None, env={"COE_BACKEND": "remote", "COE_REMOTE_URL": "h:1"})


def test_pool_caches_remote_backends_by_url_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COE_REMOTE_API_KEY", "sk-env")
    assert "remote" in BACKENDS
    s = resolve_settings(RunContext(backend="remote", remote_url="http://h:1/v1", remote_model="base"), env={})
    clear_backends()
    try:
        base = get_backend(s).backend
        assert isinstance(base, RemoteBackend) and base.model == "base"
        assert get_backend(s).backend is base
        coder = get_backend(s, "qwen2.5-coder-1.5b").backend
        assert isinstance(coder, RemoteBackend) and coder.model == "qwen2.5-coder-1.5b" and coder is not base
        other = get_backend(s.model_copy(update={"remote_url": "http://h:2/v1"})).backend
        assert other is not base
        assert base.chat.openai_api_key is not None and base.chat.openai_api_key.get_secret_value() == "sk-env"
    finally:
        clear_backends()
    assert model_unavailable(s, "no-such-model.gguf") is None
