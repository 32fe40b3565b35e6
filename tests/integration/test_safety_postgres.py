"""Issue 42: a PostgreSQL connection lost in the middle of ``coe run`` is exit 2 and a message, not a traceback."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URL
from tests.integration.cli_proc import ROOT, coe_env, coe_run, wait_while_running, write_fake_script

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

PLAN = """id: p
title: Plan
slots:
  - {id: a, title: A, description: Write part A., expert: general_reasoning}
  - {id: b, title: B, description: Write part B., expert: general_reasoning, deps: [a]}
"""


@pytest.fixture
def database() -> Iterator[str]:
    """A new PostgreSQL database of its own (its sessions can be ended without touching anyone else's)."""
    import psycopg

    name = f"coe_lost_{uuid.uuid4().hex[:12]}"
    admin_url = POSTGRES_URL
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_connection_lost_mid_run_exits_2_and_the_run_resumes(tmp_path: Path, database: str) -> None:
    import psycopg

    calls = tmp_path / "calls.jsonl"
    script = write_fake_script(tmp_path / "script.yaml", calls, {"b": 10.0})  # the connection is cut within 1 s
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN, encoding="utf-8")
    env = coe_env(tmp_path / "home", script)
    args = ["run", "Plan a service", "--framework", str(plan), "--thread-id", "lost", "--checkpoint", database]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_while_running(proc, lambda: calls.exists() and '"b"' in calls.read_text(), 60, "slot b started")
    time.sleep(0.3)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:  # what a database restart does to a session
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database.rsplit("/", 1)[1],),
        )
    _, message = proc.communicate(timeout=120)
    assert proc.returncode == 2, message
    assert "lost the connection to" in message and "coe resume lost" in message and "Traceback" not in message
    write_fake_script(script, calls, {})
    resumed = coe_run("resume", "lost", "--checkpoint", database, env=env)
    assert resumed.returncode == 0, resumed.stderr
