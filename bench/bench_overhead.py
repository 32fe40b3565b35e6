"""Harness overhead benchmark: what the graph costs around the experts' work.

Part 1 runs a 6-slot framework with 0-latency fake experts on the memory, SQLite and PostgreSQL
checkpointers (durability ``sync``, as the CLI runs), and reports the total harness time per run and per
slot. Part 2 runs the same framework once on the real default model (llama.cpp) and reports
``overhead / total``, where overhead = wall time - the union of the intervals spent inside
``backend.generate`` (slots may overlap; llama.cpp serialises them behind the model's lock). The target is
at most 3 %.

Run: ``python -m bench.bench_overhead`` (results in ``bench/results/overhead.{json,md}``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.common import (
    RunTiming,
    bench_parser,
    make_framework,
    md_table,
    median,
    merge_intervals,
    percentile,
    require_completed,
    timed_run,
    union_length,
    write_results,
)
from state.framework import Framework

TARGET_OVERHEAD = 0.03
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def six_slots() -> Framework:
    """Six slots with some dependencies: scope -> (requirements, risks) -> (design, tests) -> plan."""
    return make_framework(
        "six",
        "Service plan",
        [
            ("scope", "Scope", []),
            ("reqs", "Requirements", ["scope"]),
            ("risks", "Risks", ["scope"]),
            ("design", "Design", ["reqs"]),
            ("tests", "Test plan", ["reqs", "risks"]),
            ("plan", "Delivery plan", ["design", "tests"]),
        ],
    )


# --- part 1: fake experts, three checkpointers --------------------------------------------------------------


def saver_url(kind: str, workdir: Path, pg_url: str) -> str:
    if kind == "memory":
        return "memory"
    if kind == "sqlite":
        return f"sqlite://{workdir / 'overhead.sqlite'}"
    if kind == "postgres":
        return pg_url
    raise SystemExit(f"unknown checkpointer {kind!r}; allowed: memory, sqlite, postgres")


def bench_saver(kind: str, url: str, fw: Framework, runs: int, warmup: int) -> dict[str, Any]:
    from graph import build_graph
    from graph.persistence import open_checkpointer
    from state.errors import CoeError

    context = {"backend": "fake", "max_parallel": len(fw.slots)}
    threads: list[str] = []
    with ExitStack() as stack:
        try:
            saver = stack.enter_context(open_checkpointer(url))
        except CoeError as exc:
            return {"skipped": f"cannot open the {kind} checkpointer: {exc}"}
        if kind == "postgres":  # leave the shared test database as we found it

            def cleanup() -> None:
                for tid in threads:
                    saver.delete_thread(tid)

            stack.callback(cleanup)
        t0 = time.perf_counter()
        graph = build_graph(saver)
        build_s = time.perf_counter() - t0
        warm: list[RunTiming] = []
        timed: list[RunTiming] = []
        for i in range(warmup + runs):
            timing = timed_run(graph, fw, context, count_checkpoints=(i == warmup))
            threads.append(timing.thread_id)
            require_completed(timing)
            (warm if i < warmup else timed).append(timing)
    walls = [t.wall_s for t in timed]
    n = len(fw.slots)
    checkpoints = timed[0].checkpoints or 0
    return {
        "url": url if kind != "postgres" else url.split("@")[-1],
        "build_graph_s": round(build_s, 4),
        "warmup_samples_s": [round(t.wall_s, 4) for t in warm],
        "samples_s": [round(w, 4) for w in walls],
        "per_run_median_ms": round(1000 * median(walls), 2),
        "per_run_p90_ms": round(1000 * percentile(walls, 90), 2),
        "per_slot_median_ms": round(1000 * median(walls) / n, 2),
        "per_slot_p90_ms": round(1000 * percentile(walls, 90) / n, 2),
        "checkpoints_per_run": checkpoints,
        "per_checkpoint_median_ms": round(1000 * median(walls) / checkpoints, 2) if checkpoints else None,
    }


# --- part 2: the real default model -------------------------------------------------------------------------


class TimedBackend:
    """Wraps a backend and records when each ``generate`` call ran (bench-only timing proxy)."""

    def __init__(self, inner: Any, calls: list[dict[str, Any]], lock: threading.Lock) -> None:
        self._inner = inner
        self._calls = calls
        self._lock = lock
        self.name = inner.name

    def supports_grammar(self) -> bool:
        return bool(self._inner.supports_grammar())

    def generate(self, request: Any) -> Any:
        start = time.perf_counter()
        gen = None
        try:
            gen = self._inner.generate(request)
            return gen
        finally:
            end = time.perf_counter()
            record = {"slot": request.slot_id, "attempt": request.attempt, "start": start, "end": end}
            if gen is not None:
                record.update(
                    tokens_per_s=round(gen.completion_tokens / gen.seconds, 2) if gen.seconds else None,
                    inner_s=gen.seconds,
                    prompt_tokens=gen.prompt_tokens,
                    completion_tokens=gen.completion_tokens,
                    finish_reason=gen.finish_reason,
                )
            with self._lock:
                self._calls.append(record)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def timed_backends(calls: list[dict[str, Any]]) -> Iterator[None]:
    """Make the harness see timing proxies around its backends (patched in this process only)."""
    # ``nodes.execute_slots`` as an attribute is the node function (re-exported by ``nodes``), not the
    # module: patch the module object itself.
    modules = [importlib.import_module("experts.pool.pooled"), importlib.import_module("nodes.execute_slots")]
    original = modules[0].__dict__["get_backend"]
    lock = threading.Lock()

    def patched(settings: Any, model: str | None = None) -> Any:  # the signature of experts.models.get_backend
        return TimedBackend(original(settings, model), calls, lock)

    for module in modules:
        module.__dict__["get_backend"] = patched
    try:
        yield
    finally:
        for module in modules:
            module.__dict__["get_backend"] = original


def real_context(args: argparse.Namespace, n_slots: int) -> dict[str, Any]:
    ctx: dict[str, Any] = {
        "backend": "llama",
        "max_tokens": args.max_tokens,
        "max_outline_retries": args.real_retries,
        "best_of": args.real_best_of,
        "max_parallel": n_slots,
    }
    if args.model:
        ctx["model_path"] = args.model
    return ctx


def prepare_real(ctx: dict[str, Any]) -> tuple[Any | None, str | None, dict[str, Any]]:
    """Resolve and load the real backend before timing; return (backend, skip reason, info)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        return None, f"llama_cpp is not importable ({exc}); install with: pip install -e '.[llama]'", {}
    try:
        import experts.backends.llama  # noqa: F401
    except ImportError as exc:
        return None, f"experts.backends.llama is not importable ({exc})", {}
    from experts.pool.pooled import get_backend
    from state.context import resolve_settings

    info: dict[str, Any] = {}
    try:
        settings = resolve_settings(ctx)
        t0 = time.perf_counter()
        backend = get_backend(settings)
        info["resolve_model_s"] = round(time.perf_counter() - t0, 3)
        inner = getattr(backend, "backend", backend)  # the pool's entry wraps the llama.cpp backend
        info["model_path"] = str(getattr(inner, "model_path", settings.model_path))
        info["n_threads"] = getattr(inner, "n_threads", None)
        info["n_ctx"] = getattr(inner, "n_ctx", None)
        load = getattr(backend, "load", None)
        if callable(load):
            t0 = time.perf_counter()
            load()
            info["load_model_s"] = round(time.perf_counter() - t0, 3)
    except Exception as exc:  # noqa: BLE001 - report any failure of the real backend as a skip reason
        return None, f"the real backend failed to start: {type(exc).__name__}: {exc}", info
    return backend, None, info


