"""Experts from outside the project: added by the user, installed by a package, examined, kept out when failing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from engine.exam_checks import exam_failures
from experts.catalog import add_expert, load_catalog, remove_expert
from experts.catalog.exams import ExamChecks, ExamRecord, TaskResult, read_record, write_record
from experts.routing.index import ExpertVectorCache, base_positions, build_index
from experts.routing.router import get_router
from state.errors import ConfigError
from state.paths import user_experts_dir
from tests.unit.plan_runs import answer

runner = CliRunner()

RUST_SCOPE: dict[str, Any] = {
    "id": "rust_developer",
    "version": "1.0",
    "display_name": "Rust Developer",
    "kind": "task",
    "summary": "Writes, debugs and explains Rust code.",
    "capability_scope": "\n".join(
        [
            "Write a Rust function that parses a line of text into a struct",
            "Fix a borrow checker error in a Rust function that mutates a vector while iterating",
            "Write an async Rust HTTP client with reqwest and tokio",
            "Implement a trait for a Rust struct and write unit tests with cargo test",
            "Convert a Rust function that panics into one that returns Result with a custom error type",
        ]
    ),
    "exclusion_scope": "Writing Python scripts\nDesigning a system's architecture without code",
    "harness_constraints": "You are a Rust developer.\nYou MAY write Rust.\nYou must REFUSE other languages.",
    "known_weaknesses": ["Small models get lifetimes wrong."],
    "model": {"binding": "faux"},
    "generation": {"temperature": 0.0, "max_tokens": 600},
    "verification": {"date": "2026-11-28", "method": "test"},
}
EXAM: dict[str, Any] = {
    "expert": "rust_developer",
    "bar": 0.6,
    "tasks": [
        {"id": f"t{i}", "task": f"Write Rust function number {i}: add two numbers", "checks": {"contains": ["fn"]}}
        for i in range(5)
    ],
}


def expert_dir(root: Path, scope: dict[str, Any] | None = None, **files: Any) -> Path:
    """An expert directory named after the scope's id, with ``scope.yaml`` and the other files given."""
    scope = dict(RUST_SCOPE if scope is None else scope)
    directory = root / str(scope["id"])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scope.yaml").write_text(yaml.safe_dump(scope), encoding="utf-8")
    for name, content in files.items():
        name = name.replace("_", ".")
        text = content if isinstance(content, str) else yaml.safe_dump(content)
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def test_an_added_expert_joins_the_catalog_and_routing_and_can_be_removed(tmp_path: Path) -> None:
    source = expert_dir(tmp_path, examples_txt="Write a Rust function that totals a tax form\nFix my Rust lifetimes\n")
    added = add_expert(source)
    assert added.directory == user_experts_dir() / "rust_developer"
    assert json.loads((added.directory / "origin.json").read_text())["source"] == str(source)
    catalog = load_catalog()
    assert "rust_developer" in catalog and catalog.origin("rust_developer").kind == "user"
    assert ("rust_developer", "Fix my Rust lifetimes") in catalog.extra_examples
    assert catalog.get("rust_developer").version == "1.0"
    router = get_router(catalog=catalog)
    assert "rust_developer" in router.index.expert_ids
    assert router.route("Fix the borrow checker error in my Rust function that mutates a vector").expert == (
        "rust_developer"
    )
    remove_expert("rust_developer")
    assert "rust_developer" not in load_catalog()
    assert not added.directory.exists()


def test_an_added_experts_exam_tasks_join_the_routing_guard_set(tmp_path: Path) -> None:
    from experts.routing.index import GUARD_FILE, load_examples
    from experts.routing.lesson_check import lessons_version

    before = lessons_version(load_catalog())
    add_expert(expert_dir(tmp_path, exam_yaml=EXAM))
    guard = load_examples(load_catalog(), GUARD_FILE)
    assert ("rust_developer", EXAM["tasks"][0]["task"]) in guard and len(guard) > len(EXAM["tasks"])
    assert lessons_version(load_catalog()) != before  # kept lessons are checked again against the grown guard


def test_a_shipped_catalog_named_by_directory_has_no_added_experts(tmp_path: Path) -> None:
    add_expert(expert_dir(tmp_path))
    shipped = load_catalog().directory
    assert "rust_developer" not in load_catalog(shipped)
    assert "rust_developer" in load_catalog(shipped, extras=True)


