"""Saved runs in every state retention cares about, made in-process on the fake backend (retention tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from graph import build_graph
from state.framework import load_framework_file
from state.io import RunInput, RunOptions
from tests.conftest import FIXTURES

FINISHED = {"done": "completed", "failed": "failed", "rejected": "rejected"}
UNFINISHED = {"waiting": "waiting", "stopped": "stopped"}
"""Thread id -> the status ``describe_thread`` reports."""


def config(thread_id: str) -> Any:
    """The run config of a thread."""
    return {"configurable": {"thread_id": thread_id}}


def populate(saver: BaseCheckpointSaver[str], tmp_path: Path) -> dict[str, str]:
    """Save five runs of the branchy plan; returns thread id -> expected status.

    ``done`` completed; ``failed`` every slot failed; ``rejected`` the plan was rejected (confirm mode);
    ``waiting`` waits for plan approval; ``stopped`` stopped before its slots ran (as after a kill).
    """
    graph = build_graph(saver)
    fw = load_framework_file(str(FIXTURES / "branchy.yaml"))
    options = RunOptions(framework=fw.model_dump(mode="json"), framework_source="branchy")
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump({"rules": []}))
    bad = tmp_path / "fail.yaml"
    bad.write_text(yaml.safe_dump({"rules": [{"title": ".", "fail": "scripted failure"}]}))

    def start(thread: str, mode: str, script: Path, **kwargs: Any) -> dict[str, Any]:
        context = {"backend": "fake", "fake_script": str(script)}
        task = RunInput(task="Plan a small service", mode=mode, options=options)
        graph.invoke(task, config(thread), context=context, **kwargs)
        return context

    start("done", "autonomous", ok)
    start("failed", "autonomous", bad)
    context = start("rejected", "confirm", ok)
    graph.invoke(Command(resume={"action": "reject", "reason": "not now"}), config("rejected"), context=context)
    start("waiting", "confirm", ok)
    start("stopped", "autonomous", ok, interrupt_before=["execute_slots"])
    return {**FINISHED, **UNFINISHED}


def checkpoints(saver: BaseCheckpointSaver[str], thread_id: str) -> int:
    """How many checkpoints a thread has."""
    return len(list(saver.list(config(thread_id))))
