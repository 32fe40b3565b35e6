"""The fault matrix over the ``coe`` command: bad input, broken files and stopped runs, one case a test.

Each case runs ``coe`` processes on the fake backend in a fresh lab (:mod:`tests.faults_lab`) and holds when the
input is refused with exit code 2 and a message naming the problem, or the run completes, and nothing saved is
lost (a stopped run resumes with no slot run twice). ``bench/bench_faults.py`` runs the same cases and writes the
matrix's table and totals. The cases that need the test PostgreSQL are marked ``postgres``; all start processes.
The cases that time nothing run three at a time in a thread pool, each in its own lab (:func:`pooled`).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.faults_lab import (
    PLAN,
    ROOT,
    TASK,
    Case,
    Lab,
    Outcome,
    cli_refused,
    cli_runs,
    completed,
    first_line,
    refused,
    write_file,
)

pytestmark = pytest.mark.slow


def _truncated_checkpoint(lab: Lab) -> str:
    good = lab.coe("run", TASK, "--no-templates")
    assert good.returncode == 0, good.stderr
    size = lab.db.stat().st_size
    with lab.db.open("r+b") as fh:
        fh.truncate(size // 3)
    for suffix in ("-wal", "-shm"):
        Path(str(lab.db) + suffix).unlink(missing_ok=True)
    return str(lab.db)


def _overwritten_checkpoint(lab: Lab) -> str:
    lab.db.write_bytes(os.urandom(64 * 1024))
    return str(lab.db)


def _waiting(lab: Lab) -> str:
    proc = lab.coe("run", "Plan a service", "--mode", "confirm", "--framework", str(lab.plan()), "--thread-id", "w")
    assert proc.returncode == 3, proc.stderr
    return "w"


def _answer_case(case_id: str, what: str, answer: Callable[[Lab], list[str]], names: str) -> Case:
    def run(lab: Lab) -> Outcome:
        tid = _waiting(lab)
        proc = lab.coe("resume", tid, *answer(lab))
        err = proc.stderr.decode("utf-8", "replace")
        listed = lab.threads() or []
        after = lab.coe("resume", tid, "--answer", "approve")
        held = proc.returncode == 2 and names in err and "Traceback" not in err and after.returncode == 0
        state = f"thread {[t['status'] for t in listed]}; then approved: rc {after.returncode}"
        return Outcome(str(proc.returncode), first_line(proc.stderr), state, held)

    return Case(case_id, "cli", what, run, kind="answers")


def _long_description(lab: Lab) -> list[str]:
    slots = [{**PLAN["slots"][0], "description": "d" * 8001}]
    return ["run", TASK, "--framework", str(lab.plan(slots=slots))]


def _cli_cases_1() -> list[Case]:
    """Part 1 of the matrix over the ``coe`` command."""
    task = ["run", TASK]
    return [
        cli_refused("task-empty", "empty task", lambda lab: ["run", ""], "task: is empty"),
        cli_refused("task-blank", "task of spaces and newlines", lambda lab: ["run", " \n\t "], "task: is empty"),
        cli_refused("task-8001", "task of 8,001 characters", lambda lab: ["run", "x" * 8001], "limit is 8000"),
        cli_runs("task-8000", "task of 8,000 characters", lambda lab: ["run", ("Plan the migration. " * 400)[:8000]]),
        cli_refused(
            "task-nul", "task on stdin with a NUL character", lambda lab: ["run", "-"], "NUL", stdin=b"Explain\x00 TLS"
        ),
        cli_refused(
            "stdin-latin1", "task on stdin in Latin-1", lambda lab: ["run", "-"], "not UTF-8", stdin=b"caf\xe9 menu"
        ),
        cli_refused("stdin-empty", "empty stdin", lambda lab: ["run", "-"], "task: is empty"),
        cli_refused("stdin-binary", "a binary file on stdin", lambda lab: ["run", "-"], "not UTF-8", stdin=b"\x00\xff"),
        cli_runs(
            "stdin-bom",
            "stdin with a UTF-8 byte-order mark",
            lambda lab: ["run", "-"],
            stdin=b"\xef\xbb\xbf" + TASK.encode(),
        ),
        cli_runs("task-unicode", "task in Greek with emoji", lambda lab: ["run", "Εξήγησε το TLS 🔐"]),
        cli_refused("mode-bad", "--mode yolo", lambda lab: [*task, "--mode", "yolo"], "yolo", kind="options"),
        cli_refused(
            "parallel-0",
            "--max-parallel 0",
            lambda lab: [*task, "--max-parallel", "0"],
            "--max-parallel",
            kind="options",
        ),
        cli_refused(
            "parallel-65",
            "--max-parallel 65",
            lambda lab: [*task, "--max-parallel", "65"],
            "--max-parallel",
            kind="options",
        ),
        cli_refused(
            "tokens-5", "--max-tokens 5", lambda lab: [*task, "--max-tokens", "5"], "--max-tokens", kind="options"
        ),
        cli_refused(
            "tokens-text",
            "--max-tokens lots",
            lambda lab: [*task, "--max-tokens", "lots"],
            "--max-tokens",
            kind="options",
        ),
        cli_refused(
            "memory-10",
            "--memory-limit 10",
            lambda lab: [*task, "--memory-limit", "10"],
            "--memory-limit",
            kind="options",
        ),
        cli_refused(
            "memory-100",
            "--memory-limit 100 (under the profile's overhead)",
            lambda lab: [*task, "--memory-limit", "100"],
            "leaves nothing",
            kind="options",
        ),
        cli_refused("profile-bad", "--profile nope", lambda lab: [*task, "--profile", "nope"], "nope", kind="options"),
        cli_refused("backend-bad", "--backend nope", lambda lab: [*task, "--backend", "nope"], "nope", kind="options"),
    ]


def _cli_cases_2() -> list[Case]:
    """Part 2 of the matrix over the ``coe`` command."""
    task = ["run", TASK]
    return [
        cli_refused(
            "model-missing",
            "--model /no/such.gguf",
            lambda lab: [*task, "--backend", "llama", "--model", "/no/such.gguf"],
            "/no/such.gguf",
            kind="model",
        ),
        cli_refused(
            "model-dir",
            "--model a directory",
            lambda lab: [*task, "--backend", "llama", "--model", str(lab.root)],
            "is not a file",
            kind="model",
        ),
        cli_refused(
            "model-text",
            "--model a text file",
            lambda lab: [*task, "--backend", "llama", "--model", str(write_file(lab, "m.gguf", "hello"))],
            "not a GGUF",
            kind="model",
        ),
        cli_refused(
            "model-empty",
            "--model an empty file",
            lambda lab: [*task, "--backend", "llama", "--model", str(write_file(lab, "e.gguf", b""))],
            "not a GGUF",
            kind="model",
        ),
        cli_refused(
            "model-name",
            "--model an unknown name",
            lambda lab: [*task, "--backend", "llama", "--model", "qwen-huge"],
            "qwen-huge",
            kind="model",
        ),
        cli_refused(
            "script-missing",
            "--fake-script missing",
            lambda lab: [*task, "--fake-script", "/no/script.yaml"],
            "/no/script.yaml",
            kind="files",
        ),
        cli_refused(
            "script-yaml",
            "--fake-script not YAML",
            lambda lab: [*task, "--fake-script", str(write_file(lab, "s.yaml", "rules: [\n"))],
            "s.yaml",
            kind="files",
        ),
        cli_refused(
            "script-binary",
            "--fake-script binary",
            lambda lab: [*task, "--fake-script", str(write_file(lab, "s.bin", b"\xff\xfe\x00"))],
            "s.bin",
            kind="files",
        ),
    ]


def _cli_cases_3() -> list[Case]:
    """Part 3 of the matrix over the ``coe`` command."""
    task = ["run", TASK]
    return [
        cli_refused(
            "plan-missing",
            "--framework missing",
            lambda lab: [*task, "--framework", "/no/plan.yaml"],
            "/no/plan.yaml",
            kind="files",
        ),
        cli_refused(
            "plan-dir",
            "--framework a directory",
            lambda lab: [*task, "--framework", str(lab.root)],
            str(Path(tempfile.gettempdir())),
            kind="files",
        ),
        cli_refused(
            "plan-yaml",
            "--framework not YAML",
            lambda lab: [*task, "--framework", str(write_file(lab, "p.yaml", "slots: [\n"))],
            "p.yaml",
            kind="files",
        ),
        cli_refused(
            "plan-binary",
            "--framework binary",
            lambda lab: [*task, "--framework", str(write_file(lab, "p.bin", b"\xff\xfe\x00"))],
            "p.bin",
            kind="files",
        ),
        cli_refused(
            "plan-empty",
            "--framework empty file",
            lambda lab: [*task, "--framework", str(write_file(lab, "p0.yaml", ""))],
            "p0.yaml",
            kind="files",
        ),
        cli_refused(
            "plan-cycle",
            "--framework with a cycle",
            lambda lab: [
                *task,
                "--framework",
                str(lab.plan(slots=[{**PLAN["slots"][0], "deps": ["b"]}, PLAN["slots"][1]])),
            ],
            "cycle",
            kind="files",
        ),
        cli_refused(
            "plan-expert",
            "--framework naming an unknown expert",
            lambda lab: [*task, "--framework", str(lab.plan(slots=[{**PLAN["slots"][0], "expert": "wizard"}]))],
            "wizard",
            kind="files",
        ),
        cli_refused(
            "plan-long", "--framework with an 8,001-character description", _long_description, "8000", kind="files"
        ),
    ]


def _cli_cases_4() -> list[Case]:
    """Part 4 of the matrix over the ``coe`` command."""
    task = ["run", TASK]
    return [
        cli_refused(
            "env-tokens",
            "COE_MAX_TOKENS=lots",
            lambda lab: task,
            "COE_MAX_TOKENS",
            env={"COE_MAX_TOKENS": "lots"},
            kind="environment",
        ),
        cli_refused(
            "env-backend",
            "COE_BACKEND=nope",
            lambda lab: task,
            "COE_BACKEND",
            env={"COE_BACKEND": "nope"},
            kind="environment",
        ),
        cli_refused(
            "env-remote",
            "COE_BACKEND=remote without a URL",
            lambda lab: task,
            "COE_REMOTE_URL",
            env={"COE_BACKEND": "remote"},
            kind="environment",
        ),
        cli_refused(
            "env-remote-url",
            "COE_REMOTE_URL=ftp://x",
            lambda lab: task,
            "ftp://x",
            env={"COE_BACKEND": "remote", "COE_REMOTE_URL": "ftp://x"},
            kind="environment",
        ),
        cli_refused(
            "env-scopes-missing",
            "COE_EXPERT_SCOPES names no directory",
            lambda lab: task,
            "/no/scopes",
            env={"COE_EXPERT_SCOPES": "/no/scopes"},
            kind="environment",
        ),
        cli_refused(
            "env-profile",
            "COE_PROFILE=nope",
            lambda lab: task,
            "COE_PROFILE",
            env={"COE_PROFILE": "nope"},
            kind="environment",
        ),
        cli_refused(
            "cp-scheme",
            "--checkpoint ftp://x",
            lambda lab: [*task, "--checkpoint", "ftp://x"],
            "ftp://x",
            kind="storage",
        ),
    ]


def _cli_cases_5() -> list[Case]:
    """Part 5 of the matrix over the ``coe`` command."""
    task = ["run", TASK]
    return [
        cli_refused(
            "cp-nofile",
            "--checkpoint sqlite://",
            lambda lab: [*task, "--checkpoint", "sqlite://"],
            "names no file",
            kind="storage",
        ),
        cli_refused(
            "cp-dir",
            "--checkpoint a directory",
            lambda lab: [*task, "--checkpoint", f"sqlite://{lab.root}"],
            lambda lab: str(lab.root),
            kind="storage",
        ),
        cli_refused(
            "cp-proc",
            "--checkpoint under /proc",
            lambda lab: [*task, "--checkpoint", "sqlite:///proc/coe/x.sqlite"],
            "/proc/coe",
            kind="storage",
        ),
        cli_refused(
            "cp-random",
            "--checkpoint a file of random bytes",
            lambda lab: [*task, "--checkpoint", f"sqlite://{_overwritten_checkpoint(lab)}"],
            lambda lab: str(lab.db),
            kind="storage",
            saved=None,
        ),
        cli_refused(
            "cp-truncated",
            "--checkpoint a truncated checkpoint file",
            lambda lab: [*task, "--checkpoint", f"sqlite://{_truncated_checkpoint(lab)}"],
            lambda lab: str(lab.db),
            kind="storage",
            saved=None,
        ),
        cli_refused(
            "cp-pg-host",
            "--checkpoint PostgreSQL on a closed port",
            lambda lab: [*task, "--checkpoint", "postgresql://postgres@127.0.0.1:1/test"],
            "cannot connect",
            kind="storage",
        ),
        cli_refused(
            "cp-pg-db",
            "--checkpoint PostgreSQL database that does not exist",
            lambda lab: [*task, "--checkpoint", "postgresql://postgres@127.0.0.1:5432/coe_no_such_db"],
            "coe_no_such_db",
            kind="storage",
        ),
        cli_refused(
            "resume-unknown", "resume an unknown thread", lambda lab: ["resume", "nope"], "no run 'nope'", kind="resume"
        ),
        cli_refused(
            "show-unknown", "show an unknown thread", lambda lab: ["show", "nope"], "no run 'nope'", kind="resume"
        ),
        _answer_case(
            "answer-not-json", "--answer maybe to a plan approval", lambda lab: ["--answer", "maybe"], "maybe"
        ),
    ]


def _cli_cases_6() -> list[Case]:
    """Part 6 of the matrix over the ``coe`` command."""
    task = ["run", TASK]
    return [
        _answer_case(
            "answers-missing",
            "--answers-file missing",
            lambda lab: ["--answers-file", "/no/answers.yaml"],
            "/no/answers.yaml",
        ),
        _answer_case(
            "answers-binary", "--answers-file /bin/true", lambda lab: ["--answers-file", "/bin/true"], "/bin/true"
        ),
        _answer_case(
            "answers-yaml",
            "--answers-file not YAML",
            lambda lab: ["--answers-file", str(write_file(lab, "a.yaml", "a: [\n"))],
            "a.yaml",
        ),
        _answer_case(
            "answers-id",
            "--answers-file naming an unknown interrupt",
            lambda lab: ["--answers-file", str(write_file(lab, "a.yaml", "nope: approve\nother: approve\n"))],
            "a.yaml",
        ),
        _answer_case(
            "answers-dir",
            "--answers-file a directory",
            lambda lab: ["--answers-file", str(lab.root)],
            str(Path(tempfile.gettempdir())),
        ),
        Case("resume-finished", "cli", "resume a finished run", _resume_finished, kind="resume"),
        Case(
            "answer-not-waiting", "cli", "--answer to a run that waits for nothing", _answer_not_waiting, kind="resume"
        ),
        cli_refused(
            "out-dir",
            "--out into a missing directory",
            lambda lab: [*task, "--out", "/no/dir/answer.md"],
            "/no/dir",
            kind="files",
        ),
        cli_refused(
            "out-dir-file",
            "--out-dir onto a file",
            lambda lab: [*task, "--out-dir", str(write_file(lab, "f.md", "x"))],
            "--out-dir",
            kind="files",
        ),
        cli_refused(
            "prune-negative",
            "prune --older-than -1",
            lambda lab: ["prune", "--older-than", "-1"],
            "--older-than",
            kind="options",
        ),
        cli_refused(
            "kb-missing", "kb add a missing path", lambda lab: ["kb", "add", "/no/docs"], "/no/docs", kind="files"
        ),
    ]


def _cli_cases_7() -> list[Case]:
    """Part 7 of the matrix over the ``coe`` command."""
    return [
        cli_refused(
            "kb-binary",
            "kb add a binary file named .txt",
            lambda lab: ["kb", "add", str(write_file(lab, "bin.txt", os.urandom(4096)))],
            "bin.txt",
            kind="files",
        ),
        cli_refused(
            "kb-empty-dir",
            "kb add a directory with no documents",
            lambda lab: ["kb", "add", str(_empty_dir(lab))],
            "empty",
            kind="files",
        ),
        Case(
            "sigint",
            "cli",
            "Ctrl+C in the middle of a run, then resume",
            lambda lab: _stopped(lab, signal.SIGINT),
            kind="interrupt",
        ),
        Case(
            "sigterm",
            "cli",
            "SIGTERM in the middle of a run, then resume",
            lambda lab: _stopped(lab, signal.SIGTERM),
            kind="interrupt",
        ),
        Case(
            "sigkill",
            "cli",
            "kill -9 in the middle of a run, then resume",
            lambda lab: _stopped(lab, signal.SIGKILL),
            kind="interrupt",
        ),
        Case("two-resumes", "cli", "two resumes of one thread at once", _two_resumes, kind="interrupt"),
        Case(
            "pg-fresh-10", "cli", "10 first runs at once on a new PostgreSQL database", _fresh_postgres, kind="storage"
        ),
        Case("corrupt-row", "cli", "threads with one unreadable run beside healthy ones", _corrupt_row, kind="storage"),
    ]


def _cli_cases() -> list[Case]:
    """The matrix over the ``coe`` command, as ``bench/bench_faults.py`` counts it."""
    return [
        *_cli_cases_1(),
        *_cli_cases_2(),
        *_cli_cases_3(),
        *_cli_cases_4(),
        *_cli_cases_5(),
        *_cli_cases_6(),
        *_cli_cases_7(),
    ]


def _empty_dir(lab: Lab) -> Path:
    path = lab.root / "empty"
    path.mkdir()
    return path


def _resume_finished(lab: Lab) -> Outcome:
    assert lab.coe("run", TASK, "--no-templates", "--thread-id", "f").returncode == 0
    return completed(lab, lab.coe("resume", "f"))


def _answer_not_waiting(lab: Lab) -> Outcome:
    assert lab.coe("run", TASK, "--no-templates", "--thread-id", "f").returncode == 0
    proc = lab.coe("resume", "f", "--answer", "approve")
    out = refused(lab, proc, names="not waiting", saved=1)
    return out


def _stopped(lab: Lab, sig: signal.Signals) -> Outcome:
    """Stop a run while slot b sleeps; resume it; slot a must not run again."""
    lab.write_script({"b": 4.0})
    proc = lab.start("run", "Plan a service", "--framework", str(lab.plan()), "--thread-id", "s")
    deadline = time.monotonic() + 60
    while lab.calls_per_slot().get("b", 0) == 0 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    code = proc.returncode
    lab.write_script({})
    resumed = lab.coe("resume", "s")
    calls = lab.calls_per_slot()
    listed = lab.threads() or []
    expected = -9 if sig == signal.SIGKILL else 130
    held = (
        code == expected
        and resumed.returncode == 0
        and calls.get("a") == 1
        and [t["status"] for t in listed] == ["completed"]
    )
    message = first_line(err) or "(killed)"
    return Outcome(str(code), message, f"resume rc {resumed.returncode}; calls {calls}", held)


def _two_resumes(lab: Lab) -> Outcome:
    lab.write_script({"a": 3.0, "b": 3.0})
    first = lab.start("run", "Plan a service", "--framework", str(lab.plan()), "--thread-id", "d")
    deadline = time.monotonic() + 60
    while lab.calls_per_slot().get("a", 0) == 0 and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    second = lab.coe("resume", "d")
    first.communicate(timeout=120)
    calls = lab.calls_per_slot()
    listed = lab.threads() or []
    held = (
        first.returncode == 0
        and second.returncode == 2
        and calls == {"a": 1, "b": 1}
        and [t["status"] for t in listed] == ["completed"]
    )
    return Outcome(f"{first.returncode}, {second.returncode}", first_line(second.stderr), f"calls {calls}", held)


PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def _fresh_postgres(lab: Lab, runs: int = 10) -> Outcome:
    """``runs`` first runs started together on a brand-new PostgreSQL database: every one saved and completed."""
    import uuid

    import psycopg

    name = f"coe_fresh_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cli",
                    "run",
                    TASK,
                    "--no-templates",
                    "--thread-id",
                    f"t{i}",
                    "--checkpoint",
                    url,
                ],
                cwd=ROOT,
                env=lab.env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for i in range(runs)
        ]
        stderrs = [p.communicate(timeout=300)[1] for p in procs]  # reads and closes each pipe
        codes = [p.returncode for p in procs]
        errors = [first_line(err) for err, c in zip(stderrs, codes, strict=True) if c]
        listed = lab.coe("threads", "--json", "--checkpoint", url)
        saved = [t["status"] for t in json.loads(listed.stdout)] if listed.returncode == 0 else []
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    held = codes == [0] * runs and saved == ["completed"] * runs
    message = errors[0] if errors else ""
    return Outcome(
        f"{codes.count(0)}/{runs} rc 0", message, f"{saved.count('completed')} of {runs} saved, completed", held
    )


def _corrupt_row(lab: Lab) -> Outcome:
    for tid in ("h1", "bad", "h2"):
        assert lab.coe("run", TASK, "--no-templates", "--thread-id", tid).returncode == 0
    with sqlite3.connect(lab.db) as conn:
        conn.execute("UPDATE checkpoints SET checkpoint = ? WHERE thread_id = 'bad'", (b"\xc1\xc1\xc1garbage",))
    proc = lab.coe("threads", "--json")
    err = proc.stderr.decode("utf-8", "replace")
    try:
        listed = {t["thread_id"]: t["status"] for t in json.loads(proc.stdout)}
    except json.JSONDecodeError:
        listed = {}
    healthy = listed.get("h1") == listed.get("h2") == "completed"
    held = proc.returncode in (0, 1) and healthy and listed.get("bad") != "completed" and "Traceback" not in err
    return Outcome(str(proc.returncode), first_line(proc.stderr), f"listed {listed}", held and "bad" in err)


CLI_CASES = _cli_cases()
POSTGRES = {"cp-pg-db", "pg-fresh-10"}
"""The cases that reach the test PostgreSQL (a child process does, where the test's own guard cannot see it)."""


SERIAL_KINDS = {"interrupt", "resume"}
"""Cases that time signals or races between processes: each runs alone, when its test runs."""
WORKERS = 3
"""The other cases run this many at a time, as soon as the first of them is tested: most of a case is starting
``coe`` processes, so the matrix takes about half the time it took one case after another."""


@pytest.fixture(scope="module")
def pooled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future]]:
    """The selected cases that may run side by side, started in a thread pool: case id -> its outcome's future."""
    module = request.node.nodeid
    selected = {
        item.callspec.id
        for item in request.session.items
        if item.nodeid.startswith(module) and hasattr(item, "callspec")
    }
    cases = [c for c in CLI_CASES if c.id in selected and c.kind not in SERIAL_KINDS and c.id not in POSTGRES]
    with ThreadPoolExecutor(WORKERS) as workers:
        yield {c.id: workers.submit(c.run, Lab(tmp_path_factory.mktemp(c.id))) for c in cases}


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.id, marks=[pytest.mark.postgres] if c.id in POSTGRES else []) for c in CLI_CASES]
)
def test_the_fault_holds(case: Case, tmp_path: Path, pooled: dict[str, Future]) -> None:
    future = pooled.get(case.id)
    outcome: Outcome = future.result(timeout=900) if future is not None else case.run(Lab(tmp_path))
    assert outcome.held, f"{case.what}: {outcome}"
