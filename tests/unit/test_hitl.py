"""Human in the loop: plan approval (confirm), clarifying questions (interactive), answers that do not fit."""

from __future__ import annotations

import importlib
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from typer.testing import CliRunner

from cli.main import app
from experts.embedding import get_embedder
from graph import build_graph
from graph.persistence import serializer
from memory.store import FactMemory
from state import Passport
from state.enums import RunStatus
from state.framework import load_framework_file
from state.hitl import InterruptPayload
from state.io import RunInput, RunOptions
from tests.conftest import FIXTURES, read_calls

BRANCHY = load_framework_file(str(FIXTURES / "branchy.yaml"))
runner = CliRunner()


class Run:
    """One thread of a compiled graph on an in-memory saver, with the fake backend logging its calls."""

    def __init__(self, tmp_path: Path, mode: str, task: str = "Plan a small service", framework: bool = True) -> None:
        self.graph = build_graph(InMemorySaver(serde=serializer()))
        self.config: Any = {"configurable": {"thread_id": "t"}}
        self.calls = tmp_path / "calls.jsonl"
        script = tmp_path / "script.yaml"
        script.write_text(yaml.safe_dump({"calls_log": str(self.calls), "rules": []}))
        self.context = {"backend": "fake", "fake_script": str(script)}
        options = (
            RunOptions(framework=BRANCHY.model_dump(mode="json"), framework_source="branchy")
            if framework
            else RunOptions()
        )
        self.graph.invoke(RunInput(task=task, mode=mode, options=options), self.config, context=self.context)

    def resume(self, value: object) -> None:
        self.graph.invoke(Command(resume=value), self.config, context=self.context)

    @property
    def state(self) -> Passport:
        return Passport.model_validate(self.graph.get_state(self.config).values)

    def pending(self) -> list[InterruptPayload]:
        return [InterruptPayload.model_validate(i.value) for i in self.graph.get_state(self.config).interrupts]


def test_confirm_mode_shows_the_routed_plan_and_runs_only_after_approval(tmp_path: Path) -> None:
    run = Run(tmp_path, "confirm")
    [payload] = run.pending()
    assert payload.kind == "approve_plan" and payload.allowed == ["approve", "reject", "edit"]
    assert payload.category == "decision" and payload.severity == "medium" and payload.error is None
    assert payload.plan is not None and [s.id for s in payload.plan] == ["A", "B", "C", "D"]
    assert all(s.expert for s in payload.plan) and payload.plan[3].deps == ["B", "C"]
    assert payload.framework is not None and payload.framework["slots"][0]["expert"] == payload.plan[0].expert
    assert read_calls(run.calls) == [] and run.state.results == {}  # no expert ran before the answer
    run.resume("approve")
    state = run.state
    assert state.status == RunStatus.COMPLETED and sorted(state.results) == ["A", "B", "C", "D"]
    assert state.approval is not None and state.approval.action == "approve"
    assert any(e.action == "plan_approve" and e.agent == "person" for e in state.ledger)


def test_reject_ends_the_run_cleanly_with_its_status(tmp_path: Path) -> None:
    run = Run(tmp_path, "confirm")
    run.resume({"action": "reject", "reason": "too broad"})
    state = run.state
    assert state.status == RunStatus.REJECTED and state.results == {} and read_calls(run.calls) == []
    assert state.document is not None and "rejected: too broad" in state.document
    assert state.summary is not None and state.summary.status == RunStatus.REJECTED
    assert run.graph.get_state(run.config).next == ()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("maybe", "unknown answer 'maybe'; allowed: approve, reject, edit"),
        ("edit", "must carry the edited plan"),
        ({"action": "approve", "framework": {}}, "only an edit carries a plan"),
        ({"action": "ok"}, "action: 'ok' is not one of approve, reject, edit"),
        (
            {
                "action": "edit",
                "framework": {
                    "id": "x",
                    "title": "X",
                    "slots": [
                        {"id": "a", "title": "A", "description": "d", "deps": ["b"]},
                        {"id": "b", "title": "B", "description": "d", "deps": ["a"]},
                    ],
                },
            },
            "dependency cycle",
        ),
        (
            {
                "action": "edit",
                "framework": {
                    "id": "x",
                    "title": "X",
                    "slots": [
                        {"id": "a", "title": "A", "description": "d", "expert": "wizard"},
                    ],
                },
            },
            "unknown expert id 'wizard'",
        ),
    ],
)
def test_an_answer_that_does_not_fit_is_refused_and_changes_nothing(
    tmp_path: Path, answer: object, message: str
) -> None:
    run = Run(tmp_path, "confirm")
    before = run.state
    run.resume(answer)
    [payload] = run.pending()
    assert payload.kind == "approve_plan" and payload.error is not None and message in payload.error
    after = run.state
    assert after.framework == before.framework and after.results == {} and after.approval is None
    assert read_calls(run.calls) == []
    run.resume("approve")  # the next valid answer is taken
    assert run.state.status == RunStatus.COMPLETED


