"""Checks that see what a reader sees (issue 39): code written twice, a text left inside code, made-up output.

Built from the documents the default install (every expert on Qwen2.5-Coder-0.5B) delivered with every check
passed: the README demo wrote ``is_palindrome`` under "1. Usage" and again under "2. `is_palindrome` function",
then stopped at "If they are equal, the function `"; the mortgage answer showed an "output" its program never
printed and boxed its $2,500.
"""

from __future__ import annotations

import pytest

from engine.slots.checks import CheckContext, check_answer, cut_unfinished_end, ending_check
from engine.slots.checks.contract import broken_paragraph, duplicates_check, repeated_code
from engine.slots.checks.printed import unprinted_outputs, wrong_print_comments
from engine.slots.contracts import contract_of
from engine.slots.job import SlotJob
from engine.slots.run import run_slot
from engine.slots.sandbox import SandboxLimits
from state.context import resolve_settings
from state.framework import Deliverable, SlotSpec
from state.outline import parse_output
from state.quality import CheckResult
from state.result import SlotResult
from state.settings import Settings
from tests.unit.scripted import Scripted

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


def settings(**values: object) -> Settings:
    return resolve_settings({"backend": "fake", "best_of": 3, **values}, env={})


def code_job(task: str = DEMO_TASK) -> SlotJob:
    """A code slot of a plan (the contract's prompt only: every draw is the scripted text)."""
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable="code", language="python")
    return SlotJob(
        spec=spec, task=f"A small text utilities package.\n{task}", constraints=(), expert="python_coder",
        persona="You write Python.", references={}, max_tokens=600, temperature=0.0,
    )  # fmt: skip


# --- the same code twice --------------------------------------------------------------------------------------


def test_the_demos_function_under_two_sections_is_a_hard_duplicate() -> None:
    checks = checks_of(DEMO)
    assert checks["contract.duplicates"] == (False, "section 2 repeats a code block of section 1")
    assert checks["python.runs"][0]  # the code itself is sound: the repeat is what a reader trips on
    assert checks_of(CLEAN)["contract.duplicates"] == (True, "")


def test_a_kept_answer_that_still_repeats_its_function_loses_the_repeat_and_its_broken_end() -> None:
    outcome = run_slot(code_job(), Scripted([DEMO]), settings(), emit=lambda _: None)
    result = outcome.result
    assert result is not None and result.quality is not None
    assert len(result.quality.candidates) == 3  # hard: every draw was the demo, so more were drawn
    assert result.raw.count("def is_palindrome") == 1
    assert result.sections[0].body.strip() == f"```python\n{FUNCTION}```"  # the module, untouched
    assert result.sections[1].body == EXPLANATION  # the explanation stays, cut back to its last full sentence
    assert result.raw.rstrip().endswith("with its reverse.")
    cuts = {e.action: e.outputs_summary for e in outcome.ledger if e.agent == "harness"}
    assert cuts["cut_sections"] == "section 2 repeats a code block of section 1: removed, nothing reworded"
    assert "'If they are equal, the function `' removed" in cuts["cut_unfinished_end"]
    kept = {c.name: c.passed for c in result.quality.checks}
    assert kept["contract.duplicates"] and kept["contract.ends"]
    assert outcome.notices == []  # the warnings speak of the text delivered, as its checks do


def test_a_demo_answer_draws_another_candidate_and_keeps_the_clean_one() -> None:
    backend = Scripted([DEMO, CLEAN])
    outcome = run_slot(code_job(), backend, settings(), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.raw == CLEAN and len(backend.requests) == 2
    assert "contract.duplicates: section 2 repeats a code block" in backend.requests[1].messages[-1].content


USAGE_AGAIN = (
    "## Outline\n1. is_palindrome\n2. Usage\n\n"
    f"## 1. is_palindrome\n```python\n{FUNCTION}```\n\n"
    "## 2. Usage\n```python\ndef is_palindrome(s):\n    return s == s[::-1]\n\n"
    "print(is_palindrome('racecar'))\nprint(is_palindrome('hello'))\n```\n"
)


def test_a_function_defined_again_under_its_name_is_a_second_version_of_a_module_and_its_calls_stay() -> None:
    assert checks_of(USAGE_AGAIN)["contract.duplicates"] == (
        False,
        "section 2 defines is_palindrome again (section 1 does)",
    )
    [again] = repeated_code(parsed(USAGE_AGAIN), module=True)
    assert again.kept == "```python\nprint(is_palindrome('racecar'))\nprint(is_palindrome('hello'))\n```"
    outcome = run_slot(code_job(), Scripted([USAGE_AGAIN]), settings(best_of=1), emit=lambda _: None)
    assert outcome.result is not None
    assert [s.title for s in outcome.result.sections] == ["is_palindrome", "Usage"]
    assert outcome.result.sections[1].body == again.kept
    # a tutorial in prose may improve a function under the same name; the same body twice is a repeat anywhere
    assert repeated_code(parsed(USAGE_AGAIN, "prose")) == []
    renamed = USAGE_AGAIN.replace(
        "def is_palindrome(s):\n    return s == s[::-1]\n", FUNCTION.replace("is_pal", "is_a_pal")
    )
    [same] = repeated_code(parsed(renamed, "prose"))
    assert same.why == "section 2 defines is_a_palindrome, the same function as is_palindrome of section 1"


def test_code_that_is_not_written_twice_is_no_duplicate() -> None:
    restart = "```bash\nsudo systemctl restart nginx\n```"
    plan = (
        "## Outline\n1. Change the config\n2. Renew the certificate\n\n"
        f"## 1. Change the config\nEdit the server block, then restart:\n{restart}\n\n"
        f"## 2. Renew the certificate\nRun certbot renew, then restart:\n{restart}\n"
    )
    assert repeated_code(parsed(plan, "plan")) == []  # a one-line command at two steps is a runbook's way
    classes = (
        "## Outline\n1. Shapes\n2. More shapes\n\n"
        "## 1. Shapes\n```python\nclass Square:\n    def area(self):\n        return self.side ** 2\n```\n\n"
        "## 2. More shapes\n```python\nclass Circle:\n    def area(self):\n        return 3.14 * self.r ** 2\n```\n"
    )
    assert repeated_code(parsed(classes), module=True) == []  # two classes' methods of one name
    table = "```\nName,Age\nAlice,25\nBob,30\n```"
    readme = (  # the review set's README: an example whose input and output read the same, in one section
        "## Outline\n1. Example\n\n## 1. Example\nGiven `data.csv`:\n\n"
        f"{table}\n\nrun `csvtidy data.csv -o out.csv`. This writes `out.csv` with the following content:\n\n{table}\n"
    )
    assert repeated_code(parsed(readme, "prose")) == []
    assert duplicates_check(parsed(classes), DEMO_TASK, module=True).passed


def test_the_line_that_announced_a_repeated_block_goes_with_it() -> None:
    announced = DEMO.replace(
        "## 2. `is_palindrome` function\n```", "## 2. `is_palindrome` function\nHere is the function:\n```"
    )
    [again] = repeated_code(parsed(announced), module=True)
    section = parsed(announced).sections[1]
    assert section.body[again.start : again.end] == f"Here is the function:\n```python\n{FUNCTION}```"


# --- a text left inside code ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (f"{EXPLANATION} If they are equal, the function `", "stops inside an inline code span it opened"),
        ("It strips the text. Then it calls `is_pal", "stops inside an inline code span it opened"),
        ("Here is the code:\n\n```python\ndef f(x):\n    return g(x)", "ends inside a code block it never closed"),
        ("It returns the cleaned text, the one `str.lower()` made", "stops mid-sentence"),
        # review_whole_dec07, sql-running-total and sql-top-customers: the usage notes broke off on a column's name
        (
            "The result is a table with three columns: `sale_date`, `amount`, and `running_total`. The `amount` "
            "column shows the revenue for each day, and the `running_total`",
            "stops mid-sentence",
        ),
        (
            "This query assumes that the `orders` table has an `id` column, an `amount` column, and a `created_at`",
            "stops",
        ),
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
        "Then call `main()`",
        f"```python\n{FUNCTION}```",
    ],
)
def test_a_closed_code_span_or_block_ends_as_before(text: str) -> None:
    assert ending_check(text).passed


