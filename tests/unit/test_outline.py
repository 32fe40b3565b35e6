"""Tests for the outline parser: the output contract, every way small models break it, and properties."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.outline import (
    MAX_OUTLINE_ITEMS,
    MAX_PROBLEMS,
    MIN_OUTLINE_ITEMS,
    parse_output,
    retry_feedback,
)
from state.result import Section, SlotResult

COMPLIANT = """\
## Outline
1. Token storage
   1.1 Encryption at rest
   1.2 Rotation
2. Login flow
3. Testing

---

## 1. Token storage
Tokens live in a table.

### 1.1 Encryption at rest
AES-GCM with a KMS key.

### 1.2 Rotation
Rotate every 24 hours.

## 2. Login flow
The user posts credentials.

## 3. Testing
Unit and integration tests.
"""


def parse(text: str, attempts: int = 1) -> SlotResult:
    return parse_output(text, "slot_a", "expert_x", attempts)


def labels(result: SlotResult) -> list[str]:
    return [s.label for s in result.sections]


def outline_labels(result: SlotResult) -> list[str]:
    return [i.label for i in result.outline]


def found(result: SlotResult, key: str) -> Section:
    section = result.section(key)
    assert section is not None, key
    return section


def has_problem(result: SlotResult, fragment: str) -> bool:
    return any(fragment in p for p in result.problems)


def doc(outline: str, body: str) -> str:
    return f"## Outline\n{outline}\n\n{body}"


THREE = "1. Storage\n2. API\n3. Testing"


# --- the contract --------------------------------------------------------------------------------------------


def test_compliant_document() -> None:
    r = parse(COMPLIANT)
    assert r.compliant, r.problems
    assert r.problems == []
    assert (r.slot_id, r.expert, r.raw, r.attempts) == ("slot_a", "expert_x", COMPLIANT, 1)
    assert outline_labels(r) == ["1", "1.1", "1.2", "2", "3"]
    assert [i.title for i in r.outline] == [
        "Token storage",
        "Encryption at rest",
        "Rotation",
        "Login flow",
        "Testing",
    ]
    assert [i.level for i in r.outline] == [1, 2, 2, 1, 1]
    assert labels(r) == ["1", "1.1", "1.2", "2", "3"]
    assert [s.level for s in r.sections] == [1, 2, 2, 1, 1]
    assert r.sections[0].body == "Tokens live in a table."
    assert r.sections[1].body == "AES-GCM with a KMS key."
    assert r.sections[4].body == "Unit and integration tests."


def test_separator_is_optional_and_never_part_of_a_body() -> None:
    without = parse(COMPLIANT.replace("---\n\n", ""))
    assert without.compliant, without.problems
    assert without.sections == parse(COMPLIANT).sections
    r = parse(doc(THREE, "## 1. Storage\nA\n\n---\n\n## 2. API\nB\n---\n## 3. Testing\nC\n\n***\n"))
    assert r.compliant, r.problems
    assert [s.body for s in r.sections] == ["A", "B", "C"]


def test_crlf_and_lone_cr_parse_like_lf() -> None:
    lf = parse(COMPLIANT)
    for variant in (COMPLIANT.replace("\n", "\r\n"), COMPLIANT.replace("\n", "\r")):
        r = parse(variant)
        assert r.compliant, r.problems
        assert r.sections == lf.sections
        assert r.outline == lf.outline
        assert r.raw == variant


def test_byte_order_mark_is_ignored() -> None:
    assert parse("\ufeff" + COMPLIANT).compliant


def test_preamble_and_trailing_junk_are_tolerated() -> None:
    text = "Sure! Here is my answer.\n\n" + COMPLIANT + "\nLet me know if you need anything else!\n"
    r = parse(text)
    assert r.compliant, r.problems
    assert r.sections[-1].body == "Unit and integration tests.\n\nLet me know if you need anything else!"


def test_levels_come_from_label_depth_not_from_hashes() -> None:
    body = "# 1. Storage\nA\n#### 1.1 Keys\nB\n## 1.1.1 Rotation\nC\n### 2. API\nD\n## 3. Testing\nE"
    r = parse(doc("1. Storage\n   1.1 Keys\n      1.1.1 Rotation\n2. API\n3. Testing", body))
    assert r.compliant, r.problems
    assert [(s.label, s.level) for s in r.sections] == [("1", 1), ("1.1", 2), ("1.1.1", 3), ("2", 1), ("3", 1)]


def test_closing_hashes_and_trailing_colons_are_dropped_from_titles() -> None:
    r = parse(doc(THREE, "## 1. Storage ##\nA\n## 2. API:\nB\n## 3. Testing #\nC"))
    assert r.compliant, r.problems
    assert [s.title for s in r.sections] == ["Storage", "API", "Testing"]


# --- outline heading variants --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "marker",
    ["# Outline", "### Outline", "## Outline:", "## **Outline**", "## outline", "Outline\n=======", "## Outline ##"],
)
def test_heading_variants_of_the_outline_marker_are_accepted(marker: str) -> None:
    r = parse(COMPLIANT.replace("## Outline", marker, 1))
    assert r.compliant, r.problems
    assert outline_labels(r) == ["1", "1.1", "1.2", "2", "3"]


@pytest.mark.parametrize("marker", ["**Outline**", "**Outline:**", "Outline:", "__Outline__", "*Outline*"])
def test_plain_text_outline_markers_are_parsed_but_flagged(marker: str) -> None:
    r = parse(COMPLIANT.replace("## Outline", marker, 1))
    assert not r.compliant
    assert r.problems == [f"the outline starts with '{marker}', not with a '## Outline' heading"]
    assert outline_labels(r) == ["1", "1.1", "1.2", "2", "3"]
    assert labels(r) == ["1", "1.1", "1.2", "2", "3"]


def test_missing_outline_is_derived_from_numbered_sections() -> None:
    text = "## 1. Storage\nA\n### 1.1 Keys\nB\n## 2. API\nC\n## 3. Testing\nD\n"
    r = parse(text)
    assert not r.compliant
    assert r.problems == ["missing '## Outline' heading"]
    assert [(i.label, i.title, i.level) for i in r.outline] == [
        ("1", "Storage", 1),
        ("1.1", "Keys", 2),
        ("2", "API", 1),
        ("3", "Testing", 1),
    ]
    assert r.outline_text() == "1. Storage\n   1.1. Keys\n2. API\n3. Testing"


def test_numbered_list_without_outline_heading_is_used_as_the_outline() -> None:
    r = parse(THREE + "\n\n## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC")
    assert r.problems == ["missing '## Outline' heading (found a numbered list without it)"]
    assert [i.title for i in r.outline] == ["Storage", "API", "Testing"]


def test_outline_heading_without_a_list() -> None:
    r = parse("## Outline\nI will explain things.\n\n## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC")
    assert has_problem(r, "'## Outline' heading is not followed by a numbered list")
    assert outline_labels(r) == ["1", "2", "3"]  # derived from the sections


def test_outline_written_as_bullets_is_numbered() -> None:
    r = parse(doc("- Storage\n- API\n  - detail\n- Testing", "## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.problems == ["the outline items are bullets; number them 1., 2., 3. (sub-items 1.1, 1.2)"]
    assert [(i.label, i.title) for i in r.outline] == [("1", "Storage"), ("2", "API"), ("3", "Testing")]


def test_outline_written_as_headings_before_the_sections() -> None:
    text = "## Outline\n### 1. Storage\n### 2. API\n### 3. Testing\n\n## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC"
    r = parse(text)
    assert r.problems == ["the outline is written as headings; write it as a numbered list (1., 1.1, 2., ...)"]
    assert outline_labels(r) == ["1", "2", "3"]
    assert [(s.label, s.body) for s in r.sections] == [("1", "A"), ("2", "B"), ("3", "C")]


def test_outline_heading_directly_followed_by_sections() -> None:
    r = parse("## Outline\n## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC")
    assert [(s.label, s.body) for s in r.sections] == [("1", "A"), ("2", "B"), ("3", "C")]
    assert has_problem(r, "not followed by a numbered list")


def test_outline_after_the_sections() -> None:
    r = parse("## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC\n\n## Outline\n" + THREE)
    assert r.problems == ["the '## Outline' must come before the sections"]
    assert [s.body for s in r.sections] == ["A", "B", "C"]
    assert outline_labels(r) == ["1", "2", "3"]


# --- numbering -----------------------------------------------------------------------------------------------


def test_parenthesis_numbering() -> None:
    text = "## Outline\n1) Storage\n   1.1) Keys\n2) API\n3) Testing\n\n"
    text += "## 1) Storage\nA\n### 1.1) Keys\nK\n## 2) API\nB\n## 3) Testing\nC"
    r = parse(text)
    assert r.compliant, r.problems
    assert labels(r) == ["1", "1.1", "2", "3"]
    assert [s.title for s in r.sections] == ["Storage", "Keys", "API", "Testing"]


@pytest.mark.parametrize(
    "heading",
    ["## **1. Storage**", "## **1.** Storage", "## 1. **Storage**", "## 1. *Storage*", "## Section 1: Storage"],
)
def test_emphasis_and_prefixes_around_section_numbers(heading: str) -> None:
    r = parse(doc(THREE, f"{heading}\nA\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.compliant, r.problems
    assert r.sections[0].label == "1"
    assert r.sections[0].title == "Storage"


def test_outline_items_with_bold_titles_and_descriptions() -> None:
    outline = "1. **Storage** - where tokens live\n2. **API**: the endpoints\n3. **Testing**"
    r = parse(doc(outline, "## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.compliant, r.problems
    assert [i.title for i in r.outline] == ["Storage", "API", "Testing"]


@pytest.mark.parametrize("count", [1, 2, 8, 9])
def test_top_level_item_count_outside_three_to_seven(count: int) -> None:
    outline = "\n".join(f"{n}. Part {n}" for n in range(1, count + 1))
    body = "\n".join(f"## {n}. Part {n}\ntext" for n in range(1, count + 1))
    r = parse(doc(outline, body))
    noun = "item" if count == 1 else "items"
    assert r.problems == [f"outline has {count} top-level {noun}; 3-7 required"]


@pytest.mark.parametrize("count", [MIN_OUTLINE_ITEMS, MAX_OUTLINE_ITEMS])
def test_top_level_item_count_at_the_bounds(count: int) -> None:
    outline = "\n".join(f"{n}. Part {n}" for n in range(1, count + 1))
    body = "\n".join(f"## {n}. Part {n}\ntext" for n in range(1, count + 1))
    assert parse(doc(outline, body)).compliant


def test_sub_items_do_not_count_as_top_level() -> None:
    outline = "1. A\n   1.1 A1\n   1.2 A2\n   1.3 A3\n   1.4 A4\n   1.5 A5\n   1.6 A6\n   1.7 A7\n2. B\n3. C"
    body = "## 1. A\n" + "".join(f"### 1.{n} A{n}\nx\n" for n in range(1, 8)) + "## 2. B\nx\n## 3. C\nx"
    r = parse(doc(outline, body))
    assert r.compliant, r.problems


def test_top_level_numbering_must_run_in_order() -> None:
    r = parse(doc("1. Storage\n2. API\n4. Testing", "## 1. Storage\nA\n## 2. API\nB\n## 4. Testing\nC"))
    assert r.problems == ["outline top-level items are numbered 1, 2, 4; number them 1, 2, 3 in order"]


def test_repeated_outline_numbers() -> None:
    r = parse(doc("1. Storage\n1. API\n1. Testing", "## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC"))
    assert "outline item 1 appears 3 times; each number must be used once" in r.problems
    assert outline_labels(r) == ["1"]
    assert has_problem(r, "section 2 'API' is not in the outline")


def test_sub_item_without_parent() -> None:
    r = parse(doc(THREE + "\n   4.1 Extra", "## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC\n### 4.1 Extra\nD"))
    assert r.problems == ["outline item 4.1 'Extra' has no parent item 4"]


def test_sections_out_of_order() -> None:
    r = parse(doc(THREE, "## 2. API\nB\n## 1. Storage\nA\n## 3. Testing\nC"))
    assert r.problems == ["section 1 comes after section 2; keep the outline order"]


def test_repeated_section_number_inside_a_body_stays_text() -> None:
    r = parse(doc(THREE, "## 1. Storage\nA\n## 2. API\nSteps:\n### 1. Install\npip install\n## 3. Testing\nC"))
    assert labels(r) == ["1", "2", "3"]
    assert r.sections[1].body == "Steps:\n### 1. Install\npip install"
    assert r.problems == ["heading '### 1. Install' repeats section number 1; kept it as text of section 2"]


def test_numbers_like_years_are_not_section_labels() -> None:
    r = parse(doc(THREE, "## 1. Storage\nA\n## 2024 roadmap\nplans\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.compliant, r.problems
    assert r.sections[0].body == "A\n## 2024 roadmap\nplans"


# --- matching outline and sections ---------------------------------------------------------------------------


def test_section_title_that_does_not_match_its_outline_item() -> None:
    r = parse(doc(THREE, "## 1. Storage\nA\n## 2. Data model\nB\n## 3. Testing\nC"))
    assert r.problems == ["section 2 'Data model' does not match outline item 2 'API'"]


def test_outline_item_without_section() -> None:
    r = parse(doc(THREE, "## 1. Storage\nA\n## 2. API\nB"))
    assert r.problems == ["outline item 3 'Testing' has no section"]


def test_sub_item_without_section() -> None:
    r = parse(doc("1. Storage\n   1.1 Keys\n2. API\n3. Testing", "## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.problems == ["outline item 1.1 'Keys' has no section"]


def test_section_not_in_outline() -> None:
    r = parse(doc(THREE, "## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC\n## 4. Extras\nD"))
    assert r.problems == ["section 4 'Extras' is not in the outline"]


def test_same_title_under_another_number_does_not_match() -> None:
    r = parse(doc(THREE, "## 1. Storage\nA\n## 3. API\nB\n## 2. Testing\nC"))
    assert "section 3 'API' does not match outline item 3 'Testing'" in r.problems
    assert "section 2 'Testing' does not match outline item 2 'API'" in r.problems


@pytest.mark.parametrize(
    ("item", "heading"),
    [
        ("Token Storage", "token storage"),
        ("Token storage", "Token-Storage!"),
        ("**Token storage**", "*Token storage*"),
        ("Token storage", "Token storage:"),
        ("Token storage", "Token storage and rotation"),
        ("Token storage", "Token storages"),
        ("Token storage layer", "Storage"),
        ("Storage", "Storage - where the tokens live"),
        ("Données chiffrées", "DONNÉES CHIFFRÉES"),
    ],
)
def test_title_matching_is_tolerant(item: str, heading: str) -> None:
    r = parse(doc(f"1. {item}\n2. API\n3. Testing", f"## 1. {heading}\nA\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.compliant, r.problems


def test_empty_leaf_section() -> None:
    outline = "1. Storage\n   1.1 Keys\n2. API\n3. Testing"
    r = parse(doc(outline, "## 1. Storage\n### 1.1 Keys\nK\n## 2. API\n## 3. Testing\nC"))
    assert r.problems == ["section 2 'API' is empty"]


def test_heading_without_title_takes_the_outline_title() -> None:
    r = parse(doc(THREE, "## 1.\nA\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.sections[0].title == "Storage"
    assert r.problems == ["section 1 heading has no title"]


def test_sections_without_numbers_are_matched_to_the_outline() -> None:
    r = parse(doc(THREE, "## Storage\nA\n## API\nB\n### Example\nexample\n## Testing\nC"))
    assert [(s.label, s.title, s.body) for s in r.sections] == [
        ("1", "Storage", "A"),
        ("2", "API", "B\n### Example\nexample"),
        ("3", "Testing", "C"),
    ]
    assert r.problems == [
        "section heading '## Storage' has no number; write '## 1. Storage'",
        "section heading '## API' has no number; write '## 2. API'",
        "section heading '## Testing' has no number; write '## 3. Testing'",
    ]


def test_unnumbered_headings_without_outline_leave_sections_empty() -> None:
    text = "Intro text\n\n## Storage\nA\n\n## API\nB\n"
    r = parse(text)
    assert r.sections == []
    assert r.outline == []
    assert r.problems == [
        "missing '## Outline' heading",
        "no numbered section headings found (expected '## 1. Title', '### 1.1 Title')",
    ]
    assert r.body_text() == text.strip()
    assert r.outline_text() == ""


def test_bold_lines_used_as_section_headings() -> None:
    r = parse(doc(THREE, "**1. Storage**\nA\n\n**2. API**\nB\n\n**3. Testing:**\nC"))
    assert [(s.label, s.title, s.body) for s in r.sections] == [
        ("1", "Storage", "A"),
        ("2", "API", "B"),
        ("3", "Testing", "C"),
    ]
    assert r.problems == [
        "section headings are bold text ('**1. Storage**'); write them as Markdown headings ('## 1. Storage')"
    ]


def test_outline_only_without_sections() -> None:
    r = parse(doc(THREE, "Storage is a table. The API has two endpoints."))
    assert outline_labels(r) == ["1", "2", "3"]
    assert r.sections == []
    assert "no numbered section headings found (expected '## 1. Title', '### 1.1 Title')" in r.problems
    assert has_problem(r, "outline item 1 'Storage' has no section")


# --- code fences ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fence", ["```", "~~~", "````", "```python", "~~~~ text"])
def test_headings_inside_code_fences_are_ignored(fence: str) -> None:
    close = fence.split()[0].rstrip("python")
    code = f"{fence}\n## 2. Not a section\n# Outline\n1. not an item\n{close}"
    r = parse(doc(THREE, f"## 1. Storage\n{code}\nafter\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.compliant, r.problems
    assert labels(r) == ["1", "2", "3"]
    assert r.sections[0].body == f"{code}\nafter"


def test_shorter_or_other_fence_does_not_close_a_block() -> None:
    code = "````\n```\n## 2. Inside\n~~~\n````"
    r = parse(doc(THREE, f"## 1. Storage\n{code}\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.compliant, r.problems
    assert r.sections[0].body == code


def test_inline_triple_backticks_do_not_open_a_fence() -> None:
    r = parse(doc(THREE, "## 1. Storage\n```inline``` code\n## 2. API\nB\n## 3. Testing\nC"))
    assert r.compliant, r.problems


def test_outline_marker_inside_a_fence_is_not_the_outline() -> None:
    r = parse("```\n## Outline\n1. A\n2. B\n3. C\n```\n## 1. Storage\nA\n## 2. API\nB\n## 3. Testing\nC")
    assert "missing '## Outline' heading" in r.problems
    assert [i.title for i in r.outline] == ["Storage", "API", "Testing"]


@pytest.mark.parametrize(
    ("opening", "closing"), [("```markdown", "```"), ("~~~md", "~~~"), ("```", "```"), ("```markdown", "")]
)
def test_answer_wrapped_in_a_markdown_fence_is_unwrapped(opening: str, closing: str) -> None:
    r = parse(f"{opening}\n{COMPLIANT}{closing}\n")
    assert r.problems == [f"the answer is wrapped in a code block ('{opening}'); write plain Markdown"]
    assert r.sections == parse(COMPLIANT).sections
    assert r.outline == parse(COMPLIANT).outline


def test_leading_code_block_is_not_mistaken_for_a_wrapper() -> None:
    text = "```\n# install first\npip install x\n```\n" + COMPLIANT
    r = parse(text)
    assert r.compliant, r.problems


def test_unclosed_fence() -> None:
    r = parse(doc(THREE, "## 1. Storage\nA\n```python\nx = 1\n## 2. API\nB\n## 3. Testing\nC"))
    assert labels(r) == ["1"]
    assert "x = 1\n## 2. API" in r.sections[0].body
    never_closed = "the code block opened on line 8 is never closed, so everything after it is read as code"
    assert r.problems[0] == never_closed
    assert has_problem(r, "outline item 2 'API' has no section")


# --- unusual input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\n\r\n", "\t"])
def test_empty_input(text: str) -> None:
    r = parse(text)
    assert not r.compliant
    assert r.problems == ["output is empty"]
    assert r.sections == []
    assert r.outline == []
    assert r.body_text() == ""
    assert r.outline_text() == ""


def test_unicode_titles_and_lookup() -> None:
    text = doc(
        "1. 数据模型\n2. Schnittstelle für Zugriffe\n3. Тестирование",
        "## 1. 数据模型\n表\n## 2. Schnittstelle für Zugriffe\nREST\n## 3. Тестирование\nтесты 🧪",
    )
    r = parse(text)
    assert r.compliant, r.problems
    assert found(r, "数据模型").body == "表"
    assert found(r, "schnittstelle fur zugriffe").label == "2"
    assert found(r, "тестирование").body == "тесты 🧪"


def test_titles_not_found_do_not_fall_back_to_the_first_section() -> None:
    r = parse(doc("1. 数据模型\n2. 接口\n3. 测试", "## 1. 数据模型\nA\n## 2. 接口\nB\n## 3. 测试\nC"))
    assert r.section("!!!") is None
    assert found(r, "2").title == "接口"


def test_giant_input_is_parsed_quickly() -> None:
    outline = "\n".join(f"{n}. Part {n}" for n in range(1, 6))
    body = "\n".join(f"## {n}. Part {n}\n" + ("lorem ipsum dolor sit amet\n" * 20_000) for n in range(1, 6))
    text = doc(outline, body) + "x" * 1_000_000 + "\n## " + " " * 100_000 + "#" * 50_000 + "\n"
    start = time.perf_counter()
    r = parse(text)
    assert time.perf_counter() - start < 5
    assert r.compliant, r.problems
    assert len(r.sections) == 5


def test_many_problems_are_capped() -> None:
    body = "\n".join(f"## {n}. Extra {n}\ntext" for n in range(1, 60))
    r = parse(doc(THREE, body))
    assert len(r.problems) == MAX_PROBLEMS + 1
    assert re.fullmatch(r"\.\.\. and \d+ more problems", r.problems[-1])


def test_long_titles_are_shortened_in_problems() -> None:
    long = "word " * 50
    r = parse(doc(THREE, f"## 1. Storage\nA\n## 2. {long}\nB\n## 3. Testing\nC"))
    assert has_problem(r, "\u2026' does not match outline item 2 'API'")


@pytest.mark.parametrize(("given", "kept"), [(1, 1), (3, 3), (0, 1), (-5, 1)])
def test_attempts_are_recorded_and_clamped(given: int, kept: int) -> None:
    assert parse(COMPLIANT, attempts=given).attempts == kept


# --- the SlotResult helpers on a parsed answer ---------------------------------------------------------------


def test_section_lookup_by_label_title_and_fuzzy_title() -> None:
    r = parse(COMPLIANT)
    assert found(r, "1.2").title == "Rotation"
    assert found(r, "2.").title == "Login flow"
    assert found(r, "login flow").label == "2"
    assert found(r, "1.1 Encryption at rest").label == "1.1"
    assert found(r, "Encryption at rst").label == "1.1"
    assert found(r, "Testing").label == "3"
    assert found(r, "**Rotation**").label == "1.2"
    assert r.section("9") is None
    assert r.section("Quantum chromodynamics") is None


def test_section_text_includes_sub_sections() -> None:
    r = parse(COMPLIANT)
    assert r.section_text("1") == (
        "## 1. Token storage\n\nTokens live in a table.\n\n"
        "### 1.1 Encryption at rest\n\nAES-GCM with a KMS key.\n\n"
        "### 1.2 Rotation\n\nRotate every 24 hours."
    )
    assert r.section_text("Login flow") == "## 2. Login flow\n\nThe user posts credentials."
    assert r.section_text("nothing like it") is None


def test_outline_text_and_body_text() -> None:
    r = parse(COMPLIANT)
    assert r.outline_text() == (
        "1. Token storage\n   1.1. Encryption at rest\n   1.2. Rotation\n2. Login flow\n3. Testing"
    )
    assert r.body_text().startswith("## 1. Token storage\n\nTokens live in a table.\n\n### 1.1 Encryption")
    assert "## Outline" not in r.body_text()


# --- retry feedback ------------------------------------------------------------------------------------------


def test_retry_feedback_lists_problems_outline_and_structure() -> None:
    r = parse(doc(THREE, "## 1. Storage\nA\n## 2. Data model\nB"))
    text = retry_feedback(r)
    assert "did not follow the required output structure" in text
    assert "- section 2 'Data model' does not match outline item 2 'API'" in text
    assert "- outline item 3 'Testing' has no section" in text
    assert "1. Storage\n2. API\n3. Testing" in text
    assert "<" not in text  # nothing a small model could copy as a title


def test_retry_feedback_without_outline() -> None:
    text = retry_feedback(parse("just prose"))
    assert "- missing '## Outline' heading" in text
    assert "Your outline was" not in text


def test_retry_feedback_for_a_compliant_result_has_no_problem_list() -> None:
    text = retry_feedback(parse(COMPLIANT))
    assert "did not follow" not in text


# --- properties ----------------------------------------------------------------------------------------------

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéßжλ中文ü"
word = st.text(alphabet=LETTERS, min_size=1, max_size=8)
title = st.builds(
    lambda first, rest: first + "".join(sep + w for sep, w in rest),
    word,
    st.lists(st.tuples(st.sampled_from([" ", " - ", ", ", " / ", " & ", " ("]), word), max_size=3),
)
paragraph = st.lists(word, min_size=1, max_size=6).map(" ".join)
code_line = st.one_of(
    paragraph,
    st.sampled_from(["## 2. Not a heading", "# Outline", "1. not an item", "---", "**1. Bold**", "## Outline"]),
)
code_block = st.builds(
    lambda fence, info, lines: f"{fence}{info}\n" + "\n".join(lines) + f"\n{fence}",
    st.sampled_from(["```", "~~~", "````"]),
    st.sampled_from(["", "python", "bash"]),
    st.lists(code_line, max_size=4),
)
block = st.one_of(
    paragraph,
    code_block,
    st.lists(paragraph, min_size=1, max_size=3).map(lambda ps: "\n".join(f"- {p}" for p in ps)),
    st.lists(paragraph, min_size=1, max_size=3).map(lambda ps: "\n".join(f"{n}. {p}" for n, p in enumerate(ps, 1))),
)
body = st.lists(block, min_size=1, max_size=2).map("\n\n".join)


@st.composite
def outline_tree(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """(label, title, body) in document order; leaves always have a body."""
    nodes: list[tuple[str, str, str]] = []

    def add(label: str, depth: int) -> None:
        children = draw(st.integers(0, 3 - depth)) if depth < 3 and draw(st.booleans()) else 0
        text = draw(body) if children == 0 or draw(st.booleans()) else ""
        nodes.append((label, draw(title), text))
        for n in range(1, children + 1):
            add(f"{label}.{n}", depth + 1)

    for n in range(1, draw(st.integers(MIN_OUTLINE_ITEMS, MAX_OUTLINE_ITEMS)) + 1):
        add(str(n), 1)
    return nodes


@st.composite
def compliant_document(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, str]]]:
    nodes = draw(outline_tree())
    close = draw(st.sampled_from([".", ")"]))
    lines = ["## Outline"]
    for label, name, _ in nodes:
        depth = label.count(".")
        lines.append(f"{'   ' * depth}{label}{close if depth == 0 else ''} {name}")
    parts = ["\n".join(lines)]
    if draw(st.booleans()):
        parts.append("---")
    gap = draw(st.sampled_from(["\n", "\n\n"]))
    for label, name, text in nodes:
        depth = label.count(".")
        head = f"{'#' * (depth + 2)} {label}{close if depth == 0 else ''} {name}"
        parts.append(f"{head}{gap}{text}" if text else head)
    text = "\n\n".join(parts) + "\n"
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text, nodes


messy_line = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "", "---", "***", "```", "~~~", "````", "```python", "=====", "Outline:", "**Outline**"]),
    st.builds(
        lambda hashes, lab, sep, name: f"{hashes} {lab}{sep} {name}",
        st.sampled_from(["#", "##", "###", "####", "#######", ""]),
        st.sampled_from(["1", "2", "3", "1.1", "1.2", "2.1", "4", "10", "1.1.1", "**1.**", "Section 2", "Outline"]),
        st.sampled_from(["", ".", ")", ":"]),
        st.one_of(title, st.text(max_size=10)),
    ),
    st.builds(
        lambda indent, lab, name: f"{indent}{lab} {name}",
        st.sampled_from(["", "   ", "- ", "  * "]),
        st.sampled_from(["1.", "2.", "3)", "1.1", "2.1.", "**1.**", "-", "7."]),
        title,
    ),
)
messy_document = st.builds(
    lambda lines, newline: newline.join(lines),
    st.lists(messy_line, max_size=40),
    st.sampled_from(["\n", "\r\n", "\r"]),
)


def check_invariants(r: SlotResult) -> None:
    assert r.compliant == (not r.problems)
    assert len(r.problems) <= MAX_PROBLEMS + 1
    for items in (r.outline, r.sections):
        found = [i.label for i in items]
        assert len(found) == len(set(found))
        for i in items:
            assert re.fullmatch(r"\d+(\.\d+)*", i.label)
            assert i.level == i.label.count(".") + 1
    if r.compliant:
        top = [i for i in r.outline if i.level == 1]
        assert MIN_OUTLINE_ITEMS <= len(top) <= MAX_OUTLINE_ITEMS
        assert {s.label for s in r.sections} == {i.label for i in r.outline}
    assert isinstance(r.body_text(), str)
    assert isinstance(r.outline_text(), str)
    assert isinstance(retry_feedback(r), str)


def render(r: SlotResult) -> str:
    return f"## Outline\n\n{r.outline_text()}\n\n{r.body_text()}\n"


def assert_stable(r: SlotResult) -> None:
    if not r.sections:
        return
    again = parse(render(r))
    assert again.sections == r.sections
    assert again.outline == r.outline
    assert parse(render(again)).sections == again.sections


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    r = parse(text)
    check_invariants(r)
    assert r.raw == text


@settings(max_examples=300, deadline=None)
@given(messy_document)
def test_never_raises_on_heading_soup_and_rendering_back_is_stable(text: str) -> None:
    r = parse(text)
    check_invariants(r)
    assert_stable(r)


@settings(max_examples=100, deadline=None)
@given(compliant_document())
def test_generated_compliant_documents_parse_as_compliant(case: tuple[str, list[tuple[str, str, str]]]) -> None:
    text, nodes = case
    r = parse(text)
    assert r.compliant, r.problems
    assert [(i.label, i.title) for i in r.outline] == [(label, name) for label, name, _ in nodes]
    assert [(s.label, s.title, s.body) for s in r.sections] == [
        (label, name, text.strip()) for label, name, text in nodes
    ]
    assert_stable(r)
    for label, name, _ in nodes:
        found = r.section(label)
        assert found is not None and found.title == name


@settings(max_examples=100, deadline=None)
@given(messy_document)
def test_line_endings_do_not_change_the_parse(text: str) -> None:
    lf = parse(text.replace("\r\n", "\n").replace("\r", "\n"))
    crlf = parse(text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\r\n"))
    assert (crlf.outline, crlf.sections, crlf.problems) == (lf.outline, lf.sections, lf.problems)


def test_fuzzy_lookup_prefers_whole_word_containment_over_spelling_similarity() -> None:
    r = parse_output(
        "## Outline\n1. Token storage\n2. API\n3. Testing\n\n"
        "## 1. Token storage\nT\n\n## 2. API\nA\n\n## 3. Testing\nX\n",
        "s",
        "e",
    )
    found = r.section("Testing strategy")
    assert found is not None and found.label == "3"
    found = r.section("storage")
    assert found is not None and found.label == "1"


def test_a_title_that_writes_its_own_number_again_loses_it() -> None:
    """2026-12-07, a landlord email on the 0.5B: its sections rendered as "1. 1: Introduction", "2. 2: Overview"."""
    r = parse_output(
        "## Outline\n1. 1: Introduction\n2. 2: Overview\n3. 3\\. Steps\n\n## 1. 1: Introduction\nDear Sam.\n\n"
        "## 2. 2: Overview\nThe tap drips.\n\n## 3. 3\\. Steps\nFix it.\n",
        "s",
        "e",
    )
    assert [(i.label, i.title) for i in r.outline] == [("1", "Introduction"), ("2", "Overview"), ("3", "Steps")]
    assert [s.title for s in r.sections] == ["Introduction", "Overview", "Steps"] and r.compliant, r.problems
    kept = parse_output("## Outline\n1. 2024: A review\n\n## 1. 2024: A review\nIt was a year.\n", "s", "e")
    assert [s.title for s in kept.sections] == ["2024: A review"]  # another number is the title's own


def test_a_note_written_into_its_heading_opens_its_body() -> None:
    """2026-12-07, a SQL answer on the 1.5B: "2. Usage: This query finds ... the salary of a", then "manager. ..."."""
    heading = "Usage: This query finds employees who have a salary greater than the salary of a"
    r = parse_output(
        f"## Outline\n1. Query\n2. {heading}\n\n## 1. Query\n```sql\nSELECT 1;\n```\n\n## 2. {heading}\n"
        "manager. The result includes the employee's ID, name, and salary.\n",
        "s",
        "e",
        min_items=1,
        max_items=2,
    )
    assert [(i.label, i.title) for i in r.outline] == [("1", "Query"), ("2", "Usage")] and r.compliant, r.problems
    usage = r.section("2")
    assert usage is not None and usage.title == "Usage"
    assert usage.body.startswith("This query finds employees who have a salary greater than the salary of a manager.")
    short = parse_output("## Outline\n1. Note: keep it short\n\n## 1. Note: keep it short\nText here.\n", "s", "e")
    assert [s.title for s in short.sections] == ["Note: keep it short"]  # a label and a short title stay a title
