"""Adaptation benchmark: retrieval + constrained adaptation with the planner model over varied tasks.

Run: ``python -m bench.bench_adaptation [--tasks N]`` (``--quick``: two tasks on the fake backend). Writes
``bench/results/adaptation.{json,md}``.

Tasks: the first N non-trivial tasks of ``bench/data/template_tasks.yaml`` taken round-robin over the
template families (so the set is varied). For each: the best template by search, then
:func:`engine.planning.adaptation.adapt` with the llama.cpp backend and the planner model (``--model``; grammar on).
Reported: share of frameworks valid without fallback, share that needed a retry, share that fell back (to the
seed, to one slot), operations per plan, mean and max seconds per adaptation, and whether every framework that
would reach execution passes validation (it must: 100%).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.common import bench_parser, write_results
from engine.planning.adaptation import adapt
from experts.catalog import load_catalog
from experts.embedding import get_embedder
from experts.pool.pooled import get_backend
from experts.routing.templates import load_or_build
from state.context import resolve_settings
from state.framework import validation_errors
from state.paths import config_dir
from state.template import load_library

TASKS = Path(__file__).resolve().parent / "data" / "template_tasks.yaml"


def pick_tasks(n: int, families: dict[str, str]) -> list[str]:
    items = [i for i in yaml.safe_load(TASKS.read_text(encoding="utf-8"))["items"] if not i["trivial"]]
    by_family: dict[str, list[str]] = {}
    for item in items:
        by_family.setdefault(families[item["fits"][0]], []).append(item["task"])
    out: list[str] = []
    while len(out) < n and any(by_family.values()):
        for family in sorted(by_family):
            if by_family[family] and len(out) < n:
                out.append(by_family[family].pop(0))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--model", default=None, help="planner model (default: the planner_model setting; '' = base)")
    parser.add_argument("--name", default="adaptation")
    args = parser.parse_args(argv)
    catalog = load_catalog()
    library = load_library([config_dir() / "framework_templates"], catalog.ids).templates
    index = load_or_build(library, get_embedder())
    settings = resolve_settings({"backend": "fake" if args.quick else "llama"}, env={})
    model = args.model if args.model is not None else settings.planner_model
    backend = get_backend(settings, model or None)
    tasks = pick_tasks(2 if args.quick else args.tasks, {t.id: t.family for t in library.values()})
    rows: list[dict[str, Any]] = []
    for task in tasks:
        hit = index.search(task, 1)[0]
        t0 = time.perf_counter()
        fw, record = adapt(library[hit.template_id], hit.similarity, task, backend, list(catalog.ids))
        seconds = time.perf_counter() - t0
        rows.append(
            {
                "task": task,
                "template": hit.template_id,
                "similarity": hit.similarity,
                "fallback": record.fallback,
                "as_is": record.as_is,
                "attempts": len(record.attempts),
                "operations": [op.op for op in record.operations],
                "valid": not validation_errors(fw),
                "seconds": round(seconds, 2),
                "errors": [e for a in record.attempts for e in a.errors][:6],
            }
        )
        print(f"{seconds:6.1f}s {record.fallback:<11} attempts {len(record.attempts)} {hit.template_id}: {task[:60]}")
    n = len(rows)
    no_fallback = [r for r in rows if r["fallback"] == "none"]
    summary = {
        "tasks": n,
        "valid_without_fallback": len(no_fallback) / n,
        "needed_retry": sum(r["attempts"] > 1 for r in no_fallback) / n,
        "fell_back": Counter(r["fallback"] for r in rows if r["fallback"] != "none"),
        "frameworks_valid": sum(r["valid"] for r in rows) / n,
        "operations": Counter(op for r in rows for op in r["operations"]),
        "plans_with_no_operation": sum(not r["operations"] for r in no_fallback),
        "seconds_mean": statistics.mean(r["seconds"] for r in rows),
        "seconds_max": max(r["seconds"] for r in rows),
    }
    md = [
        f"{n} tasks, planner model {model or 'base'}, grammar on: valid without fallback "
        f"{summary['valid_without_fallback']:.0%} "
        f"(of which needed a retry: {summary['needed_retry']:.0%} of all), fell back "
        f"{dict(summary['fell_back']) or 'never'}; frameworks that reach execution valid: "
        f"{summary['frameworks_valid']:.0%}. Operations used: {dict(summary['operations'])}; plans that keep the "
        f"template unchanged: {summary['plans_with_no_operation']}. Time per adaptation: mean "
        f"{summary['seconds_mean']:.1f} s, max {summary['seconds_max']:.1f} s.",
    ]
    payload = {"summary": summary, "model": model or "base", "quick": args.quick, "rows": rows}
    write_results(args.name, payload, "\n".join(md) + "\n", directory=args.out)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
