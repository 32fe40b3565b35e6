"""Assist resolution with the scripted fake expert: lookup, expert consults, user questions, cycle cuts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.assists.resolver import AssistResolver, asks_the_person, echoes_question, parse_consult_answer
from experts.backends.fake import FakeBackend, FakeRule, FakeScript
from experts.knowledge import KnowledgeBase, add_documents, load_kb
from state.assist import scan_assists, unresolved_markers
from state.context import resolve_settings
from state.enums import Mode
from state.outline import parse_output
from state.result import SlotResult
from tests.conftest import FIXTURES

THRESHOLD = 0.6


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    path = tmp_path_factory.mktemp("kb") / "kb"
    add_documents([FIXTURES / "kb"], path)
    return load_kb(path)


def _result(body: str, expert: str = "python_coder", slot: str = "impl") -> SlotResult:
    text = (
        f"## Outline\n1. Setup\n2. Limits\n3. Next\n\n## 1. Setup\n{body}\n\n## 2. Limits\nNone.\n\n## 3. Next\nDone.\n"
    )
    return parse_output(text, slot, expert)


def _resolver(
    kb: KnowledgeBase | None, rules: list[dict[str, Any]] | None = None, **kw: Any
) -> tuple[AssistResolver, FakeBackend]:
    settings = resolve_settings({"backend": "fake", "lookup_threshold": THRESHOLD}, env={})
    backend = FakeBackend(script=FakeScript(rules=[FakeRule(**r) for r in rules or []]))
    empty = KnowledgeBase(Path("/nonexistent"), (), np.zeros((0, 1), dtype=np.float32), None, None, {})
    resolver = AssistResolver(
        settings, kb=(lambda: kb if kb is not None else empty), backend_for=lambda _expert: backend, **kw
    )
    return resolver, backend


def test_lookup_fills_from_a_passage_with_its_source(kb: KnowledgeBase) -> None:
    resolver, _ = _resolver(kb)
    res = resolver.resolve(_result("Back up at {{ASSIST:lookup:time of the nightly database backup}}."))
    (rec,) = res.records
    assert rec.status == "resolved" and rec.kind == "lookup"
    (src,) = rec.sources
    assert src.kind == "document" and src.file is not None and src.file.endswith("deployment_runbook.md")
    assert src.section is not None and src.section.endswith("Backups")
    assert src.line_start is not None and src.score is not None and src.score >= THRESHOLD
    assert "02:00 UTC" in (rec.value or "") and "deployment_runbook.md" in (rec.value or "")
    body = res.result.sections[0].body
    assert "02:00 UTC" in body and "{{" not in body and "02:00 UTC" in res.result.raw
    assert any(e.action == "assist_lookup" and "deployment_runbook.md" in e.outputs_summary for e in res.ledger)


def test_pdf_lookup_cites_the_page(kb: KnowledgeBase) -> None:
    resolver, _ = _resolver(kb)
    (rec,) = resolver.resolve(_result("Hotels up to {{ASSIST:lookup:nightly hotel limit in Europe}}.")).records
    assert rec.status == "resolved" and rec.sources[0].page == 1 and "page 1" in (rec.value or "")


def test_lookup_below_the_threshold_stays_unresolved_with_the_reason(kb: KnowledgeBase) -> None:
    resolver, _ = _resolver(kb)
    res = resolver.resolve(_result("Per {{ASSIST:lookup:Delaware liability statute reference}}."))
    (rec,) = res.records
    assert rec.status == "unresolved" and rec.value is None and not rec.sources
    assert rec.reason is not None and "relevant enough" in rec.reason and f"< {THRESHOLD:.2f}" in rec.reason
    assert unresolved_markers(res.result.raw) == [rec.marker]
    assert rec.marker is not None and rec.marker.startswith("{{UNRESOLVED:lookup:Delaware liability statute")


def test_empty_knowledge_base(kb: KnowledgeBase) -> None:
    resolver, _ = _resolver(None)
    (rec,) = resolver.resolve(_result("{{ASSIST:lookup:time of the nightly database backup}}")).records
    assert rec.status == "unresolved" and "knowledge base is empty" in (rec.reason or "")


@pytest.mark.parametrize("mode", [Mode.AUTONOMOUS, Mode.CONFIRM, Mode.INTERACTIVE])
def test_user_questions_need_the_user(kb: KnowledgeBase, mode: Mode) -> None:
    resolver, backend = _resolver(kb, mode=mode)
    res = resolver.resolve(_result("Connect to {{ASSIST:user:your database hostname}}."))
    (rec,) = res.records
    assert rec.status == "unresolved" and rec.reason == "needs user input"
    assert rec.marker == "{{UNRESOLVED:user:your database hostname - needs user input}}"
    assert rec.awaiting_user is (mode == Mode.INTERACTIVE)
    assert [r for r in res.records if r.awaiting_user] == ([rec] if mode == Mode.INTERACTIVE else [])


# A real patient leaflet (review_reference, med-hypertension): the expert asked the person for general knowledge.
LEAFLET = "Eat foods rich in potassium:\n- {{ASSIST:user:potassium-rich foods}}\n- {{ASSIST:user:your usual breakfast}}"


@pytest.mark.parametrize("mode", [Mode.AUTONOMOUS, Mode.CONFIRM])
def test_a_general_question_put_to_the_person_is_answered_by_its_expert_where_the_person_is_not_asked(
    kb: KnowledgeBase, mode: Mode
) -> None:
    answer = "ANSWER: Bananas, potatoes, spinach and beans are rich in potassium."
    resolver, _ = _resolver(kb, [{"title": "^consult medical_clinical: potassium", "text": answer}], mode=mode)
    res = resolver.resolve(_result(LEAFLET, expert="medical_clinical"))
    general, personal = res.records
    assert general.status == "resolved" and general.kind == "user" and general.chain == ["medical_clinical"]
    assert general.value == answer[len("ANSWER: ") :] + " [source: consulted expert medical_clinical]"
    assert general.sources[0].expert == "medical_clinical" and "a general question" in general.trail[0]
    assert personal.status == "unresolved" and personal.reason == "needs user input"  # "your": only they know
    assert "Bananas" in res.result.raw and "{{UNRESOLVED:user:your usual breakfast" in res.result.raw


def test_a_general_question_its_expert_cannot_answer_still_needs_the_person(kb: KnowledgeBase) -> None:
    resolver, _ = _resolver(kb, [{"title": "^consult", "text": "UNKNOWN"}])
    general, _ = resolver.resolve(_result(LEAFLET, expert="medical_clinical")).records
    assert general.status == "unresolved" and general.reason == "needs user input"
    assert general.trail[-1] == "consulted medical_clinical: answered UNKNOWN"
    interactive, _ = _resolver(kb, mode=Mode.INTERACTIVE)
    asked, _ = interactive.resolve(_result(LEAFLET, expert="medical_clinical")).records
    assert asked.awaiting_user and asked.status == "unresolved"  # the person can answer: they are asked


def test_requests_that_name_the_persons_world_are_theirs() -> None:
    personal = ["Name", "Insert Date", "Landlord's Name", "who approves the project budget", "your clinic's ward codes"]
    assert all(asks_the_person(d) for d in personal)
    assert not any(asks_the_person(d) for d in ["potassium-rich foods", "types of exercises"])
    # a name inside the request is most often the person's own (review_whole_dec07, cw-slogan: the writer asked
    # about the shop and answered itself that the bicycle repair shop makes jewellery)
    assert asks_the_person("What is the main focus of Spoke & Chain?")
    # review_whole_dec07, legal-nda: "the laws of {{ASSIST:user:State/Province}}" was filled with a definition of
    # the words ("State/Province is a legal term used to identify the administrative division of a country")
    assert asks_the_person("State/Province") and asks_the_person("the governing jurisdiction")
    assert not asks_the_person("the clue")


def test_expert_consult_fills_with_the_consulted_expert_as_source(kb: KnowledgeBase) -> None:
    answer = "ANSWER: State that the tool gives no medical advice and limits liability to the fees paid."
    resolver, _ = _resolver(kb, [{"title": "^consult legal_drafting: ", "text": answer}])
    res = resolver.resolve(
        _result("Add {{ASSIST:expert:legal:liability disclaimer wording for a medical records tool}}.")
    )
    (rec,) = res.records
    assert rec.status == "resolved" and rec.chain == ["python_coder", "legal_drafting"] and rec.depth == 1
    assert rec.sources[0].kind == "expert" and rec.sources[0].expert == "legal_drafting"
    assert rec.value == answer[len("ANSWER: ") :] + " [source: consulted expert legal_drafting]"
    consult = [e for e in res.ledger if e.action == "consult"]
    assert consult and consult[0].agent == "legal_drafting" and "depth 1" in consult[0].inputs_summary


def test_consult_uses_the_consulted_experts_persona_and_the_brief_format(kb: KnowledgeBase, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    resolver, backend = _resolver(kb, [{"title": "^consult", "text": "ANSWER: Fine."}])
    backend.calls_log = str(log)
    resolver.resolve(_result("{{ASSIST:expert:legal:liability disclaimer wording for a medical records tool}}"))
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert call["max_tokens"] == 120 and "ANSWER: " in call["system"] and "python_coder expert" in call["system"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("UNKNOWN", "answered UNKNOWN"),
        ("## Outline\n1. a\n2. b\n3. c\n", "did not answer in the brief format"),
        ("ANSWER: I am not sure, maybe 30 days.", "said it was not sure"),
    ],
)
def test_an_expert_that_does_not_know_leaves_it_unresolved(kb: KnowledgeBase, reply: str, reason: str) -> None:
    resolver, _ = _resolver(kb, [{"title": "^consult legal_drafting", "text": reply}])
    (rec,) = resolver.resolve(_result("{{ASSIST:expert:legal:Delaware liability statute reference}}")).records
    assert rec.status == "unresolved" and rec.reason == f"consulted expert legal_drafting {reason}"
    assert any("lookup: best sentence" in t for t in rec.trail)  # lookup was tried before giving up


def test_cycle_back_into_the_askers_domain_is_cut(kb: KnowledgeBase) -> None:
    back = "ANSWER: That depends on {{ASSIST:expert:python:how the tool stores patient records}}."
    resolver, backend = _resolver(kb, [{"title": "^consult legal_drafting", "text": back}])
    res = resolver.resolve(_result("{{ASSIST:expert:legal:Delaware liability statute reference}}"))
    (rec,) = res.records
    assert rec.status == "unresolved" and rec.reason == "circular reference"
    assert rec.marker == "{{UNRESOLVED:expert:legal:Delaware liability statute reference - circular reference}}"
    assert any("cycle cut: legal_drafting asked into the domain of python_coder" in t for t in rec.trail)
    assert any("lookup" in t for t in rec.trail)
    assert [e.agent for e in res.ledger if e.action == "consult"] == ["legal_drafting"]  # python_coder not asked


def test_cycle_cut_then_lookup_can_still_answer(kb: KnowledgeBase) -> None:
    back = "ANSWER: It depends on {{ASSIST:expert:python:which Python library writes the audit log records}}."
    resolver, _ = _resolver(kb, [{"title": "^consult security_architect", "text": back}])
    (rec,) = resolver.resolve(_result("{{ASSIST:expert:security:how long audit logs are retained}}")).records
    assert rec.status == "resolved" and rec.sources[0].kind == "document"
    assert "six years" in (rec.value or "")
    assert any("cycle cut: security_architect asked into the domain of python_coder" in t for t in rec.trail)


def test_depth_is_cut_after_two_consults(kb: KnowledgeBase) -> None:
    rules = [
        {
            "title": "^consult legal_drafting",
            "text": "ANSWER: See {{ASSIST:expert:medical:drug interaction between warfarin and aspirin}}.",
        },
        {
            "title": "^consult medical_clinical",
            "text": "ANSWER: See {{ASSIST:expert:finance:tax treatment of SaaS revenue}}.",
        },
        {"title": "^consult finance_analyst", "text": "ANSWER: 42."},
    ]
    resolver, _ = _resolver(kb, rules)
    res = resolver.resolve(_result("{{ASSIST:expert:legal:Delaware liability statute reference}}"))
    (rec,) = res.records
    assert rec.status == "unresolved" and rec.reason == "circular reference"
    assert [e.agent for e in res.ledger if e.action == "consult"] == ["legal_drafting", "medical_clinical"]
    assert any("would pass depth 2" in t for t in rec.trail)


def test_nested_lookup_in_an_answer_is_resolved_with_both_sources(kb: KnowledgeBase) -> None:
    reply = "ANSWER: Keep them as the policy says: {{ASSIST:lookup:how long audit logs are retained}}."
    resolver, _ = _resolver(kb, [{"title": "^consult legal_drafting", "text": reply}])
    (rec,) = resolver.resolve(_result("{{ASSIST:expert:legal:legal retention duty for audit records}}")).records
    assert rec.status == "resolved" and [s.kind for s in rec.sources] == ["expert", "document"]
    assert "six years" in (rec.value or "") and "{{" not in (rec.value or "")


def test_same_request_twice_is_resolved_once_and_malformed_ones_are_warned(kb: KnowledgeBase) -> None:
    resolver, _ = _resolver(kb)
    res = resolver.resolve(
        _result("{{ASSIST:user:hostname}} and again {{ASSIST:user:hostname}}; broken {{ASSIST:guess:x}}")
    )
    (rec,) = res.records
    assert rec.occurrences == 2 and res.result.raw.count(rec.marker or "") == 2
    assert res.notices and "unknown type 'guess'" in res.notices[0].message
    assert "{{ASSIST:guess:x}}" in res.result.sections[0].body
    assert not scan_assists(res.result.raw).placeholders


def test_the_protocols_own_examples_copied_are_taken_out_not_asked(kb: KnowledgeBase) -> None:
    """The policy slot's answer (real run, 0.5B) used "{{ASSIST:user:the detail}}" as headings and consulted an
    expert on "the question": copies of the prompt's examples, which asked for nothing and were listed unresolved."""
    resolver, _ = _resolver(kb)
    body = (
        "{{ASSIST:user:the detail}}: Passwords have 12 characters.\n"
        "Ask {{ASSIST:expert:legal_drafting:the question}} first, then {{ASSIST:user:your VPN provider}}."
    )
    res = resolver.resolve(_result(body))
    (rec,) = res.records  # only the real question
    assert rec.description == "your VPN provider" and rec.status == "unresolved"
    text = res.result.sections[0].body
    assert text.startswith("Passwords have 12 characters.\nAsk first, then {{UNRESOLVED:user:your VPN provider")
    assert "the detail" not in res.result.raw and "the question" not in res.result.raw
    assert not [e for e in res.ledger if e.action == "consult"]  # no expert consulted about "the question"
    (removed,) = [e for e in res.ledger if e.action == "assist_example_removed"]
    assert "{{ASSIST:user:the detail}}" in removed.inputs_summary and removed.slot_id == "impl"


