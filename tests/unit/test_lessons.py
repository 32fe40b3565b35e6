"""Routing lessons (issue 20): a person's word on a slot's expert trains the router, within bounds, without drift."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

import experts.routing.lesson_check as lessons_module
from cli.main import app
from experts.routing import get_router
from experts.routing.lesson_check import Lesson, check_lesson, guard_score, router_with_lessons
from memory.routing_lessons import RoutingLessons

MISROUTED = "Explain to the finance team why the report query is now faster."
"""The router sends it to the SQL expert: the words are about a query; the work is an explanation."""
PARAPHRASE = "Tell the finance team in simple terms what changed to make the report query fast."
WRONG = Lesson("Write a SQL query that joins orders and customers and returns last month's totals.", "creative_writer")


def test_a_correction_is_learned_for_the_text_and_its_paraphrase_and_the_shipped_router_is_untouched() -> None:
    router = get_router()
    assert router.route(MISROUTED).expert == "sql_specialist"
    check = check_lesson(router, [], Lesson(MISROUTED, "technical_writer"))
    assert check.kept and check.routed_before == "sql_specialist" and check.routed_after == "technical_writer"
    assert check.guard_after is not None and check.guard_after.right >= check.guard_base.right - 1
    taught = router_with_lessons(router, [Lesson(MISROUTED, "technical_writer")])
    assert [r.expert for r in taught.route_many([MISROUTED, PARAPHRASE])] == ["technical_writer"] * 2
    assert router.route(MISROUTED).expert == "sql_specialist"  # a user's lessons never change the shared router
    assert router_with_lessons(router, []) is router


def test_a_lesson_far_from_what_the_scope_documents_say_is_refused_as_implausible() -> None:
    check = check_lesson(get_router(), [], WRONG)
    assert not check.kept and check.reason.startswith("not plausible: creative_writer scores")
    assert check.gap > lessons_module.PLAUSIBLE_GAP and check.guard_after is None


def test_a_lesson_that_costs_guard_texts_is_rolled_back(monkeypatch: pytest.MonkeyPatch) -> None:
    router = get_router()
    base = guard_score(router, router.catalog)
    assert base.total == 125
    monkeypatch.setattr(lessons_module, "DRIFT_TOLERANCE", -1)  # any lesson now "costs" one text more than allowed
    check = check_lesson(router, [], Lesson(MISROUTED, "technical_writer"))
    assert not check.kept and check.reason.startswith("rolled back: with it the router gets")


def test_only_the_latest_word_on_a_text_counts_and_at_most_max_lessons() -> None:
    lessons = [Lesson("Text  one", "a"), Lesson("text one", "b"), *[Lesson(f"t{i}", "c") for i in range(300)]]
    bounded = lessons_module._bounded(lessons)
    assert len(bounded) == lessons_module.MAX_LESSONS and bounded[-1].text == "t299"
    assert lessons_module._bounded(lessons[:2]) == [Lesson("text one", "b")]


def test_lessons_are_kept_per_user_with_their_verdict_and_forgotten_by_run() -> None:
    store = InMemoryStore()
    alice = RoutingLessons(store, "alice")
    kept, _ = alice.teach(get_router(), Lesson(MISROUTED, "technical_writer"), run_id="run-1", slot="S")
    refused, _ = alice.teach(get_router(), WRONG, run_id="run-2", slot="Q")
    assert kept.kept and not refused.kept and kept.guard.endswith("/125")
    assert alice.kept() == [Lesson(MISROUTED, "technical_writer")]
    assert [r.id for r in alice.records()] == [kept.id, refused.id]
    assert RoutingLessons(store, "bob").records() == []
    assert [r.id for r in alice.forget_run("run-1")] == [kept.id] and alice.kept() == []


@pytest.mark.slow  # every lesson re-routes the guard texts with the real embedder
def test_coe_feedback_route_to_teaches_the_next_runs_routing(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    slots = [
        {"id": "S", "title": "Explain the change", "description": MISROUTED},
        {"id": "Q", "title": "The query", "description": WRONG.text},
    ]
    plan.write_text(yaml.safe_dump({"id": "fix", "title": "Fix the report", "slots": slots}), encoding="utf-8")
    cp = ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"]
    runner = CliRunner()
    run = ["run", "Fix the report", "--framework", str(plan), "--backend", "fake", *cp]
    assert runner.invoke(app, [*run, "--thread", "first"]).exit_code == 0

    refused = runner.invoke(app, ["feedback", "first", "good", "--route-to", "technical_writer", *cp])
    assert refused.exit_code == 2 and "--route-to" in refused.stderr
    unknown = runner.invoke(app, ["feedback", "first", "bad", "--slot", "S", "--route-to", "poet", *cp])
    assert unknown.exit_code == 2 and "'poet' is not an expert" in unknown.stderr
    taught = runner.invoke(app, ["feedback", "first", "bad", "--slot", "S", "--route-to", "technical_writer", *cp])
    assert taught.exit_code == 0 and "routing lesson kept: slots like S go to technical_writer" in taught.stdout
    wrong = runner.invoke(app, ["feedback", "first", "bad", "--slot", "Q", "--route-to", "creative_writer", *cp])
    assert wrong.exit_code == 0 and "routing lesson not kept: not plausible" in wrong.stdout
    listed = runner.invoke(app, ["memory", "lessons", *cp])
    assert "kept     sql_specialist -> technical_writer" in listed.stdout
    assert "refused  sql_specialist -> creative_writer" in listed.stdout
    kept_id = json.loads(runner.invoke(app, ["memory", "lessons", "--json", *cp]).stdout)[0]["id"]
    shown = json.loads(runner.invoke(app, ["memory", "show", kept_id[:8], *cp]).stdout)
    assert shown["kind"] == "routing lesson" and shown["expert"] == "technical_writer" and shown["slot"] == "S"
    record = json.loads(runner.invoke(app, ["memory", "show", shown["run_id"], *cp]).stdout)
    assert record["kind"] == "run" and [f["verdict"] for f in record["feedback"]] == ["bad", "bad"]
    assert runner.invoke(app, ["memory", "show", "zzzz", *cp]).exit_code == 2

    assert runner.invoke(app, [*run, "--thread", "second"]).exit_code == 0
    routing = json.loads(runner.invoke(app, ["show", "second", "--json", *cp]).stdout)["routing"]
    assert routing["S"]["expert"] == "technical_writer" and "learned 1 routing lesson(s)" in routing["S"]["reason"]
    assert routing["Q"]["expert"] == "sql_specialist"


def test_a_rejected_run_leaves_no_memory() -> None:
    """V7's committed vs work in progress: a plan the person rejected writes no record, fact or lesson."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from experts.embedding import get_embedder
    from graph import build_graph
    from graph.persistence import serializer
    from memory.store import EpisodeMemory, FactMemory
    from state.io import RunInput
    from tests.conftest import FIXTURES

    store = InMemoryStore()
    graph = build_graph(InMemorySaver(serde=serializer()), store=store)
    config = {"configurable": {"thread_id": "rejected"}}
    framework = yaml.safe_load((FIXTURES / "branchy.yaml").read_text(encoding="utf-8"))
    run = RunInput(task="Plan a small service", mode="confirm", options={"framework": framework})
    graph.invoke(run, config, context={"backend": "fake"})
    out = graph.invoke(Command(resume={"action": "reject", "reason": "not now"}), config, context={"backend": "fake"})
    assert out["status"] == "rejected"
    assert EpisodeMemory(store, "local", get_embedder()).episodes() == []
    assert FactMemory(store, "local", get_embedder()).facts() == []
    assert RoutingLessons(store, "local").records() == []


