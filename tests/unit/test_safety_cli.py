"""Issue 42 over the command line, driven as it was found: ``python -m cli`` processes on the fake backend.

Bad bytes in every text argument, escape sequences in stored text, a new task on a thread that waits for an
answer or stopped half-way, a running run seen by ``coe threads`` and kept by ``coe prune``, the answers of
``coe resume``, an empty memory search, the ``[env: ...]`` hints of ``--help``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.faults_lab import PLAN, TASK
from tests.integration.cli_proc import coe_env

pytestmark = pytest.mark.slow  # each case starts `python -m cli` processes

ROOT = Path(__file__).resolve().parents[2]
BAD = os.fsdecode(b"\xff")
"""A byte that is not UTF-8, as Python hands it over from the command line (a lone surrogate)."""


class Lab:
    """One test's home, checkpoint file, fake script and calls log."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "runs.sqlite"
        self.calls = root / "calls.jsonl"
        self.script = root / "script.yaml"
        self.plan = root / "plan.yaml"
        self.plan.write_text(yaml.safe_dump(PLAN), encoding="utf-8")
        self.slow({})

    def slow(self, delays: dict[str, float]) -> None:
        rules = [{"slot": s, "delay": d} for s, d in delays.items()]
        self.script.write_text(yaml.safe_dump({"calls_log": str(self.calls), "rules": rules}), encoding="utf-8")

    def env(self) -> dict[str, str]:
        env = coe_env(self.root / "home", self.script)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        return env

    def argv(self, args: tuple[str, ...]) -> list[str]:
        saves = args[0] in ("run", "resume", "show", "threads", "prune", "feedback", "memory")
        return [sys.executable, "-m", "cli", *args, *(["--checkpoint", f"sqlite://{self.db}"] if saves else [])]

    def coe(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(args), cwd=ROOT, env=self.env(), capture_output=True, text=True, timeout=180, check=False
        )

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        with (self.root / "started.log").open("wb") as log:  # the child keeps its own copy of the descriptor
            return subprocess.Popen(self.argv(args), cwd=ROOT, env=self.env(), stdout=subprocess.DEVNULL, stderr=log)

    def called(self, slot: str) -> int:
        if not self.calls.exists():
            return 0
        lines = self.calls.read_text(encoding="utf-8").rpartition("\n")[0].splitlines()
        return sum(1 for line in lines if json.loads(line).get("slot") == slot)

    def waiting(self, thread: str = "w") -> None:
        proc = self.coe("run", "Plan a service", "--mode", "confirm", "--framework", str(self.plan), "--thread", thread)
        assert proc.returncode == 3, proc.stderr

    def statuses(self) -> dict[str, str]:
        listed = self.coe("threads", "--json")
        assert listed.returncode == 0, listed.stderr
        return {t["thread_id"]: t["status"] for t in json.loads(listed.stdout)}


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path)


def _usage_error(proc: subprocess.CompletedProcess[str], *names: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "restore the store" not in proc.stderr
    for name in names:
        assert name in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("kb", "search", f"tls{BAD}"), "query"),
        (("route", f"write a parser{BAD}"), "text"),
        (("memory", "add", f"we deploy on{BAD}"), "text"),
        (("memory", "search", f"deploy{BAD}"), "query"),
        (("run", TASK, "--thread-id", f"t{BAD}"), "--thread-id"),
        (("resume", f"t{BAD}"), "thread_id"),
        (("show", f"t{BAD}"), "thread_id"),
        (("feedback", f"t{BAD}", "good"), "thread_id"),
        (("feedback", "t", "good", "--note", f"fine{BAD}"), "--note"),
        (("run", f"Explain{BAD} TLS"), "task"),
    ],
)
def test_bytes_that_are_not_utf8_in_any_text_argument_exit_2_naming_it(
    lab: Lab, args: tuple[str, ...], name: str
) -> None:
    proc = lab.coe(*args)
    _usage_error(proc, name, "not UTF-8")


def test_an_unknown_thread_id_on_a_healthy_store_is_no_such_run(lab: Lab) -> None:
    assert lab.coe("run", TASK, "--no-templates", "--thread-id", "h").returncode == 0
    for command in ("show", "resume"):
        proc = lab.coe(command, "nosuch")
        _usage_error(proc, "no run 'nosuch' is saved")


def test_escape_sequences_in_a_task_are_printed_escaped(lab: Lab) -> None:
    task = "Explain TLS \x1b[2J\x1b]0;pwned\x07 now \u202eevil"
    assert lab.coe("run", task, "--no-templates", "--thread-id", "e").returncode == 0
    for args in (("threads",), ("show", "e")):
        out = lab.coe(*args).stdout
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
        assert "\\x1b[2J" in out and "\\u202e" in out
    listed = json.loads(lab.coe("threads", "--json").stdout)
    assert listed[0]["task"] == task  # JSON keeps the text; its escapes are JSON's


