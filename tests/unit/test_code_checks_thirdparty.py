"""A check fails only for the code's own faults: a package the sandbox lacks is stood in for, not failed for.

Issue 40: the Flask checkout endpoint of "Design a REST API for a library lending system, implement the checkout
endpoint in Flask, and write the OpenAPI documentation for it" was sound, but the sandbox has no ``flask``: it was
delivered under a caveat (``python.runs: ModuleNotFoundError``) after four candidates were drawn against the
sandbox's lack. Here the same kind of module runs with a stand-in for ``flask``, a fault of its own still fails,
and a slot on the scripted backend draws one candidate.
"""

from __future__ import annotations

import importlib.util

import pytest

from engine.slots.checks import CheckContext, check_answer, python_modules, third_party_imports
from engine.slots.contracts import contract_of
from engine.slots.job import SlotJob
from engine.slots.run import run_slot
from engine.slots.sandbox import run_python
from state.context import resolve_settings
from state.framework import SlotSpec
from state.outline import parse_output
from state.quality import CheckResult, SlotQuality
from tests.unit.scripted import Scripted

FLASK_MISSING = importlib.util.find_spec("flask") is None
needs_no_flask = pytest.mark.skipif(not FLASK_MISSING, reason="flask is installed here: nothing is stood in for")

TASK = (
    "Design a REST API for a library lending system, implement the checkout endpoint in Flask, and write the "
    "OpenAPI documentation for it. A helper gives the due date of a loan, 14 days after it starts:\n"
    "due_date('2024-03-01') == '2024-03-15'\n"
)
FLASK_MODULE = '''from datetime import date, timedelta

from flask import Flask, jsonify, request

app = Flask(__name__)
BOOKS = {1: {"title": "Dune", "borrowed_by": None}}
LOAN_DAYS = 14


def due_date(start: str) -> str:
    """The day a loan that started on ``start`` (an ISO date) is due back."""
    return (date.fromisoformat(start) + timedelta(days=LOAN_DAYS)).isoformat()


@app.route("/checkout", methods=["POST"])
def checkout():
    data = request.get_json()
    book = BOOKS.get(data["book_id"])
    if book is None:
        return jsonify({"error": "no such book"}), 404
    if book["borrowed_by"] is not None:
        return jsonify({"error": "the book is already borrowed"}), 409
    book["borrowed_by"] = data["member_id"]
    return jsonify({"book_id": data["book_id"], "due": due_date(date.today().isoformat())}), 201


if __name__ == "__main__":
    app.run()
'''
FLASK_TESTS = """def test_checkout_lends_the_book():
    client = app.test_client()
    response = client.post("/checkout", json={"book_id": 1, "member_id": 7})
    assert response.status_code == 201
"""


def answer(module: str, tests: str | None = None, title: str = "Checkout endpoint") -> str:
    """An answer in the code contract: the module, then (if any) its tests."""
    outline = f"## Outline\n1. {title}\n" + ("2. Tests\n" if tests else "")
    text = f"{outline}\n## 1. {title}\n```python\n{module}```\n"
    return text + (f"\n## 2. Tests\n```python\n{tests}```\n" if tests else "")


def checks_of(text: str, task: str = TASK, **context: object) -> dict[str, CheckResult]:
    contract = contract_of("code", "python")
    result = parse_output(text, "checkout", "python_coder", min_items=contract.min_items, max_items=contract.max_items)
    checks, _ = check_answer(result, CheckContext(task, contract, **context))  # type: ignore[arg-type]
    return {c.name: c for c in checks}


def hard_failures(checks: dict[str, CheckResult]) -> dict[str, str]:
    return {c.name: c.detail for c in checks.values() if c.severity == "hard" and not c.passed}


# --- what the code imports -----------------------------------------------------------------------------------


def test_imports_are_sorted_into_the_standard_library_the_runs_own_modules_and_third_party() -> None:
    code = "import os, json\nfrom flask import Flask\nimport flask.views\nfrom . import sibling\n"
    inside = "def fetch(url):\n    import requests\n    return requests.get(url)\n"
    tests = "from checkout import due_date\nimport pytest\n"
    assert third_party_imports([code, inside, tests], {"checkout"}) == ["flask", "pytest", "requests"]
    assert third_party_imports(["def broken(:\n"], set()) == []  # what does not parse imports nothing


