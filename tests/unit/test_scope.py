"""Trivial-task detection and the direct-answer path (with template selection on)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from experts.catalog import config_dir, load_catalog
from experts.embedding import get_embedder
from experts.scope import classify
from experts.template_index import load_or_build
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.errors import ConfigError
from state.io import RunInput
from state.template import load_library

INDEX = load_or_build(
    load_library([config_dir() / "framework_templates"], load_catalog().ids).templates, get_embedder()
)


@pytest.mark.parametrize("task", ["hello!", "thanks a lot", "convert 3 kg to pounds", "what is a mutex?"])
def test_short_simple_requests_are_trivial(task: str) -> None:
    decision = classify(task, get_embedder(), INDEX)
    assert decision.kind == "trivial", decision.reason
    assert decision.trivial_similarity is not None and decision.template_similarity is not None


@pytest.mark.parametrize(
    "task",
    [
        "Write a migration plan from MySQL 5.7 to PostgreSQL 16",
        "Draft a mutual NDA between our studio and a freelance illustrator, governed by English law",
    ],
)
def test_real_tasks_are_not(task: str) -> None:
    assert classify(task, get_embedder(), INDEX).kind == "task"


def test_long_requests_are_never_trivial() -> None:
    decision = classify("hello " * 30, get_embedder(), INDEX)
    assert decision.kind == "task" and "30 words" in decision.reason


def test_broken_prototype_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "prototypes.yaml"
    path.write_text("prototypes: []\n")
    with pytest.raises(ConfigError, match="prototypes.yaml: prototypes: must have a non-empty list of strings"):
        classify("hi", get_embedder(), INDEX, path=path)


def _run(thread: str, task: str, **context: object) -> Passport:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": thread}}
    graph.invoke(RunInput(task=task), config, context={"backend": "fake", **context})
    return Passport.model_validate(graph.get_state(config).values)


def test_a_trivial_task_is_answered_directly_without_experts() -> None:
    state = _run("trivial", "hello!", use_templates=True)
    assert state.scope is not None and state.scope.kind == "trivial"
    assert state.status.value == "completed" and state.framework is None and state.results == {}
    assert state.document is not None and state.document.startswith("# hello!\n\n")
    assert state.summary is not None and state.summary.slots == []
    assert state.summary.framework_source == "direct answer (trivial task)"
    actions = [e.action for e in state.ledger]
    assert "answer_directly" in actions and "route" not in actions and "generate" not in actions


def test_a_real_task_goes_on_to_planning_and_scope_is_recorded() -> None:
    state = _run("task", "Write a short story about a lighthouse keeper who befriends a seal", use_templates=True)
    assert state.scope is not None and state.scope.kind == "task"
    assert state.framework is not None and state.framework.source.startswith("template:")


def test_without_template_selection_nothing_is_classified() -> None:
    state = _run("plain", "hello!")
    assert state.scope is not None and state.scope.kind == "task" and state.scope.reason.startswith("not classified")
    assert state.framework is not None and [s.id for s in state.framework.slots] == ["answer"]


def test_a_failing_direct_answer_stops_the_run_resumably(tmp_path: Path) -> None:
    import json

    from state.errors import RunFailure

    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"rules": [{"slot": "answer_directly", "fail": "model crashed"}]}))
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "fails"}}
    with pytest.raises(RunFailure, match="model crashed"):
        graph.invoke(
            RunInput(task="hello!"),
            config,
            context={"backend": "fake", "fake_script": str(script), "use_templates": True},
        )
    snapshot = graph.get_state(config)
    assert snapshot.next == ("answer_directly",)  # the checkpoint before the failed node is kept
