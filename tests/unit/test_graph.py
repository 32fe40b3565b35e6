"""End-to-end runs of the compiled graph on the scripted fake backend (in-memory checkpointer)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from experts.catalog import load_catalog
from graph import build_graph
from state import Passport, RunStatus, SlotStatus
from state.framework import load_framework_file
from state.io import RunInput, RunOptions
from tests.conftest import FIXTURES, read_calls

BAD = "Here is my answer without any structure."


def _input(
    task: str = "Plan a small web service", framework: Path | None = FIXTURES / "branchy.yaml"
) -> dict[str, Any]:
    options = RunOptions()
    if framework is not None:
        fw = load_framework_file(str(framework))
        options = RunOptions(framework=fw.model_dump(mode="json"), framework_source=str(framework))
    return RunInput(task=task, options=options).model_dump(mode="json")


def _run(
    script: Path | None, *, framework: Path | None = FIXTURES / "branchy.yaml", thread: str = "t1", **ctx: Any
) -> Passport:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": thread}}
    context = {"backend": "fake", "fake_script": str(script) if script else None, **ctx}
    graph.invoke(_input(framework=framework), config, context=context)
    return Passport.model_validate(graph.get_state(config).values)


def test_branchy_run_completes_and_assembles_in_dependency_order(write_script) -> None:
    state = _run(write_script({"rules": []}))
    assert state.status == RunStatus.COMPLETED
    assert {sid: st.status for sid, st in state.slot_states.items()} == dict.fromkeys("ABCD", SlotStatus.DONE)
    doc = state.document or ""
    positions = [doc.index(f"## {t}") for t in ("Requirements", "Risks", "Design", "Plan")]
    assert positions == sorted(positions)
    assert doc.startswith("# Branchy plan")
    # Expert sections are nested one level under the slot heading.
    assert "### 1. Scope of Design" in doc and "#### 2.1 Key steps" in doc
    assert state.summary is not None and [s.id for s in state.summary.slots] == ["A", "B", "C", "D"]
    assert all(s.attempts == 1 for s in state.summary.slots)
    # Every slot was routed, and the summary reports the routed expert.
    assert {s.id: s.expert for s in state.summary.slots} == {sid: d.expert for sid, d in state.routing.items()}
    assert all(d.scores and d.expert in load_catalog() for d in state.routing.values())
    assert state.run is not None and state.run.thread_id == "t1"


def test_without_framework_the_one_slot_fallback_runs(write_script) -> None:
    state = _run(write_script({"rules": []}), framework=None, use_templates=False)
    assert state.framework is not None and state.framework.source == "fallback:single_slot"
    assert list(state.results) == ["answer"]
    assert state.status == RunStatus.COMPLETED


def test_failed_slot_blocks_dependents_and_run_still_assembles(write_script) -> None:
    script = write_script({"rules": [{"slot": "B", "fail": "model crashed"}]})
    state = _run(script)
    st = state.slot_states
    assert st["A"].status == st["C"].status == SlotStatus.DONE
    assert st["B"].status == SlotStatus.FAILED and "model crashed" in (st["B"].error or "")
    assert st["D"].status == SlotStatus.BLOCKED and st["D"].blocked_by == ["B"]
    assert state.status == RunStatus.PARTIAL
    doc = state.document or ""
    assert "this part failed: " in doc and "model crashed" in doc
    assert "was not written because B failed" in doc
    assert any(e.action == "block" and e.slot_id == "D" for e in state.ledger)


def test_non_compliant_output_is_retried_with_feedback_then_accepted(write_script) -> None:
    script = write_script({"rules": [{"slot": "A", "responses": [{"text": BAD}, {}]}]})
    state = _run(script)
    assert state.slot_states["A"].attempts == 2
    actions = [e.action for e in state.ledger if e.slot_id == "A"]
    assert actions == ["route", "generate", "generate_retry", "select"]  # the choice is in the ledger
    assert state.results["A"].compliant


def test_always_non_compliant_is_accepted_with_a_warning_after_two_retries(write_script) -> None:
    state = _run(write_script({"rules": [{"slot": "C", "text": BAD}]}))
    assert state.slot_states["C"].status == SlotStatus.DONE
    assert state.slot_states["C"].attempts == 3
    assert not state.results["C"].compliant
    warning = [n for n in state.notices if n.slot_id == "C"]
    assert warning and "accepted without the required structure after 3 attempts" in warning[0].message
    assert BAD in (state.document or "")  # best effort: the raw text is kept
    assert state.status == RunStatus.COMPLETED


def test_retry_budget_is_a_setting(write_script) -> None:
    state = _run(write_script({"rules": [{"slot": "C", "text": BAD}]}), max_outline_retries=0)
    assert state.slot_states["C"].attempts == 1


def test_assist_placeholders_become_honest_unresolved_markers(write_script) -> None:
    text = (
        "## Outline\n1. Setup\n2. Limits\n3. Next\n\n"
        "## 1. Setup\nConnect to {{ASSIST:user:your database hostname}}.\n\n"
        "## 2. Limits\nTimeout {{ASSIST:lookup:recommended session timeout}}.\n\n## 3. Next\nDone.\n"
    )
    state = _run(write_script({"rules": [{"slot": "A", "text": text}]}))
    summary = state.summary
    assert summary is not None
    assert summary.unresolved == [
        "{{UNRESOLVED:user:your database hostname - needs user input}}",
        "{{UNRESOLVED:lookup:recommended session timeout - the knowledge base is empty}}",
    ]
    doc = state.document or ""
    assert "{{ASSIST:" not in doc and "## Unresolved" in doc


def test_a_slot_starts_when_its_own_deps_are_done_not_when_the_wave_is(write_script, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    script = write_script({"calls_log": str(log), "rules": [{"slot": "A", "delay": 0.05}, {"slot": "C", "delay": 1.5}]})
    start = time.time()
    _run(script)
    calls = {json.loads(line)["slot"]: json.loads(line)["t"] - start for line in log.read_text().splitlines()}
    # B depends only on A (0.05 s); C takes 1.5 s. B must start long before C ends.
    assert calls["B"] < calls["C"] + 1.0
    assert calls["D"] >= calls["C"] + 1.4  # D waits for C


def test_progress_events_reach_the_custom_stream(write_script) -> None:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "s"}}
    events = [
        chunk
        for mode, chunk in graph.stream(
            _input(), config, context={"backend": "fake"}, stream_mode=["custom", "updates"]
        )
        if mode == "custom"
    ]
    kinds = {(e["event"], e.get("slot")) for e in events}  # a run-wide event (figures, completion) has no slot
    for slot in "ABCD":
        assert ("slot_dispatched", slot) in kinds and ("slot_started", slot) in kinds and ("slot_done", slot) in kinds


def test_fake_calls_are_logged_once_per_slot(write_script, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    _run(write_script({"calls_log": str(log)}))
    assert sorted(read_calls(log)) == ["A", "B", "C", "D"]


def test_output_schema_is_narrow(write_script) -> None:
    graph = build_graph(InMemorySaver())
    out = graph.invoke(_input(), {"configurable": {"thread_id": "o"}}, context={"backend": "fake"})
    assert set(out) == {"document", "status", "summary"}
    assert out["status"] == RunStatus.COMPLETED


def test_graph_exposes_the_public_node_names() -> None:
    nodes = set(build_graph().get_graph().nodes)
    assert {"guard", "select_template", "route_slots", "execute_slots", "assemble"} <= nodes


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"task": "   "}, "task: is empty"),
        ({"task": "x" * 8_001}, "the limit is 8000"),
    ],
)
def test_bad_input_is_rejected_with_the_field_named(payload: dict[str, Any], message: str) -> None:
    from state.errors import InputError

    graph = build_graph(InMemorySaver())
    with pytest.raises(InputError, match=message):
        graph.invoke(payload, {"configurable": {"thread_id": "bad"}}, context={"backend": "fake"})


def test_an_answer_cut_off_by_the_token_limit_says_so_in_the_retry_feedback(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from experts.backends.protocol import Generation, GenerationRequest

    # nodes/__init__ re-exports the node function under the module's name; patch the module itself.
    execute_module = importlib.import_module("nodes.execute_slots")

    seen: list[GenerationRequest] = []

    class Truncating:
        name = "truncating"

        def supports_grammar(self) -> bool:
            return False

        def generate(self, request: GenerationRequest) -> Generation:
            seen.append(request)
            return Generation(text="## Outline\n1. One\n2. Two", finish_reason="length")

    monkeypatch.setattr(execute_module, "get_backend", lambda settings, model=None: Truncating())
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "cut"}}
    graph.invoke(_input(framework=None), config, context={"backend": "fake", "max_tokens": 64, "use_templates": False})
    state = Passport.model_validate(graph.get_state(config).values)
    assert len(seen) == 3
    assert "cut off at the 64-token limit" in seen[1].messages[-1].content
    assert state.results["answer"].problems[0].startswith("the answer was cut off")


def test_the_slots_node_runs_sync_under_invoke_and_async_under_ainvoke_with_the_runtime(
    write_script, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI runs the graph synchronously, the server asynchronously: each reaches its own form of the node."""
    import asyncio

    from langgraph.runtime import Runtime

    from graph import builder
    from state.context import RunContext

    calls: list[tuple[str, Runtime[RunContext]]] = []
    real_sync, real_async = builder.execute_slots, builder.aexecute_slots

    def sync_round(state: Any, runtime: Runtime[RunContext]) -> dict[str, Any]:
        calls.append(("sync", runtime))
        return real_sync(state, runtime)

    async def async_round(state: Any, runtime: Runtime[RunContext]) -> dict[str, Any]:
        calls.append(("async", runtime))
        return await real_async(state, runtime)

    monkeypatch.setattr(builder, "execute_slots", sync_round)
    monkeypatch.setattr(builder, "aexecute_slots", async_round)
    graph = build_graph(InMemorySaver())
    context = {"backend": "fake", "fake_script": str(write_script({"rules": []})), "max_tokens": 321}

    graph.invoke(_input(), {"configurable": {"thread_id": "sync"}}, context=context)
    sync_calls = list(calls)
    calls.clear()
    asyncio.run(graph.ainvoke(_input(), {"configurable": {"thread_id": "async"}}, context=context))

    for kind, seen in (("sync", sync_calls), ("async", calls)):
        assert seen and {k for k, _ in seen} == {kind}
        for _, runtime in seen:
            assert isinstance(runtime.context, RunContext) and runtime.context.max_tokens == 321
            assert callable(runtime.stream_writer)
        config = {"configurable": {"thread_id": kind}}
        assert Passport.model_validate(graph.get_state(config).values).status == RunStatus.COMPLETED


def test_a_parts_first_section_named_as_the_part_gets_no_second_heading(write_script) -> None:
    """multipart_set5_rules2: "## Query (a): everyone who reports ..." over "### 1. Query (a): everyone who reports
    ... with", the part's own title shown twice, the second cut mid-phrase."""
    from nodes.assemble import _titled_as_slot

    body = "The design splits the service into an API layer and a worker that drains the queue every minute."
    notes = "The worker retries a failed job three times, then parks it for a person to look at."
    answer = f"## Outline\n1. Design\n2. Notes\n\n## 1. Design\n{body}\n\n## 2. Notes\n{notes}\n"
    state = _run(write_script({"rules": [{"slot": "B", "text": answer}]}))
    doc = state.document or ""
    assert f"## Design\n\n{body}\n\n### 2. Notes\n\n{notes}" in doc
    slot = "Query (a): everyone who reports to a given manager directly or indirectly, with a depth column"
    assert _titled_as_slot("Query (a): everyone who reports to a given manager directly or indirectly, with", slot)
    assert not _titled_as_slot("Query", slot)  # too short to be a cut title
    assert not _titled_as_slot("Usage", "Usage of the API") and _titled_as_slot("usage  of the API", "Usage of the API")
