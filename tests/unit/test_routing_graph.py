"""Routing inside the graph: the HIPAA task's slots, personas and model bindings reach the experts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from engine.slot_routing import _binding
from experts.catalog import load_catalog
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.context import resolve_settings
from state.errors import RunFailure
from state.io import RunInput, RunOptions
from state.passport import LedgerEntry, Notice

HIPAA_TASK = (
    "Write a Python script to securely analyze medical records from a HIPAA compliant database and generate a "
    "Delaware-jurisdiction legal disclaimer"
)
HIPAA_FRAMEWORK = {
    "id": "hipaa_analysis",
    "title": "Medical records analysis with a legal disclaimer",
    "slots": [
        {
            "id": "extract",
            "title": "Records query",
            "description": "Write the SQL query that pulls the visit records from the HIPAA-compliant PostgreSQL "
            "database, selecting only the columns the analysis needs.",
        },
        {
            "id": "safeguards",
            "title": "Security controls",
            "description": "Design the security controls for handling the records: encryption in transit and at "
            "rest, least-privilege access, audit logging.",
        },
        {
            "id": "analysis",
            "title": "Analysis script",
            "description": "Write the Python script that loads the extracted medical records with pandas and "
            "computes readmission rates per department.",
            "deps": ["extract"],
            "can_reference": ["extract"],
        },
        {
            "id": "disclaimer",
            "title": "Legal disclaimer",
            "description": "Draft the Delaware-jurisdiction liability disclaimer that ships with the analysis tool.",
        },
    ],
}
WANT = {
    "extract": "sql_specialist",
    "safeguards": "security_architect",
    "analysis": "python_coder",
    "disclaimer": "legal_drafting",
}


def _run(tmp_path: Path, framework: dict[str, Any], **context: Any) -> tuple[Passport, list[dict[str, Any]]]:
    calls = tmp_path / "calls.jsonl"
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"calls_log": str(calls)}))
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "routing"}}
    ctx = {"backend": "fake", "fake_script": str(script), **context}
    graph.invoke(RunInput(task=HIPAA_TASK, options=RunOptions(framework=framework)), config, context=ctx)
    state = Passport.model_validate(graph.get_state(config).values)
    return state, [json.loads(line) for line in calls.read_text().splitlines()]


@pytest.mark.parametrize("fast_gap", [None, 1.0], ids=["two-stages", "encoder-alone"])
def test_hipaa_task_slots_reach_the_right_experts_with_their_personas_and_models(
    tmp_path: Path, fast_gap: float | None
) -> None:
    state, calls = _run(tmp_path, HIPAA_FRAMEWORK, **({} if fast_gap is None else {"routing_fast_gap": fast_gap}))
    assert {sid: d.expert for sid, d in state.routing.items()} == WANT
    stages = {d.stage for d in state.routing.values()}
    assert stages == {"encoder"} if fast_gap == 1.0 else stages <= {"static", "encoder"}
    assert all(d.expert != "medical_clinical" for d in state.routing.values())
    catalog = load_catalog()
    by_slot = {c["slot"]: c for c in calls}
    for slot, expert in WANT.items():
        assert catalog.get(expert).persona in by_slot[slot]["system"], slot
    # every shipped expert runs on the 1.5B (docs/models.md), security_architect since facts_heldout_on_1p5b
    assert by_slot["analysis"]["model"] == by_slot["extract"]["model"] == by_slot["disclaimer"]["model"]
    assert by_slot["analysis"]["model"] == by_slot["safeguards"]["model"] == "qwen2.5-coder-1.5b"
    assert state.routing["disclaimer"].binding == state.routing["safeguards"].binding == "true"
    # Every decision carries every expert's score, best first, and one ledger entry per slot says why.
    for sid, decision in state.routing.items():
        assert set(decision.scores) == set(catalog.ids)
        assert decision.score == max(decision.scores.values()) or decision.rule is not None
        assert decision.runner_up is not None and decision.runner_up != decision.expert
        entries = [e for e in state.ledger if e.action == "route" and e.slot_id == sid]
        assert len(entries) == 1 and entries[0].agent == "router"
        served = f"expert {decision.expert} v1 (shipped); {decision.expert} "  # which version served, then why
        assert entries[0].outputs_summary.startswith(served) and "runner-up" in entries[0].outputs_summary
        assert entries[0].inputs_summary.startswith(f"{len(catalog.ids)} experts scored by router ")
        assert ("decided by the static first stage" in entries[0].outputs_summary) == (decision.stage == "static")
    assert [s.expert for s in state.summary.slots] == [WANT[s.id] for s in state.summary.slots]  # type: ignore[union-attr]


def test_an_expert_named_by_the_framework_is_kept(tmp_path: Path) -> None:
    fw = {**HIPAA_FRAMEWORK, "slots": [{**HIPAA_FRAMEWORK["slots"][3], "expert": "technical_writer"}]}
    state, _ = _run(tmp_path, fw)
    decision = state.routing["disclaimer"]
    assert decision.expert == "technical_writer" and decision.reason == "set by the framework" and not decision.scores
    assert decision.stage is None


def test_true_experts_can_be_switched_off(tmp_path: Path) -> None:
    fw = {**HIPAA_FRAMEWORK, "slots": [HIPAA_FRAMEWORK["slots"][0]]}
    state, calls = _run(tmp_path, fw, true_experts=False)
    assert state.routing["extract"].expert == "sql_specialist"
    assert state.routing["extract"].binding == "faux" and calls[0]["model"] is None


def test_expert_generation_defaults_apply_unless_the_user_sets_a_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fw = {
        "id": "poem",
        "title": "Poem",
        "slots": [{"id": "poem", "title": "Poem", "description": "Write a poem.", "expert": "creative_writer"}],
    }
    scope = load_catalog().get("creative_writer")
    _, calls = _run(tmp_path, fw)
    assert calls[0]["temperature"] == scope.generation.temperature
    assert calls[0]["max_tokens"] == scope.generation.max_tokens
    (tmp_path / "calls.jsonl").unlink()
    _, calls = _run(tmp_path, fw, temperature=0.0)
    assert calls[0]["temperature"] == 0.0 and calls[0]["max_tokens"] == scope.generation.max_tokens
    (tmp_path / "calls.jsonl").unlink()
    monkeypatch.setenv("COE_MAX_TOKENS", "123")
    _, calls = _run(tmp_path, fw)
    assert calls[0]["max_tokens"] == 123


def test_a_missing_true_expert_model_falls_back_to_the_base_model_or_fails_as_configured() -> None:
    catalog = load_catalog()
    scope = catalog.get("python_coder")
    missing = scope.model_copy(update={"model": scope.model.model_copy(update={"model": "/nowhere/coder.gguf"})})
    settings = resolve_settings({"backend": "llama"}, env={})
    notices: list[Notice] = []
    ledger: list[LedgerEntry] = []
    assert _binding(missing, settings, notices, ledger) == (None, "faux-fallback")
    assert "python_coder runs on the base model" in notices[0].message and "model file not found" in notices[0].message
    assert ledger[0].action == "model_fallback"
    strict = missing.model_copy(update={"model": missing.model.model_copy(update={"fallback": "error"})})
    with pytest.raises(RunFailure, match="expert python_coder: its model is unavailable"):
        _binding(strict, settings, [], [])


POLYNOMIAL = '''Complete the following Python function:
```python
def find_zero(xs: list) -> float:
    """ xs are coefficients of a polynomial. find_zero finds x such that poly(x) = 0.
    The polynomial has an even number of coefficients and a non-zero largest one.
    """
```'''


def test_a_function_handed_over_to_complete_goes_to_the_coder_as_code() -> None:
    # The router alone picks math_reasoning for this docstring; the code is still the python coder's work.
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "polynomial"}}
    graph.invoke(RunInput(task=POLYNOMIAL), config, context={"backend": "fake"})
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.scope is not None and state.scope.kind == "single" and "find_zero" in state.scope.reason
    [decision] = state.routing.values()
    assert decision.expert == "python_coder" and "(the router's pick:" in decision.reason
    assert (decision.deliverable, decision.language) == ("code", "python")


@pytest.mark.parametrize(
    ("task", "coder"),
    [
        # MBPP development problems the router alone sends to math_reasoning: code, by their test
        (
            "Write a function to find the surface area of a cylinder. Your code should pass this test: "
            "assert surfacearea_cylinder(10,5)==942.45",
            True,
        ),
        ("Write a python function to find the sum of fourth power of first n odd natural numbers.", True),
        # the verb is not a test, and a Python script named as context is not a request for one
        (
            "Draft a clause saying the licensor may assert claims (including for past infringement) within a year.",
            False,
        ),
        (
            "Specify the security controls for the Python script that analyses medical records: how database "
            "credentials are stored and how data is encrypted in transit.",
            False,
        ),
        # multipart_set3_pieces: the parts for a function named with its parameters went to prose experts
        ("Deliver parking_fee(minutes) in tariff.py returning the fee (ValueError for negative minutes).", True),
        ("Write me a little convert_length(value, from_unit, to_unit) for our workshop app.", True),
        ("Deliver a short FAQ answer for customers on how cart_total(lines, code) stacks the discounts.", False),
        # multipart_set5_first: a module named by its file, with its functions; the router read the checksum words
        (
            "isbn.py: is_valid_isbn(s) -> bool and isbn10_to_13(s) -> str. Hyphens and spaces are ignored. ISBN-10 "
            "is valid when the sum of value * weight, weights 10 down to 1, is divisible by 11.",
            True,
        ),
        ("Add ages.py with age_on(birth_date, on_date) -> int, the whole years completed on a date.", True),
    ],
)
def test_python_code_asked_in_so_many_words_goes_to_the_coder(task: str, coder: bool) -> None:
    from experts.routing.scoping import python_code_asked

    assert python_code_asked(task) is coder
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "code"}}
    graph.invoke(RunInput(task=task), config, context={"backend": "fake"})
    [decision] = Passport.model_validate(graph.get_state(config).values).routing.values()
    assert (decision.expert == "python_coder") is coder
    if coder and task.startswith("Write a "):  # the router alone picks math_reasoning for both MBPP problems
        assert "Python code asked for" in decision.reason and "(the router's pick: math_reasoning)" in decision.reason
    elif coder:  # the rule, or the router itself
        assert decision.reason.startswith("python_coder") or "Python code asked for" in decision.reason
