"""Health checks of an expert's own server (issue 19): what counts as down, and how often a server is asked."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from experts.backends.endpoint import Endpoint
from experts.pool.health import Health, HealthChecks, probe
from tests.unit.local_http import answer, serving


class _Models(BaseHTTPRequestHandler):
    """Answers GET /v1/models with the status the test sets, and records the Authorization header."""

    status = 200
    seen: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:
        type(self).seen.append((self.path, self.headers.get("authorization")))
        answer(self, '{"object": "list", "data": [{"id": "m", "object": "model"}]}', status=type(self).status)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Models.status, _Models.seen = 200, []
    with serving(_Models) as url:
        yield url


def _dead_url() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_live_server_is_up_and_gets_the_key_its_slots_send(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODER_KEY", "sk-coder")
    health = probe(Endpoint(server + "/", "coder", "CODER_KEY"))
    assert health.up and health.fresh and "HTTP 200" in health.detail
    assert _Models.seen == [("/v1/models", "Bearer sk-coder")]


@pytest.mark.parametrize(("status", "up"), [(503, False), (401, False), (500, False), (404, True), (501, True)])
def test_what_an_answer_says_about_the_server(server: str, status: int, up: bool) -> None:
    _Models.status = status
    health = probe(Endpoint(server))
    assert health.up is up and f"HTTP {status}" in health.detail


def test_nothing_listening_is_down_and_names_the_url() -> None:
    url = _dead_url()
    health = probe(Endpoint(url), timeout_s=1.0)
    assert not health.up and f"GET {url}/models" in health.detail and "ConnectError" in health.detail


def test_a_server_is_checked_once_per_interval_and_off_means_never() -> None:
    now = [100.0]
    asked: list[str] = []

    def check(endpoint: Endpoint) -> Health:
        asked.append(endpoint.url)
        return Health(endpoint.url, True, "HTTP 200")

    checks = HealthChecks(check, clock=lambda: now[0])
    a, b = Endpoint("http://a:1/v1"), Endpoint("http://b:1/v1")
    assert checks.check(a, 30.0) == Health(a.url, True, "HTTP 200")
    now[0] += 10
    cached = checks.check(a, 30.0)
    assert cached is not None and not cached.fresh and cached.up
    assert checks.check(b, 30.0) is not None and asked == [a.url, b.url]
    now[0] += 25
    assert checks.check(a, 30.0).fresh and asked == [a.url, b.url, a.url]  # type: ignore[union-attr]
    assert checks.check(a, 0.0) is None and len(asked) == 3
    assert set(checks.last()) == {a.url, b.url}
