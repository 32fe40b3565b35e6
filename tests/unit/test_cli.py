"""The `coe` command driven the way a user drives it (typer's runner, fake backend, SQLite file)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from cli.progress import Progress
from experts.catalog import load_catalog
from tests.conftest import FIXTURES

runner = CliRunner()
TASK = "Write a Python function that checks whether a string is a palindrome"


@pytest.fixture
def cp(tmp_path: Path) -> list[str]:
    return ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"]


def test_run_json_summary(cp: list[str]) -> None:
    result = runner.invoke(
        app,
        ["run", "Plan a service", "--backend", "fake", "--framework", str(FIXTURES / "branchy.yaml"), "--json", *cp],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) >= {"thread_id", "status", "slots", "warnings", "unresolved", "document"}
    assert payload["status"] == "completed"
    assert [(s["id"], s["status"], s["attempts"]) for s in payload["slots"]] == [(sid, "done", 1) for sid in "ABCD"]
    assert all(s["expert"] in load_catalog() for s in payload["slots"])
    assert payload["document"].startswith("# Branchy plan")


def test_run_writes_document_with_ledger_and_show_reads_it_back(tmp_path: Path, cp: list[str]) -> None:
    out = tmp_path / "answer.md"
    result = runner.invoke(
        app, ["run", TASK, "--backend", "fake", "--thread-id", "t-1", "--out", str(out), "--ledger", *cp]
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text.startswith("# " + TASK) and "## Ledger" in text and "| generate |" in text
    shown = runner.invoke(app, ["show", "t-1", *cp])
    assert shown.exit_code == 0
    assert "status:  completed" in shown.stdout and "answer" in shown.stdout and "scope:   single (" in shown.stdout
    assert "routed: " in shown.stdout and "runner-up" in shown.stdout and "model: " in shown.stdout
    as_json = json.loads(runner.invoke(app, ["show", "t-1", "--json", *cp]).stdout)
    assert as_json["status"] == "completed" and as_json["next"] == []
    assert set(as_json["routing"]["answer"]["scores"]) == set(load_catalog().ids)
    quality = as_json["results"]["answer"]["quality"]  # the checks of each slot, as the README says
    assert quality["checks"] and quality["chosen"] == quality["candidates"][0]["id"]


def test_show_reads_a_plan_built_from_the_tasks_deliverables(cp: list[str]) -> None:
    task = "Plant a vegetable garden plan: choose the crops, sketch the beds, and schedule the sowing."
    result = runner.invoke(app, ["run", task, "--backend", "fake", "--thread-id", "g-1", *cp])
    assert result.exit_code == 0, result.output
    shown = runner.invoke(app, ["show", "g-1", *cp])  # no template: there is no similarity to print
    assert shown.exit_code == 0, shown.output
    assert "plan:    no template fits" in shown.stdout and "one slot per deliverable" in shown.stdout
    assert "choose_the_crops" in shown.stdout and "schedule_the_sowing" in shown.stdout


def test_out_dir_writes_the_document_and_each_code_module(tmp_path: Path, cp: list[str]) -> None:
    out = tmp_path / "result"
    result = runner.invoke(app, ["run", TASK, "--backend", "fake", "--out-dir", str(out), *cp])
    assert result.exit_code == 0, result.output
    assert (out / "answer.md").read_text().startswith("# " + TASK)
    modules = sorted(p.name for p in out.glob("*.py"))
    assert modules == ["answer.py"]  # the one code slot's module, as the document shows it
    assert (out / "answer.py").read_text() in (out / "answer.md").read_text()
    compile((out / "answer.py").read_text(), "answer.py", "exec")
    bad = runner.invoke(app, ["run", TASK, "--backend", "fake", "--out-dir", str(out / "answer.md"), *cp])
    assert bad.exit_code == 2 and "--out-dir" in bad.output


def test_task_from_stdin(cp: list[str]) -> None:
    result = runner.invoke(app, ["run", "-", "--backend", "fake", "--json", *cp], input="Explain TLS\n")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["title"] == "Explain TLS"


def test_partial_run_exits_1_and_says_what_is_missing(write_script, cp: list[str]) -> None:
    script = write_script({"rules": [{"slot": "C", "fail": "out of memory"}]})
    result = runner.invoke(
        app,
        [
            "run",
            "Plan",
            "--backend",
            "fake",
            "--fake-script",
            str(script),
            "--framework",
            str(FIXTURES / "branchy.yaml"),
            *cp,
        ],
    )
    assert result.exit_code == 1
    assert "this part failed" in result.stdout and "out of memory" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "  "], "task: is empty"),
        (["run", "x", "--framework", "/no/such/plan.yaml"], "/no/such/plan.yaml"),
        (["resume", "nope", "--answer", "approve"], "no run 'nope' is saved"),
        (["run", "x", "--backend", "fake", "--fake-script", "/no/script.yaml"], "/no/script.yaml"),
        (["resume", "nope"], "no run 'nope' is saved"),
        (["show", "nope"], "no run 'nope' is saved"),
    ],
)
def test_user_errors_are_one_clear_line_exit_2_no_traceback(args: list[str], message: str, cp: list[str]) -> None:
    result = runner.invoke(app, [*args, *cp])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_invalid_framework_file_lists_every_error(tmp_path: Path, cp: list[str]) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "id: p\ntitle: P\nslots:\n"
        "  - {id: a, title: A, description: d, deps: [b]}\n"
        "  - {id: b, title: B, description: d, deps: [a]}\n"
        "  - {id: c, title: C, description: d, expert: wizard}\n"
    )
    result = runner.invoke(app, ["run", "x", "--framework", str(plan), *cp])
    assert result.exit_code == 2
    assert str(plan) in result.stderr and "dependency cycle" in result.stderr
    plan.write_text("id: p\ntitle: P\nslots:\n  - {id: c, title: C, description: d, expert: wizard}\n")
    result = runner.invoke(app, ["run", "x", "--backend", "fake", "--framework", str(plan), *cp])
    assert result.exit_code == 2
    assert "slots[c].expert" in result.stderr and "unknown expert id 'wizard'" in result.stderr
    assert "python_coder" in result.stderr and "general_reasoning" in result.stderr


def test_unknown_mode_lists_allowed_values(cp: list[str]) -> None:
    result = runner.invoke(app, ["run", "x", "--mode", "yolo", *cp])
    assert result.exit_code == 2
    assert "interactive" in result.output and "autonomous" in result.output


def test_bad_environment_value_is_named(monkeypatch: pytest.MonkeyPatch, cp: list[str]) -> None:
    monkeypatch.setenv("COE_MAX_TOKENS", "lots")
    result = runner.invoke(app, ["run", "x", "--backend", "fake", *cp])
    assert result.exit_code == 2 and "COE_MAX_TOKENS" in result.stderr


def test_progress_plain_lines_when_not_a_tty() -> None:
    buf = io.StringIO()
    with Progress(stream=buf, live=False) as p:
        p.event({"event": "figures_computed", "figures": 2, "note": "3 program(s) ran; 2 figure(s) printed by two"})
        p.event({"event": "slot_dispatched", "slot": "A", "title": "Req", "expert": "g"})
        p.event({"event": "slot_started", "slot": "A"})
        p.event({"event": "slot_calculated", "slot": "A", "note": "the program printed '0.5177'", "check": True})
        p.event({"event": "slot_retry", "slot": "A", "attempt": 2, "problems": ["missing '## Outline' heading"]})
        p.event({"event": "slot_retry", "slot": "A", "attempt": 3, "candidate": "c2", "problems": ["contract.ends"]})
        p.event({"event": "slot_done", "slot": "A", "attempts": 2})
        p.event({"event": "slot_failed", "slot": "B", "error": "boom"})
        p.event({"event": "completion_round", "decision": "nothing to do", "actions": [], "estimate_s": 0})
        p.event({"event": "completion_round", "decision": "ran", "actions": ["add a part: x"], "estimate_s": 90.0})
    lines = buf.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "figures: 3 program(s) ran; 2 figure(s) printed by two",
        "A: queued",
        "A: started",
        "A: calculated - the program printed '0.5177'",
        "A: retrying (attempt 2) - missing '## Outline' heading",
        "A: retrying (attempt 3) - c2: contract.ends",
        "A: done",
        "B: failed - boom",
        "completion round: ran - add a part: x (about 90.0 s)",
    ]
    assert "" not in p.rows  # the figures and the completion round are no slot's row


def test_progress_live_table_on_a_tty() -> None:
    buf = io.StringIO()
    with Progress(stream=buf, live=True) as p:
        p.event({"event": "slot_started", "slot": "A", "title": "Requirements", "expert": "general_reasoning"})
        p.event({"event": "slot_done", "slot": "A", "attempts": 1})
    out = buf.getvalue()
    assert "Requirements" in out and "✔" in out
