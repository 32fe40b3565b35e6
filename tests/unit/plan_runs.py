"""Run a given plan through the compiled graph on the scripted fake backend, keeping one slot's prompts.

Shared by the tests of the parts' agreement and of the task's figures.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from experts.backends.fake import FakeBackend
from experts.backends.protocol import Generation, GenerationRequest
from graph import build_graph
from state import Passport
from state.io import RunInput, RunOptions


def answer(title: str, body: str) -> str:
    """A one-section answer in the output contract's shape."""
    return f"## Outline\n1. {title}\n\n## 1. {title}\n{body}\n"


class Recording(FakeBackend):
    """The fake backend, keeping the prompt of every call for one slot."""

    watched: str
    prompts: list[str]

    def generate(self, request: GenerationRequest) -> Generation:
        if request.slot_id == self.watched:
            self.prompts.append("\n".join(m.content for m in request.messages))
        return super().generate(request)


def run_plan(
    script: Path,
    task: str,
    plan: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch | None = None,
    watched: str = "",
    prompts: list[str] | None = None,
) -> Passport:
    """Run ``plan`` for ``task`` with the fake ``script``; with ``monkeypatch``, record ``watched``'s prompts.

    One backend serves the whole run, as the pool keeps one: a rule's ``first_calls`` count across rounds.
    """
    if monkeypatch is not None:
        made: list[Recording] = []

        def backend(settings: Any, model: str | None = None) -> FakeBackend:
            if not made:
                made.append(Recording.from_settings(settings))
                made[0].watched, made[0].prompts = watched, prompts if prompts is not None else []
            return made[0]

        monkeypatch.setattr(importlib.import_module("nodes.execute_slots"), "get_backend", backend)
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "plan"}}
    run_input = RunInput(task=task, options=RunOptions(framework=plan))
    graph.invoke(run_input.model_dump(mode="json"), config, context={"backend": "fake", "fake_script": str(script)})
    return Passport.model_validate(graph.get_state(config).values)
