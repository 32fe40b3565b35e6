"""Checks that see what a reader sees (issue 39): a text left inside code.

Built from the documents the default install (every expert on Qwen2.5-Coder-0.5B) delivered with every check
passed: the README demo wrote ``is_palindrome`` under "1. Usage" and again under "2. `is_palindrome` function",
then stopped at "If they are equal, the function `"; the mortgage answer showed an "output" its program never
printed and boxed its $2,500.
"""

from __future__ import annotations

import pytest

from engine.slots.checks import CheckContext, check_answer, cut_unfinished_end, ending_check
from engine.slots.contracts import contract_of
from state.framework import Deliverable
from state.outline import parse_output
from state.result import SlotResult

DEMO_TASK = "Write a Python function that checks whether a string is a palindrome"
FUNCTION = (
    "def is_palindrome(s):\n"
    "    # Remove any non-alphanumeric characters and convert to lowercase\n"
    "    cleaned = ''.join(char.lower() for char in s if char.isalnum())\n"
    "    # Check if the cleaned string is equal to its reverse\n"
    "    return cleaned == cleaned[::-1]\n"
)
EXPLANATION = (
    "The `is_palindrome` function takes a string `s` as input. It first removes any non-alphanumeric characters "
    "and converts the string to lowercase. Then it compares the cleaned string with its reverse."
)
DEMO = (
    "## Outline\n1. Usage\n2. `is_palindrome` function\n\n"
    f"## 1. Usage\n```python\n{FUNCTION}```\n\n"
    f"## 2. `is_palindrome` function\n```python\n{FUNCTION}```\n\n"
    f"{EXPLANATION} If they are equal, the function `\n"
)
"""The README demo's answer on the default install, as the 0.5B wrote it."""
CLEAN = f"## Outline\n1. is_palindrome\n\n## 1. is_palindrome\n```python\n{FUNCTION}```\n"


def parsed(text: str, deliverable: Deliverable = "code") -> SlotResult:
    contract = contract_of(deliverable, "python" if deliverable == "code" else None)
    return parse_output(text, "s", "e", min_items=contract.min_items, max_items=contract.max_items)


def checks_of(text: str, deliverable: Deliverable = "code") -> dict[str, tuple[bool, str]]:
    contract = contract_of(deliverable, "python" if deliverable == "code" else None)
    checks, _ = check_answer(parsed(text, deliverable), CheckContext(DEMO_TASK, contract))
    return {c.name: (c.passed, c.detail) for c in checks}


# --- a text left inside code ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (f"{EXPLANATION} If they are equal, the function `", "stops inside an inline code span it opened"),
        ("It strips the text. Then it calls `is_pal", "stops inside an inline code span it opened"),
        ("Here is the code:\n\n```python\ndef f(x):\n    return g(x)", "ends inside a code block it never closed"),
        ("It returns the cleaned text, the one `str.lower()` made", "stops mid-sentence"),
    ],
)
def test_a_text_left_inside_code_does_not_end(text: str, why: str) -> None:
    check = ending_check(text)
    assert not check.passed and why in check.detail


@pytest.mark.parametrize(
    "text",
    [
        "It compares `cleaned` with `cleaned[::-1]`.",
        "Use ``a`b`` for a backtick inside code.",
        "Type the backtick (`) before the name.",  # a stray backtick in a finished sentence
        "Run it with `python main.py`",
        f"```python\n{FUNCTION}```",
    ],
)
def test_a_closed_code_span_or_block_ends_as_before(text: str) -> None:
    assert ending_check(text).passed


def test_the_demos_ending_fails_and_is_cut_back_to_its_last_full_sentence() -> None:
    assert checks_of(DEMO)["contract.ends"][0] is False  # soft for code: the note is cut, not redrawn for
    tail = f"{EXPLANATION} If they are equal, the function `"
    assert cut_unfinished_end(tail) == (EXPLANATION + "\n", "If they are equal, the function `")
    over_lines = "It is short.\nThen it calls `is_pal\nand compares"
    assert cut_unfinished_end(over_lines) == ("It is short.\n", "Then it calls `is_pal\nand compares")
    unclosed = "Here is the code:\n\n```python\ndef f(x):\n    return g(x)"
    assert cut_unfinished_end(unclosed) == (unclosed, None)  # code is never cut
