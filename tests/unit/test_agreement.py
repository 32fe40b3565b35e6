"""Parts that agree (issue 40, item 3): the comparison of finished parts, and the round that sends one back."""

from __future__ import annotations

from typing import Any

import pytest

from engine.agreement import Part, disagreements
from state import Passport, RunStatus
from state.result import SlotResult
from tests.unit.plan_runs import answer, run_plan

SCHEMA = """```sql
CREATE TABLE customers (
    customer_id SERIAL PRIMARY KEY,
    first_name VARCHAR(50) NOT NULL,
    last_name VARCHAR(50) NOT NULL
);
CREATE TABLE orders (
    order_id SERIAL PRIMARY KEY,
    customer_id INT REFERENCES customers (customer_id),
    amount NUMERIC(10, 2) NOT NULL,
    order_date DATE NOT NULL
);
```"""
# The query: it groups by a customer_name the schema part never defined.
QUERY = """```sql
SELECT c.customer_name, SUM(o.amount) AS revenue
FROM orders o JOIN customers c ON o.customer_id = c.customer_id
WHERE o.order_date >= CURRENT_DATE - INTERVAL '90 days'
GROUP BY c.customer_name
ORDER BY revenue DESC
LIMIT 10;
```"""
FIXED = QUERY.replace("c.customer_name", "c.first_name || ' ' || c.last_name AS customer_name", 1).replace(
    "GROUP BY c.customer_name", "GROUP BY c.customer_id, c.first_name, c.last_name"
)


def _part(slot_id: str, text: str) -> Part:
    return Part(slot_id, slot_id.title(), SlotResult(slot_id=slot_id, expert="e", raw=text))


def test_a_query_that_uses_a_column_the_schema_part_lacks_is_sent_back_with_the_schema() -> None:
    [found] = disagreements([_part("schema", SCHEMA), _part("query", QUERY)])
    assert (found.slot_id, found.source_id, found.kind) == ("query", "schema", "sql.columns")
    assert "customer_name" in found.detail
    assert "CREATE TABLE customers" in found.facts and "first_name" in found.facts


def test_a_query_that_fits_the_schema_and_a_table_no_part_creates_are_not_judged() -> None:
    assert disagreements([_part("schema", SCHEMA), _part("query", FIXED)]) == []
    other = "```sql\nSELECT p.total FROM payments p;\n```"
    assert disagreements([_part("schema", SCHEMA), _part("query", other)]) == []


def test_a_table_two_parts_create_differently_sends_the_later_one_back() -> None:
    again = "```sql\nCREATE TABLE customers (id INT PRIMARY KEY, customer_name TEXT);\n```"
    found = disagreements([_part("schema", SCHEMA), _part("query", again)])
    assert [(d.slot_id, d.kind) for d in found] == [("query", "sql.tables")]
    assert "customer_name" in found[0].detail and "first_name" in found[0].facts


def test_the_sql_a_python_part_runs_is_read_against_the_schema_part() -> None:
    """multipart_set3_pieces, mp3-bike-repair-sqlite: the call-sheet script made its own customers table (phone)."""
    script = (
        "```python\nimport sqlite3\n\nconn = sqlite3.connect('jobs.db')\nconn.execute('''\nCREATE TABLE IF NOT EXISTS "
        "customers (customer_id INTEGER PRIMARY KEY, phone TEXT)\n''')\nrows = conn.execute(\"SELECT c.phone FROM "
        "customers c\").fetchall()\nprint(f'{len(rows)} rows')\n```"
    )
    found = disagreements([_part("schema", SCHEMA), _part("script", script)])
    assert [(d.slot_id, d.kind) for d in found] == [("script", "sql.columns"), ("script", "sql.tables")]
    assert "phone" in found[0].detail and "CREATE TABLE customers" in found[1].facts
    fitting = "```python\nrows = conn.execute('SELECT c.first_name FROM customers c').fetchall()\n```"
    assert disagreements([_part("schema", SCHEMA), _part("script", fitting)]) == []


