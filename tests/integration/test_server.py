"""`langgraph dev` serves the graph from langgraph.json; runs and interrupts through langgraph-sdk."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from state.framework import load_framework_file
from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
TASK = "Write a Python function that checks whether a string is a palindrome"  # single expert: one slot
BRANCHY = load_framework_file(str(FIXTURES / "branchy.yaml")).model_dump(mode="json")
T = TypeVar("T")

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, url: str, db: Path) -> None:
        self.url, self.db = url, db

    def run(self, scenario: Callable[[Any], Awaitable[T]]) -> T:
        from langgraph_sdk import get_client

        async def main() -> T:
            async with get_client(url=self.url) as client:
                return await scenario(client)

        return asyncio.run(main())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("server")
    port = _free_port()
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "COE_BACKEND": "fake",
        "COE_HOME": str(tmp / "home"),
        "COE_CHECKPOINT_URL": f"sqlite://{tmp / 'server.sqlite'}",
    }
    log = (tmp / "server.log").open("w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "langgraph"), "dev", "--no-browser", "--no-reload", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    srv = Server(f"http://127.0.0.1:{port}", tmp / "server.sqlite")

    async def ready(client: Any) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                await client.assistants.search()
                return
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                await asyncio.sleep(0.5)

    try:
        srv.run(ready)
        yield srv
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def test_langgraph_dev_run_through_the_sdk(server: Server) -> None:
    async def scenario(client: Any) -> tuple[set[str], dict[str, Any]]:
        thread = await client.threads.create()
        custom: set[str] = set()
        async for part in client.runs.stream(
            thread["thread_id"], "college_of_experts", input={"task": TASK}, stream_mode=["custom"]
        ):
            if part.event == "custom":
                custom.add(part.data["event"])
        state = await client.threads.get_state(thread["thread_id"])
        return custom, state["values"]

    custom, values = server.run(scenario)
    assert {"slot_dispatched", "slot_started", "slot_done"} <= custom
    assert values["status"] == "completed"
    assert values["document"].startswith("# " + TASK)
    assert server.db.exists()  # the custom checkpointer honoured COE_CHECKPOINT_URL


def test_plan_approval_over_the_api(server: Server) -> None:
    """confirm mode: the typed interrupt is readable, a bad answer is refused, one Command resumes."""

    async def scenario(client: Any) -> dict[str, Any]:
        thread = (await client.threads.create())["thread_id"]
        run_input = {"task": "Plan a small service", "mode": "confirm", "options": {"framework": BRANCHY}}
        await client.runs.wait(thread, "college_of_experts", input=run_input)
        state = await client.threads.get_state(thread)
        [intr] = state["interrupts"]
        payload = intr["value"]
        assert payload["kind"] == "approve_plan" and [s["id"] for s in payload["plan"]] == ["A", "B", "C", "D"]
        assert state["next"] == ["confirm_plan"] and not state["values"].get("results")
        await client.runs.wait(thread, "college_of_experts", command={"resume": "sure"})
        state = await client.threads.get_state(thread)
        [again] = state["interrupts"]
        assert again["value"]["error"] == "unknown answer 'sure'; allowed: approve, reject, edit"
        assert not state["values"].get("results")
        await client.runs.wait(thread, "college_of_experts", command={"resume": {again["id"]: "approve"}})
        final = await client.threads.get_state(thread)
        assert final["interrupts"] == [] and final["next"] == []
        return dict(final["values"])

    values = server.run(scenario)
    assert values["status"] == "completed" and sorted(values["results"]) == ["A", "B", "C", "D"]
    assert values["approval"]["action"] == "approve" and values["approval"]["rounds"] == 2


def test_reject_over_the_api_ends_the_run(server: Server) -> None:
    async def scenario(client: Any) -> dict[str, Any]:
        thread = (await client.threads.create())["thread_id"]
        run_input = {"task": "Plan a small service", "mode": "confirm", "options": {"framework": BRANCHY}}
        await client.runs.wait(thread, "college_of_experts", input=run_input)
        out = await client.runs.wait(
            thread, "college_of_experts", command={"resume": {"action": "reject", "reason": "not now"}}
        )
        assert out["status"] == "rejected"  # the output schema: document, status, summary
        return dict((await client.threads.get_state(thread))["values"])

    values = server.run(scenario)
    assert values["status"] == "rejected" and "rejected: not now" in values["document"]
