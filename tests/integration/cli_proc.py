"""Helpers for tests that drive ``python -m cli`` (kill -9, resume, prune) or a server as a separate process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a server a test starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def coe_env(home: Path, script: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``coe`` process on the fake backend, without the caller's COE_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COE_")}
    # the fake's template answers repeat each other, which the completion round would write again (tests/conftest.py)
    env.update(
        {"COE_HOME": str(home), "COE_BACKEND": "fake", "COE_FAKE_SCRIPT": str(script), "COE_COMPLETION_SECONDS": "0"}
    )
    env.update(extra)
    return env


def write_fake_script(path: Path, calls: Path, delays: dict[str, float] | None = None) -> Path:
    """Write a fake-backend script: log every call to ``calls``; slot id -> seconds to sleep before answering."""
    rules: list[dict[str, Any]] = [{"slot": slot, "delay": delay} for slot, delay in (delays or {}).items()]
    path.write_text(yaml.safe_dump({"calls_log": str(calls), "rules": rules}), encoding="utf-8")
    return path


def coe(*args: str, env: dict[str, str], module: str = "cli") -> subprocess.Popen[str]:
    """Start ``python -m cli ARGS`` (or another module taking the same arguments) in the project root."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def coe_run(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python -m cli ARGS`` to the end."""
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def wait_for(predicate: Callable[[], bool], timeout: float, what: str = "condition") -> None:
    """Poll ``predicate`` every 20 ms until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what} not reached in {timeout} s")


def wait_while_running(proc: subprocess.Popen[str], predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Like :func:`wait_for`, but fail at once (with the process' stderr) if the process ends first."""

    def check() -> bool:
        if predicate():
            return True
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the process ended (rc {proc.returncode}) before {what}:\n{err[-3000:]}")
        return False

    wait_for(check, timeout, what)


def kill_9(proc: subprocess.Popen[str]) -> None:
    """SIGKILL a process we started and reap it (it must still be running: a kill after exit proves nothing)."""
    if proc.poll() is not None:
        _, err = proc.communicate()
        raise AssertionError(f"the process ended before the kill (rc {proc.returncode}):\n{err[-3000:]}")
    proc.kill()
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def headings(document: str) -> list[str]:
    """The document's structure: every Markdown heading line, in order."""
    return [line for line in document.splitlines() if line.startswith("#")]
