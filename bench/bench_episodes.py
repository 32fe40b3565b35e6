"""Episodic memory's line: does an earlier run bear on the same request asked again, and not on another one?

``memory/store.py`` prefers a template whose plan worked for a *similar* task, and passes over one that failed,
when the earlier run's task is at least ``SIMILAR_TASK_LINE`` similar to the new one (set by hand at 0.85). This
bench measures that line on ``bench/data/episodes.yaml``: 30 tasks, each with the same request in other words
(the earlier run should count) and a different request of the same kind (it should not: "the water cycle" lesson
is not the "photosynthesis" lesson, even when both fit one template).

Through the real code path: each task's run is recorded in an :class:`memory.store.EpisodeMemory` on an
in-memory Store, then :meth:`~memory.store.EpisodeMemory.similar` is asked with the paraphrase and with the
other request. Reported at the shipped line: how often the paraphrase finds its run (goal: high) and how often
the other request finds a run (goal: 0), and the same for a sweep of lines, to show where the line sits.

Run: ``python -m bench.bench_episodes`` (seconds: the embedder only); ``--quick``: the first five items.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import yaml
from langgraph.store.memory import InMemoryStore

from bench.common import bench_parser, md_table, write_results
from experts.embedding import get_embedder
from memory.store import SIMILAR_TASK_LINE, Episode, EpisodeMemory

DATA = Path(__file__).resolve().parent / "data" / "episodes.yaml"
SWEEP = (0.75, 0.8, 0.85, 0.88, 0.9, 0.92, 0.95)


def run(quick: bool) -> dict[str, Any]:
    """Record each task's run, then ask with its paraphrase and with the other request."""
    items: list[dict[str, str]] = yaml.safe_load(DATA.read_text(encoding="utf-8"))["items"]
    items = items[:5] if quick else items
    memory = EpisodeMemory(InMemoryStore(), "bench", get_embedder)
    for n, item in enumerate(items):
        memory.record(
            Episode(f"run-{n}", f"thread-{n}", item["task"], "completed", f"template-{n}", [], 1.0, None, f"{n:04d}")
        )
    rows = []
    for n, item in enumerate(items):
        same = dict((e.run_id, s) for e, s in memory.similar(item["same"], line=-1.0))
        other = memory.similar(item["other"], line=-1.0)
        rows.append(
            {
                "task": item["task"],
                "same": same[f"run-{n}"],
                "same_is_nearest": max(same, key=lambda k: same[k]) == f"run-{n}",
                "other": other[0][1],
                "other_nearest": other[0][0].task,
            }
        )
    sweep = {
        str(line): {
            "paraphrase_found": round(sum(r["same"] >= line for r in rows) / len(rows), 3),
            "other_request_found": round(sum(r["other"] >= line for r in rows) / len(rows), 3),
        }
        for line in sorted({*SWEEP, SIMILAR_TASK_LINE})
    }
    return {
        "line": SIMILAR_TASK_LINE,
        "items": len(rows),
        "at_line": sweep[str(SIMILAR_TASK_LINE)],
        "paraphrase_nearest": round(sum(r["same_is_nearest"] for r in rows) / len(rows), 3),
        "median_paraphrase": round(statistics.median(r["same"] for r in rows), 3),
        "median_other": round(statistics.median(r["other"] for r in rows), 3),
        "sweep": sweep,
        "rows": rows,
    }


def markdown(result: dict[str, Any]) -> str:
    """The results as Markdown."""
    at = result["at_line"]
    sweep = md_table(
        ["line", "paraphrase finds its run", "other request finds a run"],
        [[line, v["paraphrase_found"], v["other_request_found"]] for line, v in result["sweep"].items()],
    )
    worst = sorted(result["rows"], key=lambda r: r["same"])[:3]
    closest = sorted(result["rows"], key=lambda r: -r["other"])[:3]
    lines = [
        f"{result['items']} tasks, each recorded as a finished run; asked again in other words, and a different "
        "request of the same kind (`bench/data/episodes.yaml`).",
        "",
        f"At the shipped line ({result['line']}): **the paraphrase finds its run {at['paraphrase_found']:.0%}**, "
        f"**another request finds a run {at['other_request_found']:.0%}** (goal 0). The paraphrase's own run is "
        f"the nearest record {result['paraphrase_nearest']:.0%} of the time; median similarity "
        f"{result['median_paraphrase']} (paraphrase) against {result['median_other']} (other request).",
        "",
        sweep,
        "",
        "Paraphrases least like their task:",
        "",
        *[f"- {r['same']:.3f}: {r['task'][:100]}" for r in worst],
        "",
        "Other requests most like a recorded task:",
        "",
        *[f"- {r['other']:.3f}: {r['task'][:100]}" for r in closest],
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    result = run(args.quick)
    json_path, md_path = write_results("episodes", result, markdown(result), args.out)
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
