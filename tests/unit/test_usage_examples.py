"""An answer's usage example run against its own code (``python.usage``), alone and beside the document's files.

Built from mp5-feature-flags (multipart_set5_rules3): the module's usage example called
``flags.is_enabled('new_checkout', 'u-1001')`` where its own ``is_enabled`` also takes ``flags``; every check passed.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.agreement import Part, disagreements
from engine.prompts import CONTRACT_DATA
from engine.slots.checks import CheckContext, check_answer
from engine.slots.checks.code import unimported_modules
from engine.slots.checks.usage import raising_usage, usage_blocks
from engine.slots.contracts import contract_of
from engine.slots.job import SlotJob
from engine.slots.run import run_slot
from engine.slots.sandbox import SandboxLimits
from state import RunStatus
from state.context import resolve_settings
from state.framework import SlotSpec
from state.outline import parse_output
from state.quality import SlotQuality
from tests.unit.plan_runs import answer, run_plan
from tests.unit.scripted import Scripted

FLAGS_JSON = """{
  "flags": {
    "new_checkout": {"enabled": true, "rollout_percent": 25, "allow_users": ["u-1001"]},
    "dark_mode": {"enabled": true, "rollout_percent": 100, "allow_users": []},
    "bulk_export": {"enabled": false, "rollout_percent": 50, "allow_users": ["u-2002"]}
  }
}
"""
FLAGS_MODULE = """import json
import zlib

class Flags:
    def __init__(self, path):
        self.path = path
        self.flags = self.load_flags()

    def load_flags(self):
        with open(self.path, 'r') as file:
            data = json.load(file)
            if 'flags' not in data:
                raise ValueError("The 'flags' object is missing in the file.")
            return data['flags']

    def is_enabled(self, flags, name, user_id):
        if name not in flags:
            return False
        flag = flags[name]
        if not flag['enabled']:
            return False
        if user_id not in flag['allow_users']:
            return False
        return zlib.crc32(f"{name}:{user_id}".encode("utf-8")) % 100 < flag['rollout_percent']