def test_an_expert_consulted_by_an_assist_is_routed_with_the_persons_lessons() -> None:
    from engine.slots.job import SlotJob
    from engine.slots.run import run_slot
    from experts.backends import Generation, GenerationRequest
    from state.context import resolve_settings
    from state.framework import SlotSpec

    assist = f"{{{{ASSIST:expert:reporting:{MISROUTED}}}}}"
    answer = f"## Outline\n1. Notes\n\n## 1. Notes\nThe change, explained: {assist}\n"

    class Answers:
        def supports_grammar(self) -> bool:
            return False

        def generate(self, request: GenerationRequest) -> Generation:
            return Generation(text=answer, finish_reason="stop")

    def consulted(lessons: tuple[Lesson, ...]) -> list[str]:
        spec = SlotSpec(id="notes", title="Notes", description="Notes on the report change", deliverable="prose")
        job = SlotJob(
            spec=spec, task="Notes on the report change", constraints=(), expert="technical_writer", persona="",
            references={}, max_tokens=200, temperature=0.0, lessons=lessons,
        )  # fmt: skip
        outcome = run_slot(job, Answers(), resolve_settings({"backend": "fake"}, env={}), emit=lambda _: None)
        return [step for record in outcome.assists for step in record.trail if step.startswith("routed")]

    assert "to sql_specialist" in consulted(())[0]
    assert "to technical_writer" in consulted((Lesson(MISROUTED, "technical_writer"),))[0]


