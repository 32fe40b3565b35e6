"""Issue 42, the parts under the CLI and the server: the remote backend's cancel, the server's SQLite saver's
storage faults, the server's run checks as pure functions."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from experts.backends.protocol import ChatMessage, GenerationRequest
from experts.backends.remote import RemoteBackend
from server.http_app import input_problem, stopped_problem, waiting_problem
from state.errors import ConfigError, GenerationStopped
from tests.unit.local_http import serving


def test_a_cancel_cuts_a_request_the_server_has_not_answered_yet() -> None:
    """A server still thinking (no byte of the answer): the slot stops at the cancel and the server sees it go."""
    gone = threading.Event()

    class Thinking(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            self.connection.settimeout(20)
            if self.connection.recv(1) == b"":  # the client closed its side
                gone.set()

        def log_message(self, *args: object) -> None:
            pass

    with serving(Thinking) as url:
        backend = RemoteBackend(url, timeout=20, retries=2)
        cancel = threading.Event()
        request = GenerationRequest(
            messages=[ChatMessage(role="user", content="hi")], max_tokens=20, slot_id="s1", cancel=cancel
        )
        timer = threading.Timer(0.5, cancel.set)
        timer.start()
        started = time.monotonic()
        with pytest.raises(GenerationStopped) as info:
            backend.generate(request)
        elapsed = time.monotonic() - started
        timer.join()
        backend.close()
        assert info.value.reason == "cancelled" and elapsed < 5
        assert gone.wait(5)


def test_the_server_sqlite_saver_reports_a_locked_file_as_a_user_error(tmp_path: Path) -> None:
    import aiosqlite

    from graph.persistence import serializer, sqlite_errors
    from graph.savers import ServerSqliteSaver

    path = tmp_path / "server.sqlite"

    async def scenario() -> None:
        async with aiosqlite.connect(str(path), timeout=0.2) as conn:
            saver = ServerSqliteSaver(conn, lambda: sqlite_errors(path), serde=serializer())
            await saver.setup()
            holder = sqlite3.connect(str(path), isolation_level=None)
            holder.execute("BEGIN EXCLUSIVE")
            try:
                with pytest.raises(ConfigError, match="is locked by another process"):
                    await saver.adelete_thread("t")
                config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}}
                with pytest.raises(ConfigError, match=str(path)):
                    await saver.aput_writes(config, [("x", 1)], "task-1")
            finally:
                holder.execute("ROLLBACK")
                holder.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"input": {"task": "x"}, "context": {"max_token": 5}}, "context: unknown key(s) max_token; allowed: backend"),
        ({"input": {"task": "x", "colour": 1}}, "input: unknown key(s) colour; allowed: task, mode, options"),
    ],
)
def test_an_unknown_key_of_a_run_request_is_named_with_the_allowed_ones(payload: dict[str, object], words: str) -> None:
    problem = input_problem(payload)
    assert problem is not None and problem[0] == 422 and words in problem[1]


def test_a_known_run_request_passes() -> None:
    assert input_problem({"input": {"task": "x", "mode": "confirm"}, "context": {"max_tokens": 64}}) is None


def test_a_new_input_on_a_waiting_thread_is_refused_unless_it_abandons_it() -> None:
    waiting = [("0123456789abcdef0123456789abcdef", "approve_plan")]
    problem = waiting_problem("t1", {"task": "other"}, waiting)
    assert problem is not None and problem[0] == 409
    assert "approve_plan" in problem[1] and "options.abandon" in problem[1] and "resume" in problem[1]
    assert waiting_problem("t1", {"task": "other", "options": {"abandon": True}}, waiting) is None
    assert waiting_problem("t1", {"task": "other"}, []) is None


@pytest.mark.parametrize(
    ("state", "refused"),
    [
        ({"next": ["execute_slots"], "values": {"status": "running"}}, True),  # killed, cancelled or held
        ({"next": [], "values": {"status": "completed"}}, False),  # over
        ({"next": ["guard"], "values": {}}, False),  # the guard raised on the input: nothing done, a retry is fine
        ({"next": ["assemble"], "values": {"refused": "task: empty"}}, False),
        ({"next": ["execute_slots"], "values": {"status": "rejected"}}, False),
        ({"next": ["ask_user"], "interrupts": [{"id": "x"}], "values": {}}, False),  # waiting: waiting_problem's
    ],
)
def test_a_new_input_on_a_run_that_stopped_half_way_is_refused_unless_it_abandons_it(
    state: dict[str, object], refused: bool
) -> None:
    problem = stopped_problem("t1", {"task": "other"}, state)
    assert (problem is not None) is refused
    if problem is not None:
        assert problem[0] == 409 and "stopped half-way" in problem[1] and "execute_slots" in problem[1]
        assert "options.abandon" in problem[1] and "input null" in problem[1]
    assert stopped_problem("t1", {"task": "other", "options": {"abandon": True}}, state) is None
    assert stopped_problem("t1", None, state) is None