def bench_real(fw: Framework, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from graph import build_graph
    from graph.persistence import open_checkpointer

    ctx = real_context(args, len(fw.slots))
    backend, skip, info = prepare_real(ctx)
    result: dict[str, Any] = {"context": ctx, **info}
    if backend is None:
        result["skipped"] = skip
        return result
    calls: list[dict[str, Any]] = []
    try:
        with open_checkpointer(f"sqlite://{workdir / 'real.sqlite'}") as saver, timed_backends(calls):
            graph = build_graph(saver)
            timing = timed_run(graph, fw, ctx, count_checkpoints=True)
    except Exception as exc:  # noqa: BLE001 - a failing real run is reported, not hidden
        result["skipped"] = f"the real run failed: {type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc(limit=8)
        return result
    if not calls:
        result["skipped"] = "no backend.generate call was seen: the timing proxy did not take effect"
        return result
    t0, wall = timing.t0, timing.wall_s
    outer = [(c["start"] - t0, c["end"] - t0) for c in calls]
    inner = [(c["end"] - t0 - c.get("inner_s", 0.0), c["end"] - t0) for c in calls]
    gen_union = union_length(outer)
    gen_inner_union = union_length(inner)
    overhead = wall - gen_union
    result.update(
        {
            "status": timing.status,
            "wall_s": round(wall, 3),
            "generate_calls": len(calls),
            "generate_union_s": round(gen_union, 3),
            "overhead_s": round(overhead, 3),
            "overhead_ratio": round(overhead / wall, 5),
            "target_ratio": TARGET_OVERHEAD,
            "meets_target": overhead / wall <= TARGET_OVERHEAD,
            "strict": {
                "note": "generation counted only while llama.cpp ran (Generation.seconds), not lock waits",
                "generate_union_s": round(gen_inner_union, 3),
                "overhead_s": round(wall - gen_inner_union, 3),
                "overhead_ratio": round((wall - gen_inner_union) / wall, 5),
            },
            "checkpoints_per_run": timing.checkpoints,
            "generation_intervals_s": [(round(a, 3), round(b, 3)) for a, b in merge_intervals(outer)],
            "calls": [
                {
                    **{k: v for k, v in c.items() if k not in ("start", "end")},
                    "start_s": round(c["start"] - t0, 3),
                    "end_s": round(c["end"] - t0, 3),
                }
                for c in sorted(calls, key=lambda c: c["start"])
            ],
            "slot_times_s": timing.slot_times,
            "compliant": timing.compliant,
        }
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--runs", type=int, default=10, help="timed runs per checkpointer (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    parser.add_argument("--savers", default="memory,sqlite,postgres", help="comma-separated: memory, sqlite, postgres")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("COE_TEST_POSTGRES_URL", DEFAULT_PG_URL),
        help=f"PostgreSQL for the postgres checkpointer (default $COE_TEST_POSTGRES_URL or {DEFAULT_PG_URL})",
    )
    parser.add_argument(
        "--real",
        choices=("auto", "yes", "no"),
        default="auto",
        help="run part 2 on the real default model (auto: when llama_cpp and the model are available; "
        "--quick: no unless yes)",
    )
    parser.add_argument("--model", default=None, help="model for part 2 (default: the bundled default model)")
    parser.add_argument("--max-tokens", type=int, default=150, help="token budget per slot in part 2 (150)")
    parser.add_argument(
        "--real-retries", type=int, default=0, help="outline retries per slot in part 2 (default 0, to bound time)"
    )
    parser.add_argument(
        "--real-best-of",
        type=int,
        default=1,
        help="candidates per slot in part 2 (default 1: the harness's own work, not selection)",
    )
    parser.add_argument("--name", default="overhead", help="results file name (default: overhead)")
    args = parser.parse_args(argv)
    if args.quick:  # one run per checkpointer, no warm-up, the real model only when asked for
        args.runs, args.warmup = 1, 0
        args.real = "yes" if args.real == "yes" else "no"

    fw = six_slots()
    kinds = [k.strip() for k in args.savers.split(",") if k.strip()]
    fake: dict[str, Any] = {}
    real: dict[str, Any] = {"skipped": "not requested (--real no)"}
    with tempfile.TemporaryDirectory(prefix="coe-bench-") as tmp:
        for kind in kinds:
            print(f"fake experts, {kind}: {args.warmup} warm-up + {args.runs} runs ...", flush=True)
            fake[kind] = bench_saver(kind, saver_url(kind, Path(tmp), args.postgres_url), fw, args.runs, args.warmup)
        if args.real != "no":
            print(f"real model: one run of {len(fw.slots)} slots, max_tokens {args.max_tokens} ...", flush=True)
            real = bench_real(fw, args, Path(tmp))

    rows = []
    for kind, r in fake.items():
        if "skipped" in r:
            rows.append([kind, "skipped: " + r["skipped"], "", "", "", "", ""])
            continue
        rows.append(
            [
                kind,
                f"{r['per_run_median_ms']:.1f}",
                f"{r['per_run_p90_ms']:.1f}",
                f"{r['per_slot_median_ms']:.1f}",
                f"{r['per_slot_p90_ms']:.1f}",
                r["checkpoints_per_run"],
                f"{r['per_checkpoint_median_ms']:.1f}",
            ]
        )
    part1 = md_table(
        [
            "checkpointer",
            "per run median ms",
            "per run p90 ms",
            "per slot median ms",
            "per slot p90 ms",
            "checkpoints / run",
            "ms / checkpoint",
        ],
        rows,
    )
    part1 += (
        f"\n\n6-slot framework (scope -> requirements, risks -> design, tests -> delivery plan), 0-latency fake "
        f"experts, graph.stream(..., durability='sync'); {args.runs} runs after {args.warmup} warm-up runs on one "
        "compiled graph. Per slot = per run / 6.\n"
    )
    if "skipped" in real:
        part2 = f"Real model: skipped: {real['skipped']}\n"
    else:
        part2 = md_table(
            [
                "model",
                "status",
                "wall s",
                "generate calls",
                "generation (union) s",
                "overhead s",
                "overhead / total",
                f"<= {TARGET_OVERHEAD:.0%}",
                "strict overhead / total",
            ],
            [
                [
                    Path(real["model_path"]).name,
                    real["status"],
                    f"{real['wall_s']:.2f}",
                    real["generate_calls"],
                    f"{real['generate_union_s']:.2f}",
                    f"{real['overhead_s']:.3f}",
                    f"**{real['overhead_ratio']:.2%}**",
                    "yes" if real["meets_target"] else "NO",
                    f"{real['strict']['overhead_ratio']:.2%}",
                ]
            ],
        )
        part2 += (
            f"\n\nOne run, SQLite checkpointer, durability='sync', max_tokens {args.max_tokens}, outline retries "
            f"{args.real_retries}; model loaded before timing ({real.get('load_model_s')} s). Overhead = wall - "
            "union of the intervals spent in backend.generate (timing proxy in the bench). Strict: only the time "
            "llama.cpp itself reports (lock waits count as overhead).\n"
        )
    markdown = "## Fake experts (0 latency)\n\n" + part1 + "\n## Real default model\n\n" + part2
    payload = {
        "framework": [{"id": s.id, "deps": s.deps} for s in fw.slots],
        "runs": args.runs,
        "warmup": args.warmup,
        "fake": fake,
        "real": real,
    }
    json_path, md_path = write_results(args.name, payload, markdown, directory=args.out)
    print()
    print(markdown)
    print(f"wrote {json_path} and {md_path}")
    return 1 if args.real == "yes" and "skipped" in real else 0


if __name__ == "__main__":
    raise SystemExit(main())