# --- the sandbox's stand-ins ---------------------------------------------------------------------------------


def test_a_stand_in_makes_a_flask_module_import_and_leaves_its_functions_as_written() -> None:
    program = FLASK_MODULE.replace('if __name__ == "__main__":', "if True:") + (
        "print(checkout.__name__, due_date('2024-03-01'))\n"
        "class BookView(flask.views.MethodView):\n    def get(self):\n        return 'listed'\n"
        "print(BookView().get())\n"
        "try:\n    raise flask.FlaskError('x')\nexcept flask.FlaskError:\n    print('caught')\n"
    )
    program = "import flask.views\n" + program
    ran = run_python({"main.py": program}, "main.py", stubs=["flask"])
    assert ran.ok, ran.stderr
    if FLASK_MISSING:
        assert ran.stubbed == ["flask"]
        assert ran.stdout.splitlines() == ["checkout 2024-03-15", "listed", "caught"]


def test_an_installed_package_is_never_stood_in_for() -> None:
    ran = run_python({"main.py": "import yaml\nprint(yaml.safe_load('a: 1'))"}, "main.py", stubs=["yaml"])
    assert ran.ok and ran.stubbed == [] and ran.stdout.strip() == "{'a': 1}"


def test_importing_requests_binds_no_network_but_loopback_and_a_real_bind_is_still_refused() -> None:
    # urllib3 binds ::1 at import to learn whether IPv6 works: that refusal failed every module importing requests
    loopback = "import socket\nwith socket.socket(socket.AF_INET) as s:\n    s.bind(('127.0.0.1', 0))\n"
    assert run_python({"main.py": loopback}, "main.py").violations == []
    wide = "import socket\nwith socket.socket(socket.AF_INET) as s:\n    s.bind(('0.0.0.0', 0))\n"
    assert "socket.bind" in run_python({"main.py": wide}, "main.py").violations[0]


# --- the checks ---------------------------------------------------------------------------------------------


def test_a_sound_flask_endpoint_passes_every_hard_check_and_names_what_the_sandbox_lacks() -> None:
    checks = checks_of(answer(FLASK_MODULE, FLASK_TESTS))
    assert hard_failures(checks) == {}
    assert checks["python.runs"].passed and checks["python.runs"].severity == "hard"
    assert checks["python.examples"].passed and checks["python.examples"].severity == "hard"  # due_date ran
    if FLASK_MISSING:
        assert checks["python.packages"].detail == (
            "flask is not installed in the sandbox: checked parse, lint and the code that does not need it"
        )
        tests = checks["python.tests"]  # its test client is a stand-in: soft, and it says why
        assert tests.severity == "soft" and tests.detail.startswith("flask is not installed in the sandbox: ")
        quality = SlotQuality(deliverable="code", language="python", checks=list(checks.values()))
        assert quality.passed and quality.caveat is not None and "flask is not installed" in quality.caveat
    else:
        assert "python.packages" not in checks


def test_a_name_error_in_its_own_helper_still_fails() -> None:
    broken = FLASK_MODULE.replace("timedelta(days=LOAN_DAYS)", "timedelta(days=LOAN_PERIOD)")
    failures = hard_failures(checks_of(answer(broken)))
    assert "NameError: name 'LOAN_PERIOD' is not defined" in failures["python.examples"]
    at_import = FLASK_MODULE.replace("LOAN_DAYS = 14", "LOAN_DAYS = loan_period('standard')")
    assert "NameError" in hard_failures(checks_of(answer(at_import)))["python.runs"]


def test_a_syntax_error_and_an_example_that_does_not_touch_the_stand_in_still_fail() -> None:
    assert "python.parses" in hard_failures(checks_of(answer(FLASK_MODULE.replace("def due_date(", "def due_date"))))
    wrong = FLASK_MODULE.replace("timedelta(days=LOAN_DAYS)", "timedelta(days=LOAN_DAYS + 1)")
    failures = hard_failures(checks_of(answer(wrong)))
    assert "returned '2024-03-16', expected '2024-03-15'" in failures["python.examples"]