def test_an_empty_memory_search_exits_2_as_an_empty_kb_search(lab: Lab) -> None:
    for args in (("memory", "search", ""), ("kb", "search", "  ")):
        _usage_error(lab.coe(*args), "QUERY", "is empty")


def test_a_new_task_on_a_waiting_thread_is_refused_and_the_question_kept(lab: Lab) -> None:
    lab.waiting()
    proc = lab.coe("run", "Something else", "--no-templates", "--thread-id", "w")
    _usage_error(proc, "waiting for an answer (approve_plan)", "coe resume w", "--abandon")
    assert lab.statuses() == {"w": "waiting"}
    assert lab.coe("resume", "w", "--answer", "approve").returncode == 0  # the question was not dropped


def test_abandon_runs_the_new_task_and_records_the_abandoned_run(lab: Lab) -> None:
    lab.waiting()
    proc = lab.coe("run", "Something else", "--no-templates", "--thread-id", "w", "--abandon")
    assert proc.returncode == 0, proc.stderr
    shown = lab.coe("show", "w").stdout
    assert "turn 1: abandoned" in shown and "abandon_run" in shown


def test_a_new_task_on_a_killed_thread_is_refused_and_resume_finishes_it(lab: Lab) -> None:
    lab.slow({"b": 30.0})
    proc = lab.start("run", "Plan a service", "--framework", str(lab.plan), "--thread-id", "k")
    deadline = time.monotonic() + 60
    while lab.called("b") == 0:
        assert proc.poll() is None and time.monotonic() < deadline, (lab.root / "started.log").read_text()
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    lab.slow({})
    refused = lab.coe("run", "Something else", "--no-templates", "--thread-id", "k")
    _usage_error(refused, "stopped half-way", "coe resume k", "--abandon")
    assert lab.coe("resume", "k").returncode == 0
    assert lab.called("a") == 1 and lab.statuses() == {"k": "completed"}


def test_a_running_run_is_listed_running_and_prune_never_deletes_it(lab: Lab) -> None:
    lab.slow({"b": 30.0})
    proc = lab.start("run", "Plan a service", "--framework", str(lab.plan), "--thread-id", "r")
    try:
        deadline = time.monotonic() + 60
        while lab.called("b") == 0:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert lab.statuses() == {"r": "running"}
        pruned = lab.coe("prune", "--older-than", "0", "--delete-unfinished", "--json")
        assert pruned.returncode == 0, pruned.stderr
        report = json.loads(pruned.stdout)
        assert report["deleted"] == [] and report["running"] == ["r"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    lab.slow({})
    assert lab.statuses() == {"r": "stopped"}  # its process is gone: the lease is not live any more
    pruned = json.loads(lab.coe("prune", "--older-than", "1", "--json").stdout)
    assert pruned["stale_leases"] == ["r"] and pruned["deleted"] == []  # the left-over row goes, the run stays
    assert lab.coe("resume", "r").returncode == 0 and lab.statuses() == {"r": "completed"}


def test_answer_and_answers_file_together_are_refused(lab: Lab) -> None:
    lab.waiting()
    answers = lab.root / "approve.yaml"
    answers.write_text("approve\n", encoding="utf-8")
    proc = lab.coe("resume", "w", "--answer", "reject", "--answers-file", str(answers))
    _usage_error(proc, "give one of them")
    assert lab.statuses() == {"w": "waiting"}


def test_an_unknown_interrupt_id_in_an_answers_file_names_it_and_the_pending_ones(lab: Lab) -> None:
    lab.waiting()
    shown = json.loads(lab.coe("show", "w", "--json").stdout)
    assert shown["status"] == "running"
    answers = lab.root / "answers.json"
    answers.write_text(json.dumps({"f" * 32: "approve"}), encoding="utf-8")
    proc = lab.coe("resume", "w", "--answers-file", str(answers))
    _usage_error(proc, "f" * 32, "pending: ")
    assert "None is not one of" not in proc.stderr


def test_help_shows_the_environment_variable_of_each_setting(lab: Lab) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "run", "--help"],
        cwd=ROOT,
        env={**lab.env(), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=False,
    )
    for name in ("COE_BACKEND", "COE_MODEL", "COE_FAKE_SCRIPT", "COE_PROFILE", "COE_MEMORY_LIMIT_MB"):
        assert f"[env: {name}]" in proc.stdout, proc.stdout
