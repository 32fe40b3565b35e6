"""Semantic memory (issue 20): facts per user in LangGraph's Store, searched by meaning, filling lookup assists."""

from __future__ import annotations

import json
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from experts.embedding import get_embedder
from graph import build_graph, open_store
from graph.persistence import serializer
from memory.store import FactMemory
from state import Passport
from state.io import RunInput

ANSWER = (
    "## Outline\n1. Database\n\n## 1. Database\n"
    "Production runs {{ASSIST:lookup:the PostgreSQL version we run in production}}, and the rotation hands over "
    "at {{ASSIST:lookup:the MySQL root password of the staging server}}.\n"
)


def test_facts_are_added_searched_by_meaning_and_forgotten() -> None:
    memory = FactMemory(InMemoryStore(), "alice", get_embedder())
    pg = memory.add("We deploy our services on PostgreSQL 16 in the eu-west-1 region.")
    memory.add("Customer support is open weekdays from 08:00 to 18:00 CET.", source="onboarding", run_id="r1")
    [(best, score)] = memory.search("the PostgreSQL version we run in production", k=1)
    assert best.id == pg.id and score > 0.48
    assert [f.source for f in memory.facts()] == ["person", "onboarding"]
    assert [f.text for f in memory.forget_run("r1")] == ["Customer support is open weekdays from 08:00 to 18:00 CET."]
    assert memory.forget(pg.id[:8]) == pg and memory.facts() == []


def test_users_never_see_each_others_facts() -> None:
    store = InMemoryStore()
    FactMemory(store, "alice", get_embedder()).add("Alice's team deploys on Fridays.")
    assert FactMemory(store, "bob", get_embedder()).facts() == []
    assert FactMemory(store, "bob", get_embedder()).search("when does the team deploy") == []


def test_a_lookup_is_filled_from_a_remembered_fact_with_its_provenance_and_a_near_miss_is_not(tmp_path: Path) -> None:
    store = InMemoryStore()
    FactMemory(store, "local", get_embedder()).add("We deploy our services on PostgreSQL 16 in the eu-west-1 region.")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": [{"title": ".*", "text": ANSWER}]}))
    graph = build_graph(InMemorySaver(serde=serializer()), store=store)
    config = {"configurable": {"thread_id": "facts"}}
    context = {"backend": "fake", "fake_script": str(script), "kb_path": str(tmp_path / "kb")}
    graph.invoke(RunInput(task="Describe our production database setup"), config, context=context)
    state = Passport.model_validate(graph.get_state(config).values)
    records = [r for rs in state.assists.values() for r in rs]
    filled = next(r for r in records if "PostgreSQL version" in r.description)
    assert filled.value is not None and "PostgreSQL 16" in filled.value
    assert filled.sources and filled.sources[0].kind == "memory" and filled.sources[0].excerpt
    assert "PostgreSQL 16" in (state.document or "")
    near_miss = next(r for r in records if "MySQL root password" in r.description)
    assert near_miss.value is None  # a fact on a nearby topic does not answer it


def test_a_fact_above_the_line_fills_only_when_the_check_model_reads_it_as_the_answer(tmp_path: Path) -> None:
    store = InMemoryStore()
    FactMemory(store, "local", get_embedder()).add("We deploy our services on PostgreSQL 16 in the eu-west-1 region.")
    answers = {}
    for verdict in ("no", "yes"):
        script = tmp_path / f"{verdict}.json"
        rules = [{"slot": "memory-check", "text": verdict}, {"title": ".*", "text": ANSWER}]
        script.write_text(json.dumps({"rules": rules}))
        graph = build_graph(InMemorySaver(serde=serializer()), store=store)
        config = {"configurable": {"thread_id": verdict}}
        context = {"backend": "fake", "fake_script": str(script), "kb_path": str(tmp_path / "kb")}
        graph.invoke(RunInput(task="Describe our production database setup"), config, context=context)
        state = Passport.model_validate(graph.get_state(config).values)
        answers[verdict] = next(r for rs in state.assists.values() for r in rs if "PostgreSQL version" in r.description)
    assert answers["yes"].value is not None and "PostgreSQL 16" in answers["yes"].value
    assert answers["no"].value is None  # near enough by meaning, but the check read it as no answer
    assert any("not answering the request" in step for step in answers["no"].trail)


