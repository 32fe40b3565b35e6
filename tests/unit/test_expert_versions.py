"""Expert versions: a candidate examined beside the current version, promoted on its evidence, rolled back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from experts.catalog import add_expert, load_catalog
from experts.catalog.exams import read_record
from experts.catalog.versions import (
    add_candidate,
    candidates,
    history,
    previous,
    promote,
    rollback,
    shadow_path,
)
from state.errors import ConfigError
from tests.unit.plan_runs import answer
from tests.unit.test_expert_sources import EXAM, RUST_SCOPE, expert_dir

runner = CliRunner()
GOOD = answer("Add", "```rust\nfn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n```\nIt adds the two numbers.")
BAD = answer("Add", "Adding two numbers is done with the plus operator, which Rust supports natively.")


def fake(monkeypatch: pytest.MonkeyPatch, write_script: Any, good: int, name: str) -> None:
    """The fake backend answers the first ``good`` exam tasks well and the rest badly."""
    rules = [{"title": f"t{i}", "text": GOOD if i < good else BAD} for i in range(5)]
    monkeypatch.setenv("COE_BACKEND", "fake")
    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": rules}, name=name)))


def examine(*args: str) -> Any:
    return runner.invoke(app, ["experts", "examine", *args])


def test_a_candidate_is_examined_promoted_on_its_evidence_and_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any
) -> None:
    add_expert(expert_dir(tmp_path / "v1", exam_yaml=EXAM))
    fake(monkeypatch, write_script, good=3, name="v1.yaml")
    assert examine("rust_developer").exit_code == 0  # v1: 3 of 5
    v2 = {**RUST_SCOPE, "version": "2.0", "summary": "Writes idiomatic Rust with tests."}
    added = runner.invoke(app, ["experts", "add", str(expert_dir(tmp_path / "v2", v2, exam_yaml=EXAM)), "--candidate"])
    assert added.exit_code == 0, added.output
    assert "added rust_developer v2.0 as a candidate" in added.output
    assert "examining rust_developer v2.0 (candidate)" in added.output
    assert load_catalog().get("rust_developer").version == "1.0"  # a candidate is not routed to
    assert read_record("rust_developer", "2.0").score == 0.6  # type: ignore[union-attr]  # same answers as v1

    fake(monkeypatch, write_script, good=5, name="v2.yaml")
    assert examine("rust_developer", "--version", "2.0").exit_code == 0
    shown = runner.invoke(app, ["experts", "versions", "rust_developer"]).output
    assert "v1.0      current   passed 3/5" in shown and "v2.0      candidate passed 5/5" in shown

    promoted = runner.invoke(app, ["experts", "promote", "rust_developer", "2.0"])
    assert promoted.exit_code == 0, promoted.output
    assert "rust_developer: v1.0 -> v2.0" in promoted.output and "evidence: v2.0 passed 5/5" in promoted.output
    catalog = load_catalog()
    assert catalog.get("rust_developer").version == "2.0" and catalog.origin("rust_developer").kind == "user"
    assert list(previous("rust_developer")) == ["1.0"] and not candidates("rust_developer")
    [step] = history("rust_developer")
    assert step["evidence"]["from"].startswith("passed 3/5") and not step["forced"]

    back = runner.invoke(app, ["experts", "rollback", "rust_developer"])
    assert back.exit_code == 0 and "v2.0 -> v1.0" in back.output
    assert load_catalog().get("rust_developer").version == "1.0" and list(candidates("rust_developer")) == ["2.0"]
    again = json.loads(runner.invoke(app, ["experts", "versions", "rust_developer", "--json"]).stdout)
    assert [h["action"] for h in again["history"]] == ["promote", "rollback"]
    with pytest.raises(ConfigError, match="no promotion to roll back"):
        rollback("rust_developer")


def test_a_candidate_is_not_promoted_without_evidence_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any
) -> None:
    add_expert(expert_dir(tmp_path / "v1", exam_yaml=EXAM))
    fake(monkeypatch, write_script, good=4, name="v1.yaml")
    assert examine("rust_developer").exit_code == 0
    add_candidate(expert_dir(tmp_path / "v2", {**RUST_SCOPE, "version": "2.0"}, exam_yaml=EXAM))
    with pytest.raises(ConfigError, match="examine it first: coe experts examine rust_developer --version 2.0"):
        promote("rust_developer", "2.0")
    fake(monkeypatch, write_script, good=1, name="v2-bad.yaml")
    assert examine("rust_developer", "--version", "2.0").exit_code == 1
    with pytest.raises(ConfigError, match="its exam failed: FAILED 1/5"):
        promote("rust_developer", "2.0")
    assert "rust_developer" not in load_catalog().benched  # a failed candidate does not bench the current version
    fake(monkeypatch, write_script, good=3, name="v2-lower.yaml")
    assert examine("rust_developer", "--version", "2.0").exit_code == 0
    with pytest.raises(ConfigError, match="it scored 0.60, below the current v1.0's 0.80"):
        promote("rust_developer", "2.0")
    step = promote("rust_developer", "2.0", force=True)
    assert step["forced"] and load_catalog().get("rust_developer").version == "2.0"
    with pytest.raises(ConfigError, match="version '2.0' is the current version"):
        add_candidate(tmp_path / "v2" / "rust_developer")
    with pytest.raises(ConfigError, match="unknown expert id 'go_developer'"):
        add_candidate(expert_dir(tmp_path / "go", {**RUST_SCOPE, "id": "go_developer"}))


def test_a_promoted_candidate_replaces_a_shipped_expert_until_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any
) -> None:
    shipped = load_catalog()
    scope = yaml.safe_load(shipped.origin("sql_specialist").path.read_text(encoding="utf-8"))
    scope["version"] = "2"
    exam = {**EXAM, "expert": "sql_specialist"}
    add_candidate(expert_dir(tmp_path, scope, exam_yaml=exam))
    fake(monkeypatch, write_script, good=5, name="sql.yaml")
    assert examine("sql_specialist", "--version", "2").exit_code == 0
    promote("sql_specialist", "2")
    catalog = load_catalog()
    assert catalog.get("sql_specialist").version == "2"
    assert catalog.origin("sql_specialist").label() == "user, replaces shipped v1"
    assert catalog.ids.index("sql_specialist") == shipped.ids.index("sql_specialist")  # its place in the index
    rollback("sql_specialist")
    assert load_catalog().origin("sql_specialist").kind == "shipped"
    assert load_catalog().get("sql_specialist").version == "1"


def test_replacing_an_expert_keeps_the_replaced_version(tmp_path: Path) -> None:
    add_expert(expert_dir(tmp_path / "v1"))
    add_expert(expert_dir(tmp_path / "v2", {**RUST_SCOPE, "version": "2.0"}), replace_existing=True)
    assert list(previous("rust_developer")) == ["1.0"]
    assert load_catalog().get("rust_developer").version == "2.0"


def test_a_run_keeps_the_expert_version_it_was_routed_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any
) -> None:
    import importlib

    from langgraph.checkpoint.memory import InMemorySaver

    from experts.backends.fake import FakeBackend
    from graph import build_graph
    from state import Passport
    from state.io import RunInput, RunOptions
    from tests.unit.plan_runs import Recording

    add_expert(expert_dir(tmp_path / "v1"))
    prompts: list[str] = []

    def backend(settings: Any, model: str | None = None) -> FakeBackend:
        made = Recording.from_settings(settings)
        made.watched, made.prompts = "a", prompts
        return made

    monkeypatch.setattr(importlib.import_module("nodes.execute_slots"), "get_backend", backend)
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "pinned"}}
    slot = {"id": "a", "title": "Add", "description": "Write a Rust add function", "expert": "rust_developer"}
    run = RunInput(
        task="Write a Rust add function", options=RunOptions(framework={"id": "p", "title": "P", "slots": [slot]})
    )
    context = {"backend": "fake", "fake_script": str(write_script({"rules": []}))}
    graph.invoke(run.model_dump(mode="json"), config, context=context, interrupt_before=["execute_slots"])
    assert Passport.model_validate(graph.get_state(config).values).routing["a"].version == "1.0"

    persona = "You are a Rust developer of the second version.\nYou MAY write Rust.\nYou must REFUSE other work."
    add_expert(
        expert_dir(tmp_path / "v2", {**RUST_SCOPE, "version": "2.0", "harness_constraints": persona}),
        replace_existing=True,
    )
    graph.invoke(None, config, context=context)
    assert prompts and all("second version" not in p for p in prompts)  # v1's persona served the run
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.slot_states["a"].status.value == "done"
    prompts.clear()
    graph.invoke(run.model_dump(mode="json"), {"configurable": {"thread_id": "later"}}, context=context)
    assert any("second version" in p for p in prompts)  # a later run gets v2


def test_a_candidate_answers_real_slots_in_shadow_and_the_tally_is_the_promotions_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_script: Any
) -> None:
    add_expert(expert_dir(tmp_path / "v1", exam_yaml=EXAM))
    slot = {"id": "add", "title": "Add", "description": "Write a Rust add function", "expert": "rust_developer"}
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"id": "p", "title": "P", "slots": [slot]}), encoding="utf-8")
    monkeypatch.setenv("COE_BACKEND", "fake")
    monkeypatch.setenv(
        "COE_FAKE_SCRIPT", str(write_script({"rules": [{"title": "^Add$", "text": "fn add"}]}, "bad.yaml"))
    )
    for _ in range(2):  # two real runs, served by v1 with an answer that breaks the output contract
        ran = runner.invoke(app, ["run", "Write a Rust add function", "--framework", str(plan)])
        assert ran.exit_code in (0, 3), ran.output

    add_candidate(expert_dir(tmp_path / "v2", {**RUST_SCOPE, "version": "2.0"}, exam_yaml=EXAM))
    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": [{"title": "^Add$", "text": GOOD}]}, "good.yaml")))
    shadowed = runner.invoke(app, ["experts", "shadow", "rust_developer", "2.0", "--slots", "5"])
    assert shadowed.exit_code == 0, shadowed.output
    assert shadowed.output.count("served v1.0") == 2 and "-> candidate" in shadowed.output
    assert "rust_developer v2.0: shadow: 2 slots, candidate 2, served 0, tie 0" in shadowed.output
    listing = runner.invoke(app, ["experts", "versions", "rust_developer"]).output
    assert "shadow: 2 slots, candidate 2" in listing

    fake(monkeypatch, write_script, good=5, name="exam.yaml")
    assert examine("rust_developer", "--version", "2.0").exit_code == 0
    step = promote("rust_developer", "2.0")
    assert step["evidence"]["shadow"] == "shadow: 2 slots, candidate 2, served 0, tie 0"
    rollback("rust_developer")
    with shadow_path("rust_developer", "2.0").open("a", encoding="utf-8") as kept:  # three more, lost
        kept.write((json.dumps({"winner": "served"}) + "\n") * 3)
    with pytest.raises(ConfigError, match=r"the served answers won its shadow runs \(shadow: 5 slots, candidate 2"):
        promote("rust_developer", "2.0")
    with pytest.raises(ConfigError, match="no saved run has a finished slot of rust_developer"):
        from graph.shadow import shadow

        add_candidate(expert_dir(tmp_path / "v3", {**RUST_SCOPE, "version": "3.0"}))
        shadow("rust_developer", "3.0", checkpoint=f"sqlite://{tmp_path / 'empty.sqlite'}")


def test_a_shadow_tie_goes_to_the_judge_only_when_its_pick_holds_in_both_orders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import graph.shadow as shadow_module
    from state.framework import SlotSpec

    spec = SlotSpec(id="s", title="Add", description="Write a Rust add function")
    monkeypatch.setattr(shadow_module, "get_backend", lambda settings, model: None)
    monkeypatch.setattr(shadow_module, "judge", lambda tied, rubric, backend: tied[0][0])  # always the first shown
    assert shadow_module._winner(111.0, 111.0, "a", "b", spec, {"backend": "fake"}) == ("tie", False)
    monkeypatch.setattr(shadow_module, "judge", lambda tied, rubric, backend: "candidate")
    assert shadow_module._winner(111.0, 111.0, "a", "b", spec, {"backend": "fake"}) == ("candidate", True)
    assert shadow_module._winner(100.0, 111.0, "a", "b", spec, {"backend": "fake"}) == ("candidate", False)