def test_a_class_two_parts_define_with_different_fields_is_found_and_a_main_is_not() -> None:
    design = (
        "```python\nclass Book(BaseModel):\n    id: int\n    title: str\n    borrowed: bool\n\n"
        "def main():\n    pass\n```"
    )
    code = (
        "```python\nclass Book(BaseModel):\n    id: int\n    title: str\n    borrowed_by: int | None\n\n"
        "def main(argv):\n    pass\n```"
    )
    [found] = disagreements([_part("design", design), _part("implementation", code)])
    assert (found.slot_id, found.kind) == ("implementation", "python.names")
    assert "borrowed_by" in found.detail and "borrowed: bool" in found.facts
    same = design.replace("def main():", "def main(argv):")
    assert disagreements([_part("design", design), _part("implementation", same)]) == []


PLAN = {
    "id": "customers",
    "title": "Top customers",
    "slots": [
        {"id": "schema", "title": "Schema", "description": "Write the tables.", "expert": "sql_specialist"},
        {"id": "query", "title": "Query", "description": "Write the query.", "expert": "sql_specialist"},
    ],
}


def _run(write_script: Any, query_calls: list[str], prompts: list[str], monkeypatch: pytest.MonkeyPatch) -> Passport:
    script = write_script(
        {
            "rules": [
                {"slot": "schema", "text": answer("Tables", SCHEMA)},
                {
                    "slot": "query",
                    "first_calls": [{"text": answer("Query", q)} for q in query_calls[:-1]],
                    "text": answer("Query", query_calls[-1]),
                },
            ]
        }
    )
    return run_plan(script, "Top ten customers by revenue", PLAN, monkeypatch, "query", prompts)