def test_coe_memory_commands_keep_facts_beside_the_runs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    cp = ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"]
    runner = CliRunner()
    added = runner.invoke(app, ["memory", "add", "Our fiscal year starts on 1 April.", "--json", *cp])
    assert added.exit_code == 0, added.output
    fact_id = json.loads(added.stdout)["id"]
    listed = runner.invoke(app, ["memory", "list", *cp])
    assert "Our fiscal year starts on 1 April." in listed.stdout
    found = runner.invoke(app, ["memory", "search", "the month our fiscal year begins", "--json", *cp])
    assert json.loads(found.stdout)[0]["id"] == fact_id
    said = runner.invoke(app, ["memory", "search", "the month our fiscal year begins", *cp])
    assert "Our fiscal year starts on 1 April." in said.stdout and "(searched by " in said.stderr
    with open_store(f"sqlite://{tmp_path / 'runs.sqlite'}") as store:  # the same file as the runs
        assert FactMemory(store, "local", get_embedder()).facts()[0].id == fact_id
    bad = runner.invoke(app, ["memory", "forget", *cp])
    assert bad.exit_code == 2 and "give a fact id or --run" in bad.stderr
    gone = runner.invoke(app, ["memory", "forget", fact_id[:8], *cp])
    assert gone.exit_code == 0 and "forgot" in gone.stdout
    assert "no facts remembered" in runner.invoke(app, ["memory", "list", *cp]).stdout


def test_a_fact_put_through_the_store_api_is_found_and_forgotten_by_its_key() -> None:
    from memory.store import namespace

    store = InMemoryStore()
    store.put(namespace("alice"), "k1", {"text": "Payments are processed by Stripe."})  # no vector, no id
    memory = FactMemory(store, "alice", get_embedder())
    [(fact, score)] = memory.search("our payment processor", k=1)
    assert fact.id == "k1" and fact.source == "store API" and score > 0.48
    assert memory.forget("k1") == fact and memory.facts() == []


FASTAPI = (
    "Secure a Python FastAPI backend: add authentication, rate limiting and input validation, and document the changes."
)


def test_every_finished_run_is_recorded_and_a_template_that_failed_for_a_similar_task_is_passed_over() -> None:
    from memory.store import Episode, EpisodeMemory

    store = InMemoryStore()
    graph = build_graph(InMemorySaver(serde=serializer()), store=store)
    config = {"configurable": {"thread_id": "first"}}
    graph.invoke(RunInput(task=FASTAPI), config, context={"backend": "fake"})
    first = Passport.model_validate(graph.get_state(config).values)
    assert first.template is not None and first.template.id == "secure_code_with_legal_artifact"
    episodes = EpisodeMemory(store, "local", get_embedder())
    [episode] = episodes.episodes()
    assert first.run is not None and first.framework is not None
    assert episode.run_id == first.run.run_id and episode.status == first.status.value
    assert episode.template == "secure_code_with_legal_artifact"
    assert [s["id"] for s in episode.slots] == [s.id for s in first.framework.slots]
    # the same template ended badly for this task: the next run of a similar task plans from the next best one
    episodes.record(Episode(**{**episode.__dict__, "run_id": "bad-run", "status": "failed"}))
    episodes.facts.store.delete(episodes.namespace, episode.run_id)
    again = {"configurable": {"thread_id": "second"}}
    graph.invoke(RunInput(task=FASTAPI), again, context={"backend": "fake"})
    second = Passport.model_validate(graph.get_state(again).values)
    assert second.template is not None and second.template.id == "rest_api_design_and_implementation"
    chosen = next(e for e in second.ledger if e.action == "select_framework")
    assert "secure_code_with_legal_artifact was passed over" in chosen.inputs_summary
    assert episodes.forget_run("bad-run") and not episodes.forget_run("bad-run")


