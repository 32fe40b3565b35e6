"""Shared helpers for the benchmarks: frameworks and fake scripts, timed harness runs, result files."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml

from state.framework import Framework, SlotSpec, validate_framework
from state.io import RunInput, RunOptions

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ROOT = RESULTS_DIR.parents[1]
GRAPH = "college_of_experts"
"""The graph id in ``langgraph.json``."""


def _load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


_LOAD_AT_START = _load_average()
"""The load average when the benchmark started (other work on the machine skews the timings)."""


# --- frameworks and fake scripts ---------------------------------------------------------------------------


def make_framework(fid: str, title: str, slots: Sequence[tuple[str, str, Sequence[str]]]) -> Framework:
    """A validated framework from ``(id, title, deps)`` triples; each slot may reference its direct deps."""
    specs = [
        SlotSpec(
            id=sid,
            title=stitle,
            description=f"Write the part '{stitle}' of the answer.",
            expected_outputs=[f"The {stitle.lower()} part"],
            deps=list(deps),
            can_reference=list(deps),
            reference_hints={d: ["@outline"] for d in deps},
        )
        for sid, stitle, deps in slots
    ]
    return validate_framework(Framework(id=fid, title=title, source=f"bench:{fid}", slots=specs))


def run_input(fw: Framework, task: str = "Plan a small web service for a bakery") -> dict[str, Any]:
    """The graph input for a run of ``fw`` (as a caller over the API would send it)."""
    options = RunOptions(framework=fw.model_dump(mode="json"), framework_source=fw.source)
    return RunInput(task=task, options=options).model_dump(mode="json")


def write_fake_script(directory: Path, delays: dict[str, float], name: str = "script.yaml") -> Path:
    """A fake-backend script giving each slot its fixed latency (compliant generated answers)."""
    path = directory / name
    rules = [{"slot": sid, "delay": float(d)} for sid, d in delays.items()]
    path.write_text(yaml.safe_dump({"rules": rules}, sort_keys=False), encoding="utf-8")
    return path


def topological_waves(fw: Framework) -> list[list[str]]:
    """Slots grouped by level: a slot's wave is one more than the latest wave among its deps."""
    level: dict[str, int] = {}
    remaining = [s for s in fw.slots]
    while remaining:
        for spec in list(remaining):
            if all(d in level for d in spec.deps):
                level[spec.id] = 1 + max((level[d] for d in spec.deps), default=-1)
                remaining.remove(spec)
    waves: list[list[str]] = [[] for _ in range(max(level.values()) + 1)]
    for spec in fw.slots:
        waves[level[spec.id]].append(spec.id)
    return waves


def wave_by_wave_time(fw: Framework, latencies: dict[str, float]) -> float:
    """Time of a wave-barrier executor: the sum over waves of the slowest slot in each wave."""
    return sum(max(latencies.get(s, 0.0) for s in wave) for wave in topological_waves(fw))


# --- timed harness runs ------------------------------------------------------------------------------------


