"""Shared fixtures: isolated data directory, fake-backend scripts, compiled graphs on in-memory savers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

FIXTURES = Path(__file__).parent / "fixtures"
POSTGRES_URL = os.environ.get("COE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test reads or writes the user's real data directory or inherits COE_* settings."""
    for key in list(os.environ):
        if key.startswith("COE_") and key not in ("COE_TEST_POSTGRES_URL", "COE_MODEL_CACHE"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("COE_HOME", str(tmp_path / "coe-home"))
    from experts.pool.breaker import breakers
    from experts.pool.health import health_checks

    breakers.reset()  # circuit breakers are process-wide: one test's failures must not trip another's expert
    health_checks.reset()  # and so are the endpoints' health checks
    yield


@pytest.fixture
def write_script(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a fake-backend script (a dict) to a file and return its path."""

    def _write(script: dict, name: str = "script.yaml") -> Path:  # type: ignore[type-arg]
        path = tmp_path / name
        path.write_text(yaml.safe_dump(script), encoding="utf-8")
        return path

    return _write


def read_calls(path: Path) -> list[str]:
    """Slot ids the fake backend was called for, from its calls log.

    Read while a run is still going, the log may end in a line the backend has
    not finished writing; only lines that end in a newline are read.
    """
    import json

    if not path.exists():
        return []
    complete = path.read_text().rpartition("\n")[0]
    return [json.loads(line)["slot"] for line in complete.splitlines() if line.strip()]
