"""Issue 42 over the API, driven as it was found: ``langgraph dev`` with two users' keys and langgraph-sdk.

Fake backend only (no model is loaded). Operator-only settings refused before their files are read, for every
one of them; unknown keys of a run's context and input refused; a new input on a waiting thread, or on one whose
run stopped half-way, refused (409), the question and the run kept, ``options.abandon`` honoured; feedback with
the SDK's default key header; the meta routes closed without a key; a bad keys file at start stops ``langgraph
dev`` with the message.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml

from bench.common import write_server_config
from nodes.guard import OPERATOR_SETTINGS
from tests.integration.cli_proc import free_port

pytestmark = [pytest.mark.integration, pytest.mark.server]

TASK = "Write a Python function that checks whether a string is a palindrome"
KEYS = {"alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdef00"}
PLAN = {
    "id": "p",
    "title": "Plan",
    "slots": [{"id": "a", "title": "A", "description": "Write part A.", "expert": "general_reasoning"}],
}
T = TypeVar("T")


class Server:
    def __init__(self, url: str, root: Path) -> None:
        self.url, self.root = url, root

    def run(self, key: str | None, scenario: Callable[[Any], Awaitable[T]]) -> T:
        from langgraph_sdk import get_client

        async def main() -> T:
            async with get_client(url=self.url, api_key=key) as client:
                return await scenario(client)

        return asyncio.run(main())


def _start(root: Path, keys_file: Path, port: int, *flags: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "COE_BACKEND": "fake",
        "COE_HOME": str(root / "home"),
        "COE_CHECKPOINT_URL": f"sqlite://{root / 'server.sqlite'}",
        "COE_API_KEYS_FILE": str(keys_file),
    }
    with (root / "server.log").open("wb") as log:
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "langgraph"), "dev", "--config", str(write_server_config(root)),
             "--no-browser", "--port", str(port), *flags],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("safety-server")
    keys = root / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": [{"key": k, "identity": who} for who, k in KEYS.items()]}))
    port = free_port()
    proc = _start(root, keys, port, "--no-reload")
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, (root / "server.log").read_text()
        time.sleep(0.5)
    try:
        yield Server(url, root)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _operator_value(name: str, root: Path) -> object:
    secret = root / "keys.yaml"  # the server's own keys file: reading it would answer with its parse error
    return {"kb_path": str(root), "n_threads": 2, "memory_limit_mb": 4096, "profile": "cpu"}.get(
        name, "http://127.0.0.1:9/v1" if name == "remote_url" else str(secret)
    )


def test_every_operator_setting_is_refused_before_any_file_is_read(server: Server) -> None:
    async def scenario(client: Any) -> dict[str, str]:
        answers: dict[str, str] = {}
        for name in OPERATOR_SETTINGS:
            thread = (await client.threads.create())["thread_id"]
            backend = "llama" if name in ("model_path", "planner_model", "memory_check_model") else "fake"
            context = {"backend": backend, name: _operator_value(name, server.root)}
            failed = await client.runs.wait(
                thread, "college_of_experts", input={"task": TASK}, context=context, raise_error=False
            )
            answers[name] = json.dumps(failed)
        return answers

    answers = server.run(KEYS["alice"], scenario)
    for name, answer in answers.items():
        assert "set by the server's operator" in answer, (name, answer)
        assert "Extra inputs" not in answer and "GGUF" not in answer and "alice-key" not in answer, (name, answer)


def test_unknown_keys_of_context_and_input_are_refused_naming_them(server: Server) -> None:
    async def scenario(client: Any) -> list[tuple[int, str]]:
        thread = (await client.threads.create())["thread_id"]
        found = []
        payloads = ({"input": {"task": TASK}, "context": {"max_token": 64}}, {"input": {"task": TASK, "colour": 1}})
        for payload in payloads:
            try:
                await client.runs.wait(thread, "college_of_experts", **payload)
            except httpx.HTTPStatusError as exc:
                found.append((exc.response.status_code, exc.response.text))
        return found

    found = server.run(KEYS["alice"], scenario)
    assert [status for status, _ in found] == [422, 422]
    assert "max_token" in found[0][1] and "max_tokens" in found[0][1]
    assert "colour" in found[1][1] and "task, mode, options" in found[1][1]


def test_a_new_input_on_a_waiting_thread_is_refused_and_the_question_kept(server: Server) -> None:
    async def scenario(client: Any) -> dict[str, Any]:
        thread = (await client.threads.create())["thread_id"]
        confirm = {"task": "Plan a small service", "mode": "confirm", "options": {"framework": PLAN}}
        await client.runs.wait(thread, "college_of_experts", input=confirm)
        try:
            await client.runs.wait(thread, "college_of_experts", input={"task": TASK})
            refused: tuple[int, str] = (200, "")
        except httpx.HTTPStatusError as exc:
            refused = (exc.response.status_code, exc.response.text)
        [still] = (await client.threads.get_state(thread))["interrupts"]
        approved = await client.runs.wait(thread, "college_of_experts", command={"resume": "approve"})
        other = (await client.threads.create())["thread_id"]
        await client.runs.wait(other, "college_of_experts", input=confirm)
        abandoned = await client.runs.wait(
            other, "college_of_experts", input={"task": TASK, "options": {"abandon": True}}
        )
        values = (await client.threads.get_state(other))["values"]
        return {"refused": refused, "still": still, "approved": approved, "abandoned": abandoned, "values": values}

    out = server.run(KEYS["alice"], scenario)
    assert out["refused"][0] == 409 and "waiting for an answer" in out["refused"][1], out["refused"]
    assert out["still"]["value"]["kind"] == "approve_plan" and out["approved"]["status"] == "completed"
    assert out["abandoned"]["status"] == "completed"
    assert any(e["action"] == "abandon_run" for e in out["values"]["ledger"])


def test_a_new_input_on_a_run_that_stopped_half_way_is_refused_and_the_run_kept(server: Server) -> None:
    """A run held before its slots (a breakpoint; a killed or cancelled run reads the same: steps still to run)."""

    async def scenario(client: Any) -> dict[str, Any]:
        thread = (await client.threads.create())["thread_id"]
        plan = {"task": "Plan a small service", "options": {"framework": PLAN}}
        await client.runs.wait(thread, "college_of_experts", input=plan, interrupt_before=["execute_slots"])
        try:
            await client.runs.wait(thread, "college_of_experts", input={"task": TASK})
            refused: tuple[int, str] = (200, "")
        except httpx.HTTPStatusError as exc:
            refused = (exc.response.status_code, exc.response.text)
        kept = (await client.threads.get_state(thread))["next"]
        finished = await client.runs.wait(thread, "college_of_experts", input=None)
        retried = await client.runs.wait(thread, "college_of_experts", input={"task": TASK})
        return {"refused": refused, "kept": kept, "finished": finished, "retried": retried}

    out = server.run(KEYS["alice"], scenario)
    assert out["refused"][0] == 409 and "stopped half-way" in out["refused"][1], out["refused"]
    assert "execute_slots" in out["refused"][1] and "options.abandon" in out["refused"][1]
    assert out["kept"] == ["execute_slots"]
    assert out["finished"]["status"] == "completed" and out["retried"]["status"] == "completed"


def test_feedback_works_with_the_sdks_default_key_header(server: Server) -> None:
    async def scenario(client: Any) -> tuple[Any, int]:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "college_of_experts", input={"task": TASK})
        answer = await client.http.post(f"/threads/{thread}/feedback", json={"verdict": "good"})
        async with httpx.AsyncClient(base_url=server.url, headers={"x-api-key": KEYS["bob"]}) as bob:
            theirs = await bob.post(f"/threads/{thread}/feedback", json={"verdict": "bad"})
        return answer, theirs.status_code

    answer, bobs = server.run(KEYS["alice"], scenario)  # get_client(api_key=...) sends x-api-key
    assert answer["verdict"] == "good"
    assert bobs == 404  # another user's thread stays a thread that does not exist


def test_meta_routes_need_a_key_and_health_checks_do_not(server: Server) -> None:
    for path in ("/docs", "/openapi.json", "/info"):
        assert httpx.get(server.url + path, timeout=30).status_code == 401, path
        assert httpx.get(server.url + path, headers={"x-api-key": KEYS["bob"]}, timeout=30).status_code == 200
    assert httpx.get(server.url + "/ok", timeout=30).status_code == 200


@pytest.mark.parametrize("flags", [(), ("--no-reload",)], ids=["reload", "no-reload"])
def test_a_bad_keys_file_at_start_stops_langgraph_dev_with_the_message(tmp_path: Path, flags: tuple[str, ...]) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text("keys: 3\n", encoding="utf-8")
    proc = _start(tmp_path, keys, free_port(), *flags)
    try:
        code = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert code != 0
    assert f"error: {keys}: keys: needs a list 'keys'" in log and "the server stops" in log