def test_a_copied_example_a_sentence_leads_up_to_asks_for_what_the_sentence_lacks(kb: KnowledgeBase) -> None:
    """A welcome note on the real 1.5B (tests/integration/test_assist_real.py's task): "The person on call for this
    week is {{ASSIST:user:the detail}}." was taken out as a copied example, and the note read "The person on call
    for this week is ." with nothing listed."""
    resolver, _ = _resolver(kb)
    body = (
        "Dear {{ASSIST:user:the detail}},\n"
        "The person on call for this week is {{ASSIST:expert:domain:the detail}}. They can be reached at "
        "{{ASSIST:user:the detail}}.\n"
        "**Hostname:** {{ASSIST:lookup:the fact}}\n"
        "{{ASSIST:user:the detail}}: Passwords have 12 characters."
    )
    res = resolver.resolve(_result(body))
    asked = [(r.kind, r.description, r.status) for r in res.records]
    assert asked == [
        ("user", "the recipient's name", "unresolved"),
        ("user", "the person on call for this week", "unresolved"),
        ("user", 'what follows "They can be reached at"', "unresolved"),
        ("lookup", "hostname", "unresolved"),
    ]
    text = res.result.sections[0].body
    assert "The person on call for this week is {{UNRESOLVED:user:the person on call for this week - " in text
    assert text.startswith("Dear {{UNRESOLVED:user:the recipient's name - ")
    assert text.endswith("\nPasswords have 12 characters.")  # a copy standing as a label still goes
    assert sorted(unresolved_markers(res.result.raw)) == sorted(str(r.marker) for r in res.records)


