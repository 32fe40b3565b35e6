"""The answer's quality machinery on hand-made outputs: contract rules, checks that run code, best-of-N.

Best-of-N runs :func:`engine.slots.run.run_slot` against a scripted backend that answers each draw with the next
text of its script, so every candidate, its score and the choice can be asserted exactly.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from engine.artifacts import code_artifacts
from engine.slots.checks import CheckContext, check_answer, cut_unfinished_end, extract_examples
from engine.slots.checks.code import module_code
from engine.slots.checks.prose import speaks_as_ai_check
from engine.slots.contracts import contract_for, contract_of, infer_deliverable
from engine.slots.draw_policy import RUNNABLE_EXAMPLES_DRAWS
from engine.slots.inline_arithmetic import compute, compute_all
from engine.slots.job import SlotJob
from engine.slots.prompt import build_messages, fit_prompt, plain_result, wrap_plain
from engine.slots.run import run_slot
from engine.slots.selection import best, score
from state.context import resolve_settings
from state.framework import Deliverable, Framework, SlotSpec
from state.outline import parse_output
from state.quality import CandidateRecord, CheckResult, SlotQuality
from state.settings import Settings
from tests.unit.plan_runs import answer, run_plan
from tests.unit.scripted import Scripted

PALINDROME_TASK = (
    "Write a Python function is_palindrome(text) that checks whether a string is a palindrome.\n"
    ">>> is_palindrome('racecar')\nTrue\n>>> is_palindrome('abc')\nFalse\n"
)
GOOD_CODE = (
    "## Outline\n1. Palindrome check\n\n## 1. Palindrome check\n```python\n"
    "def is_palindrome(text: str) -> bool:\n    return text == text[::-1]\n```\n"
)
WRONG_CODE = (
    "## Outline\n1. Palindrome check\n\n## 1. Palindrome check\n```python\n"
    "def is_palindrome(text: str) -> bool:\n    return True\n```\n"
)
BROKEN_CODE = (
    "## Outline\n1. Palindrome check\n\n## 1. Palindrome check\n```python\n"
    "def is_palindrome(text: str) -> bool\n    return text == text[::-1]\n```\n"
)


def failed(text: str, task: str, deliverable: Deliverable = "prose", language: str | None = None) -> dict[str, str]:
    contract = contract_of(deliverable, language)
    result = parse_output(text, "s", "e", min_items=contract.min_items, max_items=contract.max_items)
    checks, _ = check_answer(result, CheckContext(task, contract))
    return {c.name: c.detail for c in checks if c.severity == "hard" and not c.passed}


# --- contract rules -----------------------------------------------------------------------------------------


def prose(*sections: tuple[str, str]) -> str:
    outline = "\n".join(f"{n}. {title}" for n, (title, _) in enumerate(sections, 1))
    bodies = "\n\n".join(f"## {n}. {title}\n{body}" for n, (title, body) in enumerate(sections, 1))
    return f"## Outline\n{outline}\n\n{bodies}\n"


PARAGRAPH_A = "Caching keeps the hot rows of the catalogue in memory, so most reads never reach the database."
PARAGRAPH_B = "Invalidation runs on every write: the service deletes the cached row before it commits the change."
TASK = "Explain how our product catalogue service should cache its reads"


def test_a_clean_prose_answer_passes_every_hard_check() -> None:
    assert failed(prose(("Caching reads", PARAGRAPH_A), ("Invalidation", PARAGRAPH_B)), TASK) == {}


def test_a_stub_section_fails() -> None:
    bad = failed(prose(("Caching reads", PARAGRAPH_A), ("Invalidation", "TODO")), TASK)
    assert "contract.stubs" in bad and "2" in bad["contract.stubs"]
    placeholder = failed(
        prose(("Caching reads", PARAGRAPH_A), ("Invalidation", PARAGRAPH_B + " [insert details]")), TASK
    )
    assert "placeholder" in placeholder["contract.stubs"]


def test_a_section_that_ends_announcing_what_never_comes_fails() -> None:
    # numeric_heldout_first's NPV: section 2 gave the formula, then "Given:", and section 3 began; every check passed
    npv = "Please determine the net present value at 8%: outlay 50,000; inflows 15,000, 18,000, 20,000 and 22,000."
    formula = "The net present value discounts each year's inflow at 8% and subtracts the outlay."
    bad = failed(prose(("NPV formula", f"{formula}\n\nGiven:"), ("Cash flows", PARAGRAPH_B)), npv)
    assert "section 1 'NPV formula' ends announcing what never comes ('Given:')" in bad["contract.stubs"]
    bold = failed(prose(("NPV formula", f"{formula}\n\n3. **Year 3:**"), ("Cash flows", PARAGRAPH_B)), npv)
    assert "ends announcing what never comes ('3. **Year 3:**')" in bold["contract.stubs"]  # the colon in the bold
    opened = failed(prose(("NPV formula", f"{formula}\n\\["), ("Cash flows", PARAGRAPH_B)), npv)
    assert "section 1 'NPV formula' ends inside a formula it never closes" in opened["contract.stubs"]
    shown = (
        f"{formula} In Python:\n\n```python\nprint(-50000 + sum(c / 1.08**t for t, c in enumerate([15000], 1)))\n```"
    )
    assert "contract.stubs" not in failed(prose(("NPV formula", shown), ("Cash flows", PARAGRAPH_B)), npv)
    closed = f"{formula}\n\\[ NPV = -50000 + \\sum_t CF_t / 1.08^t \\]"
    assert "contract.stubs" not in failed(prose(("NPV formula", closed), ("Cash flows", PARAGRAPH_B)), npv)
    # a download time on the 1.5B (2026-11-29): section 2 stopped inside its second display formula, no result
    cut = f"{formula}\n\\[\n12.4 GB = 12,400 MB\n\\]\nThen the speed:\n\\[\n75 Mbps = 75,000,000 bps"
    cut_off = failed(prose(("NPV formula", PARAGRAPH_A), ("Download time", cut)), npv)
    assert (
        "section 2 'Download time' ends inside a formula it never closes ('75 Mbps = 75,000,000 bps')"
        in (cut_off["contract.stubs"])
    )


def test_a_duplicated_section_fails() -> None:
    bad = failed(prose(("Caching reads", PARAGRAPH_A), ("Cached reads", PARAGRAPH_A)), TASK)
    assert bad["contract.duplicates"] == "sections 1 and 2 say the same"


def test_an_answer_that_asks_back_instead_of_answering_fails() -> None:
    asks = "Sure, I'd be happy to help! Please provide me with the details of the endpoint you would like to analyze."
    bad = failed(prose(("Threats", asks)), "Make a table of the main threats to a public file-upload endpoint.")
    assert "asks the person for details instead of answering" in bad["contract.answers"]
    done = PARAGRAPH_A + " " + PARAGRAPH_B + " " + " ".join(["Reads are served from memory."] * 8)
    fine = failed(prose(("Caching", done + " Please provide more details if your catalogue differs.")), TASK)
    assert "contract.answers" not in fine  # a long answer that did the work may still offer to go on


def test_a_section_titled_with_the_task_fails() -> None:
    bad = failed(prose((TASK, PARAGRAPH_A), ("Invalidation", PARAGRAPH_B)), TASK)
    assert "repeats the task as its title" in bad["contract.titles"]


def test_a_list_that_stops_on_a_label_after_items_with_bodies_fails() -> None:
    """multipart_new8, mp-uk-tax: the explanation of the bands stopped on the third band's label."""
    bands = (
        "The bands for 2024/25 are:\n\n1. **Band 1: £0 to £12,570**\n   - Tax rate: 0%\n\n"
        "2. **Band 2: £12,571 to £50,270**\n   - Tax rate: 20%\n\n3. **Band 3: £50,271 to £125,140**"
    )
    stopped = failed(prose(("Caching reads", PARAGRAPH_A), ("Bands", bands)), TASK)
    assert "stops mid-sentence" in stopped["contract.ends"]
    labels = "Three parts:\n\n1. **Reads**\n2. **Writes**\n3. **Expiry**"  # a list of labels is a list
    assert "contract.ends" not in failed(prose(("Caching reads", PARAGRAPH_A), ("Parts", labels)), TASK)


def test_a_python_block_that_breaks_off_fails_whatever_the_answer_delivers() -> None:
    """multipart_set2_first, mp2-gym-bookings: the schema part's usage script stopped inside its query string."""
    schema = "```sql\nCREATE TABLE classes (class_id INTEGER PRIMARY KEY, capacity INTEGER NOT NULL);\n```"
    usage = 'This script prints the occupancy.\n\n```python\nquery = """\n    SELECT c.class_name\n    ORDER BY\n```'
    text = f"## Outline\n1. Tables\n2. Usage\n\n## 1. Tables\n{schema}\n\n## 2. Usage\n{usage}\n"
    bad = failed(text, "Give me the tables for a gym in SQLite.", "code", "sql")
    assert "a Python block breaks off (unterminated triple-quoted string literal" in bad["contract.ends"]
    whole = usage.replace("    ORDER BY\n", '    ORDER BY 1\n"""\n')
    assert "contract.ends" not in failed(text.replace(usage, whole), "Give me the tables.", "code", "sql")


def test_an_answer_cut_mid_sentence_fails_for_prose() -> None:
    bad = failed(prose(("Caching reads", PARAGRAPH_A), ("Invalidation", PARAGRAPH_B + " Then the service")), TASK)
    assert "stops mid-sentence" in bad["contract.ends"]
    announced = prose(("Caching reads", PARAGRAPH_A), ("Example", "- Suppose the catalogue holds these rows:"))
    assert "contract.ends" in failed(announced, TASK)  # what it announced never came (the review set's README)


