"""Each harness prompt template's placeholders match what its caller fills in."""

from __future__ import annotations

import string

from engine import prompts
from engine.slots.job import SlotJob
from engine.slots.prompt import build_messages
from state.context import resolve_settings
from state.framework import OUTLINE_REFERENCE, SlotSpec
from state.outline import parse_output


def fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


EXPECTED = {
    "SYSTEM_PROMPT": {"persona", "output_contract", "uncertainty_protocol"},
    "SLOT_PROMPT": {"task", "title", "description", "expected_outputs", "constraints", "references", "feedback"},
    "TASK_PROMPT": {"task", "expected_outputs", "constraints", "references", "feedback"},
    "FEEDBACK_BLOCK": {"problems"},
    "CONTRACT_CODE": {"language"},
    "CONTRACT_CODE_EXPLAINED": {"language"},
    "CONTRACT_FUNCTION": {"language", "function"},
    "CONTRACT_DATA": {"language"},
    "CONTRACT_PROSE": {"max_items"},
    "CONTRACT_PLAN": {"min_items", "max_items"},
    "CONTRACT_TABLE": set(),
    "JUDGE_SYSTEM": set(),
    "JUDGE_PROMPT": {"rubric", "candidates", "ids"},
    "JUDGE_CANDIDATE": {"id", "text"},
    "EXPECTED_OUTPUTS_BLOCK": {"items"},
    "CONSTRAINTS_BLOCK": {"items"},
    "REFERENCES_BLOCK": {"items"},
    "REFERENCE_ITEM": {"title", "view", "content"},
    "ADAPT_SYSTEM": {"max_ops"},
    "DIRECT_SYSTEM": set(),
    "DIRECT_TOLD": {"value"},
    "PROGRAM_PROMPT": {"task"},
    "ADAPT_PROMPT": {"task", "title", "pattern", "min_slots", "max_slots", "slots", "experts"},
    "ADAPT_SLOT_LINE": {"id", "title", "expert", "deps", "description"},
    "ADAPT_RETRY": {"errors"},
    "CONSULT_SYSTEM": {"persona", "asker", "consult_protocol"},
    "CONSULT_PROMPT": {"domain", "question"},
}


def test_template_placeholders_match_their_callers() -> None:
    for name, expected in EXPECTED.items():
        assert fields(getattr(prompts, name)) == expected, name


def test_constants_that_are_not_templates_keep_their_braces() -> None:
    # The uncertainty protocol is inserted as a value, so its {{ASSIST:...}} reaches the model verbatim.
    system, _ = build_messages(_job(), resolve_settings({"backend": "fake"}, env={}))
    assert "{{ASSIST:lookup:the fact}}" in system.content


def test_consult_prompt_keeps_the_placeholder_syntax() -> None:
    # CONSULT_PROTOCOL, like UNCERTAINTY_PROTOCOL, is a value: its {{ASSIST:...}} reaches the model verbatim.
    system = prompts.CONSULT_SYSTEM.format(persona="P", asker="python_coder", consult_protocol=prompts.CONSULT_PROTOCOL)
    assert "{{ASSIST:expert:domain:short description}}" in system and "ANSWER: " in system


def _job(**spec: object) -> SlotJob:
    design = parse_output(
        "## Outline\n1. Storage\n2. API\n3. Secret plan\n\n## 1. Storage\nUse Postgres.\n\n"
        "## 2. API\nREST endpoints.\n\n## 3. Secret plan\nDESIGN-BODY-ONLY\n",
        "design",
        "g",
    )
    other = parse_output("## Outline\n1. a\n2. b\n3. c\n\n## 1. a\nOTHER-SLOT-TEXT\n", "other", "g")
    s = SlotSpec(id="impl", title="Implementation", description="Implement it.", **spec)  # type: ignore[arg-type]
    refs = {"design": ("Design", design), "other": ("Other", other)}
    return SlotJob(
        spec=s,
        task="Build a service",
        constraints=("no cloud",),
        expert="g",
        persona="P",
        references=refs,
        max_tokens=600,
        temperature=0.0,
    )


def test_prompt_carries_only_declared_references() -> None:
    settings = resolve_settings({"backend": "fake"}, env={})
    _, user = build_messages(_job(deps=["design"], can_reference=["design"]), settings)
    assert "DESIGN-BODY-ONLY" in user.content and "Use Postgres." in user.content
    assert "OTHER-SLOT-TEXT" not in user.content  # not declared in can_reference
    assert "Build a service" in user.content and "no cloud" in user.content