@pytest.mark.parametrize(
    ("change", "files", "expected"),
    [
        ({"kind": "general"}, {}, "scope.yaml: kind: only general_reasoning may be of kind general"),
        ({"id": "rusty"}, {}, "id: 'rusty' must equal the directory name 'rust_developer'"),
        ({"capability_scope": "one line"}, {}, "capability_scope: has 1 lines"),
        ({"model": {"binding": "true", "model": "nowhere.gguf"}}, {}, "model.model: 'nowhere.gguf' is neither"),
        ({"colour": "red"}, {}, "scope.yaml: colour: Extra inputs are not permitted"),
        ({}, {"exam_yaml": {"expert": "rust_developer", "tasks": []}}, "exam.yaml: tasks: List should have at least 5"),
        ({}, {"exam_yaml": {**EXAM, "expert": "go_developer"}}, "exam.yaml: expert: 'go_developer' is not the expert"),
    ],
)
def test_a_bad_expert_is_refused_at_add_naming_the_file_and_field(
    tmp_path: Path, change: dict[str, Any], files: dict[str, Any], expected: str
) -> None:
    scope = {**RUST_SCOPE, **change}
    directory = tmp_path / "rust_developer"
    expert_dir(tmp_path, {**scope, "id": scope["id"]} if "id" in change else scope, **files)
    if "id" in change:  # the file is named after the wrong id: put it where the directory says
        (tmp_path / "rusty").rename(directory)
    with pytest.raises(ConfigError) as err:
        add_expert(directory)
    assert expected in str(err.value)
    assert not (user_experts_dir() / "rust_developer").exists()