def test_a_paragraph_that_breaks_off_in_a_code_span_before_a_block_is_found() -> None:
    """multipart_set3_pieces2, mp3-bike-repair-sqlite: the usage note stopped mid-word and began the script again."""
    note = (
        "This script connects to the SQLite database and prints them as a call sheet. The results are fetched "
        "using a SQL `EXE\n\n```python\nimport sqlite3\n\nconn = sqlite3.connect('bikes.db')\n```\n"
    )
    assert broken_paragraph(note) == "The results are fetched using a SQL `EXE"
    assert broken_paragraph(note.replace("`EXE", "`EXECUTE` call.")) is None
    assert broken_paragraph("Run it like this:\n\n```bash\npython `main.py`\n```\n") is None
    assert broken_paragraph("Type the backtick (`) before the name.\n```text\nx\n```") is None


def test_a_usage_note_that_breaks_off_on_a_column_name_is_cut_back_to_its_last_full_sentence() -> None:
    """review_whole_dec07, sql-running-total: the query's note stopped on "and the `running_total`", every check
    passed (a line ending on a backtick read as finished), and the document ended mid-sentence."""
    task = "Write a SQL query that shows each day's revenue and the running total of revenue by day."
    query = "SELECT sale_date, amount, SUM(amount) OVER (ORDER BY sale_date) AS running_total\nFROM sales;"
    whole = "The result is a table with three columns: `sale_date`, `amount`, and `running_total`."
    gone = "The `amount` column shows the revenue for each day, and the `running_total`"
    raw = f"## Outline\n1. Query\n2. Usage\n\n## 1. Query\n```sql\n{query}\n```\n\n## 2. Usage\n{whole} {gone}\n"
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable="code", language="sql")
    job = SlotJob(
        spec=spec, task=task, constraints=(), expert="sql_specialist", persona="You write SQL.", references={},
        max_tokens=600, temperature=0.0,
    )  # fmt: skip
    outcome = run_slot(job, Scripted([raw]), settings(best_of=1), emit=lambda _: None)
    result = outcome.result
    assert result is not None and result.quality is not None
    assert result.sections[-1].body == whole and result.raw.rstrip().endswith("and `running_total`.")
    cuts = {e.action: e.outputs_summary for e in outcome.ledger if e.agent == "harness"}
    assert f"{gone!r} removed" in cuts["cut_unfinished_end"]
    assert {c.name: c.passed for c in result.quality.checks}["contract.ends"]


def test_the_demos_ending_fails_and_is_cut_back_to_its_last_full_sentence() -> None:
    assert checks_of(DEMO)["contract.ends"][0] is False  # soft for code: the note is cut, not redrawn for
    tail = f"{EXPLANATION} If they are equal, the function `"
    assert cut_unfinished_end(tail) == (EXPLANATION + "\n", "If they are equal, the function `")
    over_lines = "It is short.\nThen it calls `is_pal\nand compares"
    assert cut_unfinished_end(over_lines) == ("It is short.\n", "Then it calls `is_pal\nand compares")
    unclosed = "Here is the code:\n\n```python\ndef f(x):\n    return g(x)"
    assert cut_unfinished_end(unclosed) == (unclosed, None)  # code is never cut


# --- an output no program printed -----------------------------------------------------------------------------

