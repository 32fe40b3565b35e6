"""The fault matrix's lab: each case's own home, checkpoint file and fake script, and what a case's outcome is.

The cases are tests: ``tests/integration/test_faults_cli.py`` (over the ``coe`` command, one process each) and
``tests/unit/test_faults_api.py`` (the embedded API). ``bench/bench_faults.py`` runs the same cases and writes the
matrix's table and totals (``bench/results/faults.{json,md}``).

Every case starts from a fresh home directory and checkpoint file, on the fake backend (no model: what is
checked is what the harness does with the input, not what a model writes). A case *holds* when it is refused
with exit code 2 and a message (or the matching user error over the API), or runs correctly, and nothing is lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.integration.cli_proc import coe_env

ROOT = Path(__file__).resolve().parents[1]
"""The project root: the ``coe`` processes run there (``python -m cli``)."""
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
        return coe_env(self.home, self.script, **extra)

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
        """Calls per slot in the fake backend's log, read while the run writes it: a line not yet ended is skipped.

        The .ci/run of 2026-12-07 at 8bea3d8 read the SIGTERM case's log as a line was being copied in ("Unterminated
        string"), and the run it left behind failed the next test on the worker with its unclosed pipes.
        """
        counts: dict[str, int] = {}
        if self.calls.exists():
            for line in self.calls.read_text(encoding="utf-8").rpartition("\n")[0].splitlines():
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


def first_line(stderr: bytes) -> str:
    lines = [ln.strip(" │╭╰─\t") for ln in stderr.decode("utf-8", "replace").splitlines()]
    lines = [ln for ln in lines if ln]
    for ln in lines:  # typer's usage errors: the line that names the option
        if ln.startswith(("Invalid value", "No such option", "Missing argument")):
            return ln
    for ln in lines:
        if ln.startswith(("error:", "run failed:", "interrupted", "Error", "Usage")) or "Traceback" in ln:
            return ln if "Traceback" not in ln else lines[-1]
    return lines[-1] if lines else ""


def refused(lab: Lab, proc: subprocess.CompletedProcess[bytes], *, names: str, saved: int | None = 0) -> Outcome:
    """A refused input: exit 2, one message naming ``names``, no traceback; ``saved`` runs listed after (None:
    the checkpoint file itself is the bad input, so listing it must fail the same way)."""
    err = proc.stderr.decode("utf-8", "replace")
    message = first_line(proc.stderr)
    held = proc.returncode == 2 and names in err and "Traceback" not in err
    if saved is None:
        listing = lab.coe("threads")
        state = f"coe threads: rc {listing.returncode}, {first_line(listing.stderr)[:60]}"
        return Outcome(str(proc.returncode), message, state, held and listing.returncode == 2)
    listed = lab.threads()
    state = "runs cannot be listed" if listed is None else f"{len(listed)} run(s) saved"
    return Outcome(str(proc.returncode), message, state, held and listed is not None and len(listed) == saved)


def completed(lab: Lab, proc: subprocess.CompletedProcess[bytes], *, code: int = 0) -> Outcome:
    listed = lab.threads() or []
    statuses = [t["status"] for t in listed]
    err = proc.stderr.decode("utf-8", "replace")
    held = proc.returncode == code and "Traceback" not in err and statuses == ["completed"]
    return Outcome(str(proc.returncode), first_line(proc.stderr), f"runs: {statuses}", held)


def cli_refused(case_id: str, what: str, args: Callable[[Lab], list[str]], names: str, **kw: Any) -> Case:
    stdin = kw.pop("stdin", None)
    env = kw.pop("env", None)
    saved = kw.pop("saved", 0)

    def run(lab: Lab) -> Outcome:
        proc = lab.coe(*args(lab), stdin=stdin, env=lab.env(**env) if env else None)
        return refused(lab, proc, names=names(lab) if callable(names) else names, saved=saved)

    return Case(case_id, "cli", what, run, **kw)


def cli_runs(case_id: str, what: str, args: Callable[[Lab], list[str]], **kw: Any) -> Case:
    stdin = kw.pop("stdin", None)

    def run(lab: Lab) -> Outcome:
        return completed(lab, lab.coe(*args(lab), stdin=stdin))

    return Case(case_id, "cli", what, run, **kw)


def write_file(lab: Lab, name: str, data: bytes | str) -> Path:
    """Write ``data`` to ``name`` in the lab and return its path."""
    path = lab.root / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path