def test_coe_feedback_joins_the_runs_record_and_a_bad_run_no_longer_counts_as_worked(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app
    from memory.store import EpisodeMemory
    from tests.conftest import FIXTURES

    cp = ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"]
    runner = CliRunner()
    plan = ["--framework", str(FIXTURES / "branchy.yaml"), "--backend", "fake", "--thread", "fb"]
    assert runner.invoke(app, ["run", "Plan a small service", *plan, *cp]).exit_code == 0
    with open_store(f"sqlite://{tmp_path / 'runs.sqlite'}") as store:
        [before] = EpisodeMemory(store, "local", get_embedder()).episodes()
    assert before.worked
    wrong = runner.invoke(app, ["feedback", "fb", "good", "--slot", "Z", *cp])
    assert wrong.exit_code == 2 and "its slots: A, B, C, D" in wrong.stderr
    assert runner.invoke(app, ["feedback", "fb", "meh", *cp]).exit_code == 2
    done = runner.invoke(app, ["feedback", "fb", "bad", "--note", "too generic", *cp])
    assert done.exit_code == 0 and "was bad" in done.stdout
    with open_store(f"sqlite://{tmp_path / 'runs.sqlite'}") as store:
        [after] = EpisodeMemory(store, "local", get_embedder()).episodes()
    assert after.feedback[0]["verdict"] == "bad" and after.feedback[0]["note"] == "too generic"
    assert not after.worked


FACTS = [
    "We deploy our services on PostgreSQL 16 in the eu-west-1 region.",
    "Customer support is open weekdays from 08:00 to 18:00 CET.",
    "Our availability target for the public API is 99.9 percent.",
    "Payments are processed by Stripe.",
]
QUERIES = ["the PostgreSQL version we run in production", "the rate limit of the public API", "our payment processor"]


def _scores(memory: FactMemory) -> list[list[tuple[str, float]]]:
    return [[(f.text, s) for f, s in memory.search(q, k=4)] for q in QUERIES]


def test_a_store_with_a_vector_index_searches_the_facts_itself_with_the_scans_scores() -> None:
    from experts.embedding.store_index import store_index

    scanned, indexed = FactMemory(InMemoryStore(), "a", get_embedder()), None
    indexed = FactMemory(InMemoryStore(index=store_index()), "a", get_embedder())  # type: ignore[arg-type]
    assert indexed.searched_by == "the store's vector index"
    assert scanned.searched_by == "our own scan (the store (InMemoryStore) has no vector index)"
    for text in FACTS:
        scanned.add(text)
        indexed.add(text)
    for by_scan, by_index in zip(_scores(scanned), _scores(indexed), strict=True):
        assert [t for t, _ in by_index] == [t for t, _ in by_scan]  # the same facts in the same order
        assert all(abs(a - b) < 1e-3 for (_, a), (_, b) in zip(by_scan, by_index, strict=True))  # the same line


def test_facts_written_without_the_index_are_indexed_when_first_searched() -> None:
    from experts.embedding.store_index import store_index
    from memory.store import namespace

    store = InMemoryStore(index=store_index())  # type: ignore[arg-type]
    store.put(namespace("alice"), "k1", {"text": "Payments are processed by Stripe."}, index=False)  # an old fact
    memory = FactMemory(store, "alice", get_embedder())
    [(fact, score)] = memory.search("our payment processor", k=1)
    assert fact.id == "k1" and score > 0.48 and store.get(namespace("alice"), "k1").value["indexed"]


def test_the_sqlite_store_with_sqlite_vec_gives_the_scans_scores(tmp_path: Path) -> None:
    """SQLite's index is sqlite-vec, an extension: tested on pysqlite3, whose sqlite3 can load it."""
    import pysqlite3.dbapi2 as sqlite3  # type: ignore[import-untyped]  # a test dependency
    from langgraph.store.sqlite import SqliteStore

    from experts.embedding.store_index import store_index

    conn = sqlite3.connect(str(tmp_path / "store.sqlite"), check_same_thread=False, isolation_level=None)
    try:
        store = SqliteStore(conn, index=store_index())  # type: ignore[arg-type]
        store.setup()
        indexed = FactMemory(store, "a", get_embedder())
        scanned = FactMemory(InMemoryStore(), "a", get_embedder())
        assert indexed.searched_by == "the store's vector index"
        for text in FACTS:
            scanned.add(text)
            indexed.add(text)
        for by_scan, by_index in zip(_scores(scanned), _scores(indexed), strict=True):
            assert [t for t, _ in by_index] == [t for t, _ in by_scan]
            assert all(abs(a - b) < 1e-3 for (_, a), (_, b) in zip(by_scan, by_index, strict=True))
    finally:
        conn.close()


def test_the_run_store_says_which_search_its_facts_get(tmp_path: Path) -> None:
    import sqlite3

    with open_store("memory") as store:
        assert FactMemory(store, "a", get_embedder()).searched_by == "the store's vector index"
    with open_store(f"sqlite://{tmp_path / 'runs.sqlite'}") as store:
        memory = FactMemory(store, "a", get_embedder())
        memory.add(FACTS[0])
        if hasattr(sqlite3.Connection, "enable_load_extension"):
            assert memory.searched_by == "the store's vector index"
        else:  # this Python's sqlite3 cannot load sqlite-vec: the scan, and it says so
            assert "sqlite3 cannot load extensions" in memory.searched_by
        assert memory.search(QUERIES[0], k=1)[0][0].text == FACTS[0]