MORTGAGE_TASK = "Compute the monthly payment on a 300,000 dollar mortgage at 6% annual interest over 30 years."
MORTGAGE_PROGRAM = (
    "principal = 300000\nannual_rate = 0.06\nyears = 30\n\n"
    "monthly_rate = annual_rate / 12\nn = years * 12\n"
    "payment = principal * monthly_rate * (1 + monthly_rate) ** n / ((1 + monthly_rate) ** n - 1)\n"
    'print(f"Monthly payment: ${payment:.2f}")\n'
)
MORTGAGE = (
    "## Outline\n1. Monthly payment\n\n## 1. Monthly payment\n"
    "The monthly payment follows from the annuity formula, with the monthly rate and the number of payments.\n\n"
    f"```python\n{MORTGAGE_PROGRAM}```\n\nOutput:\n```\nMonthly payment: $2500.00\n```\n\n"
    "The monthly payment on the mortgage is $2,500.\n\n\\boxed{2500}\n"
)
"""The mortgage answer: a program, an "output" it never printed ($2,500: the interest alone), the same boxed."""


def finance_job(task: str = MORTGAGE_TASK) -> SlotJob:
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable="prose")
    return SlotJob(
        spec=spec, task=task, constraints=(), expert="finance_analyst", persona="You compute.", references={},
        max_tokens=600, temperature=0.0,
    )  # fmt: skip


def test_an_output_block_the_program_does_not_print_is_removed_and_its_number_gets_a_caveat() -> None:
    off = settings(best_of=1, calculate=False)  # the cut alone: no program of thought (the next test has it)
    outcome = run_slot(finance_job(), Scripted([MORTGAGE]), off, emit=lambda _: None)
    result = outcome.result
    assert result is not None and result.quality is not None
    assert "$2500.00" not in result.raw and "Output:" not in result.raw  # the block and the label that announced it
    assert f"```python\n{MORTGAGE_PROGRAM}```" in result.raw  # the program stays; nothing is reworded
    assert "The monthly payment on the mortgage is $2,500." in result.raw
    [entry] = [e for e in outcome.ledger if e.action == "cut_output"]
    assert entry.outputs_summary.startswith("removed an output block no program printed")
    assert "Monthly payment: $1798.65" in entry.outputs_summary  # what the program really prints
    caveat = result.quality.caveat or ""
    assert "python.printed: the answer states 2,500, which only an output block no program printed showed" in caveat
    assert any("python.printed" in n.message for n in outcome.notices)


def test_an_output_block_its_program_prints_is_kept() -> None:
    printed = MORTGAGE.replace("$2500.00", "$1798.65").replace("$2,500", "$1,798.65").replace("{2500}", "{1798.65}")
    outcome = run_slot(finance_job(), Scripted([printed]), settings(best_of=1), emit=lambda _: None)
    # drawn plain first (a computed finance task), the answer is kept whole as the one part, then the working
    assert outcome.result is not None and "Output:\n```\nMonthly payment: $1798.65\n```" in outcome.result.raw
    assert not any(e.action == "cut_output" for e in outcome.ledger)
    assert "**Result: $1798.65**" in outcome.result.raw  # the program of thought agrees


def test_the_mortgage_answer_ends_with_the_computed_payment_and_says_the_answer_departs_from_it() -> None:
    # the case, by default settings: the answer's $2,500 (the interest alone) is never delivered silently
    program = f"```python\n{MORTGAGE_PROGRAM}```"
    outcome = run_slot(finance_job(), Scripted([program, MORTGAGE, MORTGAGE, program]), settings(), lambda _: None)
    result = outcome.result
    assert result is not None and result.quality is not None
    working = result.sections[0]  # first: the reader meets the computed payment before the answer's $2,500
    assert working.title == "Computed result" and "**Result: $1798.65**" in working.body
    assert "The answer below does not state this value, and another program printed it too" in working.body
    assert "The monthly payment on the mortgage is $2,500." in result.raw  # the expert's words, kept
    assert any("math.result" in n.message and "two programs" in n.message for n in outcome.notices)


def test_a_finance_answers_wrong_latex_step_is_corrected_before_its_result_is_checked() -> None:
    # numeric_heldout2_after, nh2-present-value: "\\frac{25000}{1.47746} \\approx 17039.13", boxed, under a caveat
    task = "Determine the present value of £25,000 receivable at the end of 8 years, discounted at 5% per annum."
    program = "```python\nprint(25000 / 1.05 ** 8)\n```"
    answer = (
        "\\[ PV = \\frac{25000}{(1 + 0.05)^{8}} \\approx 17039.13 \\]\n\n"
        "So the present value is about \\(\\boxed{17039.13}\\)."
    )
    outcome = run_slot(finance_job(task), Scripted([program, answer]), settings(), lambda _: None)
    result = outcome.result
    assert result is not None and result.quality is not None and result.quality.passed
    assert "\\boxed{16920.98}" in result.raw and "17039" not in result.raw
    assert "**Result: 16,920.98** (rounded from 16920.984050717176)" in result.raw  # the vote agrees: no caveat
    [fix] = [e for e in outcome.ledger if e.action == "compute"]
    assert fix.outputs_summary.startswith("c1: corrected \\frac{25000}{(1 + 0.05)^{8}} \\approx 17039.13 to 16920.98")


def test_a_usage_blocks_output_is_run_after_the_functions_the_answer_defined() -> None:
    usage = (
        f"```python\n{FUNCTION}```\n\nUsage:\n```python\nprint(is_palindrome('A man, a plan, a canal: Panama'))\n"
        "print(is_palindrome('hello'))\n```\n\n# Output\n```text\nTrue\nFalse\n```\n"
    )
    assert unprinted_outputs([usage], SandboxLimits()) == []
    wrong = usage.replace("True\nFalse", "True\nTrue")
    [gone] = unprinted_outputs([wrong], SandboxLimits())
    assert gone.printed == "True\nFalse\n" and wrong[gone.start : gone.end] == "# Output\n```text\nTrue\nTrue\n```"


TAX_CODE = (
    "def compute_income_tax(salary):\n    if salary <= 10000:\n        return salary * 0.1\n"
    "    return 1000 + (salary - 10000) * 0.2\n\n# Usage\n"
    "print(compute_income_tax(30000))  # Output: 300.0\nprint(compute_income_tax(5000))  # Output: 500.0\n"
)
"""multipart_new8, mp-uk-tax: the usage lines' comments say what the function returns, and it returns else."""