def test_a_leaked_delimiter_and_degenerate_repetition_fail() -> None:
    leaked = failed(prose(("Caching reads", PARAGRAPH_A + '\n<reference part="x">')), TASK)
    assert "contract.leaks" in leaked
    feedback = "The outline was (keep it if it is right, fix it if a problem above concerns it):\n1. Steps."
    assert "contract.leaks" in failed(prose(("Caching reads", PARAGRAPH_A + "\n" + feedback)), TASK)
    named = PARAGRAPH_A + " Each item is prioritised: contract.duplicates, contract.placeholders, prose.repetition."
    assert "contract.duplicates" in failed(prose(("Caching reads", named)), TASK)["contract.leaks"]
    code = "```python\nimport contract\nprint(contract.duplicates)\n```"  # a name in code is code
    assert "contract.leaks" not in failed(prose(("Caching reads", PARAGRAPH_A + "\n" + code)), TASK)
    looping = failed(prose(("Caching reads", " ".join([PARAGRAPH_A] * 4))), TASK)
    assert "repeated 4 times" in looping["prose.repetition"]
    # prose wrapped in a text fence is still prose (a real policy slot looped inside a ```plaintext block)
    fenced = "```plaintext\n" + " ".join([PARAGRAPH_A] * 4) + "\n```"
    assert "repeated 4 times" in failed(prose(("Caching reads", fenced)), TASK)["prose.repetition"]
    output = "```text\n" + "\n".join(["GET /catalogue 200 from the cache in 2 ms"] * 4) + "\n```"
    code = f"## Outline\n1. Cache\n\n## 1. Cache\n```python\nCACHE = {{}}\n```\nIt prints:\n{output}\n"
    assert "prose.repetition" not in failed(code, "Write a cache in Python.", "code", "python")  # a program's output


def test_an_answer_that_repeats_its_personas_lines_fails() -> None:
    persona = (
        "You are a security architect.\nYou MAY:\n"
        "- Review designs and code snippets for vulnerabilities and propose mitigations\n"
        'When a part needs other expertise, say: "This requires [X] expertise, not security expertise."'
    )
    contract = contract_of("prose", None)

    def leaks(text: str) -> str | None:
        result = parse_output(text, "s", "e", min_items=contract.min_items, max_items=contract.max_items)
        checks, _ = check_answer(result, CheckContext(TASK, contract, persona=persona))
        return next(c.detail for c in checks if c.name == "contract.leaks") or None

    titled = prose(("Password rules", PARAGRAPH_A), ("Review designs and code snippets for vulnerabilities and "
                   "propose mitigations", PARAGRAPH_B))  # fmt: skip
    assert "review designs and code snippets" in (leaks(titled) or "")
    said = "As a security architect: this requires legal expertise, not security expertise. " + PARAGRAPH_B
    assert leaks(prose(("Password rules", PARAGRAPH_A), ("Scope", said))) is None  # what the persona asks to say


def test_an_answer_that_writes_the_feedback_it_was_given_as_its_content_fails() -> None:
    """bench/results/multipart_new8.json, mp-add-column: the changelog part written again after a completion round."""
    task = (
        "Write the SQL migration that adds a nullable loyalty_tier column to customers and backfills it from total "
        "spend, the matching change to our SQLAlchemy Customer model, and a changelog entry."
    )
    told = (
        "An earlier answer to this part failed these checks: contract.placeholders: the answer copies the "
        "protocol's example placeholder ('{{ASSIST:expert:domain:the question}}'); name the fact that is missing, "
        "or leave the placeholder out. Write it so that they pass."
    )
    contract = contract_of("prose", None)

    def leaks(text: str, feedback: tuple[str, ...] = (told,)) -> str | None:
        result = parse_output(text, "s", "e", min_items=contract.min_items, max_items=contract.max_items)
        ctx = CheckContext(task, contract, asked="Write a changelog entry", feedback=feedback)
        checks, _ = check_answer(result, ctx)
        return next(c.detail for c in checks if c.name == "contract.leaks") or None

    echoed = (
        "This migration introduces a new column `loyalty_tier` to the `customers` table.\n\nThe changelog entry "
        "includes:\n- A description of the new column `loyalty_tier`\n- A name of the fact that is missing, or leave "
        "it out\n- A placeholder for the previous answer to this part"
    )
    assert "the fact that is missing or leave" in (leaks(prose(("Changelog entry", echoed))) or "")
    assert leaks(prose(("Changelog entry", echoed)), feedback=()) is None  # told nothing, it repeats nothing
    # what the feedback quotes, and what the task says too, are not the feedback's own wording
    quoting = "An outline item 'Backfill the loyalty_tier column from total spend' has no section; write it."
    written = prose(("Backfill the loyalty_tier column from total spend", PARAGRAPH_A))
    assert leaks(written, feedback=(quoting,)) is None
    # nor the outline a retry gives back to keep (multipart_set2_first, mp2-password-rules: five draws failed it)
    title = "Backfill the loyalty tier from each customer's spend in the last year"
    kept = f"Your outline was (keep it if it is right, fix it if a problem above concerns it):\n1. {title}"
    assert leaks(prose((title, PARAGRAPH_A)), (kept,)) is None


def test_an_answer_that_is_its_own_prompt_fails() -> None:
    """bench/results/multipart_new8.json, mp-consulting-contract: the "Assembled contract" part was its prompt."""
    echoed = (
        "The overall task (for context only; answer only your part):\nDraft a consulting agreement for 12 days of "
        "work.\n\nYour part: Assembled contract ready for signature\nCombine the clauses into one consistent "
        "contract.\n\nYour answer must include:\n- complete contract text\n- signature blocks"
    )
    leaked = failed(prose(("Assembled contract", echoed)), TASK)["contract.leaks"]
    assert "the overall task (for context only; answer only your part):" in leaked
    own = "The contract text below has one schedule. " + PARAGRAPH_A  # the prompt's words, not its lines
    assert "contract.leaks" not in failed(prose(("Assembled contract", own)), TASK)


def test_a_part_whose_code_is_a_referenced_parts_copied_fails() -> None:
    """multipart_new8, mp-recipe-scaler: the tests part the round added wrote the class again, and no test."""
    scaler = (
        "```python\nclass RecipeScaler:\n    def __init__(self, recipe, servings):\n        self.recipe = recipe\n"
        "        self.servings = servings\n```\n"
    )
    reference = f"## Outline\n1. Class\n\n## 1. Class\n{scaler}It scales a recipe."
    copied = f"## Outline\n1. Tests\n\n## 1. Tests\n{scaler}\nUse it as above."
    contract = contract_of("code", "python")

    def own_work(text: str) -> str:
        result = parse_output(text, "s", "e", min_items=contract.min_items, max_items=contract.max_items)
        checks, _ = check_answer(result, CheckContext("Write pytest tests for it.", contract, (reference,)))
        return next(c.detail for c in checks if c.name == "contract.own_work")

    assert "copied block for block" in own_work(copied)
    tests = (
        "```python\nfrom recipes import RecipeScaler\n\ndef test_scale():\n"
        "    assert RecipeScaler({}, 2).servings == 2\n```\n"
    )
    assert own_work(copied.replace("Use it as above.", tests)) == ""  # its own tests beside the copy


def test_a_title_that_copies_the_output_structures_wording_fails() -> None:
    copied = failed(prose(("`## Outline`", PARAGRAPH_A), ("Code block holding the complete code", PARAGRAPH_A)), TASK)
    assert "output structure's own wording ('`## Outline`')" in copied["contract.titles"]
    assert "contract.titles" not in failed(prose(("Course outline and goals", PARAGRAPH_A)), TASK)


def test_the_protocols_example_placeholder_copied_as_written_fails() -> None:
    copied = failed(prose(("Caching reads", PARAGRAPH_A + " Ask {{ASSIST:user:the detail}}.")), TASK)
    assert "the detail" in copied["contract.placeholders"] and "contract.leaks" not in copied
    real = failed(prose(("Caching reads", PARAGRAPH_A + " Ask {{ASSIST:user:the cache size}}.")), TASK)
    assert "contract.placeholders" not in real
    # 2026-12-07, a landlord email on the 0.5B: four bracketed copies, which no resolver reads, ended the email
    squared = PARAGRAPH_A + "\n\n[[ASSIST:lookup:the fact]]\n[[ASSIST:user:the landlord's name]]"
    assert "[[ASSIST:lookup:the fact]]" in failed(prose(("Caching reads", squared)), TASK)["contract.placeholders"]


def test_copying_a_referenced_slot_fails_own_work() -> None:
    reference = " ".join(f"Sentence number {n} of the requirements says something specific." for n in range(6))
    contract = contract_of("prose")
    result = parse_output(prose(("Requirements again", reference)), "s", "e")
    checks, signals = check_answer(result, CheckContext(TASK, contract, references=(reference,)))
    own = next(c for c in checks if c.name == "contract.own_work")
    assert not own.passed and signals["copied_from_references"] == 1.0


# --- checks that run the code -------------------------------------------------------------------------------


def test_the_tasks_examples_are_run_against_the_code() -> None:
    assert extract_examples(PALINDROME_TASK).count == 2
    assert failed(GOOD_CODE, PALINDROME_TASK, "code", "python") == {}
    assert "python.examples" in failed(WRONG_CODE, PALINDROME_TASK, "code", "python")
    assert "python.parses" in failed(BROKEN_CODE, PALINDROME_TASK, "code", "python")


def test_a_module_written_over_two_sections_is_one_module() -> None:
    """multipart_set4_first, mp4-version-compare: ``python.defines`` said latest_version was not defined (it was,
    in section 2), and the NameError in it, a helper nested in compare_versions, was never run."""
    task = "Write versions.py with compare_versions(a, b) and latest_version(versions)"
    answer = (
        "## Outline\n1. compare_versions\n2. latest_version\n\n## 1. compare_versions\n```python\n"
        "def compare_versions(a, b):\n    def parse_version(v):\n        return [int(p) for p in v.split('.')]\n"
        "    x, y = parse_version(a), parse_version(b)\n    return (x > y) - (x < y)\n```\n\n"
        "## 2. latest_version\n```python\ndef latest_version(versions):\n"
        "    return max(versions, key=lambda v: parse_version(v))\n```\n\n"
        "Example:\n```python\nprint(compare_versions('1.2', '1.10'))\n```\n"
    )
    result = parse_output(answer, "s", "e", min_items=1, max_items=8)
    code, tests = module_code(result)
    assert code is not None and "def latest_version" in code and "print(" not in code and tests is None
    found = failed(answer, task + ":\nlatest_version(['1.2', '1.10']) == '1.10'\n", "code", "python")
    assert "python.defines" not in found
    assert "NameError: name 'parse_version' is not defined" in found["python.examples"]


