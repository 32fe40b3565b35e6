"""The framework template library: the validator's two tiers, the shipped library, retrieval and `coe templates`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from experts.catalog import load_catalog
from experts.embedding import get_embedder
from experts.embedding.faiss_index import build_faiss_index
from experts.routing.templates import load_or_build
from state.framework import validate_framework
from state.paths import config_dir
from state.template import load_library

runner = CliRunner()
LIBRARY = config_dir() / "framework_templates"
EXPERTS = load_catalog().ids


def _template(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "report_with_review",
        "title": "Report with a review",
        "pattern": "draft + review",
        "description": "Write a short report on a topic and have it reviewed for accuracy and clarity by an expert.",
        "adaptable": {"slot_count": [3, 5], "subtypes": ["status report", "incident summary"]},
        "slots": [
            {
                "id": "scope",
                "title": "Scope and audience",
                "description": "Say who reads it.",
                "expected_outputs": ["audience"],
                "expert": "general_reasoning",
            },
            {
                "id": "facts",
                "title": "Facts and figures",
                "description": "Collect the facts.",
                "expected_outputs": ["facts"],
                "expert": "general_reasoning",
                "deps": ["scope"],
                "can_reference": ["scope"],
            },
            {
                "id": "risks",
                "title": "Open risks",
                "description": "List the risks.",
                "expected_outputs": ["risks"],
                "expert": "general_reasoning",
                "deps": ["scope"],
            },
            {
                "id": "report",
                "title": "The written report",
                "description": "Write the report.",
                "expected_outputs": ["report"],
                "expert": "technical_writer",
                "deps": ["facts", "risks"],
                "can_reference": ["facts", "risks"],
            },
        ],
    }
    base.update(changes)
    return base


def _validate(tmp_path: Path, *templates: dict[str, Any]) -> Any:
    path = tmp_path / "family.yaml"
    path.write_text(yaml.safe_dump({"family": "test", "templates": list(templates)}, sort_keys=False))
    return load_library([path], EXPERTS)


def _messages(report: Any, level: str) -> list[str]:
    return [str(i) for i in report.issues if i.level == level]


def test_a_good_template_has_no_issues_and_becomes_a_valid_framework(tmp_path: Path) -> None:
    report = _validate(tmp_path, _template())
    assert report.issues == []
    fw = report.templates["report_with_review"].to_framework()
    assert validate_framework(fw) is fw and fw.source == "template:report_with_review"


def test_each_structural_error_is_named_with_file_template_and_field(tmp_path: Path) -> None:
    good = _template()
    cycle = _template(id="cycle")
    cycle["slots"][0] = {**cycle["slots"][0], "deps": ["report"]}
    missing = _template(id="missing_dep")
    missing["slots"][1] = {**missing["slots"][1], "deps": ["nowhere"]}
    unknown = _template(id="unknown_expert")
    unknown["slots"][2] = {**unknown["slots"][2], "expert": "astrologer"}
    duplicate_slot = _template(id="duplicate_slot")
    duplicate_slot["slots"][2] = {**duplicate_slot["slots"][2], "id": "facts"}
    report = _validate(tmp_path, good, cycle, missing, unknown, duplicate_slot, _template())
    errors = "\n".join(_messages(report, "error"))
    file = str(tmp_path / "family.yaml")
    assert f"error: {file}: cycle: slots: dependency cycle scope -> facts -> report -> scope" in errors
    assert "missing_dep: slots[facts].deps: unknown slot 'nowhere'" in errors
    assert "unknown_expert: slots[risks].expert: unknown expert 'astrologer'" in errors
    assert "duplicate_slot: slots: duplicate slot id 'facts'" in errors
    assert "report_with_review: id: duplicate template id" in errors
    assert set(report.templates) == {"report_with_review"}


def test_missing_fields_and_bad_ranges_are_errors(tmp_path: Path) -> None:
    no_pattern = _template(id="no_pattern")
    del no_pattern["pattern"]
    bad_range = _template(id="bad_range", adaptable={"slot_count": [5, 8]})
    no_expert = _template(id="no_expert")
    no_expert["slots"][0] = {k: v for k, v in no_expert["slots"][0].items() if k != "expert"}
    errors = "\n".join(_messages(_validate(tmp_path, no_pattern, bad_range, no_expert), "error"))
    assert "no_pattern: pattern: Field required" in errors
    assert "bad_range: adaptable.slot_count: [5, 8] does not include the template's 4 slots" in errors
    assert "no_expert: slots[scope].expert: every template slot names the expert it needs" in errors


def test_warnings_do_not_block(tmp_path: Path) -> None:
    vague = _template(id="VagueTemplate")
    vague["slots"][1] = {**vague["slots"][1], "title": "Part 2"}
    flat = _template(id="all_parallel")
    flat["slots"] = [{**s, "deps": [], "can_reference": []} for s in flat["slots"]]
    chain = _template(id="one_chain")
    chain["slots"] = [
        {**s, "deps": [chain["slots"][i - 1]["id"]] if i else [], "can_reference": []}
        for i, s in enumerate(chain["slots"])
    ]
    report = _validate(tmp_path, vague, flat, chain)
    warnings = "\n".join(_messages(report, "warning"))
    assert "VagueTemplate: id: 'VagueTemplate' is not snake_case" in warnings
    assert "VagueTemplate: slots[facts].title: 'Part 2' does not say what the part is about" in warnings
    assert "all_parallel: slots: all slots are independent" in warnings
    assert "one_chain: slots: the slots form a single chain" in warnings
    assert _messages(report, "error") == [] and set(report.templates) == {"VagueTemplate", "all_parallel", "one_chain"}


def test_the_shipped_library_is_valid() -> None:
    report = load_library([LIBRARY], EXPERTS)
    assert report.errors == [], "\n".join(map(str, report.errors))
    assert report.warnings == [], "\n".join(map(str, report.warnings))
    assert len(report.templates) >= 100
    for template in report.templates.values():
        assert all(s.expert in EXPERTS for s in template.slots)
    # the kinds of work the library must cover, one template each at least
    covered = {
        "code_with_docs",
        "secure_code_with_legal_artifact",
        "application_security_review",
        "data_analysis_report",
        "topic_research_report",
        "architecture_decision_record",
        "debug_failure",
        "technical_tutorial",
        "short_story",
        "financial_statement_analysis",
        "contract_drafting",
        "condition_explainer",
        "math_worked_solution",
        "release_rollout_plan",
        "database_migration_plan",
    }
    assert covered <= set(report.templates)
    hipaa = report.templates["secure_code_with_legal_artifact"]
    assert {s.expert for s in hipaa.slots} >= {"python_coder", "sql_specialist", "security_architect", "legal_drafting"}
    assert "medical_clinical" not in {s.expert for s in hipaa.slots}


def test_template_index_is_cached_and_rebuilt_when_a_template_changes(tmp_path: Path) -> None:
    report = _validate(
        tmp_path,
        _template(),
        _template(
            id="code_and_docs",
            title="Code with a README",
            description="Write a Python command-line tool with its README and tests.",
        ),
    )
    cache = tmp_path / "cache"
    first = load_or_build(report.templates, get_embedder(), cache)
    assert first.built and {p.name for p in cache.iterdir()} >= {
        "template_vectors.npy",
        "template_ids.json",
        "template.index",
        "metadata.json",
    }
    assert not load_or_build(report.templates, get_embedder(), cache).built
    hits = first.search("Build a small Python CLI and document it", k=2)
    assert hits[0].template_id == "code_and_docs" and hits[0].similarity > hits[1].similarity
    changed = _validate(tmp_path, _template(description="A totally different description of a status report."))
    assert load_or_build(changed.templates, get_embedder(), cache).built


def test_hnsw_is_used_for_large_libraries_and_finds_the_same_neighbours() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(50, 384)).astype(np.float32)
    vectors = centres[rng.integers(0, 50, 3000)] + 0.3 * rng.normal(size=(3000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    flat, hnsw = build_faiss_index(vectors, "flat"), build_faiss_index(vectors, "hnsw")
    queries = vectors[:50]
    _, exact = flat.search(queries, 5)
    _, approx = hnsw.search(queries, 5)
    recall = np.mean([len(set(a) & set(e)) / 5 for a, e in zip(approx, exact, strict=True)])
    assert type(build_faiss_index(vectors[:10])).__name__ == "IndexFlatIP"
    assert recall >= 0.9


@pytest.mark.slow  # the whole shipped library validated and searched through the CLI (seconds)
def test_coe_templates_commands(tmp_path: Path) -> None:
    ok = runner.invoke(app, ["templates", "validate"])
    assert ok.exit_code == 0 and "0 errors" in ok.stdout
    broken = _template(id="broken")
    broken["slots"][0] = {**broken["slots"][0], "expert": "astrologer"}
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump({"family": "x", "templates": [broken]}))
    bad = runner.invoke(app, ["templates", "validate", str(path)])
    assert (
        bad.exit_code == 2 and f"error: {path}: broken: slots[scope].expert: unknown expert 'astrologer'" in bad.stdout
    )
    shown = runner.invoke(app, ["templates", "show", "code_with_docs"])
    assert shown.exit_code == 0 and "pattern: code + docs" in shown.stdout
    assert runner.invoke(app, ["templates", "show", "nope"]).exit_code == 2
    found = json.loads(runner.invoke(app, ["templates", "search", "Write a CLI tool with a README", "--json"]).stdout)
    sims = [r["similarity"] for r in found["results"]]
    assert found["results"] and sims == sorted(sims, reverse=True)
    assert all(set(r) >= {"id", "similarity", "as_is", "title"} for r in found["results"])