def test_a_print_comment_that_says_what_its_program_does_not_print_is_set_to_what_it_prints() -> None:
    task = "Write a Python function that computes income tax for a salary."
    outcome = run_slot(code_job(task), Scripted([f"## Outline\n1. Tax\n\n## 1. Tax\n```python\n{TAX_CODE}```\n"]),
                       settings(best_of=1), emit=lambda _: None)  # fmt: skip
    assert outcome.result is not None
    assert "print(compute_income_tax(30000))  # Output: 5000.0" in outcome.result.raw
    assert "print(compute_income_tax(5000))  # Output: 500.0" in outcome.result.raw  # right: as written
    [fix] = [e for e in outcome.ledger if e.action == "fix_output_comment"]
    assert fix.outputs_summary == "a comment said print(compute_income_tax(30000)) prints '300.0'; it prints '5000.0'"
    # output that cannot be told apart per print (a print inside the function) is left as written
    inside = TAX_CODE.replace("        return salary * 0.1", "        print(salary)\n        return salary * 0.1")
    assert wrong_print_comments([f"```python\n{inside}```"], SandboxLimits()) == []
    # an untagged block is read as Python when it is (a README's example often is untagged)
    [untagged] = wrong_print_comments([f"```\n{TAX_CODE}```"], SandboxLimits())
    assert (untagged.claimed, untagged.printed) == ("300.0", "5000.0")
    assert wrong_print_comments(["```\nTrue\n5000.0  # Output: 300.0\n```"], SandboxLimits()) == []  # no statement


def test_an_output_block_whose_program_cannot_run_alone_is_removed_without_a_run() -> None:
    asks = (
        "```python\nname = input('Your name: ')\nprint('Hello, ' + name)\n```\n\n"
        "```output\nYour name: Ada\nHello, Ada\n```\n"
    )
    [gone] = unprinted_outputs(["Some words first.", asks], SandboxLimits(timeout_s=0.001))  # no time to run
    assert (gone.body, gone.printed) == (1, None) and "input()" in gone.why
    spans = asks[gone.start : gone.end]
    assert spans.startswith("```output") and spans.endswith("Hello, Ada\n```")


def test_code_after_an_output_label_and_output_after_other_blocks_are_left_alone() -> None:
    code_after_label = f"```python\n{FUNCTION}```\n\nTo print the result:\n```\nprint(is_palindrome('abba'))\n```\n"
    after_sql = "```sql\nSELECT count(*) FROM users;\n```\n\nOutput:\n```\n42\n```\n"
    assert unprinted_outputs([code_after_label, after_sql], SandboxLimits()) == []


def test_a_section_that_only_showed_a_made_up_output_goes_with_it() -> None:
    shown = (
        "## Outline\n1. is_palindrome\n2. Output\n\n"
        f"## 1. is_palindrome\n```python\n{FUNCTION}```\n\n## 2. Output\n```output\nTrue\n```\n"
    )
    outcome = run_slot(code_job(), Scripted([shown]), settings(best_of=1), emit=lambda _: None)
    result = outcome.result
    assert result is not None  # the function prints nothing, and the section held nothing else
    assert [(s.title, s.body) for s in result.sections] == [("is_palindrome", f"```python\n{FUNCTION}```")]
    assert [o.title for o in result.outline] == ["is_palindrome"] and "True" not in result.raw
    cuts = [e.action for e in outcome.ledger if e.agent == "harness"]
    assert cuts == ["cut_output", "cut_sections"]


KAFKA_LOOP = (
    "```python\nimport json\nimport kafka\nfrom kafka.errors import KafkaError\n"
    + "from kafka.consumer import KafkaConsumer\n"
    + "from kafka import KafkaConsumer\nfrom kafka.errors import KafkaError\n" * 10
    + "```\n\nThis answer fulfills the required output structure by including a reference producer."
)
"""mp-event-contract's consumer part on the 0.5B (bench/results/multipart_completion.json), as it was delivered."""


def test_code_that_loops_fails_its_check_in_an_answer_of_any_kind() -> None:
    from engine.slots.checks.code import loop_check

    check = loop_check(KAFKA_LOOP)
    assert not check.passed and check.severity == "hard"
    assert "'from kafka import KafkaConsumer / from kafka.errors import KafkaError' is written 10 times" in check.detail
    fine = "```python\nrows = [\n    (1, 'a'),\n    (2, 'b'),\n    (3, 'c'),\n    (4, 'd'),\n]\n}\n}\n}\n}\n```"
    assert loop_check(fine).passed  # rows that differ, and a language's closing lines, are no loop


# --- a citation nobody made -------------------------------------------------------------------------------------

# review_personas_on_1p5b, sec-api-keys: the security architect on the 1.5B, writing a part after one whose
# assists the harness had resolved, cited experts that do not exist.
CITED = (
    "## Outline\n1. Generate a new API key\n2. Rotate it\n\n"
    "## 1. Generate a new API key\n"
    "Use a UUID to generate a unique identifier for the new API key. [source: consulted expert uuid_generator]\n"
    "Set an expiration date long enough to last until the leak is resolved. "
    "{{UNRESOLVED:user:what are all the places where this API key is used? - needs user input}}\n\n"
    "## 2. Rotate it\nDeploy the new key beside the old one, switch every client over, then revoke the old key "
    "at the provider.\n"
)


def test_a_source_tag_the_model_wrote_fails_and_a_kept_one_is_cut_with_its_marker() -> None:
    checks = checks_of(CITED, "plan")
    passed, detail = checks["contract.sources"]
    assert not passed and "'[source: consulted expert uuid_generator]'" in detail
    outcome = run_slot(code_job("List the steps to rotate a leaked API key"), Scripted([CITED]), settings(),
                       emit=lambda _: None)  # fmt: skip
    result = outcome.result
    assert result is not None and result.quality is not None and len(result.quality.candidates) == 3
    assert "[source:" not in result.raw and "UNRESOLVED" not in result.raw
    assert "Use a UUID to generate a unique identifier for the new API key." in result.raw  # nothing reworded
    [cut] = [e for e in outcome.ledger if e.action == "cut_sources"]
    assert cut.outputs_summary.startswith("removed 2 source tag(s) the model wrote: '[source: consulted expert")
    assert {c.name: c.passed for c in result.quality.checks}["contract.sources"]
    assert checks_of(CLEAN)["contract.sources"] == (True, "")