def test_a_function_the_task_names_in_its_words_must_be_the_modules_own() -> None:
    """multipart_set3_first, mp3-cart-discounts: a ``Cart`` class whose method is the asked function."""
    task = "Need cart_total(lines, code=None) in cart.py:\n- lines is a list of (unit_price, quantity) tuples"
    assert extract_examples(task).named == ("cart_total",) and extract_examples(task).functions == ()
    method = (
        "## Outline\n1. Cart\n\n## 1. Cart\n```python\nclass Cart:\n    def __init__(self, lines):\n"
        "        self.lines = lines\n\n    def cart_total(self, code=None):\n"
        "        return round(sum(p * q for p, q in self.lines), 2)\n```\n"
    )
    assert "only a method here" in failed(method, task, "code", "python")["python.defines"]
    function = (
        "## Outline\n1. Cart total\n\n## 1. Cart total\n```python\ndef cart_total(lines, code=None):\n"
        "    return round(sum(p * q for p, q in lines), 2)\n```\n"
    )
    assert "python.defines" not in failed(function, task, "code", "python")
    tests = (  # a tests-only answer uses the function, it need not define it
        "## Outline\n1. Tests\n\n## 1. Tests\n```python\nfrom cart import cart_total\n\n\ndef test_empty():\n"
        "    assert cart_total([]) == 0\n```\n"
    )
    assert "python.defines" not in failed(tests, f"Write pytest tests for {task}", "code", "python")
    # ... but a one-part answer to a task that asks for the function is not its tests alone (multipart_set5_first,
    # mp5-split-bill: pytest tests importing split_bill and add_tip from a module nobody wrote passed)
    assert failed(tests, task, "code", "python")["python.defines"] == "the task's function cart_total is not defined"
    # a method after a dot and a builtin are not the task's functions
    assert extract_examples("Call self.load_all(path) and print(x), then sorted(xs).").named == ()


def test_a_part_of_a_plan_is_held_to_what_it_was_asked_not_to_the_whole_task() -> None:
    """multipart_set3_pieces2: the function part of a function-tests-sign plan failed python.tests_given three
    times (the tests were another part's), and its kept answer was the worst of the three."""
    task = "I want parking_fee(minutes) in tariff.py, pytest tests that cover the edges, and the wording for the sign."
    code = (
        "## Outline\n1. Parking fee\n\n## 1. Parking fee\n```python\ndef parking_fee(minutes):\n"
        "    return 0 if minutes <= 30 else min(18.0, 2.5 * -(-minutes // 60))\n```\n"
    )
    contract = contract_of("code", "python")
    result = parse_output(code, "s", "e", min_items=contract.min_items, max_items=contract.max_items)

    def hard_failures(**kw: Any) -> set[str]:
        checks, _ = check_answer(result, CheckContext(task, contract, **kw))
        return {c.name for c in checks if c.severity == "hard" and not c.passed}

    assert "python.tests_given" in hard_failures()  # the whole task, answered by one part, asks for tests
    asked = "Deliver parking_fee(minutes) in tariff.py returning the fee."
    assert hard_failures(asked=asked, part_of_plan=True) == set()
    assert "python.defines" in hard_failures(asked=asked.replace("parking_fee", "parking_cost"), part_of_plan=True)


def test_a_doctest_that_states_a_comparison_is_checked_as_one() -> None:
    task = (
        'def is_palindrome(text):\n    """Whether text reads the same backwards.\n'
        "    >>> is_palindrome('abba') == True\n    >>> is_palindrome('abc') == False\n    \"\"\"\n"
    )  # HumanEval/156 and /162 write their examples this way: no output line
    examples = extract_examples(task)
    assert examples.doctests == ()
    assert examples.asserts == (("is_palindrome('abba')", "True"), ("is_palindrome('abc')", "False"))
    assert failed(GOOD_CODE, task, "code", "python") == {}  # a correct function passes (it printed True before)
    assert "python.examples" in failed(WRONG_CODE, task, "code", "python")


def test_examples_stated_in_the_other_ways_of_humaneval_docstrings_are_read() -> None:
    task = (
        "def f(xs, n):\n"
        '    """Examples\n'
        "    f([5, 8, 7, 1], 1) ==> 12\n"  # HumanEval/121
        "    f([1, 2], 3) = -1\n"  # /102
        "    f([], 0) # => 'No' (the list is empty)\n"  # /141: the value, not the comment after it
        "    f([2], 19) -> 19 - 5 - 6 = 8\n"  # /67: the worked sum's result
        "    f(x) = the sum of x\n"  # no literal: not an example
        '    """\n'
    )
    assert extract_examples(task).asserts == (
        ("f([5, 8, 7, 1], 1)", "12"),
        ("f([1, 2], 3)", "-1"),
        ("f([], 0)", "'No'"),
        ("f([2], 19)", "8"),
    )


def test_examples_stated_as_inputs_and_outputs_are_read_as_calls() -> None:
    task = (
        "def f(arr, k):\n"
        '    """Examples\n'
        "    * f([1], 2) => true\n"  # HumanEval/88 and /159 bullet their examples; /76 writes true
        "    assert f([2], 1) => [2]\n"  # /149
        "    for f([3], 0) == 34\n"  # /150
        "    For arr = [1,2,3], k = 2 the output should be 6.\n"  # /94, /112, /133, /142
        "    For arr = [1], the sum is 2 the output should be 3\n"  # /84: not a call, not an example
        "    Input: arr = [-3, -4, 5], k = 3\n"  # /120, /122, /129, /143
        "    Output: [-4, -3, 5]\n"
        "    Input:\n"  # /115: one name a line, with a colon, and names of its own
        "        grid : [[0,1], [1,1]]\n"
        "        bucket_capacity : 1\n"
        "    Output: 6\n"
        "    Input: arr = [111,21,3], k = 2\n"
        "    Output: 24 # sum of 21 + 3\n"  # /122: the value, not the comment
        "    Input: 3\n"  # /107 with one parameter; here f takes two: not a call of f
        "    Output: (1, 2)\n"
        '    """\n'
    )
    assert extract_examples(task).asserts == (
        ("f([1], 2)", "True"),
        ("f([2], 1)", "[2]"),
        ("f([3], 0)", "34"),
        ("f(arr=[1, 2, 3], k=2)", "6"),
        ("f(arr=[-3, -4, 5], k=3)", "[-4, -3, 5]"),
        ("f([[0, 1], [1, 1]], 1)", "6"),
        ("f(arr=[111, 21, 3], k=2)", "24"),
    )
    one = 'def g(n: int) -> tuple[int, int]:\n    """Example\n    Input: 3\n    Output: (1, 2)\n    """\n'
    assert extract_examples(one).asserts == (("g(3)", "(1, 2)"),)
    two = one + "def h(n):\n    pass\n"  # which function an input is for is not said: none is guessed
    assert extract_examples(two).asserts == ()


def test_a_looping_note_beside_correct_code_fails() -> None:
    note = "This requires Python coding expertise, not Python coding expertise. " * 4
    text = GOOD_CODE.replace("1. Palindrome check\n\n", "1. Palindrome check\n2. Note\n\n") + f"\n## 2. Note\n{note}\n"
    assert "prose.repetition" in failed(text, PALINDROME_TASK, "code", "python")


def test_a_task_that_asks_for_tests_needs_tests_in_the_answer() -> None:
    task = "Now add pytest tests for the is_palindrome function"
    no_tests = failed(GOOD_CODE, task, "code", "python")
    assert "python.tests_given" in no_tests and "has none" in no_tests["python.tests_given"]
    with_tests = GOOD_CODE.replace("```\n", "```\n\n## 2. Tests\n```python\nassert is_palindrome('aba')\n```\n", 1)
    with_tests = with_tests.replace("1. Palindrome check\n\n", "1. Palindrome check\n2. Tests\n\n", 1)
    assert "python.tests_given" not in failed(with_tests, task, "code", "python")
    verb = "Write a function that tests whether a word reads the same backwards"  # "tests" as a verb
    assert "python.tests_given" not in failed(GOOD_CODE, verb, "code", "python")


def test_tests_that_redefine_the_module_are_caught() -> None:
    text = GOOD_CODE.replace("1. Palindrome check\n\n", "1. Palindrome check\n2. Tests\n\n") + (
        "\n## 2. Tests\n```python\ndef is_palindrome(text):\n    assert text\n\n"
        "assert is_palindrome('aa') is None\n```\n"
    )
    contract = contract_of("code", "python")
    result = parse_output(text, "s", "e", min_items=1, max_items=2)
    checks, _ = check_answer(result, CheckContext(PALINDROME_TASK, contract))
    tests = [c for c in checks if c.name.startswith("python.tests")]
    assert tests and not all(c.passed for c in tests)
    assert any("is_palindrome" in c.detail for c in tests)


def test_sql_is_parsed_in_the_tasks_dialect() -> None:
    good = "## Outline\n1. Query\n\n## 1. Query\n```sql\nSELECT id, total FROM orders WHERE total > 100;\n```\n"
    bad = good.replace("FROM orders WHERE", "FROM orders WHERE WHERE (")
    task = "Write a PostgreSQL query for orders over 100"
    assert failed(good, task, "code", "sql") == {}
    detail = failed(bad, task, "code", "sql")["sql.parses"]
    assert detail.startswith("postgres SQL: ") and "at line 1, column" in detail  # where, in plain text
    assert "\x1b" not in detail and "\n" not in detail  # sqlglot underlines with terminal codes: none in a caveat


