"""Load on one server: 1, 5, 20 and 50 runs at once on up to 10 threads, through langgraph-sdk.

Run: ``python -m bench.bench_load``. Writes ``bench/results/load.{json,md}``. ``--quick``: 1 and 3 runs, one
server setting (a test of the benchmark, not a measurement).

``langgraph dev`` serves the graph with the fake backend (every expert call sleeps ``--delay`` seconds, 0.5 by
default, in place of a generation) on a SQLite checkpoint file. For each level, all runs are submitted at once
(``runs.create`` with ``multitask_strategy="enqueue"``: runs on the same thread queue behind each other), each is
joined, and its status read back. Reported per level: wall time, throughput (runs/s), p50 and p99 of a run's time
from submission to its end, their ratio to the one-run level, and runs lost (any status other than
``success``, or a thread whose final state is not a completed run). Two server settings: ``langgraph dev`` as the
README starts it (``--n-jobs-per-worker 10``), and without the flag for comparison.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import GRAPH, ROOT, bench_parser, dev_server, md_table, percentile, run_input, write_results
from state.framework import load_framework_file

FRAMEWORK = load_framework_file(str(ROOT / "tests" / "fixtures" / "branchy.yaml"))
LEVELS = (1, 5, 20, 50)
THREADS = 10
SETTINGS: dict[str, list[str]] = {
    "README command (--n-jobs-per-worker 10)": ["--n-jobs-per-worker", "10"],
    "langgraph dev's default (1 job)": [],
}
"""How the server is started: as the README says, and without the flag (``langgraph dev`` then runs one run at a
time, although its ``--help`` says the default is 10: langgraph-api's dev CLI sets ``N_JOBS_PER_WORKER=1``)."""


async def level(client: Any, runs: int) -> dict[str, Any]:
    """``runs`` runs submitted at once over ``min(runs, THREADS)`` new threads; each one's time and status."""
    threads = [(await client.threads.create())["thread_id"] for _ in range(min(runs, THREADS))]
    payload = run_input(FRAMEWORK)

    async def one(number: int) -> tuple[float, str]:
        thread = threads[number % len(threads)]
        t0 = time.perf_counter()
        run = await client.runs.create(thread, GRAPH, input=payload, multitask_strategy="enqueue")
        await client.runs.join(thread, run["run_id"])
        status = (await client.runs.get(thread, run["run_id"]))["status"]
        return time.perf_counter() - t0, str(status)

    start = time.perf_counter()
    done = await asyncio.gather(*(one(i) for i in range(runs)))
    wall = time.perf_counter() - start
    finals = [(await client.threads.get_state(t))["values"].get("status") for t in threads]
    times = [t for t, _ in done]
    lost = sum(status != "success" for _, status in done) + sum(final != "completed" for final in finals)
    return {
        "runs": runs,
        "threads": len(threads),
        "wall_s": round(wall, 2),
        "runs_per_s": round(runs / wall, 3),
        "p50_s": round(percentile(times, 50), 2),
        "p99_s": round(percentile(times, 99), 2),
        "statuses": sorted({status for _, status in done}),
        "lost": lost,
    }


async def serve(workdir: Path, name: str, args: list[str], levels: tuple[int, ...], delay: float) -> list[dict]:
    script = workdir / "script.yaml"
    script.write_text(yaml.safe_dump({"default": {"delay": delay}}), encoding="utf-8")
    env = {
        "COE_BACKEND": "fake",
        "COE_FAKE_SCRIPT": str(script),
        "COE_MAX_PARALLEL": str(len(FRAMEWORK.slots)),
        "COE_CHECKPOINT_URL": f"sqlite://{workdir / (name.replace(' ', '_') + '.sqlite')}",
    }
    async with dev_server(env, workdir / "server.log", args) as client:
        await level(client, 1)  # warm-up: the graph's first run imports and compiles what it needs
        results = []
        for runs in levels:
            results.append(await level(client, runs))
            print(f"{name}: {results[-1]}", flush=True)
        return results


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds each fake expert call takes")
    args = parser.parse_args(argv)
    levels = (1, 3) if args.quick else LEVELS
    settings = dict(list(SETTINGS.items())[:1]) if args.quick else SETTINGS
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, server_args in settings.items():
            workdir = Path(tmp) / str(len(results))
            workdir.mkdir()
            results[name] = asyncio.run(serve(workdir, name, server_args, levels, args.delay))
    rows = []
    for name, measured in results.items():
        one = measured[0]
        for r in measured:
            rows.append(
                [
                    name,
                    r["runs"],
                    r["threads"],
                    r["wall_s"],
                    r["runs_per_s"],
                    round(r["runs_per_s"] / one["runs_per_s"], 2),
                    r["p50_s"],
                    r["p99_s"],
                    round(r["p99_s"] / one["p99_s"], 2),
                    r["lost"],
                ]
            )
    md = [
        f"Framework `{FRAMEWORK.id}` ({len(FRAMEWORK.slots)} slots, critical path 3 slots), fake experts of "
        f"{args.delay} s a call, SQLite checkpoints, `langgraph dev`; runs submitted at once, queued per thread.",
        "",
        md_table(
            [
                "server",
                "runs",
                "threads",
                "wall s",
                "runs/s",
                "runs/s vs 1 run",
                "p50 s",
                "p99 s",
                "p99 vs 1 run",
                "lost",
            ],
            rows,
        ),
    ]
    payload = {"framework": FRAMEWORK.id, "delay_s": args.delay, "levels": list(levels), "results": results}
    write_results("load", payload, "\n".join(md) + "\n", directory=args.out)
    print("\n".join(md))
    lost = sum(r["lost"] for measured in results.values() for r in measured)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