# --- tests that fail against the code they are delivered with -------------------------------------------------

PARKING_TASK = (
    "Our car park tariff: the first 30 minutes are free; after that it's 2.50 per started hour of the whole stay "
    "(61 minutes counts as two hours), capped at 18.00. I want parking_fee(minutes) in tariff.py returning the fee, "
    "pytest tests that cover the edges, and the wording for the tariff sign at the entrance."
)
PARKING = """## Outline
1. Implement the `parking_fee` function in `tariff.py`.
2. Write pytest tests to cover the edges of the function.

## 1. Implement the `parking_fee` function in `tariff.py`.
```python
def parking_fee(minutes):
    if minutes < 0 or minutes > 1440:
        raise ValueError("Number of minutes must be between 0 and 1440.")
    if minutes <= 30:
        return 0
    else:
        hours = minutes // 60
        if hours > 2:
            hours = 2
        return 2.50 * hours
```

## 2. Write pytest tests to cover the edges of the function.
```python
import pytest

def test_parking_fee():
    assert parking_fee(0) == 0
    assert parking_fee(30) == 0
    assert parking_fee(31) == 2.50
```
"""
"""multipart_set3_first, mp3-parking-tariff (one slot, the 1.5B): the fee floors the hours and caps them at two, its
own test expects 2.50 for 31 minutes, where the code returns 0; delivered with no caveat."""


def test_an_answers_tests_that_fail_against_its_code_are_said_in_its_caveat() -> None:
    outcome = run_slot(code_job(PARKING_TASK), Scripted([PARKING]), settings(best_of=1), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    quality = outcome.result.quality
    assert quality.passed  # the code runs; which of the two is wrong the checks cannot say
    assert quality.caveat == (
        "Its tests fail against its code (test_parking_fee(): assert parking_fee(31) == 2.50 (parking_fee(31) is "
        "0.0)): the code or the tests are wrong."
    )
    right = PARKING.replace("parking_fee(31) == 2.50", "parking_fee(31) == 0")
    again = run_slot(code_job(PARKING_TASK), Scripted([right]), settings(best_of=1), emit=lambda _: None)
    assert again.result is not None and again.result.quality is not None and again.result.quality.caveat is None


@pytest.mark.parametrize(
    "task",
    [
        "could you write me a little convert_length(value, from_unit, to_unit)? I'd also like pytest tests (pytest."
        "approx is fine) and a tiny table for the wall chart.",
        "Need cart_total(lines, code=None) in cart.py.\nPlus pytest tests and a short FAQ answer for customers.",
        "parse_duration(text) -> int seconds, in durations.py. Function plus pytest tests please.",
    ],
)
def test_a_task_that_asks_for_tests_in_other_words_gets_tests(task: str) -> None:
    """multipart_set3_first: three of its eight code-and-tests tasks were delivered without tests, no word said."""
    contract = contract_of("code", "python")
    checks, _ = check_answer(parsed(CLEAN), CheckContext(task, contract))
    [given] = [c for c in checks if c.name == "python.tests_given"]
    assert not given.passed and given.severity == "hard"
    assert "python.tests_given" not in {
        c.name for c in check_answer(parsed(CLEAN), CheckContext(DEMO_TASK, contract))[0]
    }


SHIPPING_PARAGRAPH = """Shipping rates are calculated based on the total weight of the items being shipped and the rules
provided. The formula is as follows:

- First kilogram: $4.50
- Every extra kilogram or part of one adds $1.20

The shipping-rates paragraph includes a description of how to use the shipping rates calculator, as well as examples
of how to calculate and display shipping rates for different scenarios.

This paragraph is designed to be clear and concise, with all necessary information included in its first sentence.
The examples are provided at the end of the paragraph. The paragraph also includes a section on error handling.
"""
"""multipart_set3_first, mp3-shipping-tiers: the checkout page's paragraph, about itself, with no worked example."""


def test_a_text_that_describes_itself_instead_of_being_written_fails() -> None:
    answer = f"## Outline\n1. Shipping rates\n\n## 1. Shipping rates\n{SHIPPING_PARAGRAPH}"
    checks = checks_of(answer, "prose")
    passed, detail = checks["prose.about_itself"]
    assert not passed and detail.startswith("it describes itself ('The shipping-rates paragraph includes")
    opening = "This section provides an overview of the loan. The payment is 1,798.65 a month, for 360 months."
    assert checks_of(f"## Outline\n1. Loan\n\n## 1. Loan\n{opening} The rate is 6%.\n", "prose")[
        "prose.about_itself"
    ] == (True, "")


def test_a_part_of_a_task_whose_figures_are_computed_has_its_arithmetic_computed() -> None:
    """multipart_set3_first, mp3-server-consolidation: a finance part's "14 \\times 350 \\times 720 = 70,560" stood."""
    task = "14 machines at 350 W each, 720 hours a month, 0.28 per kWh: work out the monthly energy and cost."
    spec = SlotSpec(id="energy", title="Energy", description=task, deliverable="prose")
    text = "## Outline\n1. Energy\n\n## 1. Energy\nThe energy is 14 × 350 × 720 = 70,560 Wh a month.\n"

    def kept(figures_task: bool) -> str:
        job = SlotJob(
            spec=spec, task=task, constraints=(), expert="finance_analyst", persona="You compute.", references={},
            max_tokens=600, temperature=0.0, figures_task=figures_task,
        )  # fmt: skip
        outcome = run_slot(job, Scripted([text]), settings(best_of=1, calculate=False), emit=lambda _: None)
        assert outcome.result is not None
        return outcome.result.raw

    assert "14 × 350 × 720 = 3,528,000 Wh" in kept(True)
    assert "= 70,560 Wh" in kept(False)  # a finance part of a task with no computed figures: as written


# --- a table row short of a cell ------------------------------------------------------------------------------

COMPARISON = (
    "| Feature | REST | GraphQL | gRPC |\n| --- | --- | --- | --- |\n"
    "| Data Representation | JSON | JSON | Protobuf |\n"
    "| Cost | Generally cheaper than GraphQL but more expensive than gRPC | More expensive than REST but more "
    "expensive than gRPC |\n"
)


def test_a_table_row_short_of_a_cell_fails_and_a_whole_table_is_kept() -> None:
    """review_whole_dec07, arch-comparison-table: the "Cost" row had three cells under four columns."""
    task = "Compare REST, GraphQL and gRPC for a mobile app's backend API in a table."
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable="table")
    job = SlotJob(
        spec=spec, task=task, constraints=(), expert="software_architect", persona="You design systems.",
        references={}, max_tokens=600, temperature=0.0,
    )  # fmt: skip
    whole = COMPARISON.replace("than gRPC |\n", "than gRPC | Cheapest to run at scale |\n")
    ragged, fixed = (f"## Outline\n1. Comparison\n\n## 1. Comparison\n{t}" for t in (COMPARISON, whole))
    outcome = run_slot(job, Scripted([ragged, fixed]), settings(), emit=lambda _: None)
    result = outcome.result
    assert result is not None and result.quality is not None
    first, kept = result.quality.candidates[0], result.quality.chosen
    [rows] = [c for c in first.checks if c.name == "table.rows"]
    assert not rows.passed and rows.detail.startswith("a row has 3 cells where its header has 4 ('| Cost |")
    assert kept == "c2" and "Cheapest to run at scale" in result.body_text()
    # a pipe inside a code span or escaped is the cell's own, and a table inside a code block is code
    piped = "## Outline\n1. T\n\n## 1. T\n| a | b |\n|---|---|\n| `x|y` | 1 \\| 2 |\n"
    assert checks_of(piped, "table")["table.rows"][0]
    fenced = "## Outline\n1. T\n\n## 1. T\nLike this:\n\n```text\n| a | b |\n|---|---|\n| 1 |\n```\n"
    assert checks_of(fenced, "prose")["table.rows"][0]