def test_a_shell_script_that_uses_a_variable_it_never_sets_fails_shellcheck() -> None:
    # review_whole_dec07, ops-backup-script (and three runs before it): the file was "$DATE-$database_name.sql"
    # with the name read from "$1" only, so every backup was named "2026-12-07-.sql"
    script = (
        '#!/bin/bash\nBACKUP_DIR="/backups"\nDATE=$(date +"%Y-%m-%d")\n'
        'BACKUP_FILE="$BACKUP_DIR/$DATE-$database_name.sql"\n'
        'pg_dump -U postgres -d "$1" > "$BACKUP_FILE"\nfind "$BACKUP_DIR" -type f -mtime +14 -delete\n'
    )
    text = f"## Outline\n1. Script\n\n## 1. Script\n```bash\n{script}```\n"
    task = "Write a bash script that backs up a PostgreSQL database with pg_dump into /backups"
    assert failed(text, task, "code", "bash") == {
        "bash.lint": "1 finding(s); SC2154: database_name is referenced but not assigned."
    }
    fixed = text.replace('"$1" >', '"$database_name" >').replace("#!/bin/bash\n", '#!/bin/bash\ndatabase_name="$1"\n')
    assert failed(fixed, task, "code", "bash") == {}
    # an upper-case name may come from the environment, and a finding of style is soft: neither fails the script
    soft = text.replace("$database_name", "$PGDATABASE").replace("#!/bin/bash\n", "#!/bin/bash\ncd /backups\n")
    assert failed(soft, task, "code", "bash") == {}


@pytest.mark.parametrize(
    ("text", "expert", "expected"),
    [
        ("Write a Python function that reverses a list", "python_coder", ("code", "python")),
        ("Write a query for the top customers", "sql_specialist", ("code", "sql")),
        ("Write a Dockerfile for a Flask app", "devops_engineer", ("code", "dockerfile")),
        ("Give me a checklist for a release", "general_assistant", ("plan", None)),
        ("Compare three databases in a table", "general_assistant", ("table", None)),
        # what an explanation explains is not its form (multipart_set5_first: six answers drawn for a table)
        (
            "Give a short explanation for the club secretary of how the table is worked out and how ties are broken",
            "general_reasoning",
            ("prose", None),
        ),
        ("Describe the steps of the release", "general_assistant", ("prose", None)),
        ("Write a short story about a lighthouse", "creative_writer", ("prose", None)),
        # an explanation for readers who do not read code is prose, whoever writes it; code asked for stays code
        ("Explain the change to the finance team. Context: a slow PostgreSQL query", "sql_specialist", ("prose", None)),
        ("Write the query and explain it to the finance team", "sql_specialist", ("code", "sql")),
        ("Explain the query plan to a junior developer", "sql_specialist", ("code", "sql")),
        # a quantity asked with no code in sight is a number, whoever the router chose (2026-11-29: the download
        # time went to the Python expert, whose answer was a function with a bits-for-bytes bug and no number)
        ("How long, in minutes, to download a 12.4 GB file over 75 Mbps?", "python_coder", ("prose", None)),
        ("By how many percent did revenue change from 2.4 to 3.9 million?", "sql_specialist", ("prose", None)),
        ("Calculate the percentage change from 2.4 to 3.9 million", "sql_specialist", ("prose", None)),
        ("Write a function that calculates how many days lie between two dates", "python_coder", ("code", "python")),
        ("How long does this query take on 10 million rows?", "sql_specialist", ("code", "sql")),
        # documentation of the code is prose, or a table, whoever writes it (multipart_set5_first, mp5-url-shortener:
        # the endpoint table and the curl lines were written inside Python blocks)
        ("Usage section with curl examples", "python_coder", ("prose", None)),
        ("API description as a table of endpoints with request bodies and status codes", "python_coder",
         ("table", None)),
        ("Write a short README paragraph with one example of each function", "python_coder", ("prose", None)),
        ("Write a function that prints its usage", "python_coder", ("code", "python")),
        # a part headed by its data or configuration file is written in the file's language (multipart_set5_first:
        # flags.json came back as a Python dict; the systemd units were held to bash)
        ("Flags.json in the repo", "python_coder", ("data", "json")),
        ("Systemd units upload-purge.service (Type=oneshot) and upload-purge.timer", "devops_engineer",
         ("code", "ini")),
        ("Config /etc/upload-purge.conf in plain KEY=VALUE lines", "devops_engineer", ("code", "ini")),
        ("Write config.toml with [paths] input_dir and output_dir", "python_coder", ("code", "toml")),
        ("Python module that reads flags.json", "python_coder", ("code", "python")),
        ("Script that loads config.yaml and prints the port", "python_coder", ("code", "python")),
    ],
)  # fmt: skip
def test_the_deliverable_follows_the_expert_and_the_text(text: str, expert: str, expected: tuple) -> None:
    assert infer_deliverable(text, expert) == expected


def test_a_function_handed_over_to_complete_is_delivered_as_code_alone() -> None:
    task = 'Complete the following Python function:\n```python\ndef inc(x: int) -> int:\n    """Add one."""\n```'
    spec = SlotSpec(id="answer", title="Answer", description=task)
    contract = contract_for(spec, "python_coder")
    assert (contract.deliverable, contract.min_items, contract.max_items) == ("code", 1, 1)
    system, _ = build_messages(job(task), settings())
    assert contract.function == "inc" and "1. inc" in system.content and "Usage" not in system.content
    other = contract_for(SlotSpec(id="s", title="S", description="Write a function inc(x)"), "python_coder")
    assert other.max_items == 2  # a function to write from a description may come with a usage note


SQL_INDEX_TASK = (
    "Our PostgreSQL query SELECT * FROM events WHERE account_id = $1 AND created_at > now() - interval '7 days' "
    "ORDER BY created_at DESC is slow on a 50-million-row table. Write the index that helps it and explain why."
)


def test_a_code_task_that_asks_why_requires_the_explanation_as_its_second_section() -> None:
    # review_third, sql-index: the code contract's note is optional, and the answer was one CREATE INDEX line
    contract = contract_for(SlotSpec(id="a", title="A", description=SQL_INDEX_TASK), "sql_specialist")
    assert (contract.deliverable, contract.language, contract.min_items, contract.max_items) == ("code", "sql", 2, 2)
    assert contract.explained
    spec = SlotSpec(id="answer", title="Answer", description=SQL_INDEX_TASK, deliverable="code", language="sql")
    system, _ = build_messages(replace(job(SQL_INDEX_TASK), spec=spec, expert="sql_specialist"), settings())
    assert "three to six full sentences" in system.content and "Usage" not in system.content
    code_only = "## Outline\n1. Index\n\n## 1. Index\n```sql\nCREATE INDEX e ON events (account_id, created_at);\n```\n"
    assert not parse_output(code_only, "a", "sql_specialist", min_items=2, max_items=2).compliant
    for text in ["Write a function inc(x)", "Write the index that helps this query", "Explain why indexes help"]:
        assert not contract_for(SlotSpec(id="s", title="S", description=text), "sql_specialist").explained, text
    # a plain answer keeps its words outside the code as the explanation
    plain = (
        "Index the account first. Here is the index:\n\n"
        "```sql\nCREATE INDEX e ON events (account_id, created_at DESC);\n```\n\n"
        "The equality column comes first, so the index finds one account's rows, already in date order."
    )
    wrapped = wrap_plain(plain, contract)
    result = parse_output(wrapped, "a", "sql_specialist", min_items=2, max_items=2)
    assert result.compliant and [s.title for s in result.sections] == ["Code", "Why it works"]
    why = result.sections[1].body
    assert "equality column comes first" in why and "```" not in why
    assert "Index the account first." in why and "Here is the index" not in why  # the block's announcement goes
    code_alone = plain_result(plain.split("\n\n")[1], contract, "A", slot_id="a", expert="sql_specialist", attempts=1)
    assert not code_alone.compliant  # a plain answer with no word of why fails the contract it was asked under


# --- arithmetic is computed, not trusted ---------------------------------------------------------------------


def test_arithmetic_is_computed_by_running_the_expression() -> None:
    text, changes = compute("12 inches is equal to 12 * 2.54 centimeters.")
    assert text == "12 inches is equal to 12 * 2.54 = 30.48 centimeters." and changes
    text, _ = compute("That is [[3 * 7 + 1]] apples.")
    assert text == "That is 22 apples."
    text, _ = compute("It grows to [[100 * (1 + 0.05)^2]].")  # a calculator's power (numeric_heldout_first)
    assert text == "It grows to 110.25."
    text, changes = compute("So 17 * 23 = 381 in all.")
    assert text == "So 17 * 23 = 391 in all." and "corrected" in changes[0]
    # the review set's NPV through coe run (2026-11-29): the sum was corrected, the sentence under it was not
    npv = "\\[ NPV = 3,636.36 + 3,305.79 - 10,000 = -2,068.31 \\]\n\nSince the NPV is negative (\\(-2,068.31\\)), no."
    text, changes = compute(npv)
    assert "= -3057.85 \\]" in text and "(\\(-3057.85\\))" in text and "2,068" not in text
    assert changes[-1] == "corrected -2,068.31 to -3057.85 where the answer states it again"
    assert compute("So 2 + 3 = 6, and 6 apples.")[0] == "So 2 + 3 = 5, and 6 apples."  # too few digits to chase