@needs_no_flask
def test_a_failure_at_import_that_only_the_stand_in_caused_is_soft() -> None:
    # a stubbed function called at import time and its result used: real flask would give 14 here
    uses = FLASK_MODULE.replace(
        "LOAN_DAYS = 14", 'app.config["LOAN_DAYS"] = 14\nLOAN = timedelta(days=app.config["LOAN_DAYS"])\nLOAN_DAYS = 14'
    )
    checks = checks_of(answer(uses))
    assert hard_failures(checks) == {}
    runs = checks["python.runs"]
    assert runs.severity == "soft" and not runs.passed and runs.detail.startswith("it needs flask to import: TypeError")
    assert "flask is not installed" in checks["python.packages"].detail


@needs_no_flask
def test_an_example_that_only_the_stand_in_fails_is_not_counted() -> None:
    task = TASK + "checkout_status() == 201\n"
    module = FLASK_MODULE + "\n\ndef checkout_status():\n    return app.test_client().post('/checkout').status_code\n"
    examples = checks_of(answer(module), task)["python.examples"]
    assert examples.passed and examples.severity == "hard"
    assert examples.detail.startswith("1 of 1 examples pass (1 more need flask)")
    only = checks_of(answer(module), "Flask status:\ncheckout_status() == 201\n")["python.examples"]
    assert only.severity == "soft" and not only.passed and only.detail.startswith("no example runs without flask")


def test_a_module_that_imports_requests_and_uses_it_only_in_a_function_passes_with_its_run_checked() -> None:
    module = (
        "import requests\n\n\ndef word_count(text):\n    return len(text.split())\n\n\n"
        "def page_title(url):\n    return requests.get(url, timeout=5).text.split('<title>')[1].split('<')[0]\n"
    )
    task = "Write word_count(text), and page_title(url) that fetches a page with requests.\nword_count('a b c') == 3\n"
    checks = checks_of(answer(module, title="Word count"), task)
    assert hard_failures(checks) == {}
    assert checks["python.runs"].passed and checks["python.examples"].detail == "1 of 1 examples pass"
    lacks_requests = importlib.util.find_spec("requests") is None
    assert ("python.packages" in checks) == lacks_requests


def test_a_test_module_imports_the_implementation_slots_module_by_the_slots_name() -> None:
    implementation = parse_output(answer(FLASK_MODULE), "checkout", "python_coder", min_items=1, max_items=2)
    implementation = implementation.model_copy(update={"quality": SlotQuality(deliverable="code", language="python")})
    modules = python_modules({"checkout": implementation})
    assert list(modules) == ["checkout"]
    tests_module = (
        "from checkout import BOOKS, due_date\n\n\ndef test_due_date():\n"
        "    assert due_date('2024-03-01') == '2024-03-15'\n\n\ndef test_books():\n    assert 1 in BOOKS\n"
    )
    task = "Write pytest tests for the checkout module.\ndue_date('2024-03-01') == '2024-03-15'\n"
    checks = checks_of(answer(tests_module, title="Tests"), task, modules=modules, module="tests")
    assert hard_failures(checks) == {}
    assert checks["python.examples"].detail == "1 of 1 examples pass"  # the sibling's real due_date ran
    if FLASK_MISSING:  # the sibling's own import of flask is stood in for; the sibling is not
        assert checks["python.packages"].detail.startswith("flask is not installed")
    alone = checks_of(answer(tests_module, title="Tests"), task)  # not delivered by the run: nothing to import
    assert alone["python.packages"].detail.startswith("checkout is not installed")
    assert alone["python.examples"].severity == "soft"


