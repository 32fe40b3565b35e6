"""The README and its docs pages say what the code does: the embedding example runs as written (on the fake
backend, chosen by environment variable), CI runs the README's test command, the settings table is complete."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _block(marker: str, page: str = "README.md") -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    match = re.search(re.escape(marker) + r"\s*```\w*\n(.*?)```", text, re.S)
    assert match, f"{page} has no code block after {marker}"
    return match.group(1)


@pytest.mark.slow  # a Python process runs the documented example
def test_embedding_example_runs(tmp_path: Path) -> None:
    code = _block("<!-- embed-example -->", "docs/server.md")
    assert len(code.strip().splitlines()) <= 10
    code = code.replace("sqlite:///tmp/coe-example.sqlite", f"sqlite://{tmp_path / 'example.sqlite'}")
    env = {**os.environ, "COE_BACKEND": "fake", "COE_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("completed [('answer', <SlotStatus.DONE: 'done'>)]")
    assert "# Write a Python function that reverses a linked list" in out.stdout


def test_ci_runs_the_readme_test_command() -> None:
    command = _block("<!-- test-command -->").strip()
    assert "pytest" in command
    assert command.endswith('python -m pytest -m ""'), "the full run deselects no marker"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "<!-- test-command -->" in ci and 'eval "$cmd"' in ci


def test_the_settings_table_lists_every_setting_and_variable() -> None:
    from state.settings import ENV_VARS, PROCESS_ENV

    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    table = text[text.index("| setting | flag | environment | default |") :].split("\n\n", 1)[0]
    listed = set(re.findall(r"`(COE_[A-Z_]+)`", table))
    missing = set(ENV_VARS.values()) - listed
    assert not missing, f"settings missing from docs/settings.md: {missing}"
    known = set(ENV_VARS.values()) | set(PROCESS_ENV) | {"COE_CHECKPOINT_URL"}
    assert listed <= known, f"docs/settings.md lists variables the code does not read: {listed - known}"


def test_the_settings_page_lists_every_process_variable() -> None:
    from state.settings import PROCESS_ENV

    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    missing = {name for name in PROCESS_ENV if f"`{name}`" not in text}
    assert not missing, f"process variables missing from docs/settings.md: {missing}"
