from pathlib import Path

import pytest

from state.errors import FrameworkError
from state.framework import (
    Framework,
    SlotSpec,
    ancestors,
    critical_path,
    fallback_framework,
    load_framework_file,
    parse_framework,
    title_from_task,
    topological_order,
    validation_errors,
)
from tests.conftest import FIXTURES


def _fw(*slots: dict) -> Framework:
    return Framework(id="t", title="T", slots=[SlotSpec(title=s["id"], description="d", **s) for s in slots])


def test_branchy_fixture_is_valid_and_ordered() -> None:
    fw = load_framework_file(str(FIXTURES / "branchy.yaml"))
    assert topological_order(fw) == ["A", "C", "B", "D"]
    assert ancestors(fw, "D") == {"A", "B", "C"}
    assert critical_path(fw, {"A": 1, "B": 1, "C": 2, "D": 0.5}) == pytest.approx(2.5)


def test_duplicate_ids_are_named() -> None:
    errors = validation_errors(_fw({"id": "a"}, {"id": "a"}))
    assert errors == ["slots: duplicate slot id 'a'"]


def test_unknown_dep_lists_known_ids() -> None:
    (err,) = validation_errors(_fw({"id": "a", "deps": ["zz"]}, {"id": "b"}))
    assert "slots[a].deps: unknown slot 'zz'" in err and "known: a, b" in err


def test_cycle_is_named() -> None:
    errors = validation_errors(_fw({"id": "a", "deps": ["c"]}, {"id": "b", "deps": ["a"]}, {"id": "c", "deps": ["b"]}))
    assert len(errors) == 1
    assert errors[0].startswith("slots: dependency cycle")
    assert all(x in errors[0] for x in ("a", "b", "c"))


def test_reference_must_be_an_ancestor() -> None:
    (err,) = validation_errors(_fw({"id": "a"}, {"id": "b", "can_reference": ["a"]}))
    assert "slots[b].can_reference: 'a' is not an ancestor of 'b'" in err


def test_reference_hint_must_be_referenced() -> None:
    (err,) = validation_errors(_fw({"id": "a"}, {"id": "b", "deps": ["a"], "reference_hints": {"a": ["1"]}}))
    assert "reference_hints: 'a' is not listed in can_reference" in err


def test_self_dependency() -> None:
    errors = validation_errors(_fw({"id": "a", "deps": ["a"]}))
    assert any("cannot depend on itself" in e for e in errors)


def test_parse_errors_name_slot_and_field() -> None:
    with pytest.raises(FrameworkError) as info:
        parse_framework({"title": "x", "slots": [{"id": "s1", "title": "", "description": "d"}]}, "plan.yaml")
    assert "plan.yaml" in str(info.value)
    assert "slots[s1].title" in str(info.value)


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(FrameworkError, match=r"slots\[s1\]\.colour"):
        parse_framework(
            {"id": "x", "title": "x", "slots": [{"id": "s1", "title": "t", "description": "d", "colour": 1}]},
            "f",
        )


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\nslots: [\n  - id: a\n")
    with pytest.raises(FrameworkError) as info:
        load_framework_file(str(bad))
    assert str(bad) in str(info.value) and "line" in str(info.value)


def test_missing_file() -> None:
    with pytest.raises(FrameworkError, match="file not found"):
        load_framework_file("/nonexistent/plan.yaml")


def test_top_level_must_be_mapping() -> None:
    with pytest.raises(FrameworkError, match="expected a mapping"):
        parse_framework(["a"], "list.yaml")


def test_fallback_is_one_valid_slot() -> None:
    fw = fallback_framework("Explain TCP slow start\nin detail")
    assert [s.id for s in fw.slots] == ["answer"]
    assert fw.title == "Explain TCP slow start"
    assert validation_errors(fw) == []


def test_a_long_task_is_titled_up_to_a_words_end() -> None:
    # a real run's title was "# Write a password ... for our 40-person company, and a c..."
    task = (
        "Write a password and access-control policy for our 40-person company, and a checklist IT can use to audit "
        "it every quarter."
    )
    assert title_from_task(task) == "Write a password and access-control policy for our 40-person company, and a..."
    assert title_from_task("Sort   these\nnumbers") == "Sort these"
    long_word = title_from_task("x" * 200)
    assert len(long_word) == 80 and long_word.endswith("...")
    assert all(len(title_from_task("word " * n)) <= 80 for n in range(10, 30))
