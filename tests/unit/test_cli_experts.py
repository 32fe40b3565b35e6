"""`coe route` and `coe experts`, driven like a user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from experts.catalog import load_catalog
from experts.routing.router import DEFAULT_PARAMS

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def test_route_json_has_the_documented_shape() -> None:
    result = runner.invoke(app, ["route", "Write a Python script that analyses medical records", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert {"expert", "score", "runner_up", "runner_up_score", "scores", "fallback"} <= set(payload)
    assert payload["expert"] == "python_coder" and payload["fallback"] is False
    assert set(payload["scores"]) == set(load_catalog().ids)
    assert payload["score"] == payload["scores"]["python_coder"] == max(payload["scores"].values())
    assert payload["runner_up"] != "python_coder"
    assert payload["runner_up_score"] == payload["scores"][payload["runner_up"]]

    legal = json.loads(
        runner.invoke(app, ["route", "Draft a liability disclaimer for a medical-records tool", "--json"]).stdout
    )
    assert legal["expert"] == "legal_drafting"


def test_route_says_which_stage_decided() -> None:
    text = "Write a Python script that analyses medical records"
    fast = json.loads(runner.invoke(app, ["route", text, "--json"]).stdout)
    assert fast["stage"] == "static" and fast["expert"] == "python_coder"  # a clear case: no encoder needed
    assert "decided by the static first stage" in runner.invoke(app, ["route", text]).stdout.splitlines()[0]
    slow = json.loads(runner.invoke(app, ["route", text, "--json", "--fast-gap", "1"]).stdout)
    assert slow["stage"] == "encoder" and slow["expert"] == "python_coder"
    result = runner.invoke(app, ["route", text, "--fast-gap", "2"])
    assert result.exit_code == 2 and "routing_fast_gap" in result.stderr


def test_route_table_and_parameters() -> None:
    result = runner.invoke(app, ["route", "Prove that the square root of 2 is irrational"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("expert: math_reasoning")
    assert lines[1].split() == ["expert", "net", "capability", "exclusion", "learned"]
    row = next(line for line in lines if line.startswith("math_reasoning") and line.endswith("<"))
    net, cap, exc, learned = (float(x) for x in row.split()[1:5])
    assert learned == 0.0  # the learned term's favourite
    for line in lines[2:]:  # every row adds up: net = cap - lambda * exc + example weight * learned
        net, cap, exc, learned = (float(x) for x in line.split()[1:5])
        assert abs(net - (cap - DEFAULT_PARAMS.lam * exc + DEFAULT_PARAMS.example_weight * learned)) < 0.003, line
    fallback = json.loads(runner.invoke(app, ["route", "Prove that 2 + 2 = 4", "--threshold", "0.99", "--json"]).stdout)
    assert fallback["expert"] == "general_reasoning" and fallback["fallback"] and fallback["rule"] == "low_confidence"


def test_route_rejects_bad_input_with_exit_code_2() -> None:
    result = runner.invoke(app, ["route", "   "])
    assert result.exit_code == 2 and "TEXT" in result.output
    result = runner.invoke(app, ["route", "x", "--lambda", "-1"])
    assert result.exit_code == 2 and "routing_lambda" in result.stderr


def test_experts_list_and_show() -> None:
    listed = json.loads(runner.invoke(app, ["experts", "list", "--json"]).stdout)
    rows = {row["id"]: row for row in listed["experts"]}
    assert set(rows) == set(load_catalog().ids)
    assert rows["python_coder"]["binding"] == "true" and rows["python_coder"]["model"] == "qwen2.5-coder-1.5b"
    assert rows["security_architect"]["binding"] == "true" and rows["security_architect"]["kind"] == "domain"
    text = runner.invoke(app, ["experts", "list"]).stdout
    assert "general_reasoning" in text and "(default)" in text

    shown = runner.invoke(app, ["experts", "show", "legal_drafting"])
    assert shown.exit_code == 0
    assert "capabilities:" in shown.stdout and "exclusions:" in shown.stdout and "persona:" in shown.stdout
    data = json.loads(runner.invoke(app, ["experts", "show", "legal_drafting", "--json"]).stdout)
    assert data["id"] == "legal_drafting" and len(data["capabilities"]) >= 25

    missing = runner.invoke(app, ["experts", "show", "astrologer"])
    assert missing.exit_code == 2 and "unknown expert id 'astrologer'" in missing.stderr


def test_a_broken_catalog_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "index.yaml").write_text("version: 1\nexperts: []\n")
    env = {**os.environ, "COE_EXPERT_SCOPES": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "cli", "experts", "list"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 2
    assert f"{tmp_path / 'index.yaml'}: experts: must be a non-empty list" in out.stderr