def test_an_edited_plan_is_validated_routed_and_shown_again(tmp_path: Path) -> None:
    run = Run(tmp_path, "confirm")
    [payload] = run.pending()
    assert payload.framework is not None
    edited = dict(payload.framework)
    edited["slots"] = [s for s in edited["slots"] if s["id"] in ("A", "C")]
    edited["slots"][1] = {**edited["slots"][1], "expert": "security_architect"}
    run.resume({"action": "edit", "framework": edited, "reason": "two slots are enough"})
    [again] = run.pending()
    assert again.plan is not None and [(s.id, s.expert) for s in again.plan] == [
        ("A", payload.plan[0].expert if payload.plan else None),
        ("C", "security_architect"),
    ]
    assert read_calls(run.calls) == []
    run.resume("approve")
    state = run.state
    assert state.status == RunStatus.COMPLETED and sorted(state.results) == ["A", "C"]
    assert sorted(read_calls(run.calls)) == ["A", "C"]
    assert [e.action for e in state.ledger if e.agent == "person"] == ["plan_edit", "plan_approve"]


def test_autonomous_mode_never_interrupts(tmp_path: Path) -> None:
    run = Run(tmp_path, "autonomous")
    assert run.pending() == [] and run.state.status == RunStatus.COMPLETED and run.state.approval is None


def test_interactive_mode_asks_when_the_scope_is_unclear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scope_module = importlib.import_module("nodes.scope")  # ``nodes.scope`` is the node function
    from experts.catalog import load_catalog
    from experts.embedding import get_embedder
    from experts.routing.router import get_router
    from experts.routing.scoping import classify
    from experts.routing.templates import library

    task = "Write a Python function that checks whether a string is a palindrome"
    _, index = library(load_catalog().ids, get_embedder())
    plain = classify(task, get_embedder(), index, get_router())
    assert plain.expert_similarity is not None and plain.template_similarity is not None
    fit = plain.expert_similarity - plain.template_similarity
    monkeypatch.setattr(scope_module, "classify", partial(classify, single_margin=fit + 0.01, narrow_band=0.02))
    run = Run(tmp_path, "interactive", task=task, framework=False)
    [clarify] = run.pending()
    assert clarify.kind == "clarify" and clarify.node == "scope"
    assert [q.id for q in clarify.questions] == ["scope"] and clarify.questions[0].allowed == ["single", "multi"]
    run.resume("both")  # not an allowed answer
    [again] = run.pending()
    assert again.kind == "clarify" and again.error == "question scope: 'both' is not one of single, multi"
    run.resume({"scope": "single"})
    [plan] = run.pending()  # interactive mode also confirms the plan
    assert plan.kind == "approve_plan" and plan.plan is not None and [s.id for s in plan.plan] == ["answer"]
    state = run.state
    assert state.scope is not None and state.scope.kind == "single" and state.scope.rule is None
    assert state.scope.reason.startswith("the person chose single") and state.defaults == []
    run.resume("approve")
    assert run.state.status == RunStatus.COMPLETED


# ---------------------------------------------------------------- the CLI


@pytest.fixture
def cp(tmp_path: Path) -> list[str]:
    return ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"]


def _start(cp: list[str], thread: str = "h-1") -> Any:
    args = ["run", "Plan a small service", "--mode", "confirm", "--framework", str(FIXTURES / "branchy.yaml")]
    return runner.invoke(app, [*args, "--backend", "fake", "--thread-id", thread, "--json", *cp])


def test_coe_run_confirm_waits_and_coe_resume_answers(cp: list[str]) -> None:
    result = _start(cp)
    assert result.exit_code == 3, result.output
    waiting = json.loads(result.stdout)
    assert waiting["status"] == "waiting" and waiting["interrupts"][0]["kind"] == "approve_plan"
    assert "coe resume h-1 --answer" in result.stderr and "[approve_plan]" in result.stderr
    listed = runner.invoke(app, ["threads", "--json", *cp])
    assert listed.exit_code == 0
    [first] = json.loads(listed.stdout)
    assert first["thread_id"] == "h-1" and first["status"] == "waiting" and first["waiting_for"] == ["approve_plan"]
    bad = runner.invoke(app, ["resume", "h-1", "--answer", "perhaps", *cp])
    assert bad.exit_code == 2 and "--answer: unknown answer 'perhaps'" in bad.stderr
    done = runner.invoke(app, ["resume", "h-1", "--answer", "approve", "--json", *cp])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["status"] == "completed"
    assert "completed" in runner.invoke(app, ["threads", *cp]).stdout


