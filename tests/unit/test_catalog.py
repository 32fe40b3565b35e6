"""The expert catalog: the shipped scope documents, and clear errors for broken ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from experts.catalog import load_catalog
from state.errors import ConfigError
from state.paths import config_dir

REQUIRED = {
    "python_coder",
    "sql_specialist",
    "security_architect",
    "legal_drafting",
    "medical_clinical",
    "math_reasoning",
    "general_reasoning",
    "software_architect",
    "devops_engineer",
    "technical_writer",
    "creative_writer",
    "finance_analyst",
}
SHIPPED = config_dir() / "expert_scopes"


def test_shipped_catalog_has_every_required_expert_with_grounded_scopes() -> None:
    catalog = load_catalog(SHIPPED)
    assert REQUIRED <= set(catalog.ids)
    assert catalog.default_expert == "general_reasoning"
    for scope in catalog:
        assert len(scope.capabilities) >= 25, scope.id
        assert len(" ".join(scope.capabilities).split()) >= 300, f"{scope.id}: capability scope is too thin"
        assert len(scope.exclusions) >= 10, scope.id
        assert "This requires" in scope.persona, scope.id
        assert scope.known_weaknesses, scope.id
    kinds = {s.id: s.kind for s in catalog}
    assert kinds["python_coder"] == "task" and kinds["legal_drafting"] == "domain"
    assert kinds["general_reasoning"] == "general"
    true_experts = [s for s in catalog if s.is_true_expert]
    assert true_experts and all(s.model.model == "qwen2.5-coder-1.5b" for s in true_experts)


@pytest.fixture
def scopes(tmp_path: Path) -> Path:
    target = tmp_path / "scopes"
    shutil.copytree(SHIPPED, target)
    return target


def _edit(path: Path, **changes: object) -> None:
    data = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _errors(directory: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_catalog(directory)
    return str(info.value)


def test_missing_required_field_names_file_and_field(scopes: Path) -> None:
    _edit(scopes / "legal_drafting.yaml", capability_scope=None)
    message = _errors(scopes)
    assert "legal_drafting.yaml: capability_scope: Field required" in message


def test_every_problem_is_reported_at_once(scopes: Path) -> None:
    _edit(scopes / "sql_specialist.yaml", kind="wizard")
    _edit(scopes / "math_reasoning.yaml", model={"binding": "true"})
    (scopes / "creative_writer.yaml").write_text("id: creative_writer\nsummary: [unclosed\n")
    message = _errors(scopes)
    assert "sql_specialist.yaml: kind: Input should be 'task', 'domain' or 'general'" in message
    assert (
        "math_reasoning.yaml: model.model: a true expert needs a bundled model name, a GGUF path or an endpoint"
        in message
    )
    assert "creative_writer.yaml (line 3): not valid YAML" in message


def test_id_must_match_file_and_index(scopes: Path) -> None:
    _edit(scopes / "finance_analyst.yaml", id="Finance Analyst")
    message = _errors(scopes)
    assert "finance_analyst.yaml: id: 'Finance Analyst' must be snake_case" in message


def test_unlisted_and_missing_files_are_errors(scopes: Path) -> None:
    shutil.copy(scopes / "devops_engineer.yaml", scopes / "extra.yaml")
    (scopes / "technical_writer.yaml").unlink()
    message = _errors(scopes)
    assert "extra.yaml: not listed in index.yaml" in message
    assert "expert 'technical_writer': file technical_writer.yaml does not exist" in message


def test_the_generalist_is_required(scopes: Path) -> None:
    index = yaml.safe_load((scopes / "index.yaml").read_text())
    index["experts"] = [e for e in index["experts"] if e["id"] != "general_reasoning"]
    index["default_expert"] = "python_coder"
    (scopes / "index.yaml").write_text(yaml.safe_dump(index))
    (scopes / "general_reasoning.yaml").unlink()
    assert "'general_reasoning' is required" in _errors(scopes)


def test_a_thin_capability_scope_is_refused(scopes: Path) -> None:
    _edit(scopes / "medical_clinical.yaml", capability_scope="Explain diseases\n")
    assert "medical_clinical.yaml: capability_scope: has 1 lines" in _errors(scopes)


def test_missing_directory_says_how_to_configure_it(tmp_path: Path) -> None:
    message = _errors(tmp_path / "nowhere")
    assert "does not exist" in message and "COE_EXPERT_SCOPES" in message


def test_unquoted_true_binding_means_a_true_expert(scopes: Path) -> None:
    # YAML reads `binding: true` as a boolean; the loader takes it as the true-expert binding.
    text = (scopes / "python_coder.yaml").read_text()
    assert "binding: true" in text
    assert load_catalog(scopes).get("python_coder").is_true_expert