def test_outline_only_and_section_references() -> None:
    settings = resolve_settings({"backend": "fake"}, env={})
    _, outline = build_messages(
        _job(deps=["design"], can_reference=["design"], reference_hints={"design": [OUTLINE_REFERENCE]}), settings
    )
    assert "1. Storage" in outline.content and "Use Postgres." not in outline.content
    _, section = build_messages(
        _job(deps=["design"], can_reference=["design"], reference_hints={"design": ["api"]}), settings
    )
    assert "REST endpoints." in section.content and "Use Postgres." not in section.content
    _, missing = build_messages(
        _job(deps=["design"], can_reference=["design"], reference_hints={"design": ["9.9"]}), settings
    )
    assert "(section '9.9' not found)" in missing.content


def test_no_references_no_block() -> None:
    _, user = build_messages(_job(), resolve_settings({"backend": "fake"}, env={}))
    assert "Finished work you may use" not in user.content


def test_a_function_tasks_prompt_shares_its_persona_and_contract_heading_with_other_functions() -> None:
    from dataclasses import replace

    from engine.slots.contracts import contract_of
    from engine.slots.prompt import fit_prompt

    settings = resolve_settings({"backend": "fake"}, env={})
    code = contract_of("code", "python")
    job = replace(_job(), persona="You are a careful Python developer.", contract=replace(code, function="add"))
    prompt = fit_prompt(job, settings)
    other = fit_prompt(replace(job, contract=replace(code, function="similar_elements")), settings)
    system, shared = prompt.messages[0].content, prompt.shared
    assert shared is not None and system.startswith(shared) and other.messages[0].content.startswith(shared)
    assert shared.startswith("You are a careful Python developer.") and shared.endswith("(mandatory):\n")
    assert "add" not in shared.split("\n")[-2]
    assert fit_prompt(replace(job, contract=code), settings).shared is None  # nothing names the task: all shared


def _asking(text: str) -> SlotJob:
    from dataclasses import replace

    job = _job()
    return replace(job, spec=job.spec.model_copy(update={"description": text}))


def test_creative_writing_is_asked_for_invention_and_no_placeholders() -> None:
    # review_whole_dec07, cw-train-scene: "{{ASSIST:user:the clue}}" in a mystery scene was filled with a consulted
    # definition ("The clue is a secret message or information that is hidden or concealed.") inside the story
    settings = resolve_settings({"backend": "fake"}, env={})
    for text in [
        "Write the opening scene of a mystery novel set on a night train through the Alps.",
        "Write five slogans for a bicycle repair shop called Spoke & Chain.",
        "A haiku about autumn rain",
    ]:
        system, _ = build_messages(_asking(text), settings)
        assert prompts.UNCERTAINTY_PROTOCOL_FICTION in system.content and "{{ASSIST" not in system.content, text
    for text in [
        "Write user stories for the checkout page.",
        "Explain how the cache is invalidated.",
        "Explain what happens behind the scenes when a browser loads a page.",
    ]:
        system, _ = build_messages(_asking(text), settings)
        assert "{{ASSIST:lookup:the fact}}" in system.content, text


def test_a_message_a_person_sends_is_one_section_without_headings() -> None:
    # 2026-12-07, through coe run: the landlord email on the 0.5B came back as four headed sections, signed off twice
    settings = resolve_settings({"backend": "fake"}, env={})
    for text in [
        "Draft a polite email to my landlord asking him to fix the kitchen tap, which has been dripping for two weeks.",
        "Write a polite email asking my landlord to fix a leaking kitchen tap this week.",
        "Write me a short thank-you note for my neighbour who fed the cat.",
        "Write a cover letter for a junior data analyst job.",
    ]:
        job = _asking(text)
        assert job.slot_contract.message and job.slot_contract.max_items == 1, text
        system, _ = build_messages(job, settings)
        assert prompts.CONTRACT_MESSAGE in system.content, text
    for text in [
        "Explain what these error messages mean.",
        "Write an email template parser in Python.",
        "Write three emails for the onboarding sequence.",
    ]:
        assert not _asking(text).slot_contract.message, text