def test_latex_steps_are_computed_and_a_wrong_result_is_corrected_where_it_is_stated_again() -> None:
    # numeric_heldout2_after, nh2-present-value: the finance answer's division was wrong, and its boxed result with it
    answer = (
        "\\[ 1.05^8 \\approx 1.47746 \\]\n\nNow divide:\n\n\\[ PV = \\frac{25000}{1.47746} \\approx 17039.13 \\]\n\n"
        "Therefore the present value is approximately \\(\\boxed{17039.13}\\)."
    )
    text, changes = compute(answer)
    assert "\\frac{25000}{1.47746} \\approx 16920.93" in text and "\\boxed{16920.93}" in text and "17039" not in text
    assert "1.05^8 \\approx 1.47746" in text  # right to the digits it shows: left as written
    assert changes == [
        "corrected \\frac{25000}{1.47746} \\approx 17039.13 to 16920.93",
        "corrected 17039.13 to 16920.93 where the answer states it again",
    ]
    # the GSM8K miss: "H = 88000 / 11" then 7600, written as a LaTeX fraction
    assert compute("\\[ H = \\frac{88000}{11} = 7600 \\]")[0] == "\\[ H = \\frac{88000}{11} = 8000 \\]"
    grown = compute("\\[ 5000 \\times (1 + 0.06)^{10} = 11985.20 \\]")  # the review set's fin-compound
    assert grown[0] == "\\[ 5000 \\times (1 + 0.06)^{10} = 8954.24 \\]"
    assert compute("so 12400 / 75 ≈ 168.67 seconds")[0] == "so 12400 / 75 ≈ 165.33 seconds"  # "≈" is read too
    # an answer's sections are one answer: the restated result in the next section is corrected too
    sections = ["\\[ PV = \\frac{25000}{1.47746} \\approx 17039.13 \\]", "The present value is £17039.13."]
    assert compute_all(sections)[0] == [
        "\\[ PV = \\frac{25000}{1.47746} \\approx 16920.93 \\]",
        "The present value is £16920.93.",
    ]
    for right in ("\\[ 1.05^{10} = 1.63 \\]", "$2 \\times 3 = 6$", "\\[ \\frac{25000}{1.05^8} \\approx 16921 \\]"):
        assert compute(right) == (right, [])  # rounded as a model writes it, and right
    assert compute("x = 2 + 3 \\times 4 = 14")[1] == []  # the end of a longer expression is no step of its own
    # nh-discount-tax-chain and math-percent (bare answers): a chain's middle is no step of its own either
    for chain in (
        "\\[ 189.99 \\times (1 - 0.20) = 189.99 \\times 0.80 = 151.992 \\]",
        "100 + 0.20 \\times 100 = 100 + 20 = 120",
    ):
        assert compute(chain) == (chain, [])
    assert compute("NPV = -\\frac{10,000}{(1 + 0.10)^0} = -10,000.")[1] == []  # fin-npv: the sign is the fraction's
    assert compute("- 12 * 2.54 = 30.6")[0] == "- 12 * 2.54 = 30.48"  # a bullet's dash is no operator
    # written as the wrong result was: its thousands commas, six decimals at most
    assert compute("\\frac{3,268,750}{12} = 2,757,125")[0] == "\\frac{3,268,750}{12} = 272,395.83"
    # multipart_set3_units, the server room's calculation part: units written in \text{} between the numbers
    energy = "\\( 4900 \\text{ W} \\times 720 \\text{ hours/month} = 3568000 \\text{ Wh} \\)"
    assert compute(energy)[0] == "\\( 4900 \\text{ W} \\times 720 \\text{ hours/month} = 3528000 \\text{ Wh} \\)"
    right = "\\( 350 \\text{ W/machine} \\times 14 \\text{ machines} = 4900 \\text{ W} \\)"
    assert compute(right) == (right, [])
    # numeric_heldout3, nh3-unit-price (the generalist on the 0.5B): a currency sign and a rate's unit in LaTeX
    bag = "\\text{Cost} = 1.2 \\text{ kg} \\times £5.28/\\text{kg} = £6.704"
    assert compute(bag)[0] == "\\text{Cost} = 1.2 \\text{ kg} \\times £5.28/\\text{kg} = £6.336"
    assert compute("\\( 1.2 \\times \\$5.28 = \\$6.704 \\)")[0] == "\\( 1.2 \\times \\$5.28 = \\$6.336 \\)"
    grams = "\\( 750 \\text{ g} \\times £3.60/\\text{kg} = £288 \\)"  # wrong, but by a conversion 2,700 would not fix
    assert compute(grams) == (grams, [])
    # multipart_set3_units2, the same task's memo and calculation: steps in money, a currency sign on each number
    yearly = compute_all(["Monthly saving * 12\n= $225.79 * 12\n= $2,711.48", "we save $2,711.48 per year"])
    assert yearly[0] == ["Monthly saving * 12\n= $225.79 * 12\n= $2,709.48", "we save $2,709.48 per year"]
    assert compute("- Annual initial cost: $987.84 * 12 = $11,853.68")[0].endswith("= $11,854.08")
    for money in ("$762.05 - $987.84 = -$225.79", "$5 x 3 = $15", "cost $3 * 4 = $12.00 each"):
        assert compute(money) == (money, [])
    assert compute("0.00520833 \\times 4.79001 = 0.25600000000000003")[0].endswith("= 0.024948")


def test_a_chain_whose_links_differ_and_a_figure_unlike_its_working_are_corrected() -> None:
    # multipart_set4_first, mp4-new-hire-prorata: 16 x 41,600 is 665,600, so the chain's last step was right and the
    # result wrong, and the email stated it again
    pay = "- Calculation: \\( \\frac{16}{30} \\times 41,600 = \\frac{657,600}{30} = 21,920 \\)."
    texts, changes = compute_all([pay, "her first (September) gross pay is $21,920"])
    assert texts == [
        "- Calculation: \\( \\frac{16}{30} \\times 41,600 = 22,186.67 \\).",
        "her first (September) gross pay is $22,186.67",
    ]
    assert changes[0].endswith("to \\frac{16}{30} \\times 41,600 = 22,186.67: the chain's links differ")
    # mp4-solar-payback: a figure, then its working in brackets with its units (4,200 x 0.30 is 1,260)
    text, changes = compute("It saves $1,296 (4,200 kWh * $0.30/kWh) a year; 1,296 a year in all.")
    assert text == "It saves $1,260 (4,200 kWh * $0.30/kWh) a year; 1,260 a year in all."
    assert changes[0] == "corrected $1,296 (4,200 kWh * $0.30/kWh) to $1,260"
    for right in (
        "It saves $1,260 (4,200 kWh × $0.30/kWh) a year.",
        "cost $24 (2 x $12)",
        "\\[ 189.99 \\times (1 - 0.20) = 189.99 \\times 0.80 = 151.992 \\]",  # links that agree
        "\\[ 1000 \\times 1.05^{10} = 1000 \\times 1.6289 = 1628.9 \\]",  # a rounded link carried on
        "\\( \\frac{1}{2} \\text{ gallon} = \\frac{1}{2} \\times 3.78541 \\text{ liters} = 1.892705 \\)",  # conversion
    ):
        assert compute(right) == (right, [])


def test_a_product_whose_numbers_carry_units_is_computed() -> None:
    # multipart_set3_units, the server room's memo, and multipart_new8's runbook: units between the numbers
    text, changes = compute("Today: 14 * 350 W = 49,000 W, so 49,000 W around the clock.")
    assert text == "Today: 14 * 350 W = 4,900 W, so 4,900 W around the clock."
    assert changes[0] == "corrected 14 * 350 W = 49,000 to 4,900"
    assert compute("0.999 * 43200 minutes = 41760 minutes")[0] == "0.999 * 43200 minutes = 43156.80 minutes"
    assert compute("35,680,000 kWh * 0.28 per kWh = $10,000,240")[0].endswith("= $9,990,400.00")
    for right in (
        "30 days * 24 hours/day * 60 minutes/hour = 43200",
        "5 years * 12 months/year = 60 months",
        "$9000 / $15 = 600.00",
        # the end of a longer sum is no step of its own (mp4-solar-payback's email)
        "$1,788 (4,200 kWh * $0.30/kWh + 4,200 kWh * $0.08/kWh * 5 years = $1,788)",
    ):
        assert compute(right)[1] == [], right


def test_ranges_dates_and_versions_are_not_calculations() -> None:
    for text in ("It takes 3-5 days.", "Released on 11/23.", "Upgrade from 3.11 - 2 steps."):
        assert compute(text) == (text, [])


# --- artifacts --------------------------------------------------------------------------------------------------


def test_code_artifacts_are_the_modules_and_their_tests() -> None:
    text = GOOD_CODE.replace("1. Palindrome check\n\n", "1. Palindrome check\n2. Tests\n\n") + (
        "\n## 2. Tests\n```python\ndef test_it():\n    assert is_palindrome('aba')\n```\n"
    )
    result = parse_output(text, "palindrome", "python_coder", min_items=1, max_items=2)
    checks, _ = check_answer(result, CheckContext(PALINDROME_TASK, contract_of("code", "python")))
    result = result.model_copy(update={"quality": SlotQuality(deliverable="code", language="python", checks=checks)})
    fw = Framework(id="f", title="t", slots=[SlotSpec(id="palindrome", title="P", description="d")])
    files = code_artifacts(fw, {"palindrome": result})
    assert list(files) == ["palindrome.py", "test_palindrome.py"]
    assert files["palindrome.py"].startswith("def is_palindrome")
    assert files["test_palindrome.py"].startswith("from palindrome import *")


# --- best-of-N ------------------------------------------------------------------------------------------------


def job(task: str = PALINDROME_TASK, *, whole: bool = False) -> SlotJob:
    """A code slot: one of several (one prompt kind) or, ``whole``, the whole task (the plain prompt too)."""
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable="code", language="python")
    return SlotJob(
        spec=spec,
        task=task if whole else f"A small text utilities package.\n{task}",
        constraints=(),
        expert="python_coder",
        persona="You write Python.",
        references={},
        max_tokens=600,
        temperature=0.0,
    )


def settings(**values: object) -> Settings:
    return resolve_settings({"backend": "fake", "best_of": 3, **values}, env={})


