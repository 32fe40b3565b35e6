"""An endpoint per expert (issue 19): true experts on their own OpenAI-compatible servers, one plan using two."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from experts.backends.endpoint import Endpoint
from experts.catalog import load_catalog, resolve_binding
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.context import resolve_settings
from state.errors import ConfigError
from state.io import RunInput
from tests.scopes import scopes_with_models
from tests.unit.local_http import answer, serving

ANSWERS = {
    "coder-on-a": "```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```\n",
    "sql-on-b": "```sql\nSELECT customer_id, SUM(total) AS spent FROM orders GROUP BY customer_id;\n```\n",
}


@pytest.fixture(autouse=True)
def _fresh_pool() -> Iterator[None]:
    """The backends these tests make leave the process's pool (other tests count its loads)."""
    from experts.pool.pooled import clear_backends

    yield
    clear_backends()


class _Server(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that answers with the text of the model it is asked for (streamed or not)."""

    seen: list[tuple[int, str, str | None]] = []
    checked: list[int] = []

    def do_GET(self) -> None:  # the health check: GET /v1/models
        type(self).checked.append(self.server.server_address[1])
        answer(self, json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.server.server_address[1], body["model"], self.headers.get("authorization")))
        text = ANSWERS.get(body["model"], "unknown model")
        if body.get("stream"):
            chunks = [{"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}]
            chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            payload = "".join(
                f"data: {json.dumps({'id': 'c', 'object': 'chat.completion.chunk', 'model': body['model'], **c})}\n\n"
                for c in chunks
            )
            answer(self, payload + "data: [DONE]\n\n", "text/event-stream")
        else:
            reply = {"id": "c", "object": "chat.completion", "model": body["model"]}
            reply["choices"] = [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ]
            answer(self, json.dumps(reply))

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def two_servers() -> Iterator[tuple[str, str]]:
    _Server.seen, _Server.checked = [], []
    with serving(_Server) as a, serving(_Server) as b:
        yield a, b


def _catalog(tmp: Path, coder: dict[str, Any], sql: dict[str, Any]) -> Path:
    """The shipped catalog with python_coder and sql_specialist bound to the given ``model`` blocks."""
    return scopes_with_models(tmp, {"python_coder": coder, "sql_specialist": sql})


def test_an_endpoint_reference_round_trips_and_a_model_name_is_not_one() -> None:
    endpoint = Endpoint("http://10.0.0.5:8000/v1/", "qwen2.5-coder-1.5b", "CODER_KEY")
    ref = endpoint.ref()
    assert ref == "http://10.0.0.5:8000/v1#model=qwen2.5-coder-1.5b&key=CODER_KEY"
    assert Endpoint.parse(ref) == Endpoint("http://10.0.0.5:8000/v1", "qwen2.5-coder-1.5b", "CODER_KEY")
    assert Endpoint.parse("qwen2.5-coder-1.5b") is None and Endpoint.parse("/models/x.gguf") is None


def test_a_faux_expert_cannot_name_an_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scopes = _catalog(tmp_path, {"binding": "faux", "endpoint": {"url": "http://h:1/v1"}}, {"binding": "faux"})
    monkeypatch.setenv("COE_EXPERT_SCOPES", str(scopes))
    with pytest.raises(ConfigError, match=r"python_coder.yaml: model.endpoint: only a true expert"):
        load_catalog()


def test_two_experts_on_two_servers_in_one_plan(
    two_servers: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two_servers
    coder = {"binding": "true", "model": "qwen2.5-coder-1.5b", "endpoint": {"url": a, "model": "coder-on-a"}}
    sql = {"binding": "true", "endpoint": {"url": b, "model": "sql-on-b", "api_key_env": "SQL_SERVER_KEY"}}
    monkeypatch.setenv("COE_EXPERT_SCOPES", str(_catalog(tmp_path, coder, sql)))
    monkeypatch.setenv("SQL_SERVER_KEY", "sk-sql")
    settings = resolve_settings({"backend": "fake"}, env={})
    binding = resolve_binding(settings, load_catalog().get("python_coder"))
    assert binding.kind == "true" and Endpoint.parse(binding.model) == Endpoint(a, "coder-on-a")
    assert (
        resolve_binding(settings.model_copy(update={"true_experts": False}), load_catalog().get("python_coder")).model
        is None
    )

    framework = {
        "id": "two",
        "title": "Two servers",
        "slots": [
            {"id": "code", "title": "Function", "description": "Write a Python function that adds two integers."},
            {
                "id": "query",
                "title": "Query",
                "description": "Write the SQL query that totals the orders per customer.",
            },
        ],
    }
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "two-servers"}}
    graph.invoke(RunInput(task="Add and total", options={"framework": framework}), config, context={"backend": "fake"})
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.routing["code"].expert == "python_coder" and state.routing["query"].expert == "sql_specialist"
    assert state.routing["code"].model == f"{a}#model=coder-on-a"
    assert "def add" in state.results["code"].raw and "SUM(total)" in state.results["query"].raw
    ports = {int(u.rsplit(":", 1)[1].split("/")[0]): u for u in (a, b)}
    asked = {(ports[port], model, auth) for port, model, auth in _Server.seen}
    assert (a, "coder-on-a", None) in asked and (b, "sql-on-b", "Bearer sk-sql") in asked
    assert {model for _, model, _ in asked} == {"coder-on-a", "sql-on-b"}  # nothing else went to the servers
    assert set(_Server.checked) == set(ports)  # each server's health was checked before its slot


def test_a_dead_server_is_found_by_its_health_check_and_its_slot_runs_on_the_generalist_until_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:  # a port nothing listens on, until the server starts there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    coder = {"binding": "true", "endpoint": {"url": url, "model": "coder-on-a"}}
    monkeypatch.setenv("COE_EXPERT_SCOPES", str(_catalog(tmp_path, coder, {"binding": "faux"})))
    _Server.seen, _Server.checked = [], []
    slot = {"id": "code", "title": "Function", "description": "Write a Python function that adds two integers."}
    framework = {"id": "one", "title": "One function", "slots": [slot]}
    graph = build_graph(InMemorySaver(serde=serializer()))
    context = {"backend": "fake", "endpoint_health_s": 0.001, "remote_retries": 0}

    def run(thread: str) -> Passport:
        config = {"configurable": {"thread_id": thread}}
        graph.invoke(RunInput(task="Add", options={"framework": framework}), config, context=context)
        return Passport.model_validate(graph.get_state(config).values)

    down = run("while-down")
    assert down.routing["code"].expert == "python_coder"  # the router's choice stands
    assert down.slot_states["code"].expert == "general_reasoning" and "code" in down.results
    actions = [(e.action, e.outputs_summary) for e in down.ledger if e.slot_id == "code"]
    health = next(text for action, text in actions if action == "health_check")
    assert f"coder-on-a@127.0.0.1:{port} is down" in health and "closed -> open" in health
    fallback = next(text for action, text in actions if action == "breaker_fallback")
    assert f"python_coder's server ({url})'s circuit breaker is open" in fallback

    with serving(_Server, port):
        back = run("when-back")  # the next check finds it up and closes the breaker: no cooldown to wait out
    assert back.slot_states["code"].expert == "python_coder" and "def add" in back.results["code"].raw
    health = next(e.outputs_summary for e in back.ledger if e.action == "health_check")
    assert "is up" in health and "open -> closed" in health
    assert _Server.checked == [port] and {model for _, model, _ in _Server.seen} == {"coder-on-a"}
