"""llama.cpp's repeat penalty on the prose of the review set: degenerate answers and rubric coverage per penalty.

The harness generated with ``repeat_penalty`` 1.0 (no penalty), while the Qwen2.5 models' own generation
configs ship 1.05 (instruct) to 1.1 (coder). For each prose, plan and table task of ``bench/data/review_set.yaml``
the base model (the one every faux expert runs on) answers the task sentence alone, greedy, 900 tokens, once per
penalty; each answer is judged as the review set judges a document (:func:`bench.bench_review.judge`: the
project's repetition check, stub sections, rubric items met). Code tasks are left out: code repeats its own
tokens by nature, and the harness keeps code at 1.0 whatever this finds.

Run: ``python -m bench.bench_repeat_penalty`` (about 20 minutes on 2 cores); ``--penalties 1.0,1.1``;
``--quick``: three tasks on the fake backend (a test of the bench).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_review import judge, load_tasks
from bench.common import bench_parser, md_table, write_results
from bench.versus import bare_request
from experts.pool import get_backend
from state.context import resolve_settings

PROSE_KINDS = ("prose", "plan", "table")


def run(penalties: list[float], quick: bool, docs: Path | None) -> dict[str, Any]:
    """Every prose task's answer at each penalty, judged."""
    settings = resolve_settings({"backend": "fake"} if quick else {})
    backend = get_backend(settings, None)
    items = [i for i in load_tasks() if i["kind"] in PROSE_KINDS]
    items = items[:3] if quick else items
    rows: list[dict[str, Any]] = []
    for n, item in enumerate(items, 1):
        row: dict[str, Any] = {"id": item["id"], "expert": item["expert"], "kind": item["kind"]}
        for penalty in penalties:
            t0 = time.perf_counter()
            gen = backend.generate(bare_request(item["task"], repeat_penalty=penalty))
            judged = judge(gen.text, "", item, time.perf_counter() - t0, harness=False)
            row[str(penalty)] = {
                "degenerate": judged.degenerate,
                "detail": judged.degenerate_detail,
                "stubs": judged.stub_sections,
                "coverage": round(judged.coverage, 3),
                "tokens": gen.completion_tokens,
                "cut_off": gen.finish_reason == "length",
                "seconds": round(time.perf_counter() - t0, 1),
            }
            if docs is not None:
                docs.mkdir(parents=True, exist_ok=True)
                (docs / f"{item['id']}.{penalty}.md").write_text(gen.text, encoding="utf-8")
        rows.append(row)
        cells = ", ".join(
            f"{p}: {row[str(p)]['coverage']:.0%}{' DEGENERATE' if row[str(p)]['degenerate'] else ''}" for p in penalties
        )
        print(f"[{n}/{len(items)}] {item['id']}: {cells}", file=sys.stderr, flush=True)
    summary = {
        str(p): {
            "degenerate": sum(r[str(p)]["degenerate"] for r in rows),
            "cut_off": sum(r[str(p)]["cut_off"] for r in rows),
            "coverage": round(statistics.fmean(r[str(p)]["coverage"] for r in rows), 3),
            "median_tokens": statistics.median(r[str(p)]["tokens"] for r in rows),
        }
        for p in penalties
    }
    return {"summary": summary, "rows": rows, "model": "base model", "tasks": len(rows)}


def markdown(result: dict[str, Any], penalties: list[float]) -> str:
    """The results as Markdown."""
    s = result["summary"]
    table = md_table(
        ["repeat penalty", "degenerate answers", "cut off at 900 tokens", "rubric coverage", "median tokens"],
        [
            [p, f"{s[str(p)]['degenerate']} / {result['tasks']}", s[str(p)]["cut_off"], s[str(p)]["coverage"],
             s[str(p)]["median_tokens"]]
            for p in penalties
        ],
    )  # fmt: skip

    def cell(row: dict[str, Any], p: float) -> str:
        return f"{row[str(p)]['coverage']:.0%}{' degenerate' if row[str(p)]['degenerate'] else ''}"

    per_task = md_table(
        ["task", *map(str, penalties)], [[r["id"], *[cell(r, p) for p in penalties]] for r in result["rows"]]
    )
    return (
        f"Prose, plan and table tasks of the review set ({result['tasks']}), the base model, the task sentence alone, "
        f"greedy, 900 tokens.\n\n{table}\n\nPer task (rubric coverage):\n\n{per_task}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--penalties", default="1.0,1.1", help="comma-separated repeat penalties")
    args = parser.parse_args(argv)
    penalties = [float(p) for p in args.penalties.split(",")]
    out = args.out
    docs = None if args.quick else (out or Path(__file__).resolve().parent / "results") / "repeat_penalty_documents"
    result = run(penalties, args.quick, docs)
    json_path, md_path = write_results("repeat_penalty", result, markdown(result, penalties), out)
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
