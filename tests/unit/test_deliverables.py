"""The planner model's second reading of a plan's scope: its listing, the decision after it, and the graph's use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from engine.planning.deliverables import Listing, list_deliverables, parse_listing, second_reading
from experts.backends.fake import FakeBackend, load_script
from experts.backends.grammar import deliverables_grammar
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.io import RunInput
from state.scope_decision import ScopeDecision

TWO_PARTS = (
    "Draft a mutual NDA between our studio and a freelance illustrator, governed by English law, and write a "
    "plain-English summary of it for the illustrator"
)
MULTI = ScopeDecision(kind="multi", words=20, expert="legal_drafting", reason="the task names 2 deliverables")


def _script(tmp_path: Path, **rule: Any) -> str:
    path = tmp_path / "script.yaml"
    path.write_text(json.dumps({"rules": [{"slot": "list_deliverables", **rule}]}), encoding="utf-8")
    return str(path)


def _listing(*names: str) -> str:
    return json.dumps({"deliverables": list(names)})


def test_a_listing_is_read_from_its_json_each_name_once() -> None:
    assert parse_listing(_listing("The SQL query", "the  sql query ", "A README")) == ("The SQL query", "A README")
    assert parse_listing('{"deliverables": []}') == ()
    assert parse_listing("1. The query") == () and parse_listing('["a query"]') == ()
    grammar = deliverables_grammar(4)
    assert '"\\"deliverables\\":"' in grammar and 'item ("," sp item){0,3}' in grammar


def test_the_planner_model_lists_the_deliverables_within_its_time(tmp_path: Path) -> None:
    backend = FakeBackend(script=load_script(_script(tmp_path, text=_listing("Top-10 customers query"))))
    listing = list_deliverables("Write a SQL query ... from an orders table and a customers table.", backend)
    assert listing.deliverables == ("Top-10 customers query",) and listing.problem is None

    slow = FakeBackend(script=load_script(_script(tmp_path, text=_listing("a", "b"), delay=5.0)))
    late = list_deliverables("a task", slow, time_limit=0.5)
    assert late.deliverables == () and late.problem == "the listing was out of time (0.5 s)"

    failing = FakeBackend(script=load_script(_script(tmp_path, fail="model crashed")))
    assert "model crashed" in (list_deliverables("a task", failing).problem or "")
    prose = FakeBackend(script=load_script(_script(tmp_path, text="There are two deliverables.")))
    assert (list_deliverables("a task", prose).problem or "").startswith("no list of deliverables in the answer")


def test_one_deliverable_listed_makes_a_plan_the_narrower_single_and_says_why() -> None:
    after = second_reading(MULTI, Listing(("The SQL query",)))
    assert after.kind == "single" and after.rule == "unclear_scope_narrower" and after.listed == ["The SQL query"]
    assert "the planner model lists one deliverable ('The SQL query')" in after.reason
    assert after.expert == "legal_drafting" and "the task names 2 deliverables" in after.reason

    both = second_reading(MULTI, Listing(("The NDA", "A summary")))
    assert both.kind == "multi" and both.rule is None and both.listed == ["The NDA", "A summary"]
    failed = second_reading(MULTI, Listing(problem="out of time"))
    assert failed.kind == "multi" and failed.listed == []
    single = ScopeDecision(kind="single", words=5, reason="one expert")
    assert second_reading(single, Listing(("x",))).kind == "single"


def _run(tmp_path: Path, text: str, thread: str, **context: object) -> tuple[Any, dict[str, Any]]:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": thread}}
    fake = {"backend": "fake", "fake_script": _script(tmp_path, text=text)}
    graph.invoke(RunInput(task=TWO_PARTS, **context), config, context=fake)  # type: ignore[arg-type]
    return graph, config


def test_a_task_read_as_one_deliverable_runs_one_slot_with_the_default_recorded(tmp_path: Path) -> None:
    graph, config = _run(tmp_path, _listing("A mutual NDA with a plain-English summary"), "one")
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.scope is not None and state.scope.kind == "single" and state.scope.rule == "unclear_scope_narrower"
    assert state.framework is not None and [s.id for s in state.framework.slots] == ["answer"]
    [applied] = [d for d in state.defaults if d.rule == "unclear_scope_narrower"]
    assert applied.alternatives == ["single", "multi"] and applied.node == "scope"
    [entry] = [e for e in state.ledger if e.action == "list_deliverables"]
    assert entry.outputs_summary == "1 listed: A mutual NDA with a plain-English summary"
    assert state.status.value == "completed"


def test_two_deliverables_listed_keep_the_plan(tmp_path: Path) -> None:
    graph, config = _run(tmp_path, _listing("The NDA", "A plain-English summary"), "two")
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.scope is not None and state.scope.kind == "multi" and state.scope.listed == [
        "The NDA",
        "A plain-English summary",
    ]
    assert state.framework is not None and len(state.framework.slots) == 2


def test_interactive_mode_asks_when_the_readings_disagree(tmp_path: Path) -> None:
    graph, config = _run(tmp_path, _listing("One NDA"), "ask", mode="interactive")
    snapshot = graph.get_state(config)
    [task] = [t for t in snapshot.tasks if t.interrupts]
    payload = task.interrupts[0].value
    assert payload["node"] == "scope" and payload["questions"][0]["allowed"] == ["single", "multi"]
    # the node runs again on resume and reads the task again: greedy, the planner model lists the same
    again = {"backend": "fake", "fake_script": _script(tmp_path, text=_listing("One NDA"))}
    graph.invoke(Command(resume="multi"), config, context=again)
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.scope is not None and state.scope.kind == "multi" and "the person chose multi" in state.scope.reason


def test_no_second_reading_without_planner_time(tmp_path: Path) -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "off"}}
    context = {"backend": "fake", "fake_script": _script(tmp_path, text=_listing("One NDA")), "plan_seconds": 0}
    graph.invoke(RunInput(task=TWO_PARTS), config, context=context)
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.scope is not None and state.scope.kind == "multi" and state.scope.listed is None
    assert not any(e.action == "list_deliverables" for e in state.ledger)