def test_the_run_sends_the_disagreeing_part_back_once_with_the_schema_and_keeps_the_fixed_answer(
    write_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts: list[str] = []
    state = _run(write_script, [QUERY, FIXED], prompts, monkeypatch)
    assert state.status == RunStatus.COMPLETED
    actions = [(e.action, e.slot_id) for e in state.ledger if e.action in ("check_parts", "send_back")]
    assert actions == [("check_parts", None), ("send_back", "query"), ("check_parts", None)]
    assert "CREATE TABLE customers" in state.agreement["query"][0]
    assert len(prompts) == 2 and "CREATE TABLE customers" not in prompts[0]
    assert "use only their columns" in prompts[1] and "first_name VARCHAR(50)" in prompts[1]
    doc = state.document or ""
    assert "first_name || ' ' || c.last_name" in doc and "GROUP BY c.customer_name" not in doc
    assert "parts disagree" not in doc


def test_a_part_that_still_disagrees_after_its_second_writing_is_a_warning_of_the_document(
    write_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _run(write_script, [QUERY, QUERY], [], monkeypatch)
    actions = [e.action for e in state.ledger if e.action in ("check_parts", "send_back")]
    assert actions == ["check_parts", "send_back", "check_parts"]  # one round, bounded
    doc = state.document or ""
    assert "parts disagree (sql.columns)" in doc and "customer_name" in doc.partition("## Warnings")[2]


def test_a_second_writing_that_fails_its_checks_gives_the_first_back(
    write_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = "```sql\nSELEC c.first_name FROM customers c WHERE;\n```"
    state = _run(write_script, [QUERY, broken], [], monkeypatch)
    actions = [
        (e.action, e.slot_id) for e in state.ledger if e.action in ("check_parts", "send_back", "keep_first_writing")
    ]
    assert actions == [
        ("check_parts", None),
        ("send_back", "query"),
        ("check_parts", None),
        ("keep_first_writing", "query"),
    ]
    doc = state.document or ""
    assert "GROUP BY c.customer_name" in doc and "SELEC c.first_name" not in doc  # the first writing, whole
    warnings = doc.partition("## Warnings")[2]
    assert "the first is kept" in warnings and "parts disagree (sql.columns)" in warnings
    assert "fails its checks" not in warnings  # the second writing's own warning went with it


def test_a_part_that_serves_another_apis_paths_is_sent_back_with_the_contracts_endpoints() -> None:
    """mp-todo-api on the real models: the contract's /todos, the implementations' /tasks and /items."""
    contract = (
        "| Endpoint | Status |\n|---|---|\n| POST /todos | 201 |\n| GET /todos | 200 |\n"
        "| PUT /todos/{id} | 200 |\n| DELETE /todos/{id} | 204 |\n"
    )
    code = (
        '```python\n@app.get("/items/")\nasync def read_items():\n    return items\n\n'
        '@app.put("/items/{item_id}")\nasync def update_item(item_id: int):\n    return None\n```'
    )
    same = code.replace("/items/{item_id}", "/todos/{todo_id}").replace('"/items/"', '"/todos"')
    [found] = disagreements([_part("contract", contract), _part("implementation", code)])
    assert (found.slot_id, found.source_id, found.kind) == ("implementation", "contract", "http.endpoints")
    assert "GET /items/" in found.detail and "DELETE /todos/{id}" in found.facts
    assert disagreements([_part("contract", contract), _part("implementation", same)]) == []


def test_a_script_that_reads_keys_the_config_file_lacks_is_sent_back_with_the_file() -> None:
    """mp-config-script on the real models: the config file says database_url, the script reads config['db_url']."""
    config = (
        '```yaml\ndatabase_url: "postgresql://localhost/reports"\nrecipients: ["a@example.com"]\nreport_hour: 2\n'
        'time_zone: "Europe/London"\nretry_count: 3\n```'
    )
    script = "```python\ndef run(config):\n    db_url = config['db_url']\n    tries = config.get('retry_count')\n```"
    [found] = disagreements([_part("config", config), _part("script", script)])
    assert (found.slot_id, found.kind) == ("script", "config.keys") and "db_url" in found.detail
    assert "retry_count" not in found.detail.split(", which")[0] and "database_url:" in found.facts
    fixed = script.replace("config['db_url']", "config['database_url']")
    assert disagreements([_part("config", config), _part("script", fixed)]) == []


# mp-reminder-sms as the real models wrote it (multipart_completion, trimmed): a letter with bracketed placeholders,
# a query selecting patient_name, and a script that fills {{appointment_name}} and reads row["email"].
SMS_TEMPLATE = """The SMS template for appointment reminders is as follows:

---

Dear [Recipient's Name],

We are writing to remind you of your upcoming appointments.

Best regards,

[Your Name]"""
SMS_QUERY = """```sql
SELECT
    appointment_id,
    patient_name,
    appointment_date,
    appointment_time
FROM
    appointments
WHERE
    appointment_date = CURRENT_DATE + INTERVAL '1' DAY
ORDER BY
    appointment_date, appointment_time;
```"""
SMS_SCRIPT = """```python
def main():
    template = read_template('appointment_reminder_template.txt')
    appointments = get_tomorrow_appointments()
    for index, appointment in appointments.iterrows():
        body = template.replace('{{appointment_name}}', appointment['appointment_name'])
        body = body.replace('{{appointment_date}}', appointment['appointment_date'])
        body = body.replace('{{appointment_time}}', appointment['appointment_time'])
        msg = {}
        msg['To'] = appointment['email']
        send_email('Appointment Reminder', body, appointment['email'])
```"""


def _sms(template: str = SMS_TEMPLATE, query: str = SMS_QUERY, script: str = SMS_SCRIPT) -> list[Part]:
    return [
        Part(
            "template",
            "SMS template for appointment reminders",
            SlotResult(slot_id="template", expert="e", raw=template),
        ),
        Part("query", "SQL query for tomorrow's appointments", SlotResult(slot_id="query", expert="e", raw=query)),
        Part("script", "Python script that fills the template", SlotResult(slot_id="script", expert="e", raw=script)),
    ]


def test_a_script_that_fills_placeholders_the_template_lacks_is_sent_back_with_the_templates() -> None:
    found = {d.kind: d for d in disagreements(_sms())}
    placeholders = found["template.placeholders"]
    assert (placeholders.slot_id, placeholders.source_id) == ("script", "template")
    assert "fills {{appointment_name}}, {{appointment_date}}, {{appointment_time}}" in placeholders.detail
    assert "leaves [Recipient's Name], [Your Name] unfilled" in placeholders.detail
    assert placeholders.facts.endswith("placeholders, written as there: [Recipient's Name], [Your Name].")


def test_a_script_that_reads_row_keys_the_query_does_not_select_is_sent_back_with_the_query() -> None:
    rows = {d.kind: d for d in disagreements(_sms())}["sql.rows"]
    assert (rows.slot_id, rows.source_id) == ("script", "query")
    # the loop's row keys, not the message's msg['To']
    assert rows.detail.startswith("reads appointment_name, email from each row")
    assert "it selects appointment_id, patient_name, appointment_date, appointment_time" in rows.detail
    assert "SELECT" in rows.facts


def test_a_template_and_script_that_agree_with_the_query_pass() -> None:
    template = "Hi {{patient_name}}, a reminder of your appointment on {{appointment_date}} at {{appointment_time}}."
    script = (
        SMS_SCRIPT.replace("appointment_name", "patient_name")
        .replace("        msg = {}\n        msg['To'] = appointment['email']\n", "")
        .replace("appointment['email']", "'+440000'")
    )
    assert disagreements(_sms(template, script=script)) == []
    # str.format keywords fill {name} placeholders; a query with SELECT * says nothing about its rows
    formatted = "```python\nfor row in cursor.fetchall():\n    print(TEMPLATE.format(name=row['name']))\n```"
    found = disagreements(_sms("Hello {name}, see you soon.", "```sql\nSELECT * FROM appointments;\n```", formatted))
    assert found == []


# mp-uk-tax (multipart_recheck_tax): the function part and the tests part, as the 1.5B wrote them.
TAX_FUNCTION = """## Outline
1. Python function that computes income tax
2. Usage

## 1. Python function that computes income tax
```python
def compute_income_tax(salary):
    if salary <= 10000:
        tax = salary * 0.1
    else:
        tax = 1000 + (salary - 10000) * 0.2
    return tax
```

## 2. Usage
```python
print(compute_income_tax(30000))  # Output: 5000.0
```
"""
TAX_TESTS = """## Outline
1. Tests at 30,000 and 50,000 and 60,000
2. Usage

## 1. Tests at 30,000 and 50,000 and 60,000
```python
import pytest
from tax_calculator import calculate_income_tax

@pytest.mark.parametrize("salary, expected_tax", [
    (30000, 1000),  # 10% tax on the first £30,000
    (50000, 2000),  # 20% tax on the first £50,000
])
def test_calculate_income_tax(salary, expected_tax):
    assert calculate_income_tax(salary) == expected_tax
```

## 2. Usage
```python
from tax_calculator import calculate_income_tax

print(calculate_income_tax(30000))  # Output: 1000
```
"""
TAX_TASK = (
    "Write a Python function that computes income tax for a salary in England for the 2024/25 tax year, tests at "
    "30,000, 50,000 and 60,000, and a plain-English explanation of the bands with the same three examples."
)


def _code_part(slot_id: str, text: str) -> Part:
    from state.outline import parse_output
    from state.quality import SlotQuality

    result = parse_output(text, slot_id, "python_coder", min_items=1, max_items=3)
    quality = SlotQuality(deliverable="code", language="python")
    return Part(slot_id, slot_id.replace("_", " "), result.model_copy(update={"quality": quality}))


def test_tests_that_import_a_like_name_from_a_module_no_part_delivers_are_sent_back_with_the_real_name() -> None:
    parts = [_code_part("income_tax_function", TAX_FUNCTION), _code_part("tests", TAX_TESTS)]
    [found] = disagreements(parts, task=TAX_TASK)
    assert (found.slot_id, found.source_id, found.kind) == ("tests", "income_tax_function", "python.imports")
    assert "calculate_income_tax from tax_calculator" in found.detail and "compute_income_tax" in found.detail
    assert "`from income_tax_function import compute_income_tax`" in found.facts
    # written again as told, the tests run against the function: they fail where they expect what it does not return
    fixed = TAX_TESTS.replace(
        "from tax_calculator import calculate_income_tax", "from income_tax_function import compute_income_tax"
    ).replace("calculate_income_tax(", "compute_income_tax(")
    [found] = disagreements([parts[0], _code_part("tests", fixed)], task=TAX_TASK)
    assert (found.slot_id, found.source_id, found.kind) == ("tests", "income_tax_function", "python.tests")
    assert found.detail.endswith(
        "test_compute_income_tax(salary=30000, expected_tax=1000): assert compute_income_tax(salary) == "
        "expected_tax (compute_income_tax(salary) is 5000.0)"
    )
    assert "def compute_income_tax(salary):" in found.facts and "from the task itself" in found.facts
    agreeing = fixed.replace("(30000, 1000)", "(30000, 5000)").replace("(50000, 2000)", "(50000, 9000)")
    # its usage line still says 1000 where the function gives 5000.0: the example disagrees, once the tests agree
    [found] = disagreements([parts[0], _code_part("tests", agreeing)], task=TAX_TASK)
    assert found.kind == "python.examples" and "prints 5000.0" in found.detail
    agreeing = agreeing.replace("# Output: 1000", "# Output: 5000.0")
    assert disagreements([parts[0], _code_part("tests", agreeing)], task=TAX_TASK) == []
    # an import of a package that is not the document's is not judged
    flask = TAX_TESTS.replace("from tax_calculator import calculate_income_tax", "from flask import Flask")
    assert disagreements([parts[0], _code_part("tests", flask)], task=TAX_TASK) == []


def test_a_name_imported_from_a_parts_module_that_it_does_not_define_is_sent_back_with_its_names() -> None:
    wrong = TAX_TESTS.replace(
        "from tax_calculator import calculate_income_tax", "from income_tax_function import income_tax"
    )
    [found] = disagreements([_code_part("income_tax_function", TAX_FUNCTION), _code_part("tests", wrong)])
    assert found.kind == "python.imports" and found.detail.startswith("imports income_tax from income_tax_function")
    assert "def compute_income_tax(salary)" in found.facts
    # the task's file name is the module too (engine.slots.checks.python_modules)
    task = TAX_TASK.replace("Write a Python function", "Write a Python function compute_income_tax in tax.py")
    named = TAX_TESTS.replace("from tax_calculator import calculate_income_tax", "from tax import tax_due")
    [found] = disagreements([_code_part("income_tax_function", TAX_FUNCTION), _code_part("tests", named)], task=task)
    assert found.detail.startswith("imports tax_due from tax")


# multipart_recheck_tax2: the tests part as written again after the send-back (the import now right), module-level
# asserts that no function returns: 1500 for what the function computes as 5000.0.
TAX_TESTS_AGAIN = """## Outline
1. Tests at 30,000 and 50,000 and 60,000
2. Usage

## 1. Tests at 30,000 and 50,000 and 60,000
```python
from income_tax_function import compute_income_tax

# Test 1: Income tax for a salary of 30,000
assert compute_income_tax(30000) == 1500  # 30,000 * 15% = 4500

# Test 2: Income tax for a salary of 50,000
assert compute_income_tax(50000) == 3000  # 50,000 * 30% = 15000
```

## 2. Usage
```python
from income_tax_function import compute_income_tax

tax = compute_income_tax(30000)
print(f"The income tax for a salary of 30,000 is {tax}.")
```
"""


def test_tests_written_as_top_level_asserts_are_run_against_the_part_they_import() -> None:
    parts = [_code_part("income_tax_function", TAX_FUNCTION), _code_part("tests", TAX_TESTS_AGAIN)]
    [found] = disagreements(parts, task=TAX_TASK)
    assert found.kind == "python.tests"
    assert found.detail.endswith(
        "AssertionError: assert compute_income_tax(30000) == 1500  # 30,000 * 15% = 4500 "
        "(compute_income_tax(30000) is 5000.0)"
    )


def test_a_slot_checks_its_tests_against_a_finished_part_it_does_not_reference() -> None:
    """The tests part of mp-uk-tax referenced no part: its import was stood in for ("write_a_python_function_that is
    not installed in the sandbox"), though the run had delivered that module."""
    from engine.slots.job import SlotJob
    from engine.slots.run import run_slot
    from state.context import resolve_settings
    from state.framework import SlotSpec
    from tests.unit.scripted import Scripted

    right = TAX_TESTS_AGAIN.replace("== 1500", "== 5000.0").replace("== 3000", "== 9000.0")
    spec = SlotSpec(id="tests", title="Tests", description="Tests at 30,000 and 50,000", deliverable="code")
    settings = resolve_settings({"backend": "fake", "best_of": 2}, env={})

    def kept(beside: dict[str, SlotResult]) -> Any:
        job = SlotJob(
            spec=spec,
            task=TAX_TASK,
            constraints=(),
            expert="python_coder",
            persona="You write Python.",
            references={},
            max_tokens=600,
            temperature=0.0,
            beside=beside,
        )
        outcome = run_slot(job, Scripted([right] * 2), settings, emit=lambda _: None)
        assert outcome.result is not None and outcome.result.quality is not None
        return outcome.result.quality

    alone = kept({})
    assert alone.caveat is not None and "income_tax_function is not installed in the sandbox" in alone.caveat
    beside = kept({"income_tax_function": _code_part("income_tax_function", TAX_FUNCTION).result})
    assert beside.passed and beside.caveat is None


TAX_PLAN = {
    "id": "tax",
    "title": "Income tax",
    "slots": [
        {
            "id": "income_tax_function",
            "title": "Income tax function",
            "description": "Write the function compute_income_tax(salary) in Python.",
            "expert": "python_coder",
            "deliverable": "code",
            "language": "python",
        },
        {
            "id": "tests",
            "title": "Tests",
            "description": "Write tests for it at 30,000 and 50,000.",
            "expert": "python_coder",
            "deliverable": "code",
            "language": "python",
        },
    ],
}


def test_a_second_writing_whose_only_failure_is_its_asserts_against_the_parts_is_kept(write_script: Any) -> None:
    """multipart_recheck_tax3: sent back for importing a module no part delivers, the tests came back importing the
    function, with asserts it does not meet; the first writing, which had only run against a stand-in, was given
    back, and the document said nothing of the tests' values."""
    from tests.unit.plan_runs import run_plan

    body = lambda text: text.partition("```python\n")[2].partition("```")[0]  # noqa: E731
    function = answer("Income tax function", f"```python\n{body(TAX_FUNCTION)}```")
    first = answer("Tests", f"```python\n{body(TAX_TESTS)}```")
    again = answer("Tests", f"```python\n{body(TAX_TESTS_AGAIN)}```")
    script = write_script(
        {
            "rules": [
                {"slot": "income_tax_function", "text": function},
                {"slot": "tests", "first_calls": [{"text": first}], "text": again},
            ]
        }
    )
    state = run_plan(script, TAX_TASK, TAX_PLAN)
    actions = [(e.action, e.slot_id) for e in state.ledger if e.action in ("send_back", "keep_first_writing")]
    assert actions == [("send_back", "tests")]
    doc = state.document or ""
    assert "from income_tax_function import compute_income_tax" in doc and "tax_calculator" not in doc
    warnings = doc.partition("## Warnings")[2]
    assert "parts disagree (python.tests)" in warnings and "(compute_income_tax(30000) is 5000.0)" in warnings


def test_a_class_another_part_defines_written_again_with_other_code_is_sent_back() -> None:
    """multipart_set3_first, mp3-inventory-class: four parts (its method names read as verbs), each its own Inventory,
    one on a dict, three on pandas; no fields, so nothing compared them."""
    first = "```python\nclass Inventory:\n    def __init__(self):\n        self.stock = {}\n```"
    again = (
        "```python\nimport pandas as pd\n\nclass Inventory:\n    def __init__(self):\n"
        "        self.stock = pd.DataFrame(columns=['sku', 'qty'])\n```"
    )
    [found] = disagreements([_part("inventory", first), _part("remove", again)])
    assert (found.slot_id, found.kind) == ("remove", "python.names")
    assert found.detail == "defines Inventory again, with other code than the part 'Inventory'"
    assert "do not define it again" in found.facts and "self.stock = {}" in found.facts
    # the same class again (a docstring and layout apart) is one definition
    same = '```python\nclass Inventory:\n    """Stock."""\n\n    def __init__(self):\n        self.stock = {}\n```'
    assert disagreements([_part("inventory", first), _part("tests", same)]) == []


def test_a_fuller_writing_of_an_earlier_parts_sketch_is_not_a_second_definition() -> None:
    """mp-todo-api (multipart_completion): the design part sketched ``create_item`` as ``return item``; the
    implementation part wrote it; telling the implementation to use the sketch would make the document worse."""
    sketch = "```python\n@app.post('/items')\ndef create_item(item):\n    return item\n```"
    full = (
        "```python\nitems = []\n\n@app.post('/items')\ndef create_item(item):\n    item.id = len(items) + 1\n"
        "    items.append(item)\n    return item\n```"
    )
    assert disagreements([_part("design", sketch), _part("implementation", full)]) == []


def test_a_second_writing_takes_the_first_writings_warnings_with_it(write_script: Any) -> None:
    """multipart_set4_first, the room clashes: the script's first writing failed on a ``bookings.csv`` it opened;
    sent back, its second writing passed, and the document still warned of ``bookings.csv``."""
    from tests.unit.plan_runs import run_plan

    body = lambda text: text.partition("```python\n")[2].partition("```")[0]  # noqa: E731
    function = answer("Income tax function", f"```python\n{body(TAX_FUNCTION)}```")
    opens = f"```python\nimport csv\nrows = list(csv.reader(open('bookings.csv')))\n{body(TAX_TESTS)}```"
    right = body(TAX_TESTS_AGAIN).replace("== 1500", "== 5000.0").replace("== 3000", "== 9000.0")

    def run(draws_failing: int) -> str:
        tests = {"slot": "tests", "first_calls": [{"text": answer("Tests", opens)}] * draws_failing}
        rules = [{"slot": "income_tax_function", "text": function}, {**tests, "text": answer("Tests", right)}]
        state = run_plan(write_script({"rules": rules}), TAX_TASK, TAX_PLAN)
        assert [e.action for e in state.ledger if e.action == "send_back"] == ["send_back"]
        return (state.document or "").partition("## Warnings")[2]

    assert "bookings.csv" not in run(4)  # every draw of the first writing failed; the second writing's first passed
    # every draw of both writings failed: the second writing's warning is said once, not once per writing
    assert run(8).count("kept answer (c1 of 4) fails its checks: python.runs: FileNotFoundError") == 1


def test_a_named_quantity_another_part_gives_otherwise_is_sent_back_unless_a_program_computed_it() -> None:
    """mp4-solar-payback: the model part's payback and the email's were two figures, neither checked."""
    from state.figures import Figure, TaskFigures

    model = "## 1. Payback\nThe annual savings are 1,260.00, so the payback period is 3.2 years."
    email = "## 1. Email\nDear Sam, the payback period is 5 years (12,960 / 2,592)."
    agreeing = "## 1. Email\nDear Sam, the payback period is about 3.2 years."
    [found] = disagreements([_part("model", model), _part("email", email)])
    assert (found.slot_id, found.source_id, found.kind) == ("email", "model", "figures.named")
    assert found.detail == "gives the payback period as 5 where part model gives 3.2"
    assert found.facts.startswith('The part "Model" gives the payback period as 3.2 ("The annual savings are')
    assert disagreements([_part("model", model), _part("email", agreeing)]) == []
    computed = TaskFigures(model="m", note="", figures=[Figure(name="payback period", value=3.2)])
    assert [d.kind for d in disagreements([_part("model", model), _part("email", email)], computed)] == ["figures"]


BOWLING = """## Outline
1. Implementation

## 1. Implementation
```python
def bowling_score(rolls):
    score, i = 0, 0
    for _ in range(10):
        if rolls[i] == 10:
            score, i = score + 10 + rolls[i + 1] + rolls[i + 2], i + 1
        elif rolls[i] + rolls[i + 1] == 10:
            score, i = score + 10 + rolls[i + 2], i + 2
        else:
            score, i = score + rolls[i] + rolls[i + 1], i + 2
    return score
```
"""
README = """Call `bowling_score` with the game's rolls:

```python
rolls = [10] * 12
print(bowling_score(rolls))  # Output: {claimed}
```
"""


def test_a_parts_example_of_another_parts_function_that_prints_else_is_sent_back_with_its_code() -> None:
    """multipart_set5_first, mp5-bowling-score: the README's example said 30 and was never run against the code."""
    code = _code_part("implementation", BOWLING)
    [found] = disagreements([code, _part("readme", README.format(claimed="30"))])
    assert (found.slot_id, found.source_id, found.kind) == ("readme", "implementation", "python.examples")
    assert "prints 300" in found.detail and "not 30" in found.detail
    assert "def bowling_score(rolls):" in found.facts and "-> prints 300" in found.facts
    assert disagreements([code, _part("readme", README.format(claimed="300"))]) == []
    # imported by the module's name, the same; a part's own function is its own check's (kept_answer)
    imported = README.replace("```python\n", "```python\nfrom implementation import bowling_score\n", 1)
    assert [d.kind for d in disagreements([code, _part("readme", imported.format(claimed="30"))])] == [
        "python.examples"
    ]
    untagged = README.replace("```python\n", "```\n", 1)  # as the real README wrote it
    assert [d.kind for d in disagreements([code, _part("readme", untagged.format(claimed="30"))])] == [
        "python.examples"
    ]
    own = README.replace("```python\n", "```python\ndef bowling_score(rolls):\n    return 30\n\n", 1)
    assert [d.kind for d in disagreements([code, _part("readme", own.format(claimed="30"))])] == ["python.names"]


def test_a_parts_example_that_the_other_parts_function_refuses_disagrees_and_one_failing_alone_does_not() -> None:
    """The bowling README's ten rolls made the implementation raise 'two rolls in one frame ... more than 10'."""
    strict = BOWLING.replace(
        "    score, i = 0, 0\n",
        "    score, i = 0, 0\n    if len(rolls) < 12:\n        raise ValueError('too few rolls')\n",
        1,
    )
    code = _code_part("implementation", strict)
    short = "```\nrolls = [5, 4, 3]\nprint(bowling_score(rolls))\n```\n"
    [found] = disagreements([code, _part("readme", short)])
    assert found.kind == "python.examples" and found.detail.startswith("its example raises ValueError: too few rolls")
    alone = "```python\nrolls = load_rolls('game.txt')\nprint(bowling_score(rolls))\n```\n"  # fails before the call
    assert disagreements([code, _part("readme", alone)]) == []
