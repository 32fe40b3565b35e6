"""The quick modes of the benchmarks that need the real model or the server (see tests/bench/test_bench_quick.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.bench.test_bench_quick import run_quick


def _cpu_share(result: dict[str, Any]) -> None:
    """Two processes with the CPU budget and two without, each timed from the common start."""
    assert result["tokens"] == 8
    assert [(r["processes"], r["setting"]) for r in result["rows"]] == [(2, "with"), (2, "without")]
    for row in result["rows"]:
        assert len(row["generation_s"]) == len(row["waited_s"]) == len(row["tokens"]) == 2, row
        assert 0 < row["first_done_s"] <= row["median_done_s"] <= row["makespan_s"], row


def _coe_run(result: dict[str, Any]) -> None:
    """One task: ``coe run`` on the fake backend and the bare 1.5B in its own process, each timed and scored."""
    assert result["quick"] and len(result["rows"]) == 1 and result["warm_up_s"] > 0
    row = result["rows"][0]
    assert row["harness_s"] > 0 and row["bare_s"] > 0 and row["status"] in ("completed", "partial")
    assert isinstance(row["harness_passed"], bool) and isinstance(row["bare_passed"], bool)


def _first_command(result: dict[str, Any]) -> None:
    """One new install on the fake backend: two commands, each timed to its slot and to its end, one document."""
    assert result["quick"] and len(result["rows"]) == 1
    row = result["rows"][0]
    for run in (row["first"], row["second"]):
        assert run["exit"] in (0, 3) and run["to_slot_s"] is not None and 0 < run["to_slot_s"] < run["wall_s"], run
    assert row["first"]["document_sha256"] == row["second"]["document_sha256"]  # the fake answers alike
    assert row["bare_s"] > 0  # the bare 1.5B, 16 tokens


def _decode_thread(result: dict[str, Any]) -> None:
    """One round: each model asked from two threads, decoding on the callers' threads and on the decode thread."""
    assert result["tokens"] == 8 and result["repeats"] == 1 and list(result["runs"]) == ["caller", "decode thread"]
    for run in result["runs"].values():
        assert "default" in run
        for generations in run.values():
            assert len(generations) == 2 and all(s > 0 and 0 < n <= 8 for s, n in generations), generations


def _generation(result: dict[str, Any]) -> None:
    """The grammar pair alone, one repetition of 16 tokens, raw and harness speeds measured."""
    assert result["args"]["max_tokens"] == 16 and list(result["rows"]) == ["grammar"]
    row = result["rows"]["grammar"]
    assert len(row["raw_samples"]) == len(row["harness_samples"]) == 1
    assert row["raw_tokens_per_s"] > 0 and row["harness_tokens_per_s"] > 0
    assert row["ratio"] == pytest.approx(row["harness_tokens_per_s"] / row["raw_tokens_per_s"])


def _pool(result: dict[str, Any]) -> None:
    """The dispatch part alone, over 5 one-token generations."""
    dispatch = result["dispatch"]
    assert dispatch["n"] == 5 and dispatch["one_token_generation_ms_median"] > 0
    assert 0 <= dispatch["hand_over_ms_p50"] <= dispatch["hand_over_ms_p99"]
    assert dispatch["met"] == (dispatch["hand_over_ms_p99"] <= dispatch["goal_ms"])


REAL_MODEL: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "bench_coe_run": ("coe_run", _coe_run),
    "bench_cpu_share": ("cpu_share", _cpu_share),
    "bench_decode_thread": ("decode_thread", _decode_thread),
    "bench_first_command": ("first_command", _first_command),  # fake experts, but new indexes: about 30 s
    "bench_generation": ("generation", _generation),
    "bench_pool": ("pool", _pool),
}


@pytest.mark.model
@pytest.mark.parametrize("module", sorted(REAL_MODEL))
def test_quick_mode_on_the_real_model(module: str, tmp_path: Path) -> None:
    before = {k: v for k, v in os.environ.items() if k.startswith("COE_")}
    name, check = REAL_MODEL[module]
    check(run_quick(module, name, tmp_path))
    assert {k: v for k, v in os.environ.items() if k.startswith("COE_")} == before  # the process is left as it was


@pytest.mark.model
def test_quick_mode_of_the_prefix_benchmark(tmp_path: Path) -> None:
    summary = run_quick("bench_prefix", "prefix", tmp_path)["summary"]
    assert summary["hits"] >= 1 and summary["kept_tokens_mean_on_hits"] > 100
    assert summary["same_text_hit_and_miss"] is True


@pytest.mark.server
def test_quick_mode_of_the_server_benchmark(tmp_path: Path) -> None:
    result = run_quick("bench_server", "server", tmp_path)
    assert result["runs"] == 1 and result["api"]["run"]["p50_ms"] > 0


@pytest.mark.server
def test_quick_mode_of_the_load_benchmark(tmp_path: Path) -> None:
    result = run_quick("bench_load", "load", tmp_path)
    measured = result["results"]["README command (--n-jobs-per-worker 10)"]
    assert [r["runs"] for r in measured] == [1, 3] and all(r["lost"] == 0 for r in measured)
    assert measured[1]["threads"] == 3 and measured[1]["statuses"] == ["success"]


@pytest.mark.server
def test_isolation_between_the_users_of_one_server(tmp_path: Path) -> None:
    """Every call Bob can make on Alice's thread answers as for a thread that does not exist (the benchmark)."""
    result = run_quick("bench_isolation", "isolation", tmp_path)
    assert result["calls"] and all(call["held"] for call in result["calls"]), result["calls"]
    assert result["her_run_completed_after"] and result["kb_path_in_context_refused"]
    assert result["her_kb_path"].endswith("/kb/users/alice")


@pytest.mark.server
def test_quick_mode_of_the_streaming_benchmark(tmp_path: Path) -> None:
    result = run_quick("bench_streaming", "streaming", tmp_path)
    assert result["tokens"]["pieces_join_to_the_text"]
    assert result["first_token"]["median_in_process"] > 0 and result["first_token"]["median_api"] > 0
