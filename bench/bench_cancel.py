"""runs.cancel on the real model: how long after the cancel the server stops generating.

Run: ``python -m bench.bench_cancel``. Writes ``bench/results/cancel.{json,md}``. ``--quick``: one cancel.

``langgraph dev`` with the llama backend and the default model serves a one-slot framework whose slot writes a
long text (up to ``--max-tokens``, 400 by default: about 40 s here). Through langgraph-sdk the run is
streamed; 4 s after its slot started (the prompt read, tokens coming), ``runs.cancel`` is sent. How many cores
the server kept busy over the half second before is reported beside it (about 2 here: it was generating). The
server's CPU time (its process and children, from ``/proc``) is sampled every 50 ms: the generation has stopped
when the server uses less than a quarter of a core over 200 ms. Reported per cancel: the seconds from the cancel
to that point, and whether the same thread then finishes with a new run (the slot runs again from the
checkpoint). Goal (issue 21): under a second.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import GRAPH, bench_parser, dev_server, md_table, run_input, write_results
from state.framework import parse_framework

FRAMEWORK = parse_framework(
    {
        "id": "long",
        "title": "Long text",
        "slots": [
            {
                "id": "essay",
                "title": "History of the printing press",
                "description": "Write a long, detailed history of the printing press, century by century.",
                "expert": "general_reasoning",
            }
        ],
    },
    source="bench_cancel",
)
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system) of ``root`` and its descendants, from ``/proc``."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / TICKS
    family, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in family]
        family.update(children)
        frontier += children
    return sum(times.get(pid, 0.0) for pid in family)


async def stopped_after(pid: int, since: float, limit: float = 120.0) -> float | None:
    """Seconds from ``since`` until the server uses under a quarter of a core over 200 ms (None: not in time)."""
    window: list[tuple[float, float]] = []
    while time.monotonic() - since < limit:
        window.append((time.monotonic(), tree_cpu_seconds(pid)))
        window = [w for w in window if window[-1][0] - w[0] <= 0.2]
        if window[-1][0] - window[0][0] >= 0.15:
            rate = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
            if rate < 0.25:
                return window[0][0] - since
        await asyncio.sleep(0.05)
    return None


async def one_cancel(client: Any, pid: int, max_tokens: int) -> dict[str, Any]:
    thread = (await client.threads.create())["thread_id"]
    context = {"max_tokens": max_tokens, "use_grammar": False}
    run_id: str | None = None
    started: float | None = None
    cancelled: asyncio.Task[Any] | None = None

    busy: list[float] = []

    async def cancel_later() -> float:
        await asyncio.sleep(3.5)
        before = (time.monotonic(), tree_cpu_seconds(pid))
        await asyncio.sleep(0.5)
        busy.append((tree_cpu_seconds(pid) - before[1]) / (time.monotonic() - before[0]))
        assert run_id is not None
        at = time.monotonic()
        await client.runs.cancel(thread, run_id)
        return at

    async for part in client.runs.stream(
        thread, GRAPH, input=run_input(FRAMEWORK), context=context, stream_mode=["custom"]
    ):
        if part.event == "metadata":
            run_id = part.data["run_id"]
        elif part.event == "custom" and part.data.get("event") == "slot_started" and cancelled is None:
            started = time.monotonic()
            cancelled = asyncio.create_task(cancel_later())
    assert cancelled is not None and started is not None, "the slot never started"
    cancel_at = await cancelled
    latency = await stopped_after(pid, cancel_at)
    status = (await client.runs.get(thread, run_id))["status"] if run_id else None
    again = await client.runs.wait(thread, GRAPH, input=None)
    return {
        "cores_busy_before": round(busy[0], 2),
        "stopped_after_s": None if latency is None else round(latency, 3),
        "run_status": status,
        "thread_finished_after": again.get("status") == "completed",
    }


async def scenario(workdir: Path, repeats: int, max_tokens: int) -> list[dict[str, Any]]:
    env = {"COE_BACKEND": "llama", "COE_CHECKPOINT_URL": f"sqlite://{workdir / 'server.sqlite'}"}
    async with dev_server(env, workdir / "server.log", ["--n-jobs-per-worker", "10"]) as client:
        pid = client.server_pid
        results = []
        for _ in range(repeats):
            results.append(await one_cancel(client, pid, max_tokens))
            print(results[-1], flush=True)
        return results


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=400)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    with tempfile.TemporaryDirectory() as tmp:
        results = asyncio.run(scenario(Path(tmp), repeats, args.max_tokens))
    latencies = [r["stopped_after_s"] for r in results if r["stopped_after_s"] is not None]
    median = statistics.median(latencies) if latencies else None
    md = [
        f"Default model, one slot writing up to {args.max_tokens} tokens, `runs.cancel` 4 s after the slot started; "
        f"server CPU sampled from /proc. Median seconds from the cancel to the generation stopped: **{median}** "
        "(goal < 1).",
        "",
        md_table(
            ["cancel", "cores busy just before", "stopped after (s)", "run status", "thread finished by a new run"],
            [
                [n + 1, r["cores_busy_before"], r["stopped_after_s"], r["run_status"], r["thread_finished_after"]]
                for n, r in enumerate(results)
            ],
        ),
    ]
    write_results("cancel", {"max_tokens": args.max_tokens, "results": results}, "\n".join(md) + "\n", args.out)
    print("\n".join(md))
    return 0 if len(latencies) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