def test_a_paragraph_written_twice_is_a_loop() -> None:
    """The mystery scene through `coe run` on 2026-12-07: its last two paragraphs came again word for word."""
    from engine.slots.checks import repetition_check

    again = (
        "The conductor then explained how he would be taking the passengers to the mountain top where the missing "
        "person was hiding. He would wait for them there until they arrived safely."
    )
    opening = "As the train slowly pulled into the station, the passengers gathered."
    story = f"{opening}\n\n{again}\n\nThey set off.\n\n{again}\n"
    check = repetition_check(story)
    assert not check.passed and check.detail.startswith("a paragraph is written twice ('the conductor then")
    assert repetition_check(story.replace(f"\n\n{again}\n", "\n")).passed


# --- one named quantity, two values -----------------------------------------------------------------------------

NPV_ANSWER = (
    "## Outline\n1. Net Present Value (NPV) Calculation\n2. Project Evaluation\n\n"
    "## 1. Net Present Value (NPV) Calculation\n"
    "First, we calculate the present value of each cash flow:\n"
    r"- Year 1: \( \frac{4000}{(1 + 0.10)^1} = \frac{4000}{1.10} = 3636.37 \)"
    "\n"
    r"- Year 2: \( \frac{4000}{(1 + 0.10)^2} = \frac{4000}{1.21} = 3305.79 \)"
    "\n\n"
    "Next, we sum these present values:\n"
    r"\[ \text{NPV} = 3636.37 + 3305.79 + 3005.26 - 10000 = -52.58 \]"
    "\n\n"
    "## 2. Project Evaluation\n"
    "The NPV of the project is negative (-236.88), which means that the present value of the future cash flows is "
    "less than the initial investment. Therefore, this project is not worth it at a 10% discount rate.\n"
)
"""review_whole_dec07, fin-npv: the finance expert's kept answer (cut down), every check passed."""


def test_a_quantity_given_two_values_fails() -> None:
    passed, detail = checks_of(NPV_ANSWER, "prose")["numbers.one_value"]
    assert not passed
    assert detail == "the answer gives the NPV as -52.58 and as -236.88: work it out once and state one value"
    agreeing = NPV_ANSWER.replace("negative (-236.88)", "negative (52.58)")  # the sign a word carries
    assert checks_of(agreeing, "prose")["numbers.one_value"][0]
    rounded = NPV_ANSWER.replace("(-236.88)", "at about -52.6")  # rounded, within 1%
    assert checks_of(rounded, "prose")["numbers.one_value"][0]
    # 2026-12-07, the car's average speed: worked out as 54 km/h, boxed as 90
    speed = (
        "## Outline\n1. Answer\n\n## 1. Answer\n"
        "\\[\n\\text{Average Speed} = \\frac{90 \\text{ km}}{\\frac{5}{3} \\text{ hours}} = 54 \\text{ km/h}\n\\]\n\n"
        "The average speed of the car is \\(\\boxed{90}\\) km/h.\n"
    )
    passed, detail = checks_of(speed, "prose")["numbers.one_value"]
    assert not passed and detail.startswith("the answer gives the average speed as 54 and as 90")


@pytest.mark.parametrize(
    "prose",
    [
        # two conditions, each with its own number before the name (repeat_penalty_documents, math-percent)
        "So, after a 20% rise, the final price is $120.\nSo, after a 20% fall, the final price is $96.",
        # each year's own present value, written with a subscript
        "\\( \\text{PV}_1 = 3636.36 \\) and \\( \\text{PV}_2 = 3305.79 \\).",
        # a table's rows are one scenario each
        "| scenario | result |\n|---|---|\n| low rate | the NPV is 893 |\n| high rate | the NPV is -53 |",
        # a percentage and its fraction are one value
        "The IRR is 15%.\n\nIn decimal form, IRR = 0.15.",
        # an expression after the name is not its value
        "The monthly payment is 300000 * 0.005 / (1 - 1.005 ** -360).\n\nThe monthly payment is $1,798.65.",
        # a code block is not prose
        "```python\nNPV = 5\n```\n\nThe NPV is -52.59.",
        # one time in two units
        "The total time is 100 minutes.\n\nIn hours, the total time is 1.67 hours.",
    ],
)
def test_one_value_reads_conditions_subscripts_tables_and_code_as_no_second_value(prose: str) -> None:
    assert checks_of(f"## Outline\n1. Answer\n\n## 1. Answer\n{prose}\n", "prose")["numbers.one_value"][0]