def test_a_failing_first_answer_draws_more_and_keeps_the_passing_one_verbatim() -> None:
    backend = Scripted([WRONG_CODE, GOOD_CODE, WRONG_CODE])
    outcome = run_slot(job(), backend, settings(), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    quality = outcome.result.quality
    assert len(backend.requests) == 2  # drawing stops at the first candidate that passes
    assert quality.chosen == "c2" and quality.passed
    assert outcome.result.raw == GOOD_CODE  # verbatim: nothing merged or rewritten
    assert [c.chosen for c in quality.candidates] == [False, True]
    assert quality.tokens_generated == sum(c.completion_tokens for c in quality.candidates)
    assert any(e.action == "select" for e in outcome.ledger)


class GrammarScripted(Scripted):
    def supports_grammar(self) -> bool:
        return True


def test_a_plans_slot_starts_with_its_own_title_and_a_whole_task_writes_its_own() -> None:
    # a plan's slot left to title its first part copied a referenced slot's title, then its text (a DCF plan)
    backend = GrammarScripted([GOOD_CODE])
    run_slot(job(), backend, settings(), emit=lambda _: None)
    grammar = backend.requests[0].grammar or ""
    assert 'item-1 ::= "1. " "Answer" "\\n"' in grammar
    whole = GrammarScripted([WRONG_CODE, GOOD_CODE])  # the plain prompt first, then the contract's
    run_slot(job(whole=True), whole, settings(), emit=lambda _: None)
    grammars = [r.grammar for r in whole.requests if r.grammar]
    assert grammars and all('item-1 ::= "1. " title' in g for g in grammars)  # the task is not a part's title


def test_a_passing_first_answer_is_never_replaced() -> None:
    backend = Scripted([GOOD_CODE, WRONG_CODE])
    outcome = run_slot(job(), backend, settings(), emit=lambda _: None)
    assert len(backend.requests) == 1
    assert outcome.result is not None and outcome.result.raw == GOOD_CODE


def test_a_bad_later_candidate_never_replaces_a_better_earlier_one() -> None:
    backend = Scripted([WRONG_CODE, BROKEN_CODE, BROKEN_CODE])
    outcome = run_slot(job(), backend, settings(), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    assert len(backend.requests) == 3 * RUNNABLE_EXAMPLES_DRAWS  # the task's examples run: more than best_of
    assert outcome.result.quality.chosen == "c1" and outcome.result.raw == WRONG_CODE
    assert not outcome.result.quality.passed
    assert any(n.source == "checks" for n in outcome.notices)  # delivered with a caveat, never silently


def test_retries_are_fresh_prompts_at_another_temperature() -> None:
    backend = Scripted([WRONG_CODE, WRONG_CODE, GOOD_CODE])
    run_slot(job(), backend, settings(), emit=lambda _: None)
    first, second, third = backend.requests
    assert len(second.messages) == len(first.messages) == 2  # never the failed answer appended
    assert "return True" not in second.messages[1].content
    assert "python.examples" in second.messages[1].content  # the feedback names what was wrong
    assert (first.temperature, second.temperature, third.temperature) == (0.0, 0.3, 0.5)


def test_each_retry_event_says_what_was_wrong_with_the_candidate_drawn_last() -> None:
    # a real run printed the leader's problems at every attempt, and the candidates looked like copies
    backend = Scripted([WRONG_CODE, BROKEN_CODE, GOOD_CODE])
    events: list[dict[str, object]] = []
    run_slot(job(), backend, settings(), emit=events.append)
    retries = [e for e in events if e["event"] == "slot_retry"]
    assert [(e["attempt"], e["candidate"]) for e in retries] == [(2, "c1"), (3, "c2")]
    first, second = (" ".join(map(str, e["problems"])) for e in retries)  # type: ignore[call-overload]
    assert "python.examples" in first and "python.examples" not in second and second != first


def test_only_the_unfinished_end_of_the_last_line_of_text_goes() -> None:
    assert cut_unfinished_end("Done. It then sorts the rows by the") == ("Done.\n", "It then sorts the rows by the")
    assert cut_unfinished_end("```sql\nSELECT 1;\n```\nExplanation:") == ("```sql\nSELECT 1;\n```\n", "Explanation:")
    assert cut_unfinished_end("no sentence ends here") == ("\n", "no sentence ends here")
    for kept in (
        "It ends.",
        "```python\ndef f(:\n    return",
        "| a | b |",
        "- a list item",
        "Thanks.\n\nBest regards,\nSam Lee",
        "We look forward to serving you at your retirement party!\n\nBest regards,",  # mp3-catering-quote's email
        "Thanks.\n\nYours sincerely,",
    ):
        assert cut_unfinished_end(kept) == (kept, None)  # finished, in an unclosed code block, not prose, a signature
    assert cut_unfinished_end("Thanks.\nBest regards, and then the") == ("Thanks.\n", "Best regards, and then the")
    assert cut_unfinished_end("Thanks.\nI will fix it, and then the tap") == (
        "Thanks.\n",
        "I will fix it, and then the tap",
    )
    # issue 39's README demo stopped inside the code span it opened: the backtick ends nothing
    assert cut_unfinished_end("It compares it with its reverse. If they are equal, the function `") == (
        "It compares it with its reverse.\n",
        "If they are equal, the function `",
    )


def test_a_code_answers_note_that_breaks_off_loses_its_unfinished_end() -> None:
    # review set: an index answer ended "Explanation:" and nothing after it; the ending check is soft for code
    announced = GOOD_CODE + "\nIt compares the text with its reverse. Explanation:\n"
    outcome = run_slot(job(), Scripted([announced]), settings(), emit=lambda _: None)
    result = outcome.result
    assert result is not None and result.quality is not None
    assert result.raw.rstrip().endswith("It compares the text with its reverse.")
    assert result.sections[-1].body.rstrip().endswith("its reverse.") and "Explanation" not in result.raw
    assert "return text == text[::-1]" in result.raw  # the code is untouched
    assert next(c for c in result.quality.checks if c.name == "contract.ends").passed
    [entry] = [e for e in outcome.ledger if e.action == "cut_unfinished_end"]
    assert "'Explanation:' removed, nothing reworded" in entry.outputs_summary
    whole = run_slot(job(), Scripted([GOOD_CODE]), settings(), emit=lambda _: None)
    assert whole.result is not None and whole.result.raw == GOOD_CODE  # an answer that ends properly is kept as is
    assert not any(e.action == "cut_unfinished_end" for e in whole.ledger)


def test_a_task_whose_examples_run_draws_more_than_best_of_and_others_best_of() -> None:
    backend = Scripted([WRONG_CODE] * 5 + [GOOD_CODE])
    outcome = run_slot(job(), backend, settings(), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    assert len(backend.requests) == 6 and outcome.result.quality.chosen == "c6" and outcome.result.quality.passed
    no_examples = "Write a Python function is_palindrome(text) that checks whether a string is a palindrome."
    backend = Scripted([BROKEN_CODE])
    run_slot(job(no_examples), backend, settings(), emit=lambda _: None)
    assert len(backend.requests) == 3  # nothing that runs to tell a better candidate: best_of


def test_best_of_one_keeps_the_first_answer() -> None:
    backend = Scripted([WRONG_CODE, GOOD_CODE])
    outcome = run_slot(job(), backend, settings(best_of=1), emit=lambda _: None)
    assert len(backend.requests) == 1 and outcome.result is not None and outcome.result.raw == WRONG_CODE


PLAIN_GOOD = (
    "Here is the function:\n\n```python\ndef is_palindrome(text):\n    return text == text[::-1]\n```\n\n"
    "Usage:\n\n```python\nprint(is_palindrome('abba'))\n```\n"
)
PLAIN_WRONG = "```python\ndef is_palindrome(text):\n    return True\n```\n"
FUNCTION_TASK = (
    "Complete the following Python function:\n```python\ndef is_palindrome(text: str) -> bool:\n"
    '    """Whether text reads the same backwards.\n    >>> is_palindrome("abba")\n    True\n'
    '    >>> is_palindrome("abc")\n    False\n    """\n```'
)


def test_a_plain_answers_code_block_is_put_in_the_contracts_shape_verbatim() -> None:
    contract = contract_for(SlotSpec(id="a", title="A", description=FUNCTION_TASK), "python_coder")
    wrapped = wrap_plain(PLAIN_GOOD, contract)
    assert wrapped == (
        "## Outline\n1. is_palindrome\n\n## 1. is_palindrome\n```python\n"
        "def is_palindrome(text):\n    return text == text[::-1]\n```\n"
    )  # the block that defines the function, not the longer usage block; the explanation left out
    result = parse_output(wrapped, "a", "python_coder", min_items=contract.min_items, max_items=contract.max_items)
    assert result.compliant
    assert wrap_plain("No code here, sorry.", contract) == "No code here, sorry."  # nothing to wrap: as is


def test_a_whole_task_code_slot_alternates_the_contract_and_the_plain_prompt() -> None:
    backend = Scripted([WRONG_CODE, PLAIN_WRONG, WRONG_CODE, PLAIN_GOOD])
    outcome = run_slot(job(whole=True), backend, settings(best_of=4), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    quality = outcome.result.quality
    assert [c.prompt for c in quality.candidates] == ["contract", "plain", "contract", "plain"]
    assert [r.temperature for r in backend.requests] == [0.0, 0.0, 0.3, 0.5]  # each prompt greedy once
    plain = backend.requests[1]
    assert [m.content for m in plain.messages] == [PALINDROME_TASK] and plain.grammar is None
    assert quality.chosen == "c4" and quality.passed
    assert "def is_palindrome(text):\n    return text == text[::-1]" in outcome.result.raw


def test_a_function_to_complete_draws_the_plain_prompt_first() -> None:
    backend = Scripted([PLAIN_GOOD])
    outcome = run_slot(job(FUNCTION_TASK, whole=True), backend, settings(), emit=lambda _: None)
    assert [m.role for m in backend.requests[0].messages] == ["user"]
    assert outcome.result is not None and outcome.result.quality is not None
    assert outcome.result.quality.candidates[0].prompt == "plain" and outcome.result.quality.passed
    assert outcome.result.compliant and outcome.result.sections[0].title == "is_palindrome"


TESTED_TASK = (
    "Write a function to check whether a string is a palindrome. Your code should pass this test: "
    "assert is_palindrome('abba') == True"
)


def test_a_function_asked_for_with_its_test_draws_the_plain_prompt_first_and_keeps_only_its_code() -> None:
    # MBPP's shape: on its first 40 development problems the contract's first answer took 7-11 s where the bare
    # model's took 3-4 s, and the contract's usage note was not asked for
    backend = Scripted([PLAIN_GOOD])
    outcome = run_slot(job(TESTED_TASK, whole=True), backend, settings(), emit=lambda _: None)
    assert [m.role for m in backend.requests[0].messages] == ["user"]
    assert outcome.result is not None and outcome.result.quality is not None
    assert outcome.result.quality.candidates[0].prompt == "plain" and outcome.result.quality.passed
    assert [s.title for s in outcome.result.sections] == ["is_palindrome"]
    assert "print(" not in outcome.result.raw  # the model's usage lines are not the asked function


def test_a_passing_score_outranks_any_failing_one() -> None:
    passing = [CheckResult(name="a", passed=True), CheckResult(name="b", severity="soft", passed=False)]
    failing = [CheckResult(name="a", passed=False), CheckResult(name="b", severity="soft", passed=True)]
    assert score(passing) > score(failing)
    records = [
        CandidateRecord(id="c1", origin="first", model="m", temperature=0, score=score(failing)),
        CandidateRecord(id="c2", origin="sample", model="m", temperature=0.3, score=score(passing)),
        CandidateRecord(id="c3", origin="sample", model="m", temperature=0.5, score=score(passing)),
    ]
    assert [c.id for c in best(records)] == ["c2", "c3"]


def test_a_copy_of_a_referenced_slot_ranks_below_an_answer_of_its_own_with_two_faults() -> None:
    ok = [CheckResult(name=n, passed=True) for n in ("contract.structure", "contract.complete", "prose.repetition")]
    placeholder_ok, placeholder_copied = (CheckResult(name="contract.placeholders", passed=p) for p in (True, False))
    copy = [*ok, CheckResult(name="contract.ends", passed=True), placeholder_ok]
    copy.append(CheckResult(name="contract.own_work", passed=False, detail="100% of its sentences are copied"))
    own = [*ok, CheckResult(name="contract.ends", passed=False), placeholder_copied]
    own.append(CheckResult(name="contract.own_work", passed=True))
    assert score(own) > score(copy)


def test_an_echo_of_the_prompt_ranks_below_an_answer_that_only_loops() -> None:
    """A real policy slot kept its retry feedback, echoed (ends and leaks failed), over a looping answer."""
    names = ("contract.structure", "contract.complete", "contract.ends", "contract.leaks", "prose.repetition")
    echo = [CheckResult(name=n, passed=n not in ("contract.ends", "contract.leaks")) for n in names]
    loops = [CheckResult(name=n, passed=n != "prose.repetition") for n in names]
    assert score(loops) > score(echo)


def test_a_prompt_that_is_too_long_is_cut_to_fit_not_failed() -> None:
    huge = parse_output(prose(("Part", "word " * 6000)), "ref", "e")
    spec = SlotSpec(id="s", title="S", description="Write S.", deps=["ref"], can_reference=["ref"])
    long_job = SlotJob(
        spec=spec,
        task="A task",
        constraints=(),
        expert="e",
        persona="P",
        references={"ref": ("Reference", huge)},
        max_tokens=900,
        temperature=0.0,
        n_ctx=2048,
    )
    prompt = fit_prompt(long_job, settings())
    assert prompt.cuts and "outline" in prompt.cuts[0]
    assert sum(len(m.content) for m in prompt.messages) / 3 + prompt.max_tokens < 2048


POLICY = (
    "Passwords have at least 12 characters and are checked against a list of breached passwords. "
    "Every account that reaches company email uses multi-factor authentication. "
    "Access to production systems is granted per role and reviewed every quarter by the team lead."
)


def test_a_section_that_copies_a_referenced_slot_is_cut_from_the_kept_answer() -> None:
    # a real password-policy run: the checklist's first section was the policy's controls, word for word
    policy = parse_output(prose(("Controls", POLICY)), "policy", "security_architect")
    checklist = prose(
        ("Controls", POLICY),
        ("Quarterly audit", "- Export the list of accounts without multi-factor authentication and follow up each.\n"
         "- Compare the production access list with the current roles and remove what nobody needs."),
    )  # fmt: skip
    spec = SlotSpec(id="checklist", title="Audit checklist", description="Write the audit checklist.", deps=["policy"],
                    can_reference=["policy"], deliverable="prose")  # fmt: skip
    job = SlotJob(
        spec=spec, task="Write a password policy and a checklist to audit it.", constraints=(), expert="e",
        persona="P", references={"policy": ("Password policy", policy)}, max_tokens=900, temperature=0.0,
    )  # fmt: skip
    outcome = run_slot(job, Scripted([checklist]), settings(best_of=1), emit=lambda _: None)
    result = outcome.result
    assert result is not None
    assert [(s.label, s.title) for s in result.sections] == [("1", "Quarterly audit")]
    assert "breached passwords" not in result.raw
    [entry] = [e for e in outcome.ledger if e.action == "cut_sections"]
    assert "section 1 copies a slot it references" in entry.outputs_summary
    one_shared = prose(("Audit", POLICY.split(". ")[0] + ". Then check the breached-password list is current and "
                        "that the check runs at every password change."))  # fmt: skip
    kept = run_slot(job, Scripted([one_shared]), settings(best_of=1), emit=lambda _: None).result
    assert kept is not None and kept.sections[0].title == "Audit"  # one sentence quoted is no copy


def test_a_section_that_is_another_slots_part_is_cut_from_the_kept_answer() -> None:
    # a real run: the diagnosis slot, given the whole task, went on "2. Propose indexes", "3. Rewrite the query",
    # "4. Explain the change to the finance team": the plan's next three slots, which wrote them again
    diagnosis = prose(
        ("Diagnose likely causes", "The report scans the whole sales table and sorts it on disk every month."),
        ("Propose indexes", "An index on the sale date lets the report read one month of rows."),
        ("Rewrite the query", "Select only the columns the report shows and filter on the date first."),
    )
    spec = SlotSpec(id="diagnose", title="Diagnose likely causes", description="Diagnose likely causes.",
                    deliverable="prose")  # fmt: skip
    job = SlotJob(
        spec=spec, task="Our report is slow. Diagnose likely causes, propose indexes and rewrite the query.",
        constraints=(), expert="sql_specialist", persona="P", references={},
        max_tokens=900, temperature=0.0, others=("Propose indexes", "Rewrite the query", "Explain the change"),
    )  # fmt: skip
    outcome = run_slot(job, Scripted([diagnosis]), settings(best_of=1), emit=lambda _: None)
    result = outcome.result
    assert result is not None
    assert [(s.label, s.title) for s in result.sections] == [("1", "Diagnose likely causes")]
    assert "sale date" not in result.raw and "2. Propose indexes" not in result.raw
    [entry] = [e for e in outcome.ledger if e.action == "cut_sections"]
    assert "section 2 is the part 'Propose indexes' of another slot" in entry.outputs_summary
    alone = replace(job, others=())  # a slot alone in its plan keeps what it wrote
    kept = run_slot(alone, Scripted([diagnosis]), settings(best_of=1), emit=lambda _: None).result
    assert kept is not None and len(kept.sections) == 3


def test_a_standard_module_used_and_never_imported_fails_and_an_earlier_sections_function_does_not() -> None:
    """multipart_set5_first, mp5-feature-flags: ``zlib.crc32`` with no ``import zlib``, kept with a soft lint."""
    task = "Write flags.py with is_enabled(flags, name, user_id) that buckets users with zlib.crc32."
    code = (
        "## Outline\n1. Flags\n\n## 1. Flags\n```python\nimport json\n\n\ndef is_enabled(flags, name, user_id):\n"
        "    flag = flags[name]\n    return zlib.crc32(f'{name}:{user_id}'.encode()) % 100 < flag['rollout']\n```\n"
    )
    assert failed(code, task, "code", "python")["python.unimported"] == (
        "the code uses zlib and never imports it (import zlib)"
    )
    assert "python.unimported" not in failed(code.replace("import json", "import json\nimport zlib"), task, "code",
                                             "python")  # fmt: skip


def test_a_section_titled_with_most_of_another_slots_title_words_is_that_slots_part() -> None:
    """multipart_set5_first, mp5-league-table-sqlite: every part copied the task's list into its outline."""
    from engine.slots.checks.contract import repeated_sections

    others = ("Give one query that returns the league table", "Give a short explanation for the club secretary")
    own = "Give the schema (teams, matches) and INSERTs for the results below"
    schema = prose(
        ("Give the schema (teams, matches) and INSERTs for the results below", "CREATE TABLE teams ... " * 4),
        ("1 query that returns the league table: team, played, won, drawn, lost, goals_for,", "SELECT ... " * 9),
        ("Sample results of the teams and matches", "The nine fixtures, the last one not played yet. " * 2),
    )
    result = parse_output(schema, "schema", "e", min_items=1, max_items=5)
    assert [label for label, _ in repeated_sections(result, "task", others=others, own=own)] == ["2"]
    # a section that names the slot's own work as much as the other's stays; so does the first section
    mine = ("Give the league table query", "Give the query for the schema")
    assert repeated_sections(result, "task", others=mine, own="Write the league table query") == []
    # a long title copied and cut at a title's length names its first words only (multipart_set5_rules2: the
    # endpoint table's part wrote the implementation again); a usage note of its own work stays
    long_other = (
        "Implementation in one file and shortener.py and using only the standard library (http.server and json, "
        "links kept in memory)",
    )
    table = prose(
        ("API description as a table of endpoints", "| Endpoint | Status |\n|---|---|\n| POST /api/links | 201 |"),
        ("Implementation in one file, shortener.py, using only the standard library (http", "import json\n" * 9),
        ("Usage: implementation in one file, shortener.py, standard library", "Run it with python. " * 4),
    )
    cut = parse_output(table, "table", "e", min_items=1, max_items=5)
    own_table = "API description as a table of endpoints with request bodies and responses and status codes"
    assert [label for label, _ in repeated_sections(cut, "task", others=long_other, own=own_table)] == ["2"]


def prose_job(task: str) -> SlotJob:
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable="prose")
    return SlotJob(
        spec=spec, task=task, constraints=(), expert="medical_clinical", persona="You explain.", references={},
        max_tokens=600, temperature=0.0,
    )  # fmt: skip


LOOPING = "## Outline\n1. Colds\n\n## 1. Colds\n" + "The flu is caused by a virus. " * 17 + "\n"
PLAIN_PROSE = (
    "## Why\nColds are caused by viruses.\nAntibiotics only work on bacteria, so they cannot help.\n"
    "Ask [Your Doctor] (see [the leaflet](https://example.org)).\n"
)


def test_a_looping_prose_answer_draws_the_plain_prompt_and_keeps_its_words_as_the_one_section() -> None:
    backend = Scripted([LOOPING, PLAIN_PROSE])
    task = "Explain to a patient why antibiotics do not help a common cold."
    outcome = run_slot(prose_job(task), backend, settings(), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    assert [c.prompt for c in outcome.result.quality.candidates] == ["contract", "plain"]
    assert [m.content for m in backend.requests[1].messages] == [task]
    assert outcome.result.quality.chosen == "c2" and outcome.result.compliant
    assert outcome.result.raw == (
        "## Outline\n1. Answer\n\n## 1. Answer\n### Why\nColds are caused by viruses.\n"
        "Antibiotics only work on bacteria, so they cannot help.\n"
        "Ask {{UNRESOLVED:user:Your Doctor - needs user input}} (see [the leaflet](https://example.org)).\n"
    )  # the model's words, its heading one level under the section's, its placeholder an assist (not the link)


def test_the_first_plain_answer_is_greedy_whatever_the_experts_temperature() -> None:
    """It is the bare model's own answer, not a sample at the expert's temperature (0.2 here)."""
    backend = Scripted([LOOPING, LOOPING, PLAIN_PROSE])
    job = replace(prose_job("Explain to a patient why antibiotics do not help a common cold."), temperature=0.2)
    run_slot(job, backend, settings(), emit=lambda _: None)
    assert [r.messages[0].role for r in backend.requests][:2] == ["system", "user"]  # contract, then plain
    assert [r.temperature for r in backend.requests][:2] == [0.2, 0.0]


AS_AN_AI = (
    "Dear Landlord,\n\nAs an AI language model, I am committed to providing assistance. However, I cannot provide "
    "advice on politics.\n\nBest regards,\nSam\n"
)
EMAIL = "Dear Landlord,\n\nThe kitchen tap leaks. Could you fix it this week?\n\nBest regards,\nSam\n"


@pytest.mark.parametrize(
    ("text", "speaks"),
    [
        ("As an AI language model, I am committed to helping.", True),
        ("As an AI, I cannot give advice.", True),
        ("I'm an AI assistant.", True),
        ("I am an AI developed by a lab.", True),
        ("She works as an AI research lead.", False),
        ("I am an AI researcher at a lab.", False),
        ("Language models such as these are an AI topic.", False),
    ],
)
def test_an_answer_that_speaks_as_an_ai_model_fails(text: str, speaks: bool) -> None:
    check = speaks_as_ai_check(text)
    assert check.name == "prose.speaks_as_ai" and check.severity == "hard"
    assert check.passed is not speaks


def test_a_plain_answer_that_speaks_as_an_ai_model_loses_to_one_that_does_the_work() -> None:
    """The review set's email to a landlord: the greedy plain answer spoke as an AI model and was kept."""
    task = "Write a polite email asking my landlord to fix a leaking kitchen tap this week."
    backend = Scripted([LOOPING, AS_AN_AI, LOOPING, EMAIL])
    outcome = run_slot(prose_job(task), backend, settings(best_of=4), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    quality = outcome.result.quality
    assert [c.prompt for c in quality.candidates] == ["contract", "plain", "contract", "plain"]
    assert quality.chosen == "c4" and quality.passed
    assert "The kitchen tap leaks." in outcome.result.raw and "As an AI" not in outcome.result.raw


def test_a_plain_plan_kept_as_one_part_follows_the_contract() -> None:
    """A plan's contract asks for 2-7 steps; the plain answer is the one part by design (review set: a clean
    list of steps was kept with a caveat, "outline has 1 top-level item", after four attempts)."""
    steps = "1. **Rotate**: create a new key.\n2. **Deploy**: roll it out.\n3. **Revoke**: revoke the old key.\n"
    looping_plan = "## Outline\n1. Steps\n2. More\n\n## 1. Steps\n" + "Rotate the key now please. " * 17 + "\n"
    backend = Scripted([looping_plan, steps])
    task = "List the steps to rotate a leaked API key."
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable="plan")
    job = SlotJob(
        spec=spec, task=task, constraints=(), expert="security_architect",
        persona="You plan.", references={}, max_tokens=600, temperature=0.0,
    )  # fmt: skip
    outcome = run_slot(job, backend, settings(), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    assert outcome.result.quality.chosen == "c2" and outcome.result.compliant and outcome.result.quality.passed
    assert len(backend.requests) == 2  # the plain answer passed: nothing more is drawn


def test_a_prose_answer_that_fails_for_another_reason_is_retried_on_the_contracts_prompt_only() -> None:
    cut = "## Outline\n1. Colds\n\n## 1. Colds\nColds are caused by viruses and"
    backend = Scripted([cut, cut, cut])
    run_slot(prose_job("Explain why antibiotics do not help a cold."), backend, settings(), emit=lambda _: None)
    assert len(backend.requests) > 1
    assert all(r.messages[0].role == "system" for r in backend.requests)  # never the plain prompt (the task alone)


def test_a_caveat_shows_a_quoted_placeholder_without_its_braces() -> None:
    """A check's detail quotes the placeholder the answer leaked; the document must not hold it as a placeholder."""
    leak = CheckResult(
        name="contract.placeholders",
        passed=False,
        detail="the answer copies the protocol's example placeholder ('{{ASSIST:user:the detail}}')",
    )
    caveat = SlotQuality(deliverable="prose", checks=[leak]).caveat or ""
    assert "('ASSIST:user:the detail')" in caveat and "{{" not in caveat and "}}" not in caveat


def test_a_warning_that_quotes_a_placeholder_puts_none_in_the_document(write_script: Any) -> None:
    """test_assist_real on the 1.5B (2026-12-07): every answer copied the protocol's example placeholder; the caveat
    showed it without braces, but the Warnings line quoted it as written, a raw placeholder in the document."""
    copied = answer("Welcome", "Welcome aboard. The database host is {{ASSIST:user:the detail}} for now.")
    script = write_script({"rules": [{"slot": "note", "text": copied}]})
    plan = {"id": "p", "title": "P", "slots": [{"id": "note", "title": "Welcome", "description": "A welcome note"}]}
    state = run_plan(script, "Write a welcome note", plan)
    doc = state.document or ""
    assert "contract.placeholders" in doc.partition("## Warnings")[2]
    assert not re.search(r"\{\{\s*ASSIST\s*:(?:lookup|expert|user):[^{}]*\}\}", doc, re.I)


def test_a_plain_prose_answers_headings_go_under_its_section_but_its_code_blocks_are_kept_as_written() -> None:
    contract = contract_for(SlotSpec(id="a", title="A", description="Explain how to compute an average speed"), "")
    answer = (
        "# Average speed\nSend it to [Your Name].\n\n```python\n# distance over time\nspeeds = [ITEMS]\n```\n"
        "## Result\nIt is 60 km/h."
    )
    assert not contract.code_first
    assert wrap_plain(answer, contract, "Average speed") == (
        "## Outline\n1. Average speed\n\n## 1. Average speed\n### Average speed\n"
        "Send it to {{ASSIST:user:Your Name}}.\n\n```python\n# distance over time\nspeeds = [ITEMS]\n```\n"
        "#### Result\nIt is 60 km/h.\n"
    )  # the answer's title stays over its part


def test_a_plain_prose_answers_heading_levels_keep_their_hierarchy_and_parse_as_one_part() -> None:
    contract = contract_for(SlotSpec(id="a", title="A", description="Write the README's Installation section"), "")
    answer = "# csvtidy\n\n## 1. Installation\nRun pip.\n\n### Notes\nNone.\n\n## 2. Usage\nRun it."
    wrapped = wrap_plain(answer, contract)
    assert "### csvtidy\n\n#### 1. Installation\nRun pip.\n\n##### Notes\nNone.\n\n#### 2. Usage\n" in wrapped
    flat = wrap_plain("## Installation\nRun pip.\n\n## Usage\nRun it.", contract)
    assert "### Installation\nRun pip.\n\n### Usage\nRun it." in flat  # one level: as before
    # its own numbered headings are not the contract's sections: the answer is one part, kept whole
    result = plain_result(answer, contract, "Answer", slot_id="a", expert="", attempts=1)
    assert result.compliant and [s.title for s in result.sections] == ["Answer"] and result.raw == wrapped
    assert result.sections[0].body.endswith("#### 2. Usage\nRun it.")


def test_an_assert_after_the_words_of_a_line_is_an_example() -> None:
    # MBPP's way, as a user writes it: the test after a colon, on the line of the request
    task = (
        "Write a function to find the n largest integers from a given list of numbers. Your code should pass this "
        "test: assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],3)==[85, 75, 65]"
    )
    assert extract_examples(task).asserts == (
        ("heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],3)", "[85, 75, 65]"),
    )
    assert not extract_examples("We assert that f(x) is fine. And f(2) is 4.").asserts


def test_a_result_rounded_to_its_digits_a_unit_before_the_result_and_a_step_on_corrected_results() -> None:
    # money to the cent is right: 2721.6 x 0.28 is 762.048 (it was "corrected" to 762.048)
    assert compute("after: 2721.6 × 0.28 = 762.05.") == ("after: 2721.6 × 0.28 = 762.05.", [])
    assert compute("3 * 2.5 = 8")[0] == "3 * 2.5 = 7.5"  # a whole number claims to be the value itself
    # multipart_new8's runbook: "0.999 * 43200 minutes = 43156.8 minutes" had "= 43156.8" put in after 43200
    budget = "The error budget is 0.999 * 43200 minutes = 43156.8 minutes of uptime."
    assert compute(budget) == (budget, [])
    # multipart_set3_first, mp3-server-consolidation: both products wrong, then their difference from the wrong ones
    memo = "\\[ 14 \\times 350 \\times 720 = 70,560 \\] and 9 × 420 × 720 = 84,672. So 70,560 - 84,672 = -14,112 Wh."
    text, changes = compute(memo)
    assert text == (
        "\\[ 14 \\times 350 \\times 720 = 3,528,000 \\] and 9 × 420 × 720 = 2,721,600. So 3,528,000 - 2,721,600 = "
        "806,400 Wh."
    )
    assert changes[-1] == "corrected 3,528,000 - 2,721,600 = -14,112 to 806,400"
