"""`langgraph dev` serves the graph from langgraph.json; a run through langgraph-sdk completes."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASK = "Write a Python function that checks whether a string is a palindrome"  # single expert: one slot


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.integration
def test_langgraph_dev_run_through_the_sdk(tmp_path: Path) -> None:
    from langgraph_sdk import get_client

    port = _free_port()
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "COE_BACKEND": "fake",
        "COE_CHECKPOINT_URL": f"sqlite://{tmp_path / 'server.sqlite'}",
    }
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "langgraph"), "dev", "--no-browser", "--no-reload", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:

        async def scenario() -> tuple[set[str], dict]:  # type: ignore[type-arg]
            async with get_client(url=f"http://127.0.0.1:{port}") as client:
                return await _drive(client)

        async def _drive(client) -> tuple[set[str], dict]:  # type: ignore[no-untyped-def, type-arg]
            deadline = time.monotonic() + 60
            while True:
                try:
                    await client.assistants.search()
                    break
                except Exception:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise
                    await asyncio.sleep(0.5)
            thread = await client.threads.create()
            custom: set[str] = set()
            async for part in client.runs.stream(
                thread["thread_id"], "college_of_experts", input={"task": TASK}, stream_mode=["custom"]
            ):
                if part.event == "custom":
                    custom.add(part.data["event"])
            state = await client.threads.get_state(thread["thread_id"])
            return custom, state["values"]

        custom, values = asyncio.run(scenario())
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()
    assert {"slot_dispatched", "slot_started", "slot_done"} <= custom
    assert values["status"] == "completed"
    assert values["document"].startswith("# " + TASK)
    assert (tmp_path / "server.sqlite").exists()  # the custom checkpointer honoured COE_CHECKPOINT_URL