"""
FLAGS_USAGE = """flags = Flags('flags.json')
print(flags.is_enabled('new_checkout', 'u-1001'))  # Output: True
print(flags.is_enabled('dark_mode', 'u-1001'))  # Output: False
"""
FLAGS_ANSWER = (
    "## Outline\n1. Tiny Python module that reads it\n2. Usage\n\n"
    f"## 1. Tiny Python module that reads it\n```python\n{FLAGS_MODULE}```\n\n"
    "## 2. Usage\nCreate a `Flags` and call `is_enabled` with the flag name and the user id.\n\n"
    f"```python\n{FLAGS_USAGE}```\n"
)
TASK = "I'd like a flags.json in the repo and a tiny Python module that reads it."


def _checks(text: str) -> dict[str, tuple[bool, str]]:
    contract = contract_of("code", "python")
    result = parse_output(text, "s", "e", min_items=contract.min_items, max_items=contract.max_items)
    checks, _ = check_answer(result, CheckContext(TASK, contract))
    return {c.name: (c.passed, c.detail) for c in checks}


def _answer(module: str, usage: str) -> str:
    return (
        "## Outline\n1. The function\n2. Usage\n\n"
        f"## 1. The function\n```python\n{module}```\n\n## 2. Usage\nCall it like this:\n\n```python\n{usage}```\n"
    )


FEE = """def parking_fee(minutes, rate):
    if minutes < 0 or minutes > 1440:
        raise ValueError("Number of minutes must be between 0 and 1440.")
    return 2 * ((minutes + 59) // 60) * rate
"""


def test_a_usage_example_that_calls_the_answers_function_with_other_arguments_fails_the_check() -> None:
    passed, detail = _checks(_answer(FEE, "print(parking_fee(90))  # Output: 4\n"))["python.usage"]
    assert not passed
    assert "print(parking_fee(90))" in detail and "missing 1 required positional argument: 'rate'" in detail
    assert _checks(_answer(FEE, "print(parking_fee(90, 1))  # Output: 4\n"))["python.usage"] == (True, "")


def test_an_example_that_shows_an_error_or_needs_the_readers_file_or_values_is_not_the_codes_fault() -> None:
    shown = "print(parking_fee(1441, 1))  # Output: ValueError: Number of minutes must be between 0 and 1440.\n"
    assert _checks(_answer(FEE, shown))["python.usage"] == (True, "")  # multipart_set3_pieces2 shows it on purpose
    assert _checks(_answer(FEE, "print(parking_fee(my_minutes, 1))\n"))["python.usage"] == (True, "")
    # the flags module alone: the example stops at the file the reader (or another part) supplies
    assert _checks(FLAGS_ANSWER)["python.usage"] == (True, "")
    # multipart_set4_after: configparser reads a missing diskwatch.ini as empty, and the module refuses it
    settings = """import configparser

def load_settings(path):
    config = configparser.ConfigParser()
    config.read(path)
    if not config.has_section('monitor'):
        raise ValueError("Missing [monitor] section in the configuration file.")
    return dict(config['monitor'])
"""
    assert _checks(_answer(settings, "print(load_settings('diskwatch.ini'))\n"))["python.usage"] == (True, "")


def test_a_usage_example_the_answers_code_refuses_fails_it() -> None:
    """multipart_set5_first: the bowling README's rolls made ``bowling_score`` raise its own ValueError."""
    module = """def bowling_score(rolls):
    if any(a + b > 10 for a, b in zip(rolls[::2], rolls[1::2])):
        raise ValueError("Two rolls in one frame cannot total more than 10.")
    return sum(rolls)
"""
    passed, detail = _checks(_answer(module, "rolls = [10, 10, 10]\nprint(bowling_score(rolls))  # Output: 30\n"))[
        "python.usage"
    ]
    assert not passed and "Two rolls in one frame" in detail


def test_the_module_and_its_tests_are_not_usage_and_a_block_without_a_call_is_not_either() -> None:
    raw = _answer(FEE, "assert parking_fee(60, 1) == 2\n") + "\n```python\nMAX = 1440\n```\n"
    assert usage_blocks(raw, FEE, "assert parking_fee(60, 1) == 2\n") == []


def test_a_usage_example_run_with_the_data_file_another_part_wrote_is_sent_back_when_it_raises() -> None:
    files = {"flags.json": FLAGS_JSON}
    raised = raising_usage(FLAGS_MODULE, [FLAGS_USAGE], SandboxLimits(), beside=files)
    assert raised is not None and raised.error.startswith("TypeError: Flags.is_enabled() missing 1 required")
    data = Part("flags_json", "Flags.json in the repo", parse_output(f"```json\n{FLAGS_JSON}```", "flags_json", "e"))
    result = parse_output(FLAGS_ANSWER, "module", "python_coder", min_items=1, max_items=3)
    code = Part(
        "module",
        "Tiny Python module that reads it",
        result.model_copy(update={"quality": SlotQuality(deliverable="code", language="python")}),
    )
    found = [d for d in disagreements([data, code], task=TASK) if d.kind == "python.usage"]
    assert [(d.slot_id, d.source_id) for d in found] == [("module", "flags_json")]
    assert "flags.json" in found[0].facts and "missing 1 required positional argument" in found[0].detail
    fixed = FLAGS_ANSWER.replace(
        "is_enabled('new_checkout', 'u-1001')", "is_enabled(flags.flags, 'new_checkout', 'u-1001')"
    )
    fixed = fixed.replace("is_enabled('dark_mode', 'u-1001')", "is_enabled(flags.flags, 'dark_mode', 'u-1001')")
    result = parse_output(fixed, "module", "python_coder", min_items=1, max_items=3)
    code = Part("module", code.title, result.model_copy(update={"quality": code.result.quality}))
    assert not [d for d in disagreements([data, code], task=TASK) if d.kind == "python.usage"]


def test_an_example_that_imports_the_module_by_its_file_name_runs_and_a_name_error_inside_it_is_the_codes() -> None:
    """multipart_set5_rules4, mp5-merge-ranges: ``total_length`` summed ``merged_ranges``, a name only
    ``merge_ranges`` had; the usage example, ``from ranges import ...``, raised the NameError inside the module."""
    module = """def merge_ranges(ranges):
    merged_ranges = sorted(ranges)
    return merged_ranges

def total_length(ranges):
    return sum(end - start for start, end in merged_ranges)
"""
    usage = "from ranges import merge_ranges, total_length\n\nranges = [(1, 3), (3, 5)]\nprint(total_length(ranges))\n"
    passed, detail = _checks(_answer(module, usage))["python.usage"]
    assert not passed and "NameError: name 'merged_ranges' is not defined" in detail
    fixed = module.replace("for start, end in merged_ranges", "for start, end in merge_ranges(ranges)")
    assert _checks(_answer(fixed, usage))["python.usage"] == (True, "")


def test_a_data_file_of_a_plan_is_asked_for_the_file_alone(write_script: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """multipart_set5_rules4: the flags.json part wrote the file, then "2. flags.py with load_flags(path) ...", the
    next part's code, cut off; its JSON check then read that code too ("Extra data")."""
    plan = {
        "id": "flags",
        "title": "Feature flags",
        "slots": [
            {"id": "data", "title": "flags.json", "description": "Write flags.json.", "expert": "python_coder",
             "deliverable": "data", "language": "json"},
            {"id": "module", "title": "Module", "description": "Write flags.py.", "expert": "python_coder",
             "deliverable": "code", "language": "python"},
        ],
    }  # fmt: skip
    script = write_script(
        {
            "rules": [
                {"slot": "data", "text": answer("Flags", f"```json\n{FLAGS_JSON}```")},
                {"slot": "module", "text": answer("Flags module", f"```python\n{FLAGS_MODULE}```")},
            ]
        }
    )
    prompts: list[str] = []
    state = run_plan(script, TASK, plan, monkeypatch, "data", prompts)
    assert state.status == RunStatus.COMPLETED and len(prompts) == 1
    assert "the other parts of the task are written by others" in prompts[0] and 'Add "2. "' not in prompts[0]
    one = contract_of("data", "json")
    assert one.max_items == 2 and 'Add "2. "' in CONTRACT_DATA.format(language="json")  # a file asked alone


def test_a_standard_module_the_code_calls_and_never_imports_is_imported_before_its_checks() -> None:
    """multipart_set5_rules4: every candidate of the flags module called ``zlib.crc32`` with no ``import zlib``
    (two runs), and the part went out under ``python.unimported``'s caveat."""
    module = FLAGS_MODULE.replace("import zlib\n", "")
    text = f"## Outline\n1. Flags module\n\n## 1. Flags module\n```python\n{module}```\n"
    assert unimported_modules(module) == ["zlib"] and unimported_modules(FLAGS_MODULE) == []
    spec = SlotSpec(id="module", title="Module", description=TASK, deliverable="code", language="python")
    job = SlotJob(
        spec=spec, task=TASK, constraints=(), expert="python_coder", persona="You write Python.", references={},
        max_tokens=600, temperature=0.0,
    )  # fmt: skip
    backend = Scripted([text])
    outcome = run_slot(job, backend, resolve_settings({"backend": "fake", "best_of": 1}, env={}), emit=lambda _: None)
    assert outcome.result is not None and outcome.result.quality is not None
    assert "import json\nimport zlib\n\nclass Flags:" in outcome.result.raw and len(backend.requests) == 1
    failed = [c.name for c in outcome.result.quality.candidates[0].checks if c.severity == "hard" and not c.passed]
    assert "python.unimported" not in failed
    [entry] = [e for e in outcome.ledger if e.action == "import"]
    assert entry.outputs_summary == "c1: imported zlib: the code uses zlib and never imported it"
    # a name the code binds itself, a parameter or an assignment, is not a module it forgot
    assert unimported_modules("def f(time):\n    return time.time()\nre = object()\nre.x\n") == []


def test_a_function_the_task_names_that_no_part_defines_sends_the_code_part_back() -> None:
    """multipart_set5_rules3: the task named load_flags(path) and is_enabled(flags, name, user_id); the module part
    wrote a class whose methods took other parameters, and nothing said so."""
    task = TASK + " Then flags.py with load_flags(path) and is_enabled(flags, name, user_id)."
    quality = SlotQuality(deliverable="code", language="python")

    def part(slot_id: str, text: str) -> Part:
        result = parse_output(text, slot_id, "python_coder", min_items=1, max_items=3)
        return Part(slot_id, slot_id, result.model_copy(update={"quality": quality}))

    tests = "```python\nfrom flags import load_flags\n\ndef test_load():\n    assert load_flags('flags.json')\n```"
    data = Part("data", "flags.json", parse_output(f"```json\n{FLAGS_JSON}```", "data", "e"))
    parts = [data, part("tests", tests), part("module", FLAGS_ANSWER)]
    [found] = [d for d in disagreements(parts, task=task) if d.kind == "python.task_functions"]
    assert (found.slot_id, found.source_id) == ("module", "task")
    assert "load_flags(path), is_enabled(flags, name, user_id)" in found.detail and "not a method" in found.facts
    functions = "def load_flags(path):\n    return {}\n\ndef is_enabled(flags, name, user_id):\n    return False\n"
    parts[2] = part("module", answer("Flags module", f"```python\n{functions}```"))
    assert not [d for d in disagreements(parts, task=task) if d.kind == "python.task_functions"]
