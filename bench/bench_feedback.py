"""Routing lessons (issue 20): does the router learn from a person's feedback, and does wrong feedback stay out?

Run: ``python -m bench.bench_feedback``. Writes ``bench/results/feedback.{json,md}``. ``--quick``: 10 events.

50 feedback events (``bench/data/routing_feedback.yaml``: 35 right lessons, some confirming the router and some
correcting it, and 15 deliberately wrong ones), given one after another in a fixed shuffled order to
:class:`memory.routing_lessons.RoutingLessons` (an in-process store; each lesson is checked for plausibility and
for drift on the guard set, ``config/expert_scopes/routing_guard.tsv``, and kept or refused). Reported, for the shipped
router and for the router with the kept lessons:

* accuracy on the held-out routing sets (``routing_heldout2.yaml``, ``routing_heldout3.yaml``: 168 texts the drift
  check never sees) and on the guard set (goal: no drop beyond noise);
* the right lessons' texts and their paraphrases (never taught): how many go to their expert;
* the wrong lessons: how many were refused, and how (implausible, rolled back for drift);
* for comparison, the router trained on all 50 lessons with no check (what the checks keep out);
* the time to check and record one lesson.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from langgraph.store.memory import InMemoryStore

from bench.common import bench_parser, md_table, median, write_results
from experts.routing import ExpertRouter, get_router
from experts.routing.lesson_check import Lesson, guard_score, router_with_lessons
from memory.routing_lessons import RoutingLessons

DATA = Path(__file__).resolve().parent / "data" / "routing_feedback.yaml"
HELDOUT = [
    Path(__file__).resolve().parent / "data" / name for name in ("routing_heldout2.yaml", "routing_heldout3.yaml")
]
NOISE = 2
"""Held-out texts a router may lose and still count as "no drop beyond noise" (about 1% of 168: one standard error of
an accuracy near 0.97 on 168 texts is 1.3%)."""


def heldout() -> list[tuple[str, str]]:
    """(text, expert) of both held-out routing sets."""
    items = [item for path in HELDOUT for item in yaml.safe_load(path.read_text(encoding="utf-8"))["items"]]
    return [(item["text"], item["expert"]) for item in items]


def right_count(router: ExpertRouter, pairs: list[tuple[str, str]]) -> int:
    """How many texts go to their expert."""
    results = router.route_many([text for text, _ in pairs])
    return sum(1 for (_, expert), r in zip(pairs, results, strict=True) if r.expert == expert)


def events(data: dict[str, Any], quick: bool) -> list[dict[str, Any]]:
    """The feedback events in a fixed shuffled order (seed 20)."""
    items = [{**x, "wrong": False} for x in data["right"]] + [{**x, "wrong": True} for x in data["wrong"]]
    random.Random(20).shuffle(items)
    return items[:10] if quick else items


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    args = parser.parse_args(argv)
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    given = events(data, args.quick)
    router = get_router()
    held = heldout()
    right = [x for x in given if not x["wrong"]]
    texts = [(x["text"], x["expert"]) for x in right]
    paraphrases = [(x["paraphrase"], x["expert"]) for x in right]
    corrections = [
        x for x, r in zip(right, router.route_many([x["text"] for x in right]), strict=True) if r.expert != x["expert"]
    ]

    memory = RoutingLessons(InMemoryStore(), "bench")
    seconds, log = [], []
    for x in given:
        t0 = time.perf_counter()
        record, check = memory.teach(router, Lesson(x["text"], x["expert"]))
        seconds.append(time.perf_counter() - t0)
        log.append(
            {
                "text": x["text"],
                "expert": x["expert"],
                "wrong": x["wrong"],
                "kept": record.kept,
                "reason": record.reason,
                "gap": check.gap,
                "routed_before": check.routed_before,
                "guard": record.guard,
            }
        )
    taught = router_with_lessons(router, memory.kept())
    unchecked = router_with_lessons(router, [Lesson(x["text"], x["expert"]) for x in given])
    wrong = [e for e in log if e["wrong"]]
    routers = {"shipped": router, "with kept lessons": taught, "all lessons, unchecked": unchecked}
    rows = {}
    for name, r in routers.items():
        g = guard_score(r, r.catalog)
        rows[name] = {
            "heldout": right_count(r, held),
            "guard": g.right,
            "lesson_texts": right_count(r, texts),
            "paraphrases": right_count(r, paraphrases),
            "corrections": right_count(r, [(x["text"], x["expert"]) for x in corrections]),
            "correction_paraphrases": right_count(r, [(x["paraphrase"], x["expert"]) for x in corrections]),
        }
    guard_total = guard_score(router, router.catalog).total
    summary = {
        "events": len(given),
        "right_lessons": len(right),
        "corrections": len(corrections),
        "wrong_lessons": len(wrong),
        "right_kept": sum(1 for e in log if not e["wrong"] and e["kept"]),
        "wrong_refused": sum(1 for e in wrong if not e["kept"]),
        "wrong_refused_implausible": sum(1 for e in wrong if e["reason"].startswith("not plausible")),
        "wrong_rolled_back": sum(1 for e in wrong if e["reason"].startswith("rolled back")),
        "heldout_texts": len(held),
        "guard_texts": guard_total,
        "median_seconds_per_lesson": round(median(seconds), 3),
        "max_seconds_per_lesson": round(max(seconds), 3),
        "heldout_drop": rows["shipped"]["heldout"] - rows["with kept lessons"]["heldout"],
    }
    ok = summary["heldout_drop"] <= NOISE and summary["wrong_refused"] == len(wrong)
    table = md_table(
        [
            "router",
            f"held-out ({len(held)})",
            f"guard ({guard_total})",
            f"lesson texts ({len(texts)})",
            f"their paraphrases ({len(paraphrases)})",
            f"corrections ({len(corrections)})",
            f"corrections' paraphrases ({len(corrections)})",
        ],
        [[name, *v.values()] for name, v in rows.items()],
    )
    md = [
        ("QUICK: a sample, not a measurement. " if args.quick else "")
        + f"{len(given)} feedback events: {len(right)} right lessons ({len(corrections)} of them correct a misrouted "
        f"text), {len(wrong)} deliberately wrong. Texts routed to their expert:",
        "",
        table,
        "",
        f"- Right lessons kept: **{summary['right_kept']}/{len(right)}**.",
        f"- Wrong lessons refused: **{summary['wrong_refused']}/{len(wrong)}** ({summary['wrong_refused_implausible']} "
        f"as implausible, {summary['wrong_rolled_back']} rolled back for drift on the guard set).",
        f"- Held-out texts lost with the kept lessons: **{summary['heldout_drop']}** (goal: at most {NOISE}, the noise "
        f"of {len(held)} texts).",
        f"- Checking and recording one lesson: median {summary['median_seconds_per_lesson']} s, most "
        f"{summary['max_seconds_per_lesson']} s.",
        "",
        "Every event:",
        "",
        md_table(
            ["wrong?", "kept", "gap", "routed before", "lesson", "text", "why"],
            [
                [
                    "wrong" if e["wrong"] else "",
                    "yes" if e["kept"] else "no",
                    e["gap"],
                    e["routed_before"],
                    e["expert"],
                    e["text"][:70],
                    e["reason"][:90],
                ]
                for e in log
            ],
        ),
    ]
    json_path, md_path = write_results(
        "feedback",
        {"summary": summary, "routers": rows, "events": log, "goal_met": ok},
        "\n".join(md),
        None if args.out is None else args.out,
    )
    print(f"wrote {json_path} and {md_path}")  # noqa: T201
    print("\n".join(md[:9]))  # noqa: T201
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