# --- a script that never does what it was asked ----------------------------------------------------------------

CLEANUP_TASK = (
    "Write a bash script that deletes files older than 7 days in /var/log/myapp and logs the name of each file it "
    "deleted."
)
NO_DELETE = """#!/bin/bash

# Define the directory to search for files
LOG_DIR="/var/log/myapp"

# Get the current date
current_date=$(date +%Y-%m-%d)

# Iterate over all files in the directory
for file in "$LOG_DIR"/*; do
    # Get the file's modification time
    modification_time=$(stat -c "%Y-%m-%d" "$file")

    # Check if the file is older than 7 days
    if [ "$modification_time" -lt "$current_date - 7" ]; then
        # Log the file name
        echo "Deleted file: $file"
    fi
done
"""
"""2026-12-07, through ``coe run`` (the DevOps expert on the 0.5B): the kept script, every check passing."""


def test_a_script_asked_to_delete_that_deletes_nothing_fails() -> None:
    from engine.slots.checks.code import shell_does_check

    contract = contract_of("code", "bash")
    answer = parse_output(f"## Outline\n1. Code\n\n## 1. Code\n```bash\n{NO_DELETE}```\n", "s", "e")
    checks, _ = check_answer(answer, CheckContext(CLEANUP_TASK, contract, asked=CLEANUP_TASK))
    [does] = [c for c in checks if c.name == "bash.does"]
    assert not does.passed and does.severity == "hard"
    assert does.detail.startswith("the task asks the script to delete ('deletes'), and no command in it does")
    ran = {c.name: c.passed for c in checks}
    assert ran["bash.parses"] and ran["bash.lint"]  # bash -n and ShellCheck passed it
    found = 'find /var/log/myapp -type f -mtime +7 -print -delete >> "$LOG"\n'
    assert shell_does_check(found, CLEANUP_TASK).passed
    assert shell_does_check('for f in *.log; do\n  rm -f "$f"\ndone\n', CLEANUP_TASK).passed
    assert not shell_does_check("# rm -f old files here\necho done\n", CLEANUP_TASK).passed  # a comment does nothing
    listing = "Write a bash script that lists the files older than 7 days in /tmp, without deleting them."
    assert shell_does_check("find /tmp -mtime +7\n", listing).passed
    archive = "Write a shell script that compresses yesterday's logs into one archive."
    assert not shell_does_check("cp /var/log/*.log /backup/\n", archive).passed
    assert shell_does_check("tar -czf logs.tar.gz /var/log/*.log\n", archive).passed
    # a verb inside a file or unit name asks for nothing (multipart_set5_first, mp5-upload-purge-systemd: the config
    # file's part and the systemd units' part failed for "purge", and were sent back)
    config = "config /etc/upload-purge.conf in plain KEY=VALUE lines with UPLOAD_DIR=/srv/app/uploads/tmp"
    assert shell_does_check("UPLOAD_DIR=/srv/app/uploads/tmp\nMAX_AGE_HOURS=48\n", config).passed
    units = "systemd units upload-purge.service (Type=oneshot) and upload-purge.timer firing every 6 hours"
    assert shell_does_check("[Unit]\nDescription=Purge\n", units).passed
    assert not shell_does_check("echo done\n", "bash script purge.sh that deletes old uploads.").passed


def test_the_output_structures_instructions_written_into_a_block_are_a_leak() -> None:
    """2026-12-07, a completion part of a GitHub Actions task: its YAML block began with the contract's lines."""
    leaked = (
        "## Outline\n1. Workflow\n\n## 1. Workflow\n```yaml\n## Outline\n"
        '1. Write the line "## Outline". Under it write "1. " and a short title that names\n```\n'
    )
    passed, detail = checks_of(leaked, "data")["contract.leaks"]
    assert not passed and 'write the line "## outline"' in detail


TEAM_TASK = (
    "Write a short message to my team saying the Friday release moves to Monday because the payment tests failed."
)
TEAM_MESSAGE = (
    "## Outline\n1. Release update\n\n## 1. Release update\nDear Team,\n\nWe recently released a new version of our "
    "software on Friday. During the testing phase we encountered some issues with the payment system, and we are "
    "working on fixing them.\n\nBest regards,\n"
)
"""2026-12-07, through ``coe run`` (the generalist on the 0.5B): Monday, the news, is nowhere."""


def test_a_message_that_leaves_out_a_day_its_task_names_fails() -> None:
    from engine.slots.contracts import contract_for

    contract = contract_for(SlotSpec(id="answer", title="Answer", description=TEAM_TASK), "general_reasoning")
    assert contract.message

    def days(text: str, part_of_plan: bool = False) -> CheckResult | None:
        result = parse_output(text, "s", "e", min_items=1, max_items=1)
        ctx = CheckContext(TEAM_TASK, contract, asked=TEAM_TASK, part_of_plan=part_of_plan)
        return next((c for c in check_answer(result, ctx)[0] if c.name == "message.days"), None)

    failed = days(TEAM_MESSAGE)
    assert failed is not None and not failed.passed
    assert failed.detail == "the message does not name Monday, which the task names: say it"
    fixed = days(TEAM_MESSAGE.replace("on Friday.", "on Friday; it moves to Monday."))
    assert fixed is not None and fixed.passed
    assert days(TEAM_MESSAGE, part_of_plan=True) is None  # a part's description may name another part's days


