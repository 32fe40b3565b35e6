"""An expert pack installed with pip adds an expert whose slot is routed to it and run on the real default model.

The pack is a real distribution built and installed by pip (into a temporary site directory on ``PYTHONPATH``,
so the test venv stays as it was); it declares its expert through the ``coe.experts`` entry point group.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.integration.cli_proc import coe_run
from tests.unit.test_expert_sources import RUST_SCOPE

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "acme-experts"
version = "1.0"

[project.entry-points."coe.experts"]
rust = "acme_experts:expert_dirs"

[tool.setuptools]
packages = ["acme_experts"]

[tool.setuptools.package-data]
acme_experts = ["experts/*/*"]
"""
INIT = """\
from pathlib import Path


def expert_dirs():
    return [Path(__file__).parent / "experts"]
"""


def build_pack(root: Path) -> Path:
    pack = root / "acme-experts"
    package = pack / "acme_experts"
    expert = package / "experts" / "rust_developer"
    expert.mkdir(parents=True)
    (pack / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (package / "__init__.py").write_text(INIT, encoding="utf-8")
    (expert / "scope.yaml").write_text(yaml.safe_dump(RUST_SCOPE), encoding="utf-8")
    (expert / "examples.txt").write_text(
        "Fix the lifetime error in my Rust parser\nWrite a Rust function that reads a CSV of invoices\n",
        encoding="utf-8",
    )
    return pack


@pytest.mark.model
def test_a_pip_installed_pack_adds_an_expert_that_serves_a_real_slot(tmp_path: Path) -> None:
    site = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site)]
        + [str(build_pack(tmp_path))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("COE_")}
    env |= {"COE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(site)}
    # one short candidate: the slot is routed to the pack's expert and served by the real model; how good the
    # answer is belongs to the review set (a full answer with its redraws took 158 s of the suite's time)
    env |= {"COE_BEST_OF": "1", "COE_MAX_OUTLINE_RETRIES": "0", "COE_MAX_TOKENS": "120"}
    env |= {"COE_ESCALATE": "false", "COE_COMPLETION_SECONDS": "0"}  # no last candidate, no completion round

    listed = coe_run("experts", "list", "--json", env=env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in json.loads(listed.stdout)["experts"] if r["id"] == "rust_developer")
    assert row["origin"] == "package acme-experts 1.0" and row["routed"]

    task = "Fix the borrow checker error in a Rust function that pushes to a vector while iterating over it."
    out = coe_run("run", task, "--json", env=env, timeout=900)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert [s["expert"] for s in summary["slots"]] == ["rust_developer"], summary["slots"]
    assert summary["status"].startswith("completed") and summary["document"].strip()
    shown = coe_run("show", summary["thread_id"], env=env, timeout=120)
    assert "expert rust_developer v1.0 (package acme-experts 1.0)" in shown.stdout, shown.stdout[-3000:]
