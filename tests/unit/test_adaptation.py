"""Template adaptation: edit operations, the retry and fallback chain, and the opt-in path through the graph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from engine.planning.adaptation import adapt
from experts.backends.fake import FakeBackend, load_script
from experts.catalog import load_catalog
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.adaptation import Plan, apply_operations, parse_plan
from state.io import RunInput
from state.paths import config_dir
from state.template import load_library

EXPERTS = list(load_catalog().ids)
LIBRARY = load_library([config_dir() / "framework_templates"], EXPERTS).templates
SEED = LIBRARY["code_with_docs"]  # requirements -> implementation, tests -> readme


def plan(*ops: dict[str, object], rationale: str = "fits the task") -> Plan:
    return Plan.model_validate({"operations": list(ops), "rationale": rationale})


def test_operations_edit_the_seed_and_keep_the_dag_valid() -> None:
    fw, errors = apply_operations(
        SEED,
        plan(
            {"op": "MODIFY", "slot": "implementation", "title": "CSV validator", "description": "Write the validator."},
            {"op": "REMOVE", "slot": "tests"},
            {
                "op": "ADD",
                "id": "changelog",
                "title": "Changelog",
                "description": "List the changes.",
                "expert": "technical_writer",
                "deps": ["implementation"],
            },
            {"op": "REORDER", "order": ["requirements", "implementation", "changelog"]},
            {"op": "KEEP", "slot": "readme"},
        ),
        EXPERTS,
    )
    assert errors == [] and fw is not None
    assert [s.id for s in fw.slots] == ["requirements", "implementation", "changelog", "readme"]
    readme = fw.slot("readme")
    assert "tests" not in readme.deps and "tests" not in readme.can_reference and "tests" not in readme.reference_hints
    assert fw.slot("implementation").title == "CSV validator"
    # the planner's expert is not kept: an added slot is routed like any other (issue 18)
    assert fw.slot("changelog").deps == ["implementation"] and fw.slot("changelog").expert is None
    assert fw.source == "template:code_with_docs (adapted)"


def test_bad_operations_are_all_reported() -> None:
    fw, errors = apply_operations(
        SEED,
        plan(
            {"op": "REMOVE", "slot": "nowhere"},
            {"op": "ADD", "id": "readme", "title": "Again", "description": "Dup.", "expert": "technical_writer"},
            {"op": "ADD", "id": "extra", "title": "Extra", "description": "New.", "expert": "astrologer"},
            {"op": "MODIFY", "slot": "tests"},
        ),
        EXPERTS,
    )
    assert fw is None
    text = "\n".join(errors)
    assert "operations[0] (REMOVE): 'nowhere' is not a slot of the template" in text
    assert "operations[1] (ADD): slot id 'readme' is already taken" in text
    assert "operations[2] (ADD): unknown expert 'astrologer'" in text
    assert "operations[3] (MODIFY): give a new title or description for 'tests'" in text


def test_slot_count_must_stay_in_the_templates_range() -> None:
    low = SEED.adaptable.slot_count[0]
    removals = [{"op": "REMOVE", "slot": s.id} for s in SEED.slots[: len(SEED.slots) - low + 1]]
    fw, errors = apply_operations(SEED, plan(*removals), EXPERTS)
    assert fw is None and any("this template allows" in e for e in errors)


def test_parse_plan_reports_non_json() -> None:
    assert parse_plan("no json here")[1] == ["the answer is not a JSON object with operations and rationale"]
    assert "not valid JSON" in parse_plan("{oops}")[1][0]
    assert parse_plan('{"operations": [{"op": "JUMP"}], "rationale": ""}')[0] is None


GOOD = json.dumps(
    {
        "operations": [
            {"op": "MODIFY", "slot": "implementation", "title": "Date parser", "description": "Parse dates."}
        ],
        "rationale": "the task is a date parser",
    }
)
BAD = json.dumps({"operations": [{"op": "REMOVE", "slot": "nowhere"}], "rationale": "x"})


def _backend(tmp_path: Path, responses: list[dict[str, str]]) -> FakeBackend:
    path = tmp_path / "script.yaml"
    path.write_text(json.dumps({"rules": [{"slot": "adapt_template", "responses": responses}]}))
    return FakeBackend(script=load_script(str(path)))


def test_invalid_plan_is_retried_with_its_errors_then_accepted(tmp_path: Path) -> None:
    fw, record = adapt(
        SEED, 0.6, "A date parser with docs", _backend(tmp_path, [{"text": BAD}, {"text": GOOD}]), EXPERTS
    )
    assert record.fallback == "none" and len(record.attempts) == 2
    assert record.attempts[0].errors == ["operations[0] (REMOVE): 'nowhere' is not a slot of the template"]
    assert fw.slot("implementation").title == "Date parser" and record.rationale == "the task is a date parser"
    assert record.seed_id == "code_with_docs" and record.similarity == 0.6


def test_the_planner_leaves_the_slots_in_the_tasks_own_words_as_written(tmp_path: Path) -> None:
    # a real run: the planner's only edit cut an added slot's title mid-phrase and wrote its description twice
    cut = {"op": "MODIFY", "slot": "readme", "title": "Write a README for our", "description": "x. x."}
    good = json.loads(GOOD)
    text = json.dumps({"operations": [*good["operations"], cut], "rationale": "r"})
    fw, record = adapt(
        SEED,
        0.6,
        "A date parser with docs",
        _backend(tmp_path, [{"text": text}]),
        EXPERTS,
        as_written=frozenset({"readme"}),
    )
    assert fw.slot("readme").title == SEED.slots[-1].title and fw.slot("implementation").title == "Date parser"
    assert [op.slot for op in record.operations] == ["implementation"]
    assert "left out the edits of the task's own slots (MODIFY readme)" in record.reason
    alone = json.dumps({"operations": [cut], "rationale": "r"})  # nothing left to apply: the template as it is
    fw, record = adapt(SEED, 0.6, "t", _backend(tmp_path, [{"text": alone}]), EXPERTS, as_written=frozenset({"readme"}))
    assert [s.title for s in fw.slots] == [s.title for s in SEED.slots] and record.operations == []


def test_always_invalid_falls_back_to_the_seed_unmodified(tmp_path: Path) -> None:
    fw, record = adapt(SEED, 0.6, "A date parser", _backend(tmp_path, [{"text": BAD}] * 3), EXPERTS)
    assert record.fallback == "seed" and len(record.attempts) == 3
    assert [s.id for s in fw.slots] == [s.id for s in SEED.slots] and fw.source == "template:code_with_docs"


def test_a_modify_that_changes_nothing_is_an_error() -> None:
    impl = next(s for s in SEED.slots if s.id == "implementation")
    fw, errors = apply_operations(
        SEED,
        plan({"op": "MODIFY", "slot": "implementation", "title": impl.title, "description": impl.description}),
        EXPERTS,
    )
    assert fw is None and errors == ["operations[0] (MODIFY): 'implementation' is unchanged; use KEEP or name the task"]


def test_retries_sample_and_the_first_attempt_is_greedy(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    path = tmp_path / "script.yaml"
    path.write_text(
        json.dumps(
            {
                "calls_log": str(calls),
                "rules": [{"slot": "adapt_template", "responses": [{"text": BAD}, {"text": GOOD}]}],
            }
        )
    )
    adapt(SEED, 0.6, "A date parser", FakeBackend(script=load_script(str(path)), calls_log=str(calls)), EXPERTS)
    temperatures = [json.loads(line)["temperature"] for line in calls.read_text().splitlines()]
    assert temperatures == [0.0, 0.5]


def test_a_near_identical_template_is_used_as_is(tmp_path: Path) -> None:
    backend = _backend(tmp_path, [{"fail": "must not be called"}])
    fw, record = adapt(SEED, 0.97, "anything", backend, EXPERTS)
    assert record.as_is and record.attempts == [] and fw.source == "template:code_with_docs"


def test_template_selection_through_the_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "script.yaml"
    modify = {
        "op": "MODIFY",
        "slot": "symptoms_and_diagnosis",
        "title": "Warning signs of atrial fibrillation",
        "description": "List the warning signs of atrial fibrillation that need a doctor, in plain words.",
    }
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "slot": "adapt_template",
                        "text": json.dumps({"operations": [modify], "rationale": "names the condition"}),
                    }
                ]
            }
        )
    )
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "templates"}}
    task = (
        "Explain to my father what atrial fibrillation is, describe how it is treated, and list the warning signs "
        "that need a doctor"
    )
    graph.invoke(RunInput(task=task), config, context={"backend": "fake", "fake_script": str(script)})
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.adaptation is not None and state.adaptation.seed_id == "condition_explainer"
    assert state.adaptation.fallback == "none" and state.framework is not None
    assert state.framework.slot("symptoms_and_diagnosis").title == "Warning signs of atrial fibrillation"
    assert state.status.value == "completed" and len(state.results) == len(state.framework.slots)
    assert any(e.action == "adapt_template" and "seed condition_explainer" in e.inputs_summary for e in state.ledger)
    # with template selection off, the same task runs the one-slot framework
    off = {"backend": "fake", "use_templates": False}
    graph.invoke(RunInput(task=task), {"configurable": {"thread_id": "plain"}}, context=off)
    plain = Passport.model_validate(graph.get_state({"configurable": {"thread_id": "plain"}}).values)
    assert plain.adaptation is None and [s.id for s in plain.framework.slots] == ["answer"]  # type: ignore[union-attr]


def test_a_slot_added_without_dependencies_is_recorded_as_a_default(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    added = {
        "op": "ADD",
        "id": "caregiver_tips",
        "title": "Treatment tips for the caregiver",
        "description": "How atrial fibrillation is treated, told to a family member who looks after the patient.",
        "expert": "medical_clinical",
    }
    plan = json.dumps({"operations": [added], "rationale": "the father has a carer"})
    script.write_text(json.dumps({"rules": [{"slot": "adapt_template", "text": plan}]}))
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "added"}}
    task = (
        "Explain to my father what atrial fibrillation is, describe how it is treated, and list the warning signs "
        "that need a doctor"
    )
    graph.invoke(RunInput(task=task), config, context={"backend": "fake", "fake_script": str(script)})
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.adaptation is not None and state.adaptation.fallback == "none"
    [applied] = [d for d in state.defaults if d.rule == "missing_deps_parallel"]
    assert applied.slot_id == "caregiver_tips" and applied.node == "adapt_template"
    assert "caregiver_tips" in applied.question and "symptoms_and_diagnosis" in applied.alternatives


def test_coe_run_templates_flag(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    cp = ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"]
    task = (  # no deliverables of different kinds named (those get a part each, no template)
        "Our library needs a book-loan backend: the API design, the Flask implementation of the loan endpoint, and the "
        "API reference for client developers."
    )
    result = CliRunner().invoke(app, ["run", task, "--backend", "fake", "--json", *cp])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    # templates are on by default; the fake backend's default answer is not a plan, so the seed template is used
    assert payload["framework_source"].startswith("template:") and len(payload["slots"]) > 1
    assert any("seed template is used unmodified" in w for w in payload["warnings"])
    result = CliRunner().invoke(app, ["run", task, "--no-templates", "--backend", "fake", "--json", *cp])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["framework_source"] == "fallback:single_slot" and len(payload["slots"]) == 1


def test_the_planner_model_adapts_templates_and_falls_back_to_the_base_model() -> None:
    from engine.planning.planner_model import planner_model
    from experts.backends.llama import LlamaBackend
    from state.context import resolve_settings
    from state.settings import Settings

    def state_with(**settings: object) -> Settings:
        return resolve_settings({"backend": "llama", **settings}, env={})

    missing = planner_model(state_with(planner_model="/nowhere/planner.gguf"))
    backend = missing.backend.backend  # type: ignore[attr-defined]  # the pooled handle's backend
    assert isinstance(backend, LlamaBackend) and backend.model_path.name.startswith("qwen2.5-coder-0.5b")
    assert missing.problem is not None and "/nowhere/planner.gguf" in missing.problem
    assert missing.name == "the base model"
    base = planner_model(state_with(planner_model=""))
    assert base.problem is None and base.backend.backend.model_path.name.startswith("qwen2.5-coder-0.5b")  # type: ignore[attr-defined]
