"""The quick modes of the benchmarks that need the real model or the server (see tests/unit/test_bench_quick.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.test_bench_quick import run_quick


@pytest.mark.integration
@pytest.mark.model
@pytest.mark.parametrize(
    ("module", "name"), [("bench_cpu_share", "cpu_share"), ("bench_generation", "generation"), ("bench_pool", "pool")]
)
def test_quick_mode_on_the_real_model(module: str, name: str, tmp_path: Path) -> None:
    before = {k: v for k, v in os.environ.items() if k.startswith("COE_")}
    result = run_quick(module, name, tmp_path)
    assert len(result) > 3
    assert {k: v for k, v in os.environ.items() if k.startswith("COE_")} == before  # the process is left as it was


@pytest.mark.integration
def test_quick_mode_of_the_prefix_benchmark(tmp_path: Path) -> None:
    summary = run_quick("bench_prefix", "prefix", tmp_path)["summary"]
    assert summary["hits"] >= 1 and summary["kept_tokens_mean_on_hits"] > 100
    assert summary["same_text_hit_and_miss"] is True


@pytest.mark.integration
def test_quick_mode_of_the_server_benchmark(tmp_path: Path) -> None:
    result = run_quick("bench_server", "server", tmp_path)
    assert result["runs"] == 1 and result["api"]["run"]["p50_ms"] > 0


@pytest.mark.integration
def test_quick_mode_of_the_load_benchmark(tmp_path: Path) -> None:
    result = run_quick("bench_load", "load", tmp_path)
    measured = result["results"]["README command (--n-jobs-per-worker 10)"]
    assert [r["runs"] for r in measured] == [1, 3] and all(r["lost"] == 0 for r in measured)
    assert measured[1]["threads"] == 3 and measured[1]["statuses"] == ["success"]


@pytest.mark.integration
def test_isolation_between_the_users_of_one_server(tmp_path: Path) -> None:
    """Every call Bob can make on Alice's thread answers as for a thread that does not exist (the benchmark)."""
    result = run_quick("bench_isolation", "isolation", tmp_path)
    assert result["calls"] and all(call["held"] for call in result["calls"]), result["calls"]
    assert result["her_run_completed_after"] and result["kb_path_in_context_refused"]
    assert result["her_kb_path"].endswith("/kb/users/alice")


@pytest.mark.integration
def test_quick_mode_of_the_streaming_benchmark(tmp_path: Path) -> None:
    result = run_quick("bench_streaming", "streaming", tmp_path)
    assert result["tokens"]["pieces_join_to_the_text"]
    assert result["first_token"]["median_in_process"] > 0 and result["first_token"]["median_api"] > 0