def test_no_placeholders_no_work() -> None:
    def boom() -> KnowledgeBase:
        raise AssertionError("the knowledge base must not be loaded")

    settings = resolve_settings({"backend": "fake"}, env={})
    res = AssistResolver(settings, kb=boom).resolve(_result("Nothing unknown here."))
    assert res.records == [] and res.ledger == []


def test_parse_consult_answer() -> None:
    assert parse_consult_answer("ANSWER: Use TLS 1.3. It is faster. And more.") == ("Use TLS 1.3. It is faster.", "")
    assert parse_consult_answer("unknown")[0] is None
    assert parse_consult_answer("ANSWER:   ")[1] == "gave an empty answer"
    assert parse_consult_answer("**ANSWER:** 5 s")[0] == "5 s"
    assert parse_consult_answer("ANSWER: " + "word " * 100)[1].startswith("gave an answer of")
    # review_general_on_1p5b, the disk-full checklist: an answer about whose field it is was filled in as a fact
    scope = "ANSWER: This requires system design expertise, not software architecture expertise."
    assert parse_consult_answer(scope) == (None, "answered about whose field it is, not the question")


def test_an_answer_that_only_repeats_the_question_is_no_answer() -> None:
    assert echoes_question("Billing database person on call", "billing_database_person_on_call")
    assert echoes_question("The billing database person on call.", "billing database person on call")
    assert not echoes_question("Dana Reyes is on call this week.", "billing database person on call")