@dataclass
class RunTiming:
    """One timed run of the harness graph."""

    thread_id: str
    wall_s: float
    status: str
    events: list[dict[str, Any]] = field(default_factory=list)
    """Custom stream events, each with ``t`` (seconds since the run started, when it reached the caller)."""
    slot_times: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per slot: ``start``/``end`` in seconds since the run started (from the Passport's slot states)."""
    checkpoints: int | None = None
    t0: float = 0.0
    """``time.perf_counter()`` when the run started (to relate other measurements to the run)."""
    compliant: dict[str, bool] = field(default_factory=dict)
    """Per slot with a result: whether its answer followed the output contract."""


def timed_run(graph: Any, fw: Framework, context: dict[str, Any], *, count_checkpoints: bool = False) -> RunTiming:
    """Run ``fw`` through the compiled graph like the CLI does (``stream``, durability ``sync``) and time it.

    The wall time covers the whole ``stream`` call: guard, template selection, routing, every execution
    round and assembly, with a checkpoint written synchronously after each super-step.
    """
    from state.passport import Passport

    thread_id = f"bench-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread_id}}
    payload = run_input(fw)
    events: list[dict[str, Any]] = []
    wall0 = time.time()
    t0 = time.perf_counter()
    for _mode, chunk in graph.stream(payload, config, context=context, stream_mode=["custom"], durability="sync"):
        events.append({"t": time.perf_counter() - t0, **chunk})
    wall = time.perf_counter() - t0
    state = Passport.model_validate(graph.get_state(config).values)
    slot_times: dict[str, dict[str, float]] = {}
    for sid, st in state.slot_states.items():
        if st.started_at is not None and st.finished_at is not None:
            slot_times[sid] = {
                "start": round(st.started_at.timestamp() - wall0, 4),
                "end": round(st.finished_at.timestamp() - wall0, 4),
            }
    checkpoints = sum(1 for _ in graph.get_state_history(config)) if count_checkpoints else None
    compliant = {sid: r.compliant for sid, r in state.results.items()}
    return RunTiming(thread_id, wall, str(state.status), events, slot_times, checkpoints, t0, compliant)


def require_completed(timing: RunTiming) -> None:
    """Stop the benchmark if a run did not complete (a benchmark of a broken run means nothing)."""
    if timing.status != "completed":
        raise SystemExit(f"run {timing.thread_id} ended with status {timing.status!r}, expected 'completed'")


# --- statistics and output ---------------------------------------------------------------------------------


def coe_run_json(task: str, env: dict[str, str], *options: str) -> tuple[dict[str, Any], float]:
    """``coe run TASK --json [OPTIONS]`` as a new process, as a user runs it: its JSON summary and wall seconds.

    Raises:
        RuntimeError: If the process exits with anything but 0 or 3 (a run that ended, with or without a caveat).
    """
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cli", "run", task, "--json", *options],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 3):
        raise RuntimeError(f"coe run failed ({done.returncode}): {done.stderr[-2000:]}")
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary, seconds


def median(xs: Iterable[float]) -> float:
    """The median."""
    return statistics.median(list(xs))


def percentile(xs: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0-100), nearest-rank."""
    data = sorted(xs)
    rank = max(1, math.ceil(q / 100 * len(data)))
    return data[rank - 1]


def merge_intervals(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merge overlapping ``(start, end)`` intervals."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total time covered by the intervals (overlaps counted once)."""
    return sum(end - start for start, end in merge_intervals(intervals))


def write_server_config(directory: Path) -> Path:
    """``langgraph.json`` with absolute paths, written into ``directory`` (a server started there finds the project)."""
    config = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))
    config["dependencies"] = [str(ROOT)]
    config["graphs"] = {k: str(ROOT / v.removeprefix("./")) for k, v in config["graphs"].items()}
    for key, field_name in (("checkpointer", "path"), ("auth", "path"), ("http", "app")):
        config[key][field_name] = str(ROOT / config[key][field_name].removeprefix("./"))
    path = directory / "langgraph.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def dev_server(
    env: dict[str, str], log: Path, args: Sequence[str] = (), api_key: str | None = None
) -> AsyncIterator[Any]:
    """``langgraph dev`` on a free port with ``env`` added to ours, and a langgraph-sdk client once it answers.

    ``args`` go to ``langgraph dev`` (e.g. ``--n-jobs-per-worker 10``); its output goes to ``log``; the client
    sends ``api_key`` (a server with ``COE_API_KEYS_FILE``).
    """
    from langgraph_sdk import get_client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server_env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true", **env}
    # langgraph dev keeps its runs and threads in .langgraph_api under its working directory and starts the runs
    # it finds there again: each server gets the log's directory.
    command = [str(Path(sys.executable).parent / "langgraph"), "dev", "--no-browser", "--no-reload", "--config"]
    with log.open("w") as out:
        server = subprocess.Popen(
            [*command, str(write_server_config(log.parent)), "--port", str(port), *args],
            cwd=log.parent,
            env=server_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            async with get_client(url=f"http://127.0.0.1:{port}", api_key=api_key) as client:
                deadline = time.monotonic() + 90
                while True:
                    try:
                        await client.assistants.search()
                        break
                    except Exception:
                        if time.monotonic() > deadline or server.poll() is not None:
                            raise SystemExit(f"langgraph dev did not answer; its log: {log}") from None
                        await asyncio.sleep(0.5)
                client.server_pid = server.pid  # for benchmarks that watch the server process
                yield client
        finally:
            server.terminate()
            server.wait(timeout=30)


def machine_info() -> dict[str, Any]:
    """Where the numbers were taken."""
    import langgraph

    try:
        from importlib.metadata import version

        lg_version = version("langgraph")
    except Exception:  # noqa: BLE001 - informative only
        lg_version = getattr(langgraph, "__version__", "unknown")
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15_at_start": _LOAD_AT_START,
        "load_average_1_5_15_at_end": _load_average(),
        "python": sys.version.split()[0],
        "langgraph": lg_version,
    }


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for the block, and leave the caller's environment as it was after it."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser for a benchmark, with the two options every one has: ``--quick`` and ``--out``."""
    parser = argparse.ArgumentParser(description=(doc or "").strip().split("\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: fake experts or one tiny repetition (a test of the benchmark, not a measurement)",
    )
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    return parser


_Row = TypeVar("_Row")


def earlier_results(path: Path, key: str, build: Callable[[dict[str, Any]], _Row]) -> list[_Row]:
    """The rows under ``key`` of a results file this benchmark wrote, each made by ``build`` (``--resume``)."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))[key]
        return [build(row) for row in rows]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"--resume {path}: not a results file of this benchmark ({exc})") from exc


def write_results(
    name: str, payload: dict[str, Any], markdown: str, directory: Path | None = None
) -> tuple[Path, Path]:
    """Write ``<name>.json`` (with machine info and a timestamp) and ``<name>.md`` into ``directory``.

    The default directory is ``bench/results`` (the published figures); quick modes and tests pass their own.
    """
    directory = RESULTS_DIR if directory is None else directory
    directory.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": name,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        **payload,
    }
    json_path = directory / f"{name}.json"
    md_path = directory / f"{name}.md"
    json_path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    m = doc["machine"]
    header = (
        f"# {name}\n\n{doc['timestamp']}; {m['platform']}; {m['cpu_count']} CPUs; "
        f"load average (1, 5, 15 min) at start {m['load_average_1_5_15_at_start']}, "
        f"at end {m['load_average_1_5_15_at_end']}\n\n"
    )
    md_path.write_text(header + markdown.rstrip() + "\n", encoding="utf-8")
    return json_path, md_path
