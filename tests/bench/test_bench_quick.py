"""Every benchmark's quick mode runs and writes its result files, so a change that breaks a benchmark breaks a
test instead of a published figure. Quick results go to a temporary directory, never to bench/results.

The benchmarks of the real model (generation, pool) and of the server are in ``test_bench_quick_real.py``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Result = dict[str, Any]


def _adaptation(r: Result) -> None:
    s = r["summary"]
    assert r["quick"] is True and s["tasks"] == len(r["rows"]) == 2
    assert s["frameworks_valid"] == sum(row["valid"] for row in r["rows"]) / s["tasks"]
    assert sum(s["fell_back"].values()) <= s["tasks"] and all(row["template"] for row in r["rows"])


def _assist(r: Result) -> None:
    calibration, slots, latency = r["calibration"], r["slots"], r["latency"]
    assert calibration["answerable"] + calibration["unanswerable"] == len(calibration["rows"]) > 0
    assert calibration["chosen_threshold"] in {row["threshold"] for row in calibration["sweep"]}
    assert slots["threshold"] == calibration["chosen_threshold"]
    assert slots["expected_resolved"] + slots["expected_unresolved"] == slots["placeholders"] == len(slots["outcomes"])
    assert slots["false_fills"] == 0 and slots["filled_without_source"] == 0  # a guess is the worst outcome
    assert latency["queries"] == 5 and latency["chunks"] > 0 and latency["lookup_ms_p50"] > 0


def _catalog(r: Result) -> None:
    sizes = [s["experts"] for s in r["stages"]]
    assert r["quick"] is True and sizes == [12, 14, 15] and [a["to"] for a in r["adds"]] == [13, 14, 15]
    assert all(a["embedded_experts"] == 1 for a in r["adds"])  # each addition embeds the new expert alone
    assert len({s["router"] for s in r["stages"]}) == 3  # each catalog has its own router version
    first = r["stages"][0]["sets"]
    assert first["routing_heldout3"]["texts"] == 6 and first["routing_heldout3"]["accuracy"] is not None
    assert all(s["route_ms"]["p50"] > 0 for s in r["stages"])


def _exams(r: Result) -> None:
    [row] = r["rows"]
    assert r["quick"] is True and row["expert"] == "python_coder" and len(row["tasks"]) == 6
    assert row["backend"] == "fake" and row["score"] == sum(t["passed"] for t in row["tasks"]) / 6
    assert all(t["status"].startswith("completed") for t in row["tasks"])


def _programs(r: Result) -> None:
    s, [row] = r["summary"], r["rows"]
    assert r["quick"] is True and s["problems"] == 1 and s["first_failed_with_error"] == 1
    assert row["error"].startswith("TypeError") and row["repaired"]["right"] and row["blind"]["right"]
    assert s["repaired_right"] == s["blind_right"] == 1 and not row["first"]["ran"]


def _shadow(r: Result) -> None:
    assert r["quick"] is True and r["expert"] == "technical_writer" and len(r["served"]) == 1
    assert set(r["exams"]) == {"1", "2"} and all(e["backend"] == "fake" for e in r["exams"].values())
    [comparison] = r["shadow"]
    assert comparison["served_version"] == "1" and comparison["winner"] in {"candidate", "served", "tie"}
    assert r["decision"]["promoted"] or "not promoted" in r["decision"]["why"]


def _episodes(r: Result) -> None:
    assert r["items"] == len(r["rows"]) > 0
    assert r["at_line"] == r["sweep"][str(r["line"])]
    assert r["paraphrase_nearest"] == round(sum(row["same_is_nearest"] for row in r["rows"]) / r["items"], 3)


def _faults(r: Result) -> None:
    kinds = [case["kind"] for case in r["results"]]
    assert r["cases"] == len(r["results"]) == 4 and len(set(kinds)) == 4  # one case of each of the first kinds
    assert r["held"] == sum(case["held"] for case in r["results"]) == 4
    assert r["by_surface"] == {"cli": 4, "api": 0}


def _gsm8k(r: Result) -> None:
    s = r["summary"]
    assert s["quick"] is True and s["problems"] == len(r["outcomes"]) == 2
    assert [(o["row"], o["gold"]) for o in r["outcomes"]] == [(0, 45.0), (1, 10.0)]  # the sample's first two
    assert set(s["accuracy_percent"]) == {"harness", "harness_text", "bare_1.5b", "bare_0.5b"}
    assert all(o["document"] and o["harness_status"] == "completed" for o in r["outcomes"])


def _multipart(r: Result) -> None:
    assert r["quick"] is True and [row["id"] for row in r["rows"]] == ["mp-slugify", "mp-library-schema"]
    assert all(row["status"] == "completed" for row in r["rows"]) and r["multi_slot"] >= 1
    assert r["agree_by_checks"] == r["multi_slot"]  # the fake backend's parts hold no code that could disagree


def _gaps(r: Result) -> None:
    assert r["quick"] is True and r["documents"] == len(r["rows"]) == 6
    assert r["with_gaps"] == sum(1 for row in r["rows"] if row["gaps"]) and sum(r["kinds"].values()) >= 1
    kinds = {"form", "piece", "failed", "restates", "expert_work"}
    assert {g["kind"] for row in r["rows"] for g in row["gaps"]} <= kinds


def _humaneval(r: Result) -> None:
    s = r["summary"]
    assert s["quick"] is True and s["problems"] == len(r["outcomes"]) == 2
    assert [o["task_id"] for o in r["outcomes"]] == ["HumanEval/0", "HumanEval/1"]
    assert sum(s["routes"].values()) == sum(s["kept_candidates"].values()) == 2


def _ingest(r: Result) -> None:
    assert r["sizes"] == [0.05] and [row["megabytes"] for row in r["rows"]] == r["sizes"]
    assert all(row["passages"] > 0 and row["peak_rss_mb"] > 0 for row in r["rows"])
    assert r["verdict"] == "50 MB not run."


def _memory(r: Result) -> None:
    assert len(r["rows"]) == 12 and sum(row["fact"] is not None for row in r["rows"]) == 6
    assert all(0 <= r[part]["recall"] <= 1 and 0 <= r[part]["false_fills"] <= 1 for part in ("held_out", "all"))
    assert r["turns"]["threads"] > 0


def _feedback(r: Result) -> None:
    s = r["summary"]
    assert s["events"] == len(r["events"]) == s["right_lessons"] + s["wrong_lessons"] == 10
    assert s["right_kept"] == sum(e["kept"] and not e["wrong"] for e in r["events"])
    assert set(r["routers"]) == {"shipped", "with kept lessons", "all lessons, unchecked"}


def _injection(r: Result) -> None:
    assert r["injections"] == sum(where["total"] for where in r["by_where"].values()) > 0
    assert r["flagged"] == sum(where["flagged"] for where in r["by_where"].values())
    assert r["flagged"] + len(r["missed"]) == r["injections"] and r["microseconds_per_text"] > 0


def _overhead(r: Result) -> None:
    assert r["runs"] == 1 and set(r["fake"]) == {"memory", "sqlite", "postgres"}
    for row in r["fake"].values():
        assert len(row["samples_s"]) == 1 and row["per_run_median_ms"] > 0 and row["checkpoints_per_run"] > 0, row
    assert "skipped" in r["real"]


def _repeat_penalty(r: Result) -> None:
    assert r["tasks"] == len(r["rows"]) == 3 and set(r["summary"]) == {"1.0", "1.1"}
    assert all(set(row) >= {"id", "expert", "1.0", "1.1"} for row in r["rows"])


def _direct(r: Result) -> None:
    assert r["quick"] is True and r["tasks"] == len(r["rows"]) == 3 and set(r["summary"]) == set(r["models"])
    assert all({"coverage", "wrong_claims", "seconds"} <= set(row[m]) for row in r["rows"] for m in r["models"])


def _planning(r: Result) -> None:
    s = r["summary"]
    assert r["quick"] is True and s["tasks"] == len(r["rows"]) == 6
    assert s["scope_accuracy"] == sum(row["scope"] == row["predicted"] for row in r["rows"]) / s["tasks"]
    singles = [row for row in r["rows"] if row["scope"] == "single"]
    assert s["singles_one_part"] == round(sum(len(row["experts"]) <= 1 for row in singles) / len(singles), 4)
    assert s["singles_one_part"] >= s["singles_one_slot"]  # a task scoped single is one part


def _routing(r: Result) -> None:
    data, test = r["data"], r["test"]
    assert test["chosen"]["n"] == data["test"] and test["chosen"]["traps_n"] == data["test_traps"]
    assert r["heldout2"]["chosen"]["n"] == data["heldout2"] and r["heldout3"]["chosen"]["n"] == data["heldout3"]
    assert len(r["catalog"]["experts"]) > 0 and r["catalog"]["capability_lines"] > 0
    assert 0 <= r["calibration"]["chosen"]["accuracy"] <= 1 and r["latency"]["single_ms"]["n"] > 0


def _scheduling(r: Result) -> None:
    assert r["reps"] == 1 and set(r["cases"]) == {"branchy", "wide"}
    for case in r["cases"].values():
        assert sorted(i for wave in case["waves"] for i in wave) == sorted(slot["id"] for slot in case["slots"])
        assert case["harness"]["median_s"] > 0 and len(case["harness"]["samples_s"]) == 1


def _scope(r: Result) -> None:
    single = r["single"]
    assert sum(single["confusion"]["single"].values()) == single["n_single"]
    assert sum(single["confusion"]["multi"].values()) == single["n_multi"]
    assert single["expert_agreement"]["n"] == single["n_single"]
    assert r["trivial"]["calibration"]["n"] > 0


def _templates(r: Result) -> None:
    assert r["library"]["templates"] > 0 and r["queries"] == r["library"]["n"] == r["query_embedding_ms"]["n"]
    quality = r["retrieval_quality"]
    assert 0 <= quality["top1"] <= quality["top3"] <= 1 and quality["tasks"] > 0
    assert r["synthetic"]["n"] > 0 and r["synthetic"]["hnsw"]


def _mbpp(result: Result) -> None:
    assert result["summary"]["problems"] == 2 and len(result["outcomes"]) == 2
    assert all("Your code should pass this test: assert" in o["message"] for o in result["outcomes"])


def _prefix_disk(result: Result) -> None:
    [row] = result["rows"]
    assert row["off"]["status"] == row["on"]["status"] == "completed" and row["same_answer"]
    assert row["off"]["seconds"] > 0 and "Your code should pass this test: assert" in row["task"]


def _figures(result: Result) -> None:
    [row] = result["rows"]
    assert row["right"] == ["monthly cost: 987.84"] and row["wrong"] == ["other total: 5"]
    assert result["summary"]["right_confirmed"] == 1 and result["summary"]["prompt"] == "now"


FAKE_OR_NO_MODEL: dict[str, tuple[str, Callable[[Result], None]]] = {
    "bench_adaptation": ("adaptation", _adaptation),
    "bench_assist": ("assist", _assist),
    "bench_episodes": ("episodes", _episodes),
    "bench_faults": ("faults", _faults),
    "bench_gaps": ("gaps_saved", _gaps),
    "bench_gsm8k": ("gsm8k", _gsm8k),
    "bench_humaneval": ("humaneval", _humaneval),
    "bench_ingest": ("ingest", _ingest),
    "bench_memory": ("memory", _memory),
    "bench_multipart": ("multipart", _multipart),
    "bench_catalog": ("catalog", _catalog),
    "bench_direct": ("direct", _direct),
    "bench_exams": ("exams", _exams),
    "bench_shadow": ("shadow", _shadow),
    "bench_feedback": ("feedback", _feedback),
    "bench_figures": ("figures", _figures),
    "bench_prefix_disk": ("prefix_disk", _prefix_disk),
    "bench_mbpp": ("mbpp", _mbpp),
    "bench_injection": ("injection", _injection),
    "bench_overhead": ("overhead", _overhead),
    "bench_repeat_penalty": ("repeat_penalty", _repeat_penalty),
    "bench_planning": ("planning", _planning),
    "bench_programs": ("programs", _programs),
    "bench_routing": ("routing", _routing),
    "bench_scheduling": ("scheduling", _scheduling),
    "bench_scope": ("scope", _scope),
    "bench_templates": ("templates", _templates),
}
"""Each benchmark's name and what its quick result must hold (its own payload, beside the header fields)."""
NEEDS_POSTGRES = {"bench_overhead"}  # its quick mode times a PostgreSQL checkpointer too