def test_an_id_taken_is_refused_and_replace_makes_a_new_version(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'python_coder' is already an expert \\(shipped\\)"):
        add_expert(expert_dir(tmp_path / "a", {**RUST_SCOPE, "id": "python_coder"}))
    add_expert(expert_dir(tmp_path / "b"))
    with pytest.raises(ConfigError, match="use --replace"):
        add_expert(expert_dir(tmp_path / "c", {**RUST_SCOPE, "version": "2.0"}))
    add_expert(tmp_path / "c" / "rust_developer", replace_existing=True)
    assert load_catalog().get("rust_developer").version == "2.0"
    with pytest.raises(ConfigError, match="shipped with the project"):
        remove_expert("python_coder")


def test_a_broken_file_in_the_users_catalog_names_itself(tmp_path: Path) -> None:
    add_expert(expert_dir(tmp_path))
    (user_experts_dir() / "rust_developer" / "scope.yaml").write_text("id: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="rust_developer/scope.yaml \\(line 2\\): not valid YAML"):
        load_catalog()


def test_a_package_declares_experts_through_its_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    packs = site / "acme_experts_data"
    expert_dir(packs)
    (site / "acme_experts.py").write_text(f"EXPERTS = {str(packs)!r}\n", encoding="utf-8")
    info = site / "acme_experts-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-experts\nVersion: 1.2\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[coe.experts]\nrust = acme_experts:EXPERTS\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    catalog = load_catalog()
    assert "rust_developer" in catalog
    origin = catalog.origin("rust_developer")
    assert (origin.kind, origin.package) == ("package", "acme-experts 1.2")
    with pytest.raises(ConfigError, match="comes from the installed package acme-experts 1.2; pip uninstall it"):
        remove_expert("rust_developer")
    with pytest.raises(ConfigError, match="already an expert \\(package acme-experts 1.2\\)"):
        add_expert(expert_dir(tmp_path / "mine"))

    (site / "acme_experts.py").write_text("EXPERTS = 42\n", encoding="utf-8")
    sys.modules.pop("acme_experts", None)
    (site / "touch").write_text("", encoding="utf-8")  # the directory changes, as pip install changes it
    with pytest.raises(ConfigError, match="entry point rust = acme_experts:EXPERTS .*must give a path"):
        load_catalog()


class CountingEmbedder:
    """Deterministic vectors from a text's hash; counts the texts it embeds."""

    model_id = "counting-test"
    dim = 8

    def __init__(self) -> None:
        self.texts = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).normal(size=self.dim) for t in texts]
        out = np.asarray(rows, dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_adding_an_expert_embeds_only_its_lines(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    cache = ExpertVectorCache(tmp_path / "vectors")
    shipped = load_catalog()
    first = build_index(shipped, embedder, vector_cache=cache)  # type: ignore[arg-type]
    lines = sum(len(s.capabilities) + len(s.exclusions) for s in shipped)
    assert (embedder.texts, first.embedded_experts) == (lines, len(shipped))
    add_expert(expert_dir(tmp_path))
    grown = load_catalog()
    embedder.texts = 0
    second = build_index(grown, embedder, vector_cache=cache)  # type: ignore[arg-type]
    rust = grown.get("rust_developer")
    assert (embedder.texts, second.embedded_experts) == (len(rust.capabilities) + len(rust.exclusions), 1)
    again = build_index(grown, CountingEmbedder(), vector_cache=ExpertVectorCache(None))  # type: ignore[arg-type]
    np.testing.assert_allclose(second.capability.vectors, again.capability.vectors, rtol=1e-6)
    assert second.content_hash != first.content_hash


def test_an_added_expert_leaves_the_shipped_experts_learned_term_as_it_was(tmp_path: Path) -> None:
    shipped = load_catalog()
    first = build_index(shipped, CountingEmbedder())  # type: ignore[arg-type]
    add_expert(expert_dir(tmp_path, examples_txt="Write a Rust function that totals a tax form\n"))
    grown = load_catalog()
    assert base_positions(grown) == list(range(len(shipped))) and grown.ids[: len(shipped)] == shipped.ids
    second = build_index(grown, CountingEmbedder())  # type: ignore[arg-type]
    assert first.probe is not None and second.probe is not None
    assert second.probe.layers.tolist() == [0] * len(shipped) + [1]
    texts = ["Fix my Rust lifetimes", "Draft a clause on patient data", "Write a Python script that renames files"]
    np.testing.assert_allclose(second.probe.scores(texts)[:, : len(shipped)], first.probe.scores(texts), atol=1e-6)
    assert second.probe.logits(["Fix the borrow checker error in my Rust crate"])[0].argmax() == len(shipped)


def failed_record(expert: str, version: str = "1.0") -> ExamRecord:
    return ExamRecord(
        expert=expert,
        version=version,
        model="base model (faux)",
        backend="fake",
        score=0.2,
        bar=0.6,
        passed=False,
        seconds=1.0,
        taken_at="2026-11-28T00:00:00Z",
        tasks=[TaskResult(id="t0", passed=False, failed=["contains: missing 'fn'"])],
    )


def test_an_expert_whose_exam_failed_is_out_of_routing_until_a_new_version(tmp_path: Path) -> None:
    add_expert(expert_dir(tmp_path, exam_yaml=EXAM))
    write_record(failed_record("rust_developer"))
    catalog = load_catalog()
    assert "its exam failed: FAILED 0/1" in catalog.benched["rust_developer"]
    assert "rust_developer" not in get_router(catalog=catalog).index.expert_ids
    assert "rust_developer" in catalog  # still known: a framework may name it, its slot goes to the generalist
    add_expert(expert_dir(tmp_path / "v2", {**RUST_SCOPE, "version": "2.0"}, exam_yaml=EXAM), replace_existing=True)
    assert "rust_developer" not in load_catalog().benched  # the record is of an earlier version


def test_a_failed_shipped_expert_leaves_routing_with_its_routing_examples() -> None:
    write_record(failed_record("sql_specialist", version="1"))
    router = get_router(catalog=load_catalog())
    assert "sql_specialist" not in router.index.expert_ids
    assert router.route("Write a SQL query that joins orders and customers").expert != "sql_specialist"


@pytest.mark.parametrize(
    ("text", "checks", "failures"),
    [
        ("fn add(a: i32) -> i32", {"contains": ["fn", "i32"]}, []),
        ("def add", {"contains": ["fn"]}, ["contains: missing 'fn'"]),
        ("a cat and coffee", {"any_of": ["tea", "coffee"]}, []),
        ("```python\ndef f(x):\n    return x + 1\n```", {"code": "python", "asserts": ["assert f(1) == 2"]}, []),
        ("```python\ndef f(x):\n    return x\n```", {"asserts": ["assert f(1) == 2"]}, ["code (python): Assertion"]),
        ("```sql\nSELECT a FROM t GROUP BY a;\n```", {"code": "sql", "contains": ["GROUP BY"]}, []),
        ("```sql\nSELEC a FRM t;\n```", {"code": "sql"}, ["code (sql): does not parse"]),
        ("```yaml\non: push\njobs: {}\n```", {"code": "yaml"}, []),
        ("```bash\nif [ -d x ]; then echo; fi\n```", {"code": "bash"}, []),
        ("```bash\nif [ -d x ]; then echo\n```", {"code": "bash"}, ["code (bash): bash -n"]),
        ('```bash\ncd /tmp\necho "$1"\n```', {"code": "bash"}, []),  # ShellCheck's style warning is no fault
        ('```bash\necho "$name"\n```', {"code": "bash"}, ["code (bash): shellcheck"]),  # never set
        ("The payment is $1,798.65 a month.", {"number": 1798.65}, []),
        ("The payment is $2,500 a month.", {"number": 1798.65}, ["number: 1798.65 is not stated"]),
        ("no code here", {"code": "json"}, ["code (json): no ```json block"]),
    ],
)
def test_exam_checks_score_the_answer(text: str, checks: dict[str, Any], failures: list[str]) -> None:
    found = exam_failures(text, ExamChecks.model_validate(checks))
    assert len(found) == len(failures), found
    for got, wanted in zip(found, failures, strict=True):
        assert got.startswith(wanted), got


def test_examine_runs_each_task_as_the_experts_slot_and_keeps_the_record(
    tmp_path: Path, write_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_expert(expert_dir(tmp_path, exam_yaml=EXAM))
    good = answer("Add", "```rust\nfn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n```\nIt adds the two numbers.")
    bad = answer("Add", "Adding two numbers is done with the plus operator, which Rust supports natively.")
    rules = [{"title": f"t{i}", "text": good if i < 2 else bad} for i in range(5)]
    monkeypatch.setenv("COE_BACKEND", "fake")
    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": rules})))
    result = runner.invoke(app, ["experts", "examine", "rust_developer"])
    assert result.exit_code == 1, result.output
    assert "pass t0" in result.output and "FAIL t4" in result.output and "contains: missing 'fn'" in result.output
    assert "rust_developer is out of routing until it passes" in result.output
    record = read_record("rust_developer", "1.0")
    assert record is not None and (record.score, record.passed, record.version) == (0.4, False, "1.0")
    assert record.model == "base model (faux)"
    assert "fn add(a: i32, b: i32)" in record.tasks[0].answer and "plus operator" in record.tasks[4].answer
    listing = runner.invoke(app, ["experts", "list"]).output
    assert "OUT OF ROUTING: its exam failed: FAILED 2/5 (0.40 < bar 0.60)" in listing

    rules = [{"title": f"t{i}", "text": good} for i in range(5)]  # fixed: the exam is taken again while benched
    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": rules}, name="fixed.yaml")))
    again = runner.invoke(app, ["experts", "examine", "rust_developer", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["score"] == 1.0
    assert "rust_developer" not in load_catalog().benched


def test_a_framework_naming_a_benched_expert_runs_its_slot_on_the_generalist(tmp_path: Path, write_script: Any) -> None:
    from tests.unit.plan_runs import run_plan

    add_expert(expert_dir(tmp_path, exam_yaml=EXAM))
    write_record(failed_record("rust_developer"))
    slot = {"id": "a", "title": "A", "description": "Add", "expert": "rust_developer"}
    plan = {"id": "p", "title": "P", "slots": [slot]}
    state = run_plan(write_script({"rules": []}), "Write a Rust add function", plan)
    assert state.routing["a"].expert == "general_reasoning"
    assert any("names rust_developer, which is out of routing" in n.message for n in state.notices)


def test_cli_add_list_show_remove(tmp_path: Path) -> None:
    source = expert_dir(tmp_path, exam_yaml=EXAM)
    added = runner.invoke(app, ["experts", "add", str(source), "--no-exam"])
    assert added.exit_code == 0, added.output
    assert "added rust_developer v1.0 (task)" in added.output
    assert "routing: 13 experts, router " in added.output
    assert "exam not taken (--no-exam); take it with: coe experts examine rust_developer" in added.output
    listing = json.loads(runner.invoke(app, ["experts", "list", "--json"]).stdout)
    row = next(r for r in listing["experts"] if r["id"] == "rust_developer")
    assert (row["origin"], row["version"], row["exam"], row["routed"]) == ("user", "1.0", "not examined", True)
    shown = runner.invoke(app, ["experts", "show", "rust_developer"]).output
    assert "version: 1.0, user (" in shown and "exam: not examined" in shown
    bad = runner.invoke(app, ["experts", "add", str(tmp_path / "nowhere")])
    assert bad.exit_code == 2 and "not a directory" in bad.output
    gone = runner.invoke(app, ["experts", "remove", "rust_developer"])
    assert gone.exit_code == 0 and "routing: 12 experts" in gone.output
    shipped = runner.invoke(app, ["experts", "remove", "python_coder"])
    assert shipped.exit_code == 2 and "shipped with the project" in shipped.output


RUST_TEMPLATES = {
    "family": "rust",
    "templates": [
        {
            "id": "rust_crate_with_tests",
            "title": "Rust crate with tests and a README",
            "pattern": "rust crate + tests + docs",
            "description": "Write a small Rust library crate with unit tests and a README that shows its use.",
            "adaptable": {"slot_count": [2, 3], "subtypes": ["library crate", "command-line tool"]},
            "slots": [
                {
                    "id": "crate",
                    "title": "The crate's code",
                    "description": "Write the Rust library code with its public functions and error types.",
                    "expected_outputs": ["complete Rust source"],
                    "expert": "rust_developer",
                },
                {
                    "id": "readme",
                    "title": "README with usage examples",
                    "description": "Write the README: what the crate does, how to add it, usage examples.",
                    "expected_outputs": ["README in Markdown"],
                    "expert": "technical_writer",
                    "deps": ["crate"],
                    "can_reference": ["crate"],
                },
            ],
        }
    ],
}


def test_an_experts_templates_join_the_library_and_a_bad_one_is_refused_at_add(tmp_path: Path) -> None:
    from experts.embedding.factory import get_embedder
    from experts.routing.templates import library

    source = expert_dir(tmp_path)
    (source / "templates").mkdir()
    (source / "templates" / "rust.yaml").write_text(yaml.safe_dump(RUST_TEMPLATES), encoding="utf-8")
    add_expert(source)
    catalog = load_catalog()
    assert catalog.template_dirs == (user_experts_dir() / "rust_developer" / "templates",)
    templates, index = library(catalog.ids, get_embedder(), catalog.template_dirs)
    assert "rust_crate_with_tests" in templates and "code_with_docs" in templates and index is not None
    listed = runner.invoke(app, ["templates", "validate", "--json"])
    assert listed.exit_code == 0 and any("rust.yaml" in f for f in json.loads(listed.stdout)["files"])

    broken = dict(
        RUST_TEMPLATES["templates"][0], slots=[{**RUST_TEMPLATES["templates"][0]["slots"][0], "expert": "go_developer"}]
    )
    bad = expert_dir(tmp_path / "bad")
    (bad / "templates").mkdir()
    (bad / "templates" / "rust.yaml").write_text(
        yaml.safe_dump({"family": "rust", "templates": [broken]}), encoding="utf-8"
    )
    with pytest.raises(
        ConfigError, match=r"rust.yaml: rust_crate_with_tests: slots\[crate\]\.expert: unknown expert 'go_developer'"
    ):
        add_expert(bad, replace_existing=True)


def test_an_experts_own_gguf_is_pinned_by_its_hash(tmp_path: Path) -> None:
    import hashlib

    model = tmp_path / "pack" / "models" / "rust-coder.gguf"  # beside the expert's directory, not inside it
    model.parent.mkdir(parents=True)
    model.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    binding = {"binding": "true", "model": "../models/rust-coder.gguf", "sha256": digest, "fallback": "base"}
    add_expert(expert_dir(tmp_path / "pack", {**RUST_SCOPE, "model": binding}))
    assert load_catalog().get("rust_developer").model.model == str(model.resolve())  # the copy names it where it is

    wrong = {**binding, "sha256": "0" * 64}
    with pytest.raises(ConfigError, match="model.sha256: .*rust-coder.gguf has SHA-256 [0-9a-f]{64}, expected 0000"):
        add_expert(expert_dir(tmp_path / "pack", {**RUST_SCOPE, "model": wrong}), replace_existing=True)
    bundled = {"binding": "true", "model": "qwen2.5-coder-1.5b", "sha256": digest}
    with pytest.raises(ConfigError, match="model.sha256: pins a GGUF file's hash"):
        add_expert(expert_dir(tmp_path / "other", {**RUST_SCOPE, "model": bundled}), replace_existing=True)


def test_cli_add_takes_the_exam_and_exits_1_when_it_fails(
    tmp_path: Path, write_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COE_BACKEND", "fake")
    monkeypatch.setenv("COE_FAKE_SCRIPT", str(write_script({"rules": []})))  # generated answers: no "fn" in them
    added = runner.invoke(app, ["experts", "add", str(expert_dir(tmp_path, exam_yaml=EXAM))])
    assert added.exit_code == 1, added.output
    assert "examining rust_developer ..." in added.output and "FAILED 0/5" in added.output
    assert "rust_developer is out of routing until it passes" in added.output
    assert "rust_developer" in load_catalog().benched
