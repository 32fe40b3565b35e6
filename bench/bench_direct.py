"""Which installed model answers a short request directly: its facts against its time.

A task the scope reads as trivial ("why do we have seasons? short answer pls") is answered in one call, with the
direct-answer prompt (:data:`engine.prompts.DIRECT_SYSTEM`) and budget (:data:`nodes.answer_directly.MAX_TOKENS`),
greedy, as :func:`nodes.answer_directly.answer_directly` asks it. For each task of a review-form set (default
``bench/data/facts_heldout.yaml``: explanations whose rubric names the facts a right answer states and the wrong
claims it must not make) each model answers; each answer is judged as the review set judges a bare reply
(:func:`bench.bench_review.judge`). The 0.5B answered "why do we have seasons?" with "the natural cycles of the
Earth's rotation" in the review of 2026-12-07.

Run: ``python -m bench.bench_direct`` (a few minutes on 2 cores); ``--models base,qwen2.5-coder-1.5b``;
``--set FILE``; ``--name NAME``; ``--quick``: three tasks on the fake backend (a test of the bench).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_review import judge, load_tasks
from bench.common import bench_parser, md_table, write_results
from engine.prompts import DIRECT_SYSTEM
from experts.backends import ChatMessage, GenerationRequest
from experts.pool import get_backend
from nodes.answer_directly import MAX_TOKENS
from state.context import resolve_settings

SET = Path(__file__).resolve().parent / "data" / "facts_heldout.yaml"
BASE = "base"
"""The base model, as ``--models`` names it."""


def run(items: list[dict[str, Any]], models: list[str], quick: bool, docs: Path | None) -> dict[str, Any]:
    """Every task's direct answer by each model, judged and timed."""
    settings = resolve_settings({"backend": "fake"} if quick else {})
    rows: list[dict[str, Any]] = []
    for n, item in enumerate(items, 1):
        row: dict[str, Any] = {"id": item["id"], "expert": item["expert"]}
        for model in models:
            backend = get_backend(settings, None if quick or model == BASE else model)
            request = GenerationRequest(
                messages=(ChatMessage("system", DIRECT_SYSTEM), ChatMessage("user", item["task"])),
                max_tokens=MAX_TOKENS,
                temperature=0.0,
                slot_id="direct",
            )
            t0 = time.perf_counter()
            gen = backend.generate(request)
            seconds = time.perf_counter() - t0
            judged = judge(gen.text, "", item, seconds, harness=False)
            row[model] = {
                "coverage": round(judged.coverage, 3),
                "rubric_met": judged.rubric_met,
                "wrong_claims": sum(
                    not met for met, r in zip(judged.rubric_met, item["rubric"], strict=True) if r.get("absent")
                ),
                "tokens": gen.completion_tokens,
                "seconds": round(seconds, 2),
            }
            if docs is not None:
                docs.mkdir(parents=True, exist_ok=True)
                (docs / f"{item['id']}.{model}.md").write_text(gen.text, encoding="utf-8")
        rows.append(row)
        cells = ", ".join(f"{m}: {row[m]['coverage']:.0%} {row[m]['seconds']:.1f} s" for m in models)
        print(f"[{n}/{len(items)}] {item['id']}: {cells}", file=sys.stderr, flush=True)
    summary = {
        model: {
            "coverage": round(statistics.fmean(r[model]["coverage"] for r in rows), 3),
            "wrong_claims": sum(r[model]["wrong_claims"] for r in rows),
            "median_seconds": round(statistics.median(r[model]["seconds"] for r in rows), 2),
            "median_tokens": statistics.median(r[model]["tokens"] for r in rows),
        }
        for model in models
    }
    return {"summary": summary, "rows": rows, "models": models, "tasks": len(rows), "quick": quick}


def markdown(result: dict[str, Any], set_name: str) -> str:
    """The results as Markdown."""
    models, s = result["models"], result["summary"]
    table = md_table(
        ["model", "rubric coverage", "wrong claims made", "median seconds", "median tokens"],
        [[m, s[m]["coverage"], s[m]["wrong_claims"], s[m]["median_seconds"], s[m]["median_tokens"]] for m in models],
    )
    per_task = md_table(
        ["task", *models], [[r["id"], *[f"{r[m]['coverage']:.0%}" for m in models]] for r in result["rows"]]
    )
    return (
        f"{result['tasks']} tasks of {set_name}, each answered directly (the direct-answer prompt, "
        f"{MAX_TOKENS} tokens, greedy) by each model.\n\n{table}\n\nPer task (rubric coverage):\n\n{per_task}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--models", default=f"{BASE},qwen2.5-coder-1.5b", help="comma-separated models")
    parser.add_argument("--set", type=Path, default=SET, help="a review-form set (default: facts_heldout.yaml)")
    parser.add_argument("--name", default="direct", help="results name")
    args = parser.parse_args(argv)
    models = args.models.split(",")
    items = load_tasks(args.set)[: 3 if args.quick else None]
    out = args.out
    docs = None if args.quick else (out or Path(__file__).resolve().parent / "results") / f"{args.name}_documents"
    result = run(items, models, args.quick, docs)
    json_path, md_path = write_results(args.name, result, markdown(result, args.set.name), out)
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
