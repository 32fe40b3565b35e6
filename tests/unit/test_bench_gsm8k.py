"""How the GSM8K benchmark reads an answer: a bare reply's value, and a document's computed result and own text."""

from __future__ import annotations

from bench.bench_gsm8k import bare_value, gold, last_number, split_working

DOCUMENT = """# Answer

## 1. Steps

He gave 8 to Alisha and 27 to Bobby, so he bought 4 + 8 + 27 + 6 = 44 gumballs.

## 2. Computed result

**Result: 45**: printed by this Python program, which qwen2.5-coder-1.5b wrote for the task and the sandbox ran.

```python
print(4 + 8 + 27 + 6)
```

**The answer above does not state this value, and another program printed it too: take 45 as the result.**
"""


def test_a_bare_reply_is_read_at_its_box_else_its_last_number() -> None:
    assert bare_value("So x = 3 and the total is \\boxed{1,798.65} dollars. Check: 2 + 2") == 1798.65
    assert bare_value("The total is $1,250. That is all.") == 1250.0
    assert bare_value("no numbers here") is None and last_number("-4.5 then 7.") == 7.0
    assert gold("4+8+27+6=<<4+8+27+6=45>>45 gumballs.\n#### 1,045") == 1045.0


def test_a_document_splits_at_its_computed_result() -> None:
    text, working = split_working(DOCUMENT)
    assert bare_value(text) == 44.0 and working.startswith("## 2. Computed result")
    assert "does not state this value" in working and split_working("## 1. Steps\n\n3 + 4 = 7") == (
        "## 1. Steps\n\n3 + 4 = 7",
        "",
    )


def test_the_working_section_is_found_first_or_last() -> None:
    first = (
        "# T\n\n## Answer\n\n### 1. Computed result\n\n**Result: 45**\n\n### 2. Answer\n\nSo 44.\n\n"
        "## Warnings\n\n- w\n"
    )
    text, working = split_working(first)
    assert working.startswith("### 1. Computed result") and "**Result: 45**" in working and "So 44." not in working
    assert "So 44." in text and "## Warnings" in text and "Computed result" not in text
    last = "# T\n\n### 1. Answer\n\nSo 44.\n\n### 2. Computed result\n\n**Result: 45**\n"
    assert split_working(last) == ("# T\n\n### 1. Answer\n\nSo 44.\n\n", "### 2. Computed result\n\n**Result: 45**\n")


def test_a_programs_comments_are_not_headings_of_the_document() -> None:
    document = (
        "## Answer\n\n### 1. Computed result\n\n**Result: -60.0**: printed by this program\n\n```python\n"
        "# Initial number of jelly beans\nprint(100 - 160)\n```\n\n**The answer below does not state this value**\n\n"
        "### 2. Calculation\n\nSo \\boxed{36}.\n"
    )
    text, working = split_working(document)
    assert "does not state this value" in working and "print(100 - 160)" in working and "boxed{36}" not in working
    assert bare_value(text) == 36.0