def test_a_module_the_task_names_as_a_file_is_there_under_that_name() -> None:
    """multipart_set2_first, mp2-webhook-signing: the tests imported webhooks, which the run delivered as
    write_a_python_function: "Not fully checked (webhooks is not installed in the sandbox)"."""
    verify = "import hmac\n\n\ndef verify_signature(secret, body, header):\n    return True\n"
    implementation = parse_output(answer(verify), "write_a_python_function", "python_coder", min_items=1, max_items=2)
    implementation = implementation.model_copy(update={"quality": SlotQuality(deliverable="code", language="python")})
    task = "Write a Python function verify_signature(secret, body, header) in webhooks.py; pytest tests for it."
    modules = python_modules({"write_a_python_function": implementation}, task)
    assert list(modules) == ["write_a_python_function", "webhooks"] and "def verify_signature" in modules["webhooks"]
    tests = (
        "from webhooks import verify_signature\n\n\ndef test_bad():\n    assert not verify_signature('k', 'b', 'x')\n"
    )
    checks = checks_of(answer(tests, title="Tests"), task, modules=modules, module="tests")
    assert "python.packages" not in checks and checks["python.runs"].passed  # the import ran the implementation
    # a file the task names that no referenced module defines a name for stays unknown
    other = python_modules({"a": implementation, "b": implementation}, "Write parse() in parser.py")
    assert list(other) == ["a", "b"]


# --- a slot's draws -----------------------------------------------------------------------------------------


def job(task: str = TASK) -> SlotJob:
    spec = SlotSpec(
        id="checkout_endpoint", title="Checkout endpoint", description=task, deliverable="code", language="python"
    )
    return SlotJob(
        spec=spec,
        task=f"A library lending system.\n{task}",
        constraints=(),
        expert="python_coder",
        persona="You write Python.",
        references={},
        max_tokens=900,
        temperature=0.0,
    )


