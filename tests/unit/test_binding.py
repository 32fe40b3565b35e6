"""Which model an expert or the planner runs on: one decision, used by routing, execution, consults and planning."""

from __future__ import annotations

import dataclasses

import pytest

from experts.catalog import ExpertScope, load_catalog, prepare_models, resolve_binding
from experts.catalog import binding as binding_module
from state.context import resolve_settings

CATALOG = load_catalog()


def _true_expert(model: str, fallback: str = "base") -> ExpertScope:
    coder = CATALOG.get("python_coder")
    binding = coder.model.model_copy(update={"model": model, "fallback": fallback})
    return coder.model_copy(update={"model": binding})


def _persona(expert: str) -> ExpertScope:
    """``expert``'s scope bound as a persona on the base model (every shipped expert has a model of its own)."""
    scope = CATALOG.get(expert)
    return scope.model_copy(update={"model": scope.model.model_copy(update={"binding": "faux", "model": None})})


def test_a_persona_runs_on_the_base_model() -> None:
    settings = resolve_settings({"backend": "llama"}, env={})
    binding = resolve_binding(settings, _persona("security_architect"))
    assert (binding.model, binding.kind, binding.problem, binding.fatal) == (None, "faux", None, False)
    assert binding.label == "base model (faux)"


def test_a_true_expert_runs_on_its_own_model_unless_true_experts_are_off() -> None:
    scope = _true_expert("qwen2.5-coder-1.5b")
    on = resolve_binding(resolve_settings({"backend": "fake"}, env={}), scope)
    assert (on.model, on.kind) == ("qwen2.5-coder-1.5b", "true")
    off = resolve_binding(resolve_settings({"backend": "fake", "true_experts": False}, env={}), scope)
    assert (off.model, off.kind) == (None, "faux")


def test_a_missing_model_falls_back_or_is_fatal_as_the_scope_says() -> None:
    settings = resolve_settings({"backend": "llama"}, env={})
    fallback = resolve_binding(settings, _true_expert("/nowhere/coder.gguf"))
    assert (fallback.model, fallback.kind, fallback.fatal) == (None, "faux-fallback", False)
    assert fallback.problem is not None and "/nowhere/coder.gguf" in fallback.problem
    fatal = resolve_binding(settings, _true_expert("/nowhere/coder.gguf", fallback="error"))
    assert fatal.fatal and fatal.kind == "faux-fallback" and fatal.problem == fallback.problem


def test_the_planner_falls_back_to_the_base_model() -> None:
    settings = resolve_settings({"backend": "llama"}, env={})
    missing = resolve_binding(settings, model="/nowhere/planner.gguf")
    assert (missing.model, missing.kind, missing.fatal) == (None, "faux-fallback", False) and missing.problem
    assert resolve_binding(settings, model="") == resolve_binding(settings, model=None)
    assert resolve_binding(settings, model=None).model is None


def test_the_bound_models_are_verified_once_in_the_background(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(binding_module, "model_unavailable", lambda settings, name: seen.append(name) or None)
    monkeypatch.setattr(binding_module, "_prepared", set())
    scopes = {"python_coder": _true_expert("/models/coder.gguf"), "writer": _true_expert("/models/writer.gguf")}
    scopes["writer"] = scopes["writer"].model_copy(update={"id": "writer"})
    catalog = dataclasses.replace(CATALOG, experts={**CATALOG.experts, **scopes})
    settings = resolve_settings({"backend": "llama", "planner_model": "/models/coder.gguf"}, env={})
    thread = prepare_models(settings, catalog)
    assert thread is not None and not thread.daemon  # exiting mid-assembly would leave a partial file behind
    thread.join(5)
    # the planner's, every local true expert's, the base model (""): each once, whatever binds it; the planner's
    # first (the README demo's expert runs on it), the base last
    assert seen[0] == "/models/coder.gguf" and seen[-1] == ""
    assert sorted(seen) == ["", "/models/coder.gguf", "/models/writer.gguf", "qwen2.5-coder-1.5b"]
    assert prepare_models(settings, catalog) is None  # this process has them (or is verifying them) already
    assert prepare_models(resolve_settings({"backend": "fake"}, env={}), catalog) is None  # nothing to load


def test_a_model_that_cannot_be_prepared_is_left_to_routing_to_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding_module, "_prepared", set())
    context = {"backend": "llama", "model_path": "/nowhere/base.gguf", "planner_model": "", "true_experts": False}
    settings = resolve_settings(context, env={})
    thread = prepare_models(settings, CATALOG)
    assert thread is not None
    thread.join(5)
    assert not thread.is_alive()  # it ended, and no exception escaped it: routing names the file (test above)
    assert resolve_binding(settings, model="").model is None
