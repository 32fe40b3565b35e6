"""Assists end to end through the compiled graph (fake experts, a real knowledge base, in-memory checkpointer)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from experts.backends.fake import FakeBackend
from experts.backends.protocol import Generation, GenerationRequest
from experts.knowledge import add_documents
from graph import build_graph
from state import Passport, RunStatus
from state.assist import UNRESOLVED_RE
from state.framework import load_framework_file
from state.io import RunInput, RunOptions
from tests.conftest import FIXTURES

A_TEXT = (
    "## Outline\n1. Storage\n2. Operations\n3. Open points\n\n"
    "## 1. Storage\nPatient data is encrypted with {{ASSIST:lookup:encryption algorithm for PHI at rest}}.\n"
    "- audit: {{ASSIST:lookup:how long audit logs are retained}}\n\n"
    "## 2. Operations\nBack up at {{ASSIST:lookup:time of the nightly database backup}}; the disclaimer reads "
    "{{ASSIST:expert:legal:liability disclaimer wording for a medical records tool}}.\n\n"
    "## 3. Open points\nHost {{ASSIST:user:your production hostname}}; statute "
    "{{ASSIST:expert:legal:Delaware liability statute reference}}; fine {{ASSIST:lookup:maximum GDPR fine}}.\n"
)
C_TEXT = (
    "## Outline\n1. Risks\n2. Mitigation\n3. Owner\n\n## 1. Risks\nToken expiry is "
    "{{ASSIST:lookup:lifetime of OAuth access tokens}}.\n\n## 2. Mitigation\nRotate keys.\n\n## 3. Owner\n"
    "{{ASSIST:user:who owns the risk register}}\n"
)


class Recording(FakeBackend):
    """The fake backend, keeping every slot request it got."""

    seen: list[GenerationRequest]

    def generate(self, request: GenerationRequest) -> Generation:
        self.seen.append(request)
        return super().generate(request)


def test_assists_are_resolved_recorded_and_listed(
    write_script: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = tmp_path / "kb"
    add_documents([FIXTURES / "kb"], kb)
    script = write_script(
        {
            "rules": [
                {"slot": "A", "text": A_TEXT},
                {"slot": "C", "text": C_TEXT},
                {"title": "^consult legal_drafting: liability", "text": "ANSWER: The tool gives no medical advice."},
                {
                    "title": "^consult legal_drafting: Delaware",
                    "text": "ANSWER: See {{ASSIST:expert:security:how patient records are encrypted}}.",
                },
                {
                    "title": "^consult security_architect",
                    "text": "ANSWER: Ask {{ASSIST:expert:legal:which liability statute applies in Delaware}}.",
                },
            ]
        }
    )
    recording: list[GenerationRequest] = []

    def backend(settings: Any, model: str | None = None) -> FakeBackend:
        made = Recording.from_settings(settings)
        made.seen = recording
        return made

    monkeypatch.setattr(importlib.import_module("nodes.execute_slots"), "get_backend", backend)
    fw = load_framework_file(str(FIXTURES / "branchy.yaml"))
    # A's expert is set, not routed: the consult chain below (legal asks security, security asks legal back)
    # needs A's own expert to be neither of them, and "List the requirements" alone is a close call.
    fw.slots[0].expert = "software_architect"
    options = RunOptions(framework=fw.model_dump(mode="json"), framework_source="branchy")
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "assists"}}
    context = {"backend": "fake", "fake_script": str(script), "kb_path": str(kb), "lookup_threshold": 0.6}
    graph.invoke(
        RunInput(task="Plan the patient portal", options=options).model_dump(mode="json"), config, context=context
    )
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.status == RunStatus.COMPLETED

    records = {r.description: r for r in state.assists["A"]}
    assert set(state.assists) == {"A", "B", "C", "D"} and len(state.assists["C"]) == 2
    assert [r.status for r in state.assists["C"]] == ["resolved", "unresolved"]  # independent slot, own resolution
    resolved = {d for d, r in records.items() if r.status == "resolved"}
    assert resolved == {
        "encryption algorithm for PHI at rest",
        "how long audit logs are retained",
        "time of the nightly database backup",
        "liability disclaimer wording for a medical records tool",
    }
    for r in records.values():
        assert (r.status == "resolved") == bool(r.sources)  # nothing filled without a source
    assert records["Delaware liability statute reference"].reason == "circular reference"
    assert records["your production hostname"].reason == "needs user input"
    assert "relevant enough" in (records["maximum GDPR fine"].reason or "")

    doc = state.document or ""
    body, _, tail = doc.partition("## Unresolved")
    assert "AES-256" in body and "six years" in body and "02:00 UTC" in body and "no medical advice" in body
    assert "{{ASSIST:" not in doc
    # The document lists every unresolved marker that its body holds, and only those.
    listed = re.findall(r"^- `(\{\{UNRESOLVED:.*\}\})`$", tail, flags=re.M)
    assert sorted(listed) == sorted(set(UNRESOLVED_RE.findall(body))) and len(listed) == 4
    assert state.summary is not None and sorted(state.summary.unresolved) == sorted(listed)
    sources = tail.partition("## Assist sources")[2]
    assert str(FIXTURES / "kb" / "security_policy.md") in sources and "consulted expert legal_drafting" in sources

    # Dependents see resolved text: D references A whole.
    d_prompt = next(r for r in recording if r.slot_id == "D").messages[-1].content
    assert "02:00 UTC" in d_prompt and "{{ASSIST:" not in d_prompt
    actions = [e.action for e in state.ledger]
    assert actions.count("assist_lookup") == 5 and actions.count("assist_user") == 2
    assert actions.count("assist_expert") == 2
    assert actions.count("consult") == 3  # liability; Delaware -> security (its answer asks back: cut)
