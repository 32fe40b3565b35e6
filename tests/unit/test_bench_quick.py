"""Every benchmark's quick mode runs and writes its result files, so a change that breaks a benchmark breaks a
test instead of a published figure. Quick results go to a temporary directory, never to bench/results.

The benchmarks of the real model (generation, pool) and of the server are in
``tests/integration/test_bench_quick_real.py``.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

FAKE_OR_NO_MODEL = {
    "bench_adaptation": "adaptation",
    "bench_assist": "assist",
    "bench_episodes": "episodes",
    "bench_faults": "faults",
    "bench_humaneval": "humaneval",
    "bench_ingest": "ingest",
    "bench_memory": "memory",
    "bench_feedback": "feedback",
    "bench_injection": "injection",
    "bench_overhead": "overhead",
    "bench_repeat_penalty": "repeat_penalty",
    "bench_planning": "planning",
    "bench_routing": "routing",
    "bench_scheduling": "scheduling",
    "bench_scope": "scope",
    "bench_templates": "templates",
}


def run_quick(module: str, name: str, out: Path) -> dict:
    bench = importlib.import_module(f"bench.{module}")
    assert bench.main(["--quick", "--out", str(out)]) == 0
    result = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
    assert result["benchmark"] == name and result["machine"]["cpu_count"] >= 1
    assert (out / f"{name}.md").read_text(encoding="utf-8").startswith(f"# {name}\n")
    return result


@pytest.mark.parametrize(("module", "name"), sorted(FAKE_OR_NO_MODEL.items()))
def test_quick_mode_runs_and_writes_its_results(module: str, name: str, tmp_path: Path) -> None:
    result = run_quick(module, name, tmp_path)
    assert len(result) > 3  # the benchmark's own payload beside the header fields


def test_every_benchmark_has_a_quick_test() -> None:
    modules = {p.stem for p in (Path(__file__).resolve().parents[2] / "bench").glob("bench_*.py")}
    real = {
        "bench_cpu_share",
        "bench_generation",
        "bench_isolation",
        "bench_load",
        "bench_pool",
        "bench_prefix",
        "bench_server",
        "bench_streaming",
    }  # tests/integration/test_bench_quick_real.py
    own = {"bench_review", "bench_cancel"}  # tests/unit/test_review_set.py, tests/unit/test_bench_cancel.py
    assert modules == set(FAKE_OR_NO_MODEL) | real | own


def test_humaneval_resume_keeps_the_first_part_and_runs_only_the_rest(tmp_path: Path) -> None:
    first = run_quick("bench_humaneval", "humaneval", tmp_path)
    part = json.loads((tmp_path / "humaneval.json").read_text(encoding="utf-8"))
    part["outcomes"] = part["outcomes"][:1]  # a run stopped after its first problem
    marker = part["outcomes"][0]
    marker["notes"] = ["from the first part"]
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps(part), encoding="utf-8")

    bench = importlib.import_module("bench.bench_humaneval")
    assert bench.main(["--quick", "--out", str(tmp_path), "--name", "whole", "--resume", str(stopped)]) == 0
    whole = json.loads((tmp_path / "whole.json").read_text(encoding="utf-8"))
    assert [o["task_id"] for o in whole["outcomes"]] == [o["task_id"] for o in first["outcomes"]]
    assert whole["outcomes"][0]["notes"] == ["from the first part"]  # taken over, not run again
    assert whole["outcomes"][1]["notes"] != ["from the first part"]
    assert whole["summary"]["problems"] == 2 and whole["summary"]["resumed_from"] == str(stopped)
    assert f"Resumed from {stopped}" in (tmp_path / "whole.md").read_text(encoding="utf-8")


def test_humaneval_resume_names_a_file_that_is_not_a_results_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    bench = importlib.import_module("bench.bench_humaneval")
    with pytest.raises(SystemExit, match="--resume .*bad.json"):
        bench.main(["--quick", "--out", str(tmp_path), "--resume", str(bad)])
