"""A cancelled run stops its generations: the graph run asynchronously (as the LangGraph server runs it) is
cancelled while a slot generates; the generation stops within a second and a later run finishes the thread."""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from experts.backends.fake import FakeBackend
from experts.backends.protocol import Generation, GenerationRequest
from graph import build_graph
from state import Passport, RunStatus
from state.errors import GenerationStopped
from state.framework import load_framework_file
from state.io import RunInput, RunOptions
from tests.conftest import FIXTURES


class Watched(FakeBackend):
    """The fake backend, noting when each generation ended and how."""

    ended: list[tuple[str | None, str, float]]

    def generate(self, request: GenerationRequest) -> Generation:
        try:
            result = super().generate(request)
        except GenerationStopped as exc:
            self.ended.append((request.slot_id, exc.reason, time.monotonic()))
            raise
        self.ended.append((request.slot_id, "done", time.monotonic()))
        return result


def test_a_cancelled_run_stops_its_generation_and_the_thread_finishes_later(
    write_script: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = write_script({"rules": [{"slot": "B", "delay": 30.0}]})
    ended: list[tuple[str | None, str, float]] = []

    def backend(settings: Any, model: str | None = None) -> FakeBackend:
        made = Watched.from_settings(settings)
        made.ended = ended
        return made

    monkeypatch.setattr(importlib.import_module("nodes.execute_slots"), "get_backend", backend)
    fw = load_framework_file(str(FIXTURES / "branchy.yaml"))
    payload = RunInput(task="Plan a service", options=RunOptions(framework=fw.model_dump(mode="json")))
    graph = build_graph(InMemorySaver())
    config: Any = {"configurable": {"thread_id": "cancelled"}}
    context = {"backend": "fake", "fake_script": str(script)}

    async def run_and_cancel() -> float:
        async def consume() -> None:
            async for _ in graph.astream(payload.model_dump(mode="json"), config, context=context):
                pass

        task = asyncio.create_task(consume())
        while not any(slot == "A" for slot, _, _ in ended):  # A done: B is generating (30 s)
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return cancelled_at

    cancelled_at = asyncio.run(run_and_cancel())
    deadline = time.monotonic() + 5
    while not any(slot == "B" for slot, _, _ in ended) and time.monotonic() < deadline:
        time.sleep(0.02)
    [(_, how, at)] = [e for e in ended if e[0] == "B"]
    assert how == "cancelled" and at - cancelled_at < 1.0, (how, at - cancelled_at)
    run = Passport.model_validate(graph.get_state(config).values).run
    assert run is not None
    time.sleep(0.2)  # idle workers leave once their pool is shut down
    workers = [t for t in threading.enumerate() if t.name.startswith(f"coe-slot-{run.run_id[:8]}")]
    assert not workers, workers  # the run's slot threads are done, not generating in the background

    script.write_text("rules: []\n", encoding="utf-8")  # B is quick now: the thread finishes from its checkpoint
    graph.invoke(None, config, context=context)
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.status == RunStatus.COMPLETED and sorted(state.results) == ["A", "B", "C", "D"]
    assert [slot for slot, how, _ in ended].count("A") == 1  # a finished slot is not run again