def test_a_configuration_file_is_read_as_its_format() -> None:
    """multipart_set5_first, mp5-upload-purge-systemd and mp5-feature-flags: a config file, systemd units and a TOML
    file had no checker of their own (a unit was held to bash)."""
    from engine.slots.checks.code import block_checks

    def passed(language: str, code: str) -> tuple[bool, str]:
        [check] = block_checks(language, code, "")
        return check.passed, check.detail

    unit = "[Unit]\nDescription=Purge\n\n[Service]\nType=oneshot\nExecStart=/usr/local/bin/purge.sh\n"
    assert passed("ini", unit) == (True, "")
    assert passed("ini", "# settings\nUPLOAD_DIR=/srv/app/uploads/tmp\nMAX_AGE_HOURS=48\n") == (True, "")
    ok, detail = passed("ini", "# settings\nUPLOAD_DIR=/srv/app\nfind /srv -delete\n")
    assert not ok and "[line 3]: 'find /srv -delete" in detail  # the answer's own line number
    assert passed("toml", "[paths]\ninput_dir = 'in'\n") == (True, "")
    assert passed("toml", "[paths]\ninput_dir = in\n")[0] is False


def test_a_part_asked_for_two_files_must_hold_both() -> None:
    """multipart_set5_first and multipart_set5_rules2, mp5-upload-purge-systemd: the units part gave the service and
    no timer, and nothing said so (the only parts of the saved results whose ask names two files: both fail)."""
    from engine.slots.checks.code import files_check

    asked = (
        "deliver systemd units upload-purge.service (Type=oneshot, ExecStart the script) and upload-purge.timer "
        "firing every 6 hours"
    )
    service = "```ini\n[Unit]\nDescription=Purge\n\n[Service]\nType=oneshot\nExecStart=/usr/local/bin/purge.sh\n```\n"
    missing = files_check(service, asked)
    assert missing is not None and not missing.passed
    assert missing.detail.startswith("the part is asked for upload-purge.service, upload-purge.timer; upload-purge.t")
    timer = "\nupload-purge.timer:\n```ini\n[Timer]\nOnCalendar=*-*-* 00/6:00:00\nPersistent=true\n```\n"
    assert files_check(service + timer, asked).passed  # type: ignore[union-attr]
    assert files_check(service, "deliver a bash script purge.sh that reads /etc/purge.conf and hosts.txt") is None


def test_a_part_asked_for_curl_examples_runs_curl() -> None:
    """multipart_set5_rules2, mp5-url-shortener: the usage section described one endpoint's JSON body, no curl line,
    and ended there; every check passed."""
    asked = "write a usage section with curl examples"
    described = (
        "## Outline\n1. Usage section with curl examples\n\n## 1. Usage section with curl examples\n"
        "To use the shortener, send a JSON body with the url to POST /api/links and read the code it returns.\n"
    )
    contract = contract_of("prose", None)
    checks, _ = check_answer(parse_output(described, "s", "e"), CheckContext(asked, contract, asked=asked))
    [examples] = [c for c in checks if c.name == "examples.command"]
    assert not examples.passed and examples.detail.startswith("the part is asked for curl examples")
    shown = described + '\n```sh\ncurl -X POST http://127.0.0.1:8080/api/links -d \'{"url": "https://x.org"}\'\n```\n'
    checks, _ = check_answer(parse_output(shown, "s", "e"), CheckContext(asked, contract, asked=asked))
    assert [c.passed for c in checks if c.name == "examples.command"] == [True]
    checks, _ = check_answer(parse_output(described, "s", "e"), CheckContext("Explain it", contract, asked="x"))
    assert not [c for c in checks if c.name == "examples.command"]  # not asked: not checked


def test_a_section_that_fills_its_line_bound_was_cut_there() -> None:
    """multipart_set5_rules3, mp5-tip-pool: the working stopped after "- Ana: 36 hours", the grammar's 8th line, and
    every check passed; 169 sections of the saved documents hold exactly 8 lines, 55 hold 7."""
    lines = "\n".join(f"Step {n}: the kitchen share is worked out from the pool of tips." for n in range(1, 13))
    full = f"## Outline\n1. Working\n\n## 1. Working\n{lines}\n"
    contract = contract_of("prose", None)
    checks, _ = check_answer(parse_output(full, "s", "e"), CheckContext("t", contract, asked="t", bounded=True))
    [bound] = [c for c in checks if c.name == "contract.bound"]
    assert not bound.passed and bound.detail.startswith("section 1 'Working' reached the most lines a section may hold")
    fewer = full.replace("Step 12: the kitchen share is worked out from the pool of tips.\n", "")
    checks, _ = check_answer(parse_output(fewer, "s", "e"), CheckContext("t", contract, asked="t", bounded=True))
    assert not [c for c in checks if c.name == "contract.bound"]
    # a draw written without the grammar (the plain prompt) has no bound to fill
    checks, _ = check_answer(parse_output(full, "s", "e"), CheckContext("t", contract, asked="t"))
    assert not [c for c in checks if c.name == "contract.bound"]


def test_a_draw_under_the_grammar_that_fills_a_section_is_told_it_was_cut() -> None:
    """The slot's draw knows it was written under the grammar (the plain prompt's is not): the check runs there."""
    from dataclasses import dataclass

    from engine.slots.run import run_slot

    @dataclass
    class Bounded(Scripted):
        def supports_grammar(self) -> bool:
            return True

    lines = "\n".join(f"Step {n}: the kitchen share is worked out from the pool of tips." for n in range(1, 13))
    spec = SlotSpec(id="answer", title="Working", description="Show the working", deliverable="prose")
    job = SlotJob(spec=spec, task="Show the working", constraints=(), expert="general_reasoning", persona="You add.",
                  references={}, max_tokens=600, temperature=0.0)  # fmt: skip
    outcome = run_slot(job, Bounded([f"## Outline\n1. Working\n\n## 1. Working\n{lines}\n"]), settings(best_of=1),
                       emit=lambda _: None)  # fmt: skip
    assert outcome.result is not None and outcome.result.quality is not None
    assert "contract.bound" in {c.name for c in outcome.result.quality.checks if not c.passed}