def test_coe_resume_takes_answers_from_a_file(tmp_path: Path, cp: list[str]) -> None:
    assert _start(cp, "h-2").exit_code == 3
    answers = tmp_path / "answers.yaml"
    answers.write_text("action: reject\nreason: not now\n")
    result = runner.invoke(app, ["resume", "h-2", "--answers-file", str(answers), *cp])
    assert result.exit_code == 1 and "the plan was rejected" in result.stderr
    assert "The plan was rejected: not now." in result.stdout
    answers.write_text("nope: approve\n")
    result = runner.invoke(app, ["resume", "h-2", "--answers-file", str(answers), *cp])
    assert result.exit_code == 2 and "not waiting for an answer" in result.stderr


# ---------------------------------------------------------------- user questions of the experts

A_TEXT = (
    "## Outline\n1. Requirements\n2. Hosting\n3. Summary\n\n## 1. Requirements\nServe the API to the mobile "
    "clients over HTTPS, with one endpoint per resource and a health check.\n\n"
    "## 2. Hosting\nDeploy to {{ASSIST:user:your production hostname}} in {{ASSIST:user:your cloud region}}.\n\n"
    "## 3. Summary\nThe service is small: one process behind a load balancer, deployed from the main branch.\n"
)
C_TEXT = (
    "## Outline\n1. Risks\n2. Mitigation\n3. Owner\n\n## 1. Risks\nOutages of the upstream payment provider "
    "and a full disk on the database host are the main risks.\n\n## 2. Mitigation\nRetry payments with a "
    "backoff, and alert when the disk passes eighty percent so that someone can act.\n\n"
    "## 3. Owner\nThe owner is {{ASSIST:user:who owns the risk register}}.\n"
)


class UserQuestions(Run):
    def __init__(self, tmp_path: Path) -> None:
        self.store = InMemoryStore()
        self.graph = build_graph(InMemorySaver(serde=serializer()), store=self.store)
        self.config = {"configurable": {"thread_id": "u"}}
        self.calls = tmp_path / "calls.jsonl"
        script = tmp_path / "script.yaml"
        rules = [{"slot": "A", "text": A_TEXT}, {"slot": "C", "text": C_TEXT}]
        script.write_text(yaml.safe_dump({"calls_log": str(self.calls), "rules": rules}))
        self.context = {"backend": "fake", "fake_script": str(script)}
        options = RunOptions(framework=BRANCHY.model_dump(mode="json"), framework_source="branchy")
        self.graph.invoke(
            RunInput(task="Plan a small service", mode="interactive", options=options),
            self.config,
            context=self.context,
        )
        self.resume("approve")

    def interrupts(self) -> dict[str, InterruptPayload]:
        snapshot = self.graph.get_state(self.config)
        return {i.id: InterruptPayload.model_validate(i.value) for i in snapshot.interrupts}


def test_parallel_slots_ask_the_person_together_and_dependents_wait(tmp_path: Path) -> None:
    run = UserQuestions(tmp_path)
    pending = run.interrupts()
    assert sorted(q.id for p in pending.values() for q in p.questions) == ["A.a1", "A.a2", "C.a1"]
    assert all(p.kind == "assist_user" and p.category == "help" for p in pending.values())
    state = run.state
    assert state.slot_states["A"].status == "awaiting_user" and state.slot_states["C"].status == "awaiting_user"
    assert "B" not in read_calls(run.calls) and "D" not in read_calls(run.calls)  # dependents wait
    by_slot = {p.questions[0].id.split(".")[0]: intr_id for intr_id, p in pending.items()}
    answers = {
        by_slot["A"]: {"A.a1": "api.example.com", "A.a2": "skip"},
        by_slot["C"]: "the platform team",
    }
    run.resume(answers)  # both interrupts answered with one resume
    state = run.state
    assert run.interrupts() == {} and state.status == RunStatus.COMPLETED
    assert "Deploy to api.example.com in {{UNRESOLVED:user:your cloud region - the person did not answer}}" in (
        state.results["A"].raw
    )
    assert "The owner is the platform team." in state.results["C"].raw
    [a1, a2] = state.assists["A"]
    assert a1.status == "resolved" and a1.sources[0].kind == "user" and a1.value == "api.example.com"
    assert a2.status == "unresolved" and a2.reason == "the person did not answer"
    assert state.document is not None and "api.example.com" in state.document
    assert "the person did not answer" in state.document
    assert sorted(read_calls(run.calls)) == ["A", "B", "C", "D"]  # nothing ran twice