def test_a_lookup_for_a_figure_the_task_computed_is_filled_from_the_figures() -> None:
    """multipart_set3_first, mp3-catering-quote: given its figures, the quote asked the empty knowledge base for them,
    and showed "{{UNRESOLVED:lookup:2762.50 - the knowledge base is empty}}" for the food."""
    from state.figures import Figure

    figures = (Figure(name="food", value=2762.5), Figure(name="service charge", value=331.5))
    resolver, _ = _resolver(None, figures=figures)
    body = "- **Food**: {{ASSIST:lookup:2762.50}}\n- **Service Charge**: {{ASSIST:lookup:the service charge}}"
    res = resolver.resolve(_result(body))
    assert [r.status for r in res.records] == ["resolved", "resolved"]
    assert res.result.sections[0].body == (
        "- **Food**: 2,762.50 [source: the task's computed figures]\n"
        "- **Service Charge**: 331.50 [source: the task's computed figures]"
    )
    assert res.records[0].sources[0].kind == "program" and res.records[0].sources[0].excerpt == "food: 2,762.50"
    # a request that names no figure still goes to the knowledge base (empty here: unresolved, said so)
    (other,) = resolver.resolve(_result("VAT: {{ASSIST:lookup:the VAT rate in Germany}}")).records
    assert other.status == "unresolved" and "knowledge base is empty" in (other.reason or "")