def run_quick(module: str, name: str, out: Path) -> Result:
    bench = importlib.import_module(f"bench.{module}")
    assert bench.main(["--quick", "--out", str(out)]) == 0
    result: Result = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
    assert result["benchmark"] == name and result["machine"]["cpu_count"] >= 1
    assert (out / f"{name}.md").read_text(encoding="utf-8").startswith(f"# {name}\n")
    return result


@pytest.mark.parametrize(
    "module",
    [pytest.param(m, marks=[pytest.mark.postgres] if m in NEEDS_POSTGRES else []) for m in sorted(FAKE_OR_NO_MODEL)],
)
def test_quick_mode_runs_and_writes_its_results(module: str, tmp_path: Path) -> None:
    name, check = FAKE_OR_NO_MODEL[module]
    check(run_quick(module, name, tmp_path))


def test_every_benchmark_has_a_quick_test() -> None:
    modules = {p.stem for p in (Path(__file__).resolve().parents[2] / "bench").glob("bench_*.py")}
    real = {
        "bench_coe_run",
        "bench_cpu_share",
        "bench_decode_thread",
        "bench_first_command",
        "bench_generation",
        "bench_isolation",
        "bench_load",
        "bench_pool",
        "bench_prefix",
        "bench_server",
        "bench_streaming",
    }  # test_bench_quick_real.py
    own = {"bench_review", "bench_cancel"}  # test_review_set.py, test_bench_cancel.py
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