def test_a_slot_draws_one_candidate_when_the_only_failure_is_the_missing_package() -> None:
    backend = Scripted([answer(FLASK_MODULE, FLASK_TESTS)] * 4)
    settings = resolve_settings({"backend": "fake", "best_of": 4}, env={})
    outcome = run_slot(job(), backend, settings, emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    quality = outcome.result.quality
    assert len(backend.requests) == 1 and quality.passed
    assert not [n for n in outcome.notices if n.source == "checks"]
    if FLASK_MISSING:
        assert quality.caveat == (
            "Not fully checked (flask is not installed in the sandbox: checked parse, lint and the code that does "
            "not need it)."
        )


def test_a_slot_whose_own_code_is_wrong_still_draws_again() -> None:
    broken = FLASK_MODULE.replace("timedelta(days=LOAN_DAYS)", "timedelta(days=LOAN_PERIOD)")
    backend = Scripted([answer(broken), answer(FLASK_MODULE)])
    settings = resolve_settings({"backend": "fake", "best_of": 4}, env={})
    outcome = run_slot(job(), backend, settings, emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    assert len(backend.requests) == 2 and outcome.result.quality.chosen == "c2"


def test_a_tests_modules_own_tests_run_against_the_implementation_each_parametrised_case() -> None:
    """multipart_recheck_tax, mp-uk-tax: the tests part was one pytest module whose parametrised test never ran."""
    tax = "def compute_income_tax(salary):\n    return max(0, salary - 12570) * 0.2\n"
    text = answer(tax, title="Income tax")
    implementation = parse_output(text, "income_tax", "python_coder", min_items=1, max_items=2)
    implementation = implementation.model_copy(update={"quality": SlotQuality(deliverable="code", language="python")})
    modules = python_modules({"income_tax": implementation})
    tests = (
        "import pytest\nfrom income_tax import compute_income_tax\n\n\n"
        '@pytest.mark.parametrize("salary, expected_tax", [\n    (30000, 3486),\n    pytest.param(50000, 2000),\n])\n'
        "def test_compute_income_tax(salary, expected_tax):\n"
        "    assert compute_income_tax(salary) == pytest.approx(expected_tax)\n\n\n"
        "def test_uses_a_fixture(tmp_path):\n    assert False\n"
    )
    task = "Write pytest tests for compute_income_tax at 30,000 and 50,000."
    checks = checks_of(answer(tests, title="Tests"), task, modules=modules, module="tests")
    ran = checks["python.tests"]
    assert not ran.passed and ran.severity == "soft"
    assert ran.detail == (
        "test_compute_income_tax(salary=50000, expected_tax=2000): assert compute_income_tax(salary) == "
        "pytest.approx(expected_tax) (compute_income_tax(salary) is 7486.0)"
    )
    right = tests.replace("pytest.param(50000, 2000)", "pytest.param(50000, 7486)")
    assert checks_of(answer(right, title="Tests"), task, modules=modules, module="tests")["python.tests"].passed


# --- a tests part whose module another part delivers (mp4-overtime-pay, multipart_set4_first) -------------------

OVERTIME_TASK = (
    "Could you write weekly_pay(hours, hourly_rate) in payroll.py that returns the gross pay rounded to the cent, "
    "pytest tests for it, and a paragraph for the staff handbook explaining how overtime is paid?"
)
OVERTIME_TESTS = """import pytest
from payroll import weekly_pay

@pytest.mark.parametrize("hours, hourly_rate, expected", [
    (40, 10, 400.0),
    (45, 10, 475.0),
])
def test_weekly_pay(hours, hourly_rate, expected):
    assert weekly_pay(hours, hourly_rate) == pytest.approx(expected, rel=1e-2)

def test_weekly_pay_invalid_hours():
    with pytest.raises(ValueError):
        weekly_pay(-1, 10)
"""
OVERTIME_CODE = """def weekly_pay(hours, hourly_rate):
    if hours < 0 or hourly_rate <= 0:
        raise ValueError("Hours and hourly rate must be positive.")
    base_pay = hours * hourly_rate
    overtime_pay = max(0, (hours - 40) * hourly_rate * 1.5)
    return round(base_pay + overtime_pay, 2)
"""


def test_tests_that_stop_on_a_stand_in_of_the_module_they_test_pass_and_say_so() -> None:
    """The tests part was delivered with "Its tests fail against its code (... is <stand-in for
    payroll.weekly_pay()>): the code or the tests are wrong": the module was another part's, not in its sandbox."""
    checks = checks_of(answer(OVERTIME_TESTS, title="Tests"), OVERTIME_TASK)
    tests = checks["python.tests"]
    assert tests.passed and tests.severity == "soft"
    assert tests.detail.startswith("payroll is not installed in the sandbox: the tests stopped at test_weekly_pay(")
    quality = SlotQuality(deliverable="code", language="python", checks=list(checks.values()))
    assert quality.caveat is not None and "payroll is not installed" in quality.caveat
    assert "the code or the tests are wrong" not in quality.caveat
    beside = checks_of(answer(OVERTIME_TESTS, title="Tests"), OVERTIME_TASK, modules={"payroll": OVERTIME_CODE})
    assert not beside["python.tests"].passed  # with the part it tests, its failure is a real one
    assert "(weekly_pay(hours, hourly_rate) is 525.0)" in beside["python.tests"].detail


def test_tests_that_expect_one_call_to_give_two_values_fail() -> None:
    """multipart_set4_after, mp4-overtime-pay: the tests part as written, which passed every check of its own."""
    tests = (
        "import pytest\nfrom payroll import weekly_pay\n\ndef test_weekly_pay():\n"
        "    assert weekly_pay(45, 10) == 475.0\n    assert weekly_pay(45, 10) == 525.0\n"
        "    assert weekly_pay(80, 10) == 800.0\n    assert weekly_pay(40, 10) == 400.0\n"
        "    assert weekly_pay(40, 10) == 400\n    with pytest.raises(ValueError):\n        weekly_pay(-1, 10)\n"
    )
    failures = hard_failures(checks_of(answer(tests, title="Tests"), OVERTIME_TASK))
    assert failures["python.tests_agree"] == (
        "the tests expect weekly_pay(45, 10) to be both 475.0 and 525.0: no code passes both"
    )
    agreeing = tests.replace("== 525.0", "== 475")  # the same value twice (400 and 400.0 too) is no contradiction
    assert "python.tests_agree" not in hard_failures(checks_of(answer(agreeing, title="Tests"), OVERTIME_TASK))
    stateful = "def test_ids():\n    assert next_id() == 1\n    assert next_id() == 2\n    assert box.take(1) == 4\n"
    stateful += "    assert box.take(1) == 3\n"
    assert "python.tests_agree" not in hard_failures(checks_of(answer(stateful, title="Tests"), OVERTIME_TASK))