def test_the_persons_answers_in_committed_slots_are_remembered_and_forgotten_with_their_run(tmp_path: Path) -> None:
    run = UserQuestions(tmp_path)
    by_slot = {p.questions[0].id.split(".")[0]: i for i, p in run.interrupts().items()}
    run.resume({by_slot["A"]: {"A.a1": "api.example.com", "A.a2": "skip"}, by_slot["C"]: "the platform team"})
    state = run.state
    assert state.status == RunStatus.COMPLETED and state.run is not None
    memory = FactMemory(run.store, "local", get_embedder())
    remembered = {f.text: f for f in memory.facts()}
    assert set(remembered) == {
        "your production hostname: api.example.com",
        "who owns the risk register: the platform team",
    }  # the question left unanswered is not a fact
    assert {f.run_id for f in remembered.values()} == {state.run.run_id}
    assert remembered["who owns the risk register: the platform team"].source == "answer to Risks"
    assert len(memory.forget_run(state.run.run_id)) == 2 and memory.facts() == []


def test_questions_can_be_answered_one_at_a_time(tmp_path: Path) -> None:
    run = UserQuestions(tmp_path)
    pending = run.interrupts()
    first = next(i for i, p in pending.items() if p.questions[0].id.startswith("C"))
    run.resume({first: "the platform team"})
    left = run.interrupts()
    assert list(left) == [i for i in pending if i != first]
    assert run.state.slot_states["C"].status == "done" and run.state.slot_states["A"].status == "awaiting_user"
    [(other, payload)] = left.items()
    run.resume({other: {"A.a1": "api.example.com"}})  # a missing answer is refused, nothing changes
    [again] = run.interrupts().values()
    assert again.error == "question A.a2: no answer"
    run.resume({next(iter(run.interrupts())): {"A.a1": "api.example.com", "A.a2": "eu-west-1"}})
    state = run.state
    assert state.status == RunStatus.COMPLETED and "in eu-west-1." in state.results["A"].raw
    assert sorted(read_calls(run.calls)) == ["A", "B", "C", "D"]


def test_coe_answers_parallel_user_questions_from_a_file_on_sqlite(tmp_path: Path, cp: list[str]) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"slot": "A", "text": A_TEXT}, {"slot": "C", "text": C_TEXT}]}))
    args = ["run", "Plan a small service", "--mode", "interactive", "--framework", str(FIXTURES / "branchy.yaml")]
    fake = ["--backend", "fake", "--fake-script", str(script), "--thread-id", "q-1", "--json"]
    assert runner.invoke(app, [*args, *fake, *cp]).exit_code == 3
    result = runner.invoke(app, ["resume", "q-1", "--answer", "approve", "--json", *cp])
    assert result.exit_code == 3, result.output
    waiting = json.loads(result.stdout)["interrupts"]
    assert sorted(i["kind"] for i in waiting) == ["assist_user", "assist_user"]
    one = runner.invoke(app, ["resume", "q-1", "--answer", "x", *cp])
    assert one.exit_code == 2 and "2 questions are pending" in one.stderr
    answers = {
        i["id"]: (
            {"A.a1": "api.example.com", "A.a2": "eu-west-1"} if i["questions"][0]["id"].startswith("A") else "ops"
        )
        for i in waiting
    }
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers))
    done = runner.invoke(app, ["resume", "q-1", "--answers-file", str(path), "--json", *cp])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    assert summary["status"] == "completed" and "api.example.com in eu-west-1" in summary["document"]
    assert summary["unresolved"] == []


def test_the_terminal_dialogue_re_asks_and_edits_through_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph.types import Interrupt

    from cli.answers import ask_in_terminal

    run = Run(tmp_path, "confirm")
    [intr] = run.graph.get_state(run.config).interrupts
    replies = iter(["perhaps", "approve"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(replies))
    assert ask_in_terminal([intr]) == "approve"
    err = capsys.readouterr().err
    assert "[approve_plan]" in err and "not accepted: unknown answer 'perhaps'" in err

    def edit(prompt: str = "") -> str:
        if prompt.startswith("  the plan is in "):
            path = Path(prompt.split(" is in ", 1)[1].split(":", 1)[0])
            plan = yaml.safe_load(path.read_text())
            plan["slots"] = [s for s in plan["slots"] if s["id"] == "A"]
            path.write_text(yaml.safe_dump(plan))
            return ""
        return "edit"

    monkeypatch.setattr("builtins.input", edit)
    answer = ask_in_terminal([Interrupt(value=intr.value, id=intr.id)])
    assert isinstance(answer, dict) and answer["action"] == "edit"
    assert [s["id"] for s in answer["framework"]["slots"]] == ["A"]
    run.resume(answer)
    [again] = run.pending()
    assert again.plan is not None and [s.id for s in again.plan] == ["A"]