def test_the_scope_of_a_task_is_classified_with_the_persons_lessons() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import build_graph
    from graph.persistence import serializer
    from state import Passport
    from state.io import RunInput

    store = InMemoryStore()
    graph = build_graph(InMemorySaver(serde=serializer()), store=store)

    def run(thread: str) -> Passport:
        config = {"configurable": {"thread_id": thread}}
        graph.invoke(RunInput(task=MISROUTED), config, context={"backend": "fake"})
        return Passport.model_validate(graph.get_state(config).values)

    before = run("before")
    assert before.scope is not None and before.scope.kind == "single" and before.scope.expert == "sql_specialist"
    record, _ = RoutingLessons(store, "local").teach(get_router(), Lesson(MISROUTED, "technical_writer"))
    assert record.kept
    after = run("after")
    assert after.scope is not None and after.scope.kind == "single" and after.scope.expert == "technical_writer"
    assert after.routing["answer"].expert == "technical_writer"
    said = next(e.outputs_summary for e in after.ledger if e.action == "scope")
    assert "the router has learned 1 routing lesson(s) of yours" in said


@pytest.mark.slow  # as above, twice
def test_a_kept_lesson_is_checked_again_once_after_the_catalog_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from experts.catalog import load_catalog
    from experts.routing.lesson_check import lessons_version

    store = InMemoryStore()
    alice = RoutingLessons(store, "alice")
    shipped = get_router()
    record, _ = alice.teach(shipped, Lesson(MISROUTED, "technical_writer"))
    assert record.kept and record.catalog == lessons_version(shipped.catalog)
    assert alice.current(shipped) == [Lesson(MISROUTED, "technical_writer")]  # same catalog: not checked again

    scopes = tmp_path / "scopes"
    shutil.copytree(Path(lessons_module.__file__).resolve().parents[2] / "config" / "expert_scopes", scopes)
    with (scopes / lessons_module.GUARD_FILE).open("a", encoding="utf-8") as guard:
        guard.write("sql_specialist\tWrite the SQL that lists last week's refunds per store.\n")
    changed = get_router(catalog=load_catalog(scopes))
    assert lessons_version(changed.catalog) != record.catalog
    monkeypatch.setattr(lessons_module, "DRIFT_TOLERANCE", -1)  # under the new catalog, the lesson now drifts
    assert alice.current(changed) == []
    [again] = alice.records()
    assert not again.kept and again.catalog == lessons_version(changed.catalog)
    assert again.reason.startswith("refused on a recheck after the catalog changed: rolled back: with it")
    assert again.guard.endswith("/126")  # the new guard set was the measure
    assert alice.current(changed) == [] and alice.kept() == []  # refused for good: not checked a third time
