"""A true expert really runs on its own GGUF: python_coder on Qwen2.5-Coder-1.5B, a persona on the base model.

Every shipped expert has a model of its own since 2026-12-07 (docs/models.md); the generalist is made a persona
over the base model here, as a catalog may make any expert.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from experts.backends.llama import LlamaBackend
from experts.models.bundled import BUNDLED_MODELS, DEFAULT_MODEL, resolve_model_path
from experts.pool.pooled import clear_backends, get_backend
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.io import RunInput, RunOptions
from tests.scopes import persona_scopes

pytestmark = pytest.mark.model

FRAMEWORK = {
    "id": "code_and_notes",
    "title": "Code and notes",
    "slots": [
        {
            "id": "code",
            "title": "Date parser",
            "description": "Write a Python function that parses ISO 8601 date strings; raise ValueError on bad input.",
        },
        {
            "id": "summary",
            "title": "Summary",
            "description": "Summarise in two sentences what the date parser does, for a non-technical reader.",
            "expert": "general_reasoning",
        },
    ],
}


def test_python_coder_loads_its_own_model_and_the_generalist_the_base_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COE_EXPERT_SCOPES", str(persona_scopes(tmp_path, "general_reasoning")))
    clear_backends()
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "true-expert"}}
    context = {
        "backend": "llama",
        "max_tokens": 48,
        "max_outline_retries": 0,
        "max_parallel": 1,
        "best_of": 1,
        "escalate": False,  # one short answer a slot: this test is about which model serves which slot; with the
        "completion_seconds": 0,  # last candidate and the completion round on, it took 50 s against 15 s
    }
    graph.invoke(
        RunInput(task="A date parser with notes", options=RunOptions(framework=FRAMEWORK)), config, context=context
    )
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.settings is not None
    code, summary = state.routing["code"], state.routing["summary"]
    assert code.expert == "python_coder" and code.binding == "true" and code.model == "qwen2.5-coder-1.5b"
    assert summary.expert == "general_reasoning" and summary.binding == "faux" and summary.model is None
    assert state.slot_states["code"].status.value == "done" and state.slot_states["summary"].status.value == "done"

    own = get_backend(state.settings, "qwen2.5-coder-1.5b").backend
    base = get_backend(state.settings).backend
    assert isinstance(own, LlamaBackend) and isinstance(base, LlamaBackend) and own is not base
    assert own.loaded and base.loaded
    assert own.model_path == resolve_model_path("qwen2.5-coder-1.5b")
    assert own.model_path.stat().st_size == BUNDLED_MODELS["qwen2.5-coder-1.5b"].size
    assert base.model_path == resolve_model_path(DEFAULT_MODEL)
    # The weights in memory are the 1.5B model's, not the base model's.
    assert own._llm is not None and base._llm is not None
    assert own._llm.metadata["general.size_label"] == "1.5B" and own._llm.metadata["qwen2.embedding_length"] == "1536"
    assert base._llm.metadata["general.size_label"] == "0.5B"
    ledger = [e for e in state.ledger if e.action == "route" and e.slot_id == "code"]
    assert ledger and "model: qwen2.5-coder-1.5b (true)" in ledger[0].outputs_summary
    clear_backends()
