"""The planner model's second reading of a task read as a plan (engine/planning/scope_reading.py, nodes/scope.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver

from engine.planning import scope_reading
from engine.planning.scope_reading import GRAMMAR, ScopeReading, read_scope, reading_messages, second_reading
from experts.backends import Generation, GenerationRequest
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.errors import BackendError, ConfigError
from state.io import RunInput
from state.scope_decision import ScopeDecision
from tests.unit.scripted import Scripted

NDA = (
    "Draft a mutual NDA between our studio and a freelance illustrator, governed by English law, and write a "
    "plain-English summary of it for the illustrator"
)
JWT = (  # planning_heldout8, one deliverable the pass reads as two of no named kind
    "Our React Native app keeps the access JWT in AsyncStorage and the token never expires: assess what can go "
    "wrong with this and recommend a safer token-handling design."
)
PLAN = ScopeDecision(kind="multi", words=20, expert="legal_drafting", reason="a plan: the best template fits")


def test_the_reading_asks_one_word_under_a_grammar_after_the_labelled_turns() -> None:
    backend = Scripted(["ONE"])
    reading = read_scope("Write a haiku about a lighthouse", backend)
    assert reading.answer == "one" and reading.detail == ""
    [request] = backend.requests
    assert request.grammar == GRAMMAR and request.max_tokens == 4 and request.slot_id == "scope"
    roles = [m.role for m in request.messages]
    assert roles[0] == "system" and roles[1:-1] == ["user", "assistant"] * 16 and roles[-1] == "user"
    assert request.messages[-1].content == "Request: <<<Write a haiku about a lighthouse>>>\nONE or SEVERAL?"
    assert {m.content for m in request.messages if m.role == "assistant"} == {"ONE", "SEVERAL"}


def test_the_shared_prefix_is_the_system_message_and_the_labelled_turns_in_chatml() -> None:
    messages, shared = reading_messages("Write a haiku")
    assert shared.startswith(messages[0].content + "<|im_end|>\n<|im_start|>user\nRequest: <<<")
    last_answer = messages[-2]
    assert last_answer.role == "assistant" and shared.endswith(f"<|im_start|>assistant\n{last_answer.content}")
    # the same text as the chat rendered in ChatML, up to the end of the last labelled answer
    rendered = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages)
    assert rendered.startswith("<|im_start|>system\n" + shared + "<|im_end|>\n<|im_start|>user\n")


@pytest.mark.parametrize(
    ("text", "answer"), [("ONE", "one"), (" SEVERAL\n", "several"), ("## Outline\n1. Scope", "none"), ("", "none")]
)
def test_an_answer_that_is_not_one_or_several_is_no_reading(text: str, answer: str) -> None:
    reading = read_scope("a task", Scripted([text]))
    assert reading.answer == answer
    assert (reading.detail != "") == (answer == "none")


def test_a_failing_planner_model_is_no_reading_and_says_why() -> None:
    class Failing(Scripted):
        def generate(self, request: GenerationRequest) -> Generation:
            raise BackendError("model file missing", slot_id=request.slot_id)

    reading = read_scope("a task", Failing([]))
    assert reading.answer == "none" and "model file missing" in reading.detail


def test_a_reading_cut_off_while_the_request_was_read_is_asked_once_more() -> None:
    class SlowFirst(Scripted):
        def generate(self, request: GenerationRequest) -> Generation:
            gen = super().generate(request)
            return Generation(text="", finish_reason="time") if len(self.requests) == 1 else gen

    backend = SlowFirst(["", "SEVERAL"])
    reading = read_scope("a task", backend)
    assert reading.answer == "several" and len(backend.requests) == 2
    assert reading.detail == "asked again after the time limit (40 s) passed while the request was read"
    never = SlowFirst([""])  # the second answer is empty too (a plain stop): no third request
    assert read_scope("a task", never).answer == "none" and len(never.requests) == 2
    answered = Scripted(["ONE"])  # an answer ended by the limit after its word is an answer: not asked again
    assert read_scope("a task", answered).answer == "one" and len(answered.requests) == 1


def test_only_a_plan_read_as_one_piece_of_work_becomes_single() -> None:
    one, several = ScopeReading("one", 1.0), ScopeReading("several", 1.0)
    single = second_reading(PLAN, one, "qwen2.5-coder-1.5b")
    assert single.kind == "single" and single.rule == "planner_reads_one"
    assert single.reason.startswith("the planner model (qwen2.5-coder-1.5b) reads one piece of work (a plan")
    assert second_reading(PLAN, several, "m") == PLAN and second_reading(PLAN, ScopeReading("none", 0.0), "m") == PLAN
    trivial = PLAN.model_copy(update={"kind": "trivial"})
    assert second_reading(trivial, one, "m") == trivial  # it reads plans only


def test_a_broken_examples_file_names_the_file_and_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "scope_examples.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "examples": [{"request": "x", "answer": "MAYBE"}]}))
    monkeypatch.setattr(scope_reading, "examples_path", lambda: path)
    with pytest.raises(ConfigError, match=r"scope_examples.yaml: examples\[\]\.answer: must be ONE or SEVERAL"):
        reading_messages("a task")


def _run(thread: str, task: str, tmp_path: Path, answer: str | None, **settings: object) -> Passport:
    script = tmp_path / f"{thread}.yaml"
    rules = [{"slot": "scope", "text": answer}] if answer is not None else []
    script.write_text(yaml.safe_dump({"rules": rules}))
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": thread}}
    context = {"backend": "fake", "fake_script": str(script), **settings}
    graph.invoke(RunInput(task=task), config, context=context)
    return Passport.model_validate(graph.get_state(config).values)


def test_a_plan_the_planner_model_reads_as_one_piece_of_work_runs_as_one_slot(tmp_path: Path) -> None:
    state = _run("one", JWT, tmp_path, "ONE")
    assert state.scope is not None and state.scope.kind == "single" and state.scope.rule == "planner_reads_one"
    assert state.framework is not None and [s.id for s in state.framework.slots] == ["answer"]
    [applied] = [d for d in state.defaults if d.rule == "planner_reads_one"]
    assert applied.node == "scope" and applied.alternatives == ["single", "multi"]
    [entry] = [e for e in state.ledger if e.action == "scope_reading"]
    assert entry.agent == "planner" and entry.outputs_summary.startswith("one piece of work in ")
    assert any(e.action == "scope" and e.outputs_summary.startswith("single: the planner model") for e in state.ledger)


def test_a_plan_read_as_several_pieces_or_not_read_stays_a_plan(tmp_path: Path) -> None:
    several = _run("several", JWT, tmp_path, "SEVERAL")
    assert several.scope is not None and several.scope.kind == "multi" and len(several.framework.slots) == 2  # type: ignore[union-attr]
    [entry] = [e for e in several.ledger if e.action == "scope_reading"]
    assert entry.outputs_summary.startswith("several pieces of work in ")
    prose = _run("prose", JWT, tmp_path, None)  # the fake's compliant prose is no answer: the plan stands
    [entry] = [e for e in prose.ledger if e.action == "scope_reading"]
    assert prose.scope is not None and prose.scope.kind == "multi"
    assert entry.outputs_summary.startswith("no reading in ") and "not ONE or SEVERAL" in entry.outputs_summary
    off = _run("off", JWT, tmp_path, "ONE", scope_reading=False)
    assert off.scope is not None and off.scope.kind == "multi"
    assert not any(e.action == "scope_reading" for e in off.ledger)


def test_a_plan_of_deliverables_of_different_kinds_is_not_read_again(tmp_path: Path) -> None:
    """multipart_tasks*.yaml: the reading called six of 57 multi-part tasks ONE, five of them an NDA or agreement and
    its summary, a clause and a letter, or a module and its pytest tests; no single task of the planning sets is such
    a pair."""
    state = _run("firm", NDA, tmp_path, "ONE")
    assert state.scope is not None and state.scope.kind == "multi" and state.scope.firm
    assert "a plan however it reads: different deliverables (nda, summary)" in state.scope.reason
    assert state.framework is not None and len(state.framework.slots) == 2
    assert not any(e.action == "scope_reading" for e in state.ledger)
    # a part for each deliverable it names, not a template's parts (multipart_set5_rules2: a CLI tool and its README
    # section fitted a template of six parts)
    assert state.adaptation is not None and state.adaptation.built_from == "aspects"
    [chosen] = [e for e in state.ledger if e.action == "select_framework"]
    assert chosen.inputs_summary.startswith("the task names its deliverables (different deliverables (nda, summary)):")


def test_a_task_the_rules_read_as_one_experts_work_is_not_read_again(tmp_path: Path) -> None:
    state = _run("single", "Write a Python function that checks whether a string is a palindrome", tmp_path, "SEVERAL")
    assert state.scope is not None and state.scope.kind == "single"
    assert not any(e.action == "scope_reading" for e in state.ledger)


def test_without_the_planner_model_the_plan_is_not_read_again_and_the_run_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from engine.planning.planner_model import PlannerModel

    node = importlib.import_module("nodes.scope")  # the package exports the node function under the same name

    def stand_in(settings: object) -> PlannerModel:
        return PlannerModel(Scripted(["ONE"]), "the base model", "qwen2.5-coder-1.5b is not installed")

    monkeypatch.setattr(node, "planner_model", stand_in)
    state = _run("unread", JWT, tmp_path, "ONE")
    assert state.scope is not None and state.scope.kind == "multi"  # the base model's ONE is never asked for
    assert not any(e.action == "scope_reading" for e in state.ledger)
    [notice] = [n for n in state.notices if n.source == "scope"]
    assert notice.level == "warning" and "qwen2.5-coder-1.5b is not installed" in notice.message
    assert "not read a second time" in notice.message
