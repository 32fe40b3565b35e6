"""Follow-up turns on a thread (issue 20): the earlier run is kept as a turn and is the new run's working memory."""

from __future__ import annotations

import json
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.enums import RunStatus
from state.io import RunInput

ADD = "## Outline\n1. add\n\n## 1. add\n```python\ndef add(a, b):\n    return a + b\n```\n"
TEST = "## Outline\n1. test_add\n\n## 1. test_add\n```python\ndef test_add():\n    assert add(1, 2) == 3\n```\n"


def _context(tmp_path: Path, text: str) -> dict[str, str]:
    script = tmp_path / f"script-{len(text)}.json"
    calls = tmp_path / "calls.jsonl"
    script.write_text(json.dumps({"calls_log": str(calls), "rules": [{"title": ".*", "text": text}]}))
    return {"backend": "fake", "fake_script": str(script)}


def _calls(tmp_path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_a_new_input_on_a_thread_is_a_follow_up_that_sees_the_previous_answer(tmp_path: Path) -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "conversation"}}
    first_task = "Write a Python function add(a, b) that returns their sum"
    graph.invoke(RunInput(task=first_task), config, context=_context(tmp_path, ADD))
    first = Passport.model_validate(graph.get_state(config).values)
    assert first.status is RunStatus.COMPLETED and first.turns == []
    (tmp_path / "calls.jsonl").unlink()

    graph.invoke(RunInput(task="Now write a pytest test for that function"), config, context=_context(tmp_path, TEST))
    state = Passport.model_validate(graph.get_state(config).values)
    [turn] = state.turns
    assert turn.number == 1 and turn.task == first_task and turn.status is RunStatus.COMPLETED
    assert "def add(a, b)" in turn.document and "def add(a, b)" in next(iter(turn.results.values())).raw
    assert turn.experts == ["python_coder"]
    # the follow-up's slot saw the earlier answer, as read-only reference data
    prompts = [c["user"] for c in _calls(tmp_path)]
    assert prompts and all("earlier turn 1" in p and "def add(a, b)" in p for p in prompts)
    # and this run starts clean: its own results, document and scope
    assert state.status is RunStatus.COMPLETED and "test_add" in (state.document or "")
    assert "def add" not in (state.document or "")
    assert state.scope is not None and state.scope.transition == "same_domain"
    assert any(e.action == "follow_up" for e in state.ledger)


def test_each_turn_is_kept_and_only_the_latest_is_working_memory(tmp_path: Path) -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "three"}}
    for task, text in (
        ("Write a Python function add(a, b) that returns their sum", ADD),
        ("Now write a pytest test for that function", TEST),
        ("Write a haiku about autumn leaves", "## Outline\n1. Haiku\n\n## 1. Haiku\nLeaves fall, red and gold,\n"),
    ):
        graph.invoke(RunInput(task=task), config, context=_context(tmp_path, text))
    state = Passport.model_validate(graph.get_state(config).values)
    assert [t.number for t in state.turns] == [1, 2]
    assert state.scope is not None and state.scope.transition == "new_domain"  # a haiku after code
    haiku = [c["user"] for c in _calls(tmp_path) if "autumn" in c["user"] and not c["slot"].endswith("@judge")]
    assert haiku and all("earlier turn 2" in p and "earlier turn 1" not in p for p in haiku)


def test_coe_run_on_an_existing_thread_is_a_follow_up_and_show_lists_the_turns(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    cp = ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}", "--backend", "fake"]
    task = "Write a Python function add(a, b) that returns their sum"
    first = CliRunner().invoke(app, ["run", task, "--thread", "t1", *cp])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(app, ["run", "Now write a pytest test for that function", "--thread", "t1", *cp])
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("# Now write a pytest test")
    shown = CliRunner().invoke(app, ["show", "t1", "--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"])
    assert shown.exit_code == 0, shown.output
    assert "turn 1: completed" in shown.stdout and "Write a Python function add" in shown.stdout
    assert "turn 2: (this run)" in shown.stdout and "follow-up, same domain" in shown.stdout
