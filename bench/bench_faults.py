"""Fault matrix: bad input, broken files and interrupted runs, over the CLI and the embedded API.

Run: ``python -m bench.bench_faults``. Writes ``bench/results/faults.{json,md}``. ``--quick``: one case of each
kind (a test of the benchmark, not a measurement).

Every case starts from a fresh home directory and checkpoint file, on the fake backend (no model: what is
measured is what the harness does with the input, not what a model writes). For each case the table gives the
exit code (CLI) or the exception (API), the first line of the message, and the state afterwards: whether the
saved runs can still be listed, and whether the case's thread holds what it should (nothing for a refused input;
a finished run for a good one; a resumable run, finished by a resume with no slot run twice, for an interrupted
one). A case *holds* when it is refused with exit code 2 and a message (or the matching user error over the
API), or runs correctly, and nothing is lost. Goal: every case holds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common import bench_parser, md_table, write_results

ROOT = Path(__file__).resolve().parents[1]
PLAN = {
    "id": "p",
    "title": "Plan",
    "slots": [
        {"id": "a", "title": "A", "description": "Write part A.", "expert": "general_reasoning"},
        {"id": "b", "title": "B", "description": "Write part B.", "expert": "general_reasoning", "deps": ["a"]},
    ],
}
TASK = "Explain how TLS certificates are validated"


@dataclass
class Lab:
    """One case's own home, checkpoint file, fake script and calls log."""

    root: Path

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.home.mkdir()
        self.db = self.root / "runs.sqlite"
        self.calls = self.root / "calls.jsonl"
        self.script = self.root / "script.yaml"
        self.write_script({})

    @property
    def checkpoint(self) -> str:
        return f"sqlite://{self.db}"

    def write_script(self, delays: dict[str, float]) -> None:
        rules = [{"slot": s, "delay": d} for s, d in delays.items()]
        self.script.write_text(yaml.safe_dump({"calls_log": str(self.calls), "rules": rules}), encoding="utf-8")

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COE_")}
        env.update({"COE_HOME": str(self.home), "COE_BACKEND": "fake", "COE_FAKE_SCRIPT": str(self.script)})
        env.update(extra)
        return env

    def plan(self, **changes: Any) -> Path:
        path = self.root / "plan.yaml"
        path.write_text(yaml.safe_dump({**PLAN, **changes}), encoding="utf-8")
        return path

    def coe(
        self, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        saves = args[0] in ("run", "resume", "show", "threads", "prune")
        cp = ["--checkpoint", self.checkpoint] if saves and "--checkpoint" not in args else []
        return subprocess.run(
            [sys.executable, "-m", "cli", *args, *cp],
            cwd=ROOT,
            env=env or self.env(),
            input=stdin if stdin is not None else b"",
            capture_output=True,
            timeout=180,
            check=False,
        )

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "cli", *args, "--checkpoint", self.checkpoint],
            cwd=ROOT,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def threads(self) -> list[dict[str, Any]] | None:
        """The saved runs as ``coe threads --json`` lists them; None when listing fails."""
        listed = self.coe("threads", "--json")
        return list(json.loads(listed.stdout)) if listed.returncode == 0 else None

    def calls_per_slot(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        if self.calls.exists():
            for line in self.calls.read_text(encoding="utf-8").splitlines():
                slot = json.loads(line).get("slot")
                counts[slot] = counts.get(slot, 0) + 1
        return counts


@dataclass
class Outcome:
    code: str
    message: str
    state: str
    held: bool


@dataclass
class Case:
    id: str
    surface: str
    what: str
    run: Callable[[Lab], Outcome]
    kind: str = "input"
    result: Outcome | None = field(default=None, repr=False)


def _first_line(stderr: bytes) -> str:
    lines = [ln.strip(" │╭╰─\t") for ln in stderr.decode("utf-8", "replace").splitlines()]
    lines = [ln for ln in lines if ln]
    for ln in lines:  # typer's usage errors: the line that names the option
        if ln.startswith(("Invalid value", "No such option", "Missing argument")):
            return ln
    for ln in lines:
        if ln.startswith(("error:", "run failed:", "interrupted", "Error", "Usage")) or "Traceback" in ln:
            return ln if "Traceback" not in ln else lines[-1]
    return lines[-1] if lines else ""


def _refused(lab: Lab, proc: subprocess.CompletedProcess[bytes], *, names: str, saved: int | None = 0) -> Outcome:
    """A refused input: exit 2, one message naming ``names``, no traceback; ``saved`` runs listed after (None:
    the checkpoint file itself is the bad input, so listing it must fail the same way)."""
    err = proc.stderr.decode("utf-8", "replace")
    message = _first_line(proc.stderr)
    held = proc.returncode == 2 and names in err and "Traceback" not in err
    if saved is None:
        listing = lab.coe("threads")
        state = f"coe threads: rc {listing.returncode}, {_first_line(listing.stderr)[:60]}"
        return Outcome(str(proc.returncode), message, state, held and listing.returncode == 2)
    listed = lab.threads()
    state = "runs cannot be listed" if listed is None else f"{len(listed)} run(s) saved"
    return Outcome(str(proc.returncode), message, state, held and listed is not None and len(listed) == saved)


def _completed(lab: Lab, proc: subprocess.CompletedProcess[bytes], *, code: int = 0) -> Outcome:
    listed = lab.threads() or []
    statuses = [t["status"] for t in listed]
    err = proc.stderr.decode("utf-8", "replace")
    held = proc.returncode == code and "Traceback" not in err and statuses == ["completed"]
    return Outcome(str(proc.returncode), _first_line(proc.stderr), f"runs: {statuses}", held)


def cli_refused(case_id: str, what: str, args: Callable[[Lab], list[str]], names: str, **kw: Any) -> Case:
    stdin = kw.pop("stdin", None)
    env = kw.pop("env", None)
    saved = kw.pop("saved", 0)

    def run(lab: Lab) -> Outcome:
        proc = lab.coe(*args(lab), stdin=stdin, env=lab.env(**env) if env else None)
        return _refused(lab, proc, names=names(lab) if callable(names) else names, saved=saved)

    return Case(case_id, "cli", what, run, **kw)


def cli_runs(case_id: str, what: str, args: Callable[[Lab], list[str]], **kw: Any) -> Case:
    stdin = kw.pop("stdin", None)

    def run(lab: Lab) -> Outcome:
        return _completed(lab, lab.coe(*args(lab), stdin=stdin))

    return Case(case_id, "cli", what, run, **kw)


# --- the CLI cases -------------------------------------------------------------------------------------------------


def _write(lab: Lab, name: str, data: bytes | str) -> Path:
    path = lab.root / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


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
        return Outcome(str(proc.returncode), _first_line(proc.stderr), state, held)

    return Case(case_id, "cli", what, run, kind="answers")


def _long_description(lab: Lab) -> list[str]:
    slots = [{**PLAN["slots"][0], "description": "d" * 8001}]
    return ["run", TASK, "--framework", str(lab.plan(slots=slots))]


def _cli_cases() -> list[Case]:
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
            lambda lab: [*task, "--backend", "llama", "--model", str(_write(lab, "m.gguf", "hello"))],
            "not a GGUF",
            kind="model",
        ),
        cli_refused(
            "model-empty",
            "--model an empty file",
            lambda lab: [*task, "--backend", "llama", "--model", str(_write(lab, "e.gguf", b""))],
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
            lambda lab: [*task, "--fake-script", str(_write(lab, "s.yaml", "rules: [\n"))],
            "s.yaml",
            kind="files",
        ),
        cli_refused(
            "script-binary",
            "--fake-script binary",
            lambda lab: [*task, "--fake-script", str(_write(lab, "s.bin", b"\xff\xfe\x00"))],
            "s.bin",
            kind="files",
        ),
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
            lambda lab: [*task, "--framework", str(_write(lab, "p.yaml", "slots: [\n"))],
            "p.yaml",
            kind="files",
        ),
        cli_refused(
            "plan-binary",
            "--framework binary",
            lambda lab: [*task, "--framework", str(_write(lab, "p.bin", b"\xff\xfe\x00"))],
            "p.bin",
            kind="files",
        ),
        cli_refused(
            "plan-empty",
            "--framework empty file",
            lambda lab: [*task, "--framework", str(_write(lab, "p0.yaml", ""))],
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
            lambda lab: ["--answers-file", str(_write(lab, "a.yaml", "a: [\n"))],
            "a.yaml",
        ),
        _answer_case(
            "answers-id",
            "--answers-file naming an unknown interrupt",
            lambda lab: ["--answers-file", str(_write(lab, "a.yaml", "nope: approve\nother: approve\n"))],
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
            lambda lab: [*task, "--out-dir", str(_write(lab, "f.md", "x"))],
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
        cli_refused(
            "kb-binary",
            "kb add a binary file named .txt",
            lambda lab: ["kb", "add", str(_write(lab, "bin.txt", os.urandom(4096)))],
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


def _empty_dir(lab: Lab) -> Path:
    path = lab.root / "empty"
    path.mkdir()
    return path


def _resume_finished(lab: Lab) -> Outcome:
    assert lab.coe("run", TASK, "--no-templates", "--thread-id", "f").returncode == 0
    return _completed(lab, lab.coe("resume", "f"))


def _answer_not_waiting(lab: Lab) -> Outcome:
    assert lab.coe("run", TASK, "--no-templates", "--thread-id", "f").returncode == 0
    proc = lab.coe("resume", "f", "--answer", "approve")
    out = _refused(lab, proc, names="not waiting", saved=1)
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
    message = _first_line(err) or "(killed)"
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
    return Outcome(f"{first.returncode}, {second.returncode}", _first_line(second.stderr), f"calls {calls}", held)


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
        codes = [p.wait(timeout=300) for p in procs]
        errors = [_first_line(p.stderr.read() if p.stderr else b"") for p, c in zip(procs, codes, strict=True) if c]
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
    return Outcome(str(proc.returncode), _first_line(proc.stderr), f"listed {listed}", held and "bad" in err)


# --- the embedded API ----------------------------------------------------------------------------------------------


def _api(case_id: str, what: str, payload: Any, names: str, context: dict[str, Any] | None = None) -> Case:
    """``graph.invoke`` in this process on a SQLite checkpointer: a user error naming ``names``, and the thread
    still readable and usable by a good input afterwards."""

    def run(lab: Lab) -> Outcome:
        from graph import build_graph, open_checkpointer
        from state.errors import UserError

        config = {"configurable": {"thread_id": "api"}}
        ctx = {"backend": "fake", "fake_script": str(lab.script), **(context or {})}
        with open_checkpointer(lab.checkpoint) as saver:
            graph = build_graph(saver)
            try:
                graph.invoke(payload, config, context=ctx)
                code, message, user_error = "ok", "", False
            except Exception as exc:  # noqa: BLE001 - the case records whatever comes out
                code, message = type(exc).__name__, str(exc).splitlines()[0][:160]
                user_error = isinstance(exc, UserError)
            try:
                graph.get_state(config)
                readable = True
            except Exception:  # noqa: BLE001 - a thread the bad input broke
                readable = False
            try:
                out = graph.invoke({"task": TASK}, config, context={"backend": "fake", "fake_script": str(lab.script)})
                usable = out.get("status") == "completed"
            except Exception:  # noqa: BLE001 - a thread the bad input broke
                usable = False
        held = user_error and names in message and readable and usable
        return Outcome(code, message, f"readable {readable}; a good task after it completes {usable}", held)

    return Case(case_id, "api", what, run, kind="api")


def _api_cases() -> list[Case]:
    return [
        _api("api-task-int", "input task 123", {"task": 123}, "task"),
        _api("api-task-missing", "input without a task", {"mode": "autonomous"}, "task"),
        _api("api-task-long", "input task of 8,001 characters", {"task": "x" * 8001}, "8000"),
        _api("api-task-nul", "input task with a NUL character", {"task": "a\x00b"}, "NUL"),
        _api("api-mode", "input mode yolo", {"task": TASK, "mode": "yolo"}, "mode"),
        _api("api-options", "input options 'x'", {"task": TASK, "options": "x"}, "options"),
        _api(
            "api-options-key", "input options with an unknown key", {"task": TASK, "options": {"colour": 1}}, "colour"
        ),
        _api(
            "api-plan-expert",
            "input framework with an unknown expert",
            {"task": TASK, "options": {"framework": {**PLAN, "slots": [{**PLAN["slots"][0], "expert": "wizard"}]}}},
            "wizard",
        ),
        _api("api-backend", "context backend nope", {"task": TASK}, "nope", {"backend": "nope"}),
        _api("api-context-key", "context with an unknown key", {"task": TASK}, "colour", {"colour": 1}),
        _api("api-tokens", "context max_tokens -1", {"task": TASK}, "max_tokens", {"max_tokens": -1}),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--case", action="append", default=[], help="run only this case (repeatable)")
    args = parser.parse_args(argv)
    cases = _cli_cases() + _api_cases()
    if args.case:
        cases = [c for c in cases if c.id in args.case]
    if args.quick:
        seen: set[str] = set()
        cases = [c for c in cases if not (c.kind in seen or seen.add(c.kind))][:4]
    for case in cases:
        root = Path(tempfile.mkdtemp(prefix=f"coe-fault-{case.id}-"))
        try:
            case.result = case.run(Lab(root))
        except Exception as exc:  # noqa: BLE001 - a case whose set-up or checks broke is reported, not hidden
            case.result = Outcome("setup failed", f"{type(exc).__name__}: {exc}"[:200], "", False)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(
            f"{case.id:<20} {'held' if case.result.held else 'FAILED'}  {case.result.code}  {case.result.message[:90]}",
            file=sys.stderr,
        )
    held = sum(c.result.held for c in cases if c.result)
    rows = [
        (
            c.id,
            c.surface,
            c.what,
            c.result.code,
            c.result.message.replace("|", "\\|")[:140],
            c.result.state.replace("|", "\\|"),
            "held" if c.result.held else "**FAILED**",
        )
        for c in cases
        if c.result
    ]
    payload = {
        "cases": len(cases),
        "held": held,
        "by_surface": {s: sum(1 for c in cases if c.surface == s) for s in ("cli", "api")},
        "results": [
            {"id": c.id, "surface": c.surface, "kind": c.kind, "what": c.what, **vars(c.result)}
            for c in cases
            if c.result
        ],
    }
    md = [
        f"{held} of {len(cases)} cases held ({payload['by_surface']['cli']} CLI, "
        f"{payload['by_surface']['api']} embedded API); goal: all.",
        "",
        md_table(["case", "surface", "what", "exit / error", "message", "state afterwards", "verdict"], rows),
    ]
    write_results("faults", payload, "\n".join(md), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
