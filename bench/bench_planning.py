"""Planning benchmark: does the plan fit the task? Scope, slots, aspects, experts and time to the plan.

Run: ``python -m bench.bench_planning`` (the planner model from the settings, within ``plan_seconds``);
``--planner none`` plans without the planner (the fitted template runs); ``--quick``: six tasks on the fake
backend; ``--set FILE --name NAME`` scores another labelled set (the held-out sets
``bench/data/planning_heldout.yaml`` and ``planning_heldout2.yaml``; their headers say what each was kept
from). Writes ``bench/results/<name>.{json,md}``; ``--sweep`` also scores a grid of the three plan lines
without the planner (``<name>_sweep.{json,md}``).

The set is ``bench/data/planning_set.yaml`` (61 tasks: trivial, single, multi; traps where a domain word only
describes the data). For each task, the pipeline of the graph: scope (:func:`experts.routing.classify`), then
the plan (one slot, a template fitted and edited by :func:`engine.planning.planner.plan_from_template`, or one slot per
aspect by :func:`engine.planning.planner.plan_from_aspects`), then routing of every slot the plan does not pin.

Reported:
- scope accuracy (trivial / single / multi as labelled; an unclear scope taken as single counts as single);
- slot precision and aspect recall, on the multi-labelled tasks, each planned as multi whatever the scope said
  (the quality of the plan when a plan is made): a slot serves an aspect when its text matches the aspect's
  expression; an aspect is covered when some slot matches it;
- must-use accuracy and must-not-use violations, on the plan the pipeline really makes;
- time to the plan (p50, p90) over the multi plans, with the planner model.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import bench_parser, md_table, percentile, write_results
from engine.planning import planner as planning
from engine.planning.planner import plan_from_aspects, plan_from_template
from engine.planning.planner_model import planner_model
from engine.planning.scope_reading import ScopeReading, read_scope, second_reading
from experts.catalog import load_catalog
from experts.embedding import get_embedder
from experts.pool.pooled import get_backend
from experts.routing import classify, get_router, library
from state.context import resolve_settings
from state.framework import Framework, fallback_framework, slot_text

SET = Path(__file__).resolve().parent / "data" / "planning_set.yaml"
QUICK_IDS = ("t-mutex", "s-palindrome", "s-patients-sql", "m-fastapi", "m-hipaa", "m-slow-query")


def load_set(path: Path = SET) -> list[dict[str, Any]]:
    """The labelled tasks (every multi task has aspects; every aspect expression compiles)."""
    items: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))["items"]
    for item in items:
        item.setdefault("aspects", {})
        item.setdefault("must_use", [])
        item.setdefault("must_not_use", [])
        item["patterns"] = {name: re.compile(rx, re.I) for name, rx in item["aspects"].items()}
    return items


class Planner:
    """The graph's planning steps, callable per task: scope, plan, route."""

    def __init__(
        self, settings: Any, planner_model: str | None, plan_seconds: float, reading_model: str | None = None
    ) -> None:
        self.catalog = load_catalog()
        self.embedder = get_embedder()
        self.templates, self.index = library(self.catalog.ids, self.embedder)
        self.router = get_router(catalog=self.catalog)
        self.backend = get_backend(settings, planner_model)
        self.plan_seconds = plan_seconds
        self.reading_model = reading_model
        self.reader = get_backend(settings, reading_model) if reading_model is not None else None
        self.readings: dict[str, ScopeReading] = {}
        self.firm: dict[str, bool] = {}

    def scope(self, task: str) -> str:
        """The graph's scope: the deterministic pass, then the planner model's reading of a plan (when on)."""
        decision = classify(task, self.embedder, self.index, self.router)
        self.firm[task] = decision.firm
        if decision.kind == "multi" and self.reader is not None and not decision.firm:
            reading = self.readings[task] = read_scope(task, self.reader)
            decision = second_reading(decision, reading, self.reading_model or "")
        return decision.kind

    def plan(self, task: str) -> tuple[Framework, dict[str, Any]]:
        """The multi-slot plan of ``task`` and what it took (template, similarity, fits, seconds)."""
        assert self.index is not None
        hit = self.index.search(task, 1)[0]
        if self.firm.get(task, False):  # as nodes/select_template.py: deliverables of different kinds, one part each
            fw, record = plan_from_aspects(task, self.embedder, "the task names its deliverables")
        elif hit.similarity < planning.TEMPLATE_FIT_LINE:
            fw, record = plan_from_aspects(task, self.embedder, f"no template fits ({hit.similarity:.3f})")
        else:
            fw, record = plan_from_template(
                self.templates[hit.template_id],
                hit.similarity,
                task,
                self.backend,
                list(self.catalog.ids),
                self.embedder,
                time_budget=self.plan_seconds,
            )
        info = {
            "template": hit.template_id,
            "similarity": round(hit.similarity, 4),
            "built_from": record.built_from,
            "fallback": record.fallback,
            "operations": [op.op for op in record.operations],
            "removed": [s for fit in record.fits for s in fit.removed],
            "added": [s for fit in record.fits for s in fit.added],
            "aspects": record.fit_after.aspects if record.fit_after else [],
            "seconds": record.seconds or 0.0,
        }
        return fw, info

    def route(self, fw: Framework) -> list[str]:
        """Each slot's expert: the pinned one, else the router's."""
        open_slots = [s for s in fw.slots if s.expert is None]
        routed = iter(self.router.route_many([slot_text(s) for s in open_slots]) if open_slots else [])
        return [s.expert if s.expert is not None else next(routed).expert for s in fw.slots]


def _matches(item: dict[str, Any], text: str) -> bool:
    return any(p.search(text) for p in item["patterns"].values())


def _ratio(rows: list[dict[str, Any]], part: str, whole: str) -> float:
    return round(sum(r[part] for r in rows) / max(1, sum(r[whole] for r in rows)), 4)


def score_plan(item: dict[str, Any], fw: Framework) -> tuple[int, int, int, int]:
    """(slots serving an aspect, slots, aspects covered, aspects)."""
    texts = [slot_text(s) for s in fw.slots]
    serving = sum(_matches(item, t) for t in texts)
    covered = sum(any(p.search(t) for t in texts) for p in item["patterns"].values())
    return serving, len(texts), covered, len(item["patterns"])


def evaluate(items: list[dict[str, Any]], planner: Planner, *, verbose: bool = True) -> dict[str, Any]:
    """Run the pipeline over the set; per-task rows and the summary."""
    rows = []
    for item in items:
        task = item["task"]
        t0 = time.perf_counter()
        kind = planner.scope(task)
        scope_seconds = time.perf_counter() - t0
        row: dict[str, Any] = {
            "id": item["id"],
            "scope": item["scope"],
            "predicted": kind,
            "scope_seconds": round(scope_seconds, 3),
        }
        if (reading := planner.readings.get(task)) is not None:
            row["reading"] = {"answer": reading.answer, "seconds": round(reading.seconds, 2), "detail": reading.detail}
        plan_info: dict[str, Any] | None = None
        if kind == "trivial":
            experts: list[str] = []
        elif kind == "multi":
            fw, plan_info = planner.plan(task)
            experts = planner.route(fw)
        else:
            experts = planner.route(fallback_framework(task))
        row["experts"] = experts
        row["must_use_ok"] = all(e in experts for e in item["must_use"])
        row["must_not_used"] = sorted(set(experts) & set(item["must_not_use"]))
        if item["scope"] == "multi":
            if plan_info is None:  # the scope said otherwise: plan it anyway to judge the plan itself
                fw, plan_info = planner.plan(task)
            serving, slots, covered, aspects = score_plan(item, fw)
            row.update(
                plan=plan_info,
                slots=[f"{s.title} [{e}]" for s, e in zip(fw.slots, planner.route(fw), strict=True)],
                slots_serving=serving,
                slot_count=slots,
                aspects_covered=covered,
                aspect_count=aspects,
                unserving=[s.title for s in fw.slots if not _matches(item, slot_text(s))],
                uncovered=[n for n, p in item["patterns"].items() if not any(p.search(slot_text(s)) for s in fw.slots)],
                plan_seconds=round(scope_seconds + plan_info["seconds"], 3),
            )
        rows.append(row)
        if verbose:
            extra = (
                f" slots {row['slots_serving']}/{row['slot_count']} aspects {row['aspects_covered']}/"
                f"{row['aspect_count']} {row['plan_seconds']:.1f}s"
                if "slot_count" in row
                else ""
            )
            print(f"{item['id']:<20} {item['scope']:<7} -> {kind:<7}{extra} {row['must_not_used'] or ''}", flush=True)
    return {"rows": rows, "summary": summarise(rows)}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    multi = [r for r in rows if "slot_count" in r]
    with_must = [r for r in rows if r["must_use_ok"] is not None]
    times = [r["plan_seconds"] for r in multi]
    return {
        "tasks": len(rows),
        "scope_accuracy": round(sum(r["scope"] == r["predicted"] for r in rows) / len(rows), 4),
        "scope_confusions": {
            f"{r['scope']}->{r['predicted']}": sum(
                1 for x in rows if (x["scope"], x["predicted"]) == (r["scope"], r["predicted"])
            )
            for r in rows
            if r["scope"] != r["predicted"]
        },
        "slot_precision": _ratio(multi, "slots_serving", "slot_count"),
        "aspect_recall": _ratio(multi, "aspects_covered", "aspect_count"),
        "must_use_accuracy": round(sum(r["must_use_ok"] for r in with_must) / max(1, len(with_must)), 4),
        "plans_with_must_not_use": sum(bool(r["must_not_used"]) for r in rows),
        "plan_seconds_p50": round(percentile(times, 50), 2) if times else None,
        "plan_seconds_p90": round(percentile(times, 90), 2) if times else None,
        "slots_per_multi_plan": round(sum(r["slot_count"] for r in multi) / max(1, len(multi)), 2),
        "singles_one_slot": _share(rows, "single"),
        "singles_one_part": one_part(rows),
        "multis_planned": _share(rows, "multi"),
        "scope_seconds_p90": round(percentile([r["scope_seconds"] for r in rows], 90), 2),
        "readings": {a: sum(r.get("reading", {}).get("answer") == a for r in rows) for a in ("one", "several", "none")},
    }


def one_part(rows: list[dict[str, Any]]) -> float | None:
    """The share of single-labelled tasks a run answers in one part: scoped single, a plan of one slot, or a
    direct answer (scoped trivial). A plan of one slot is one part to the reader, whatever the scope said."""
    labelled = [r for r in rows if r["scope"] == "single"]
    return round(sum(len(r["experts"]) <= 1 for r in labelled) / len(labelled), 4) if labelled else None


def _share(rows: list[dict[str, Any]], scope: str) -> float | None:
    """The share of ``scope``-labelled tasks predicted as labelled (a single one slot, a multi a plan)."""
    labelled = [r for r in rows if r["scope"] == scope]
    return round(sum(r["predicted"] == scope for r in labelled) / len(labelled), 4) if labelled else None


def sweep(items: list[dict[str, Any]], planner: Planner) -> list[dict[str, Any]]:
    """Slot precision, aspect recall and must-not-use plans of the multi tasks, without the planner, over a grid of
    the lines."""
    saved = (planning.RELEVANCE_LINE, planning.COVERAGE_LINE, planning.TEMPLATE_FIT_LINE)
    multi = [i for i in items if i["scope"] == "multi"]
    out = []
    try:
        for fit_line in (0.0, 0.4, 0.45, 0.5):
            for relevance in (0.0, 0.3, 0.35, 0.4, 0.45):
                for coverage in (0.0, 0.4, 0.45, 0.5):
                    planning.RELEVANCE_LINE, planning.COVERAGE_LINE = relevance, coverage
                    planning.TEMPLATE_FIT_LINE = fit_line
                    counts = [0, 0, 0, 0]
                    must_not = 0
                    for item in multi:
                        fw, _ = planner.plan(item["task"])
                        counts = [a + b for a, b in zip(counts, score_plan(item, fw), strict=True)]
                        must_not += bool(set(planner.route(fw)) & set(item["must_not_use"]))
                    out.append(
                        {
                            "template_fit_line": fit_line,
                            "relevance_line": relevance,
                            "coverage_line": coverage,
                            "slot_precision": round(counts[0] / counts[1], 4),
                            "aspect_recall": round(counts[2] / counts[3], 4),
                            "slots": counts[1],
                            "plans_with_must_not_use": must_not,
                        }
                    )
    finally:
        planning.RELEVANCE_LINE, planning.COVERAGE_LINE, planning.TEMPLATE_FIT_LINE = saved
    return out


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--planner", default=None, help="planner model (default: planner_model; 'none': no planner)")
    parser.add_argument("--plan-seconds", type=float, default=None, help="the planner's time (default: plan_seconds)")
    parser.add_argument("--ids", default=None, help="comma-separated task ids (default: all)")
    parser.add_argument(
        "--scope-reading",
        choices=("on", "off"),
        default="on",
        help="the planner model's second reading of a plan's scope, as in a run (default: on; off: the rules alone)",
    )
    parser.add_argument("--sweep", action="store_true", help="also score a grid of the plan lines without the planner")
    parser.add_argument("--name", default="planning")
    parser.add_argument(
        "--set", type=Path, default=SET, help="the labelled set (default: bench/data/planning_set.yaml)"
    )
    args = parser.parse_args(argv)
    settings = resolve_settings({"backend": "fake" if args.quick else "llama"}, env={})
    no_planner = args.planner == "none"
    model = None if no_planner else (args.planner or settings.planner_model)
    seconds = 0.0 if no_planner else (args.plan_seconds if args.plan_seconds is not None else settings.plan_seconds)
    items = load_set(args.set)
    ids = QUICK_IDS if args.quick else (tuple(args.ids.split(",")) if args.ids else None)
    if ids is not None:
        items = [i for i in items if i["id"] in ids]
    # As the graph's scope: read again only by the planner model itself, never by the base model in its place
    reads = args.scope_reading == "on" and settings.scope_reading and planner_model(settings).problem is None
    reading_model = settings.planner_model if reads else None
    planner = Planner(settings, model, seconds, reading_model)
    result = evaluate(items, planner)
    s = result["summary"]
    lines = [
        f"{s['tasks']} tasks of {args.set.name}; planner {model or 'none'} within {seconds:g} s; scope reading by "
        f"{reading_model or 'none'}; lines: template fit "
        f"{planning.TEMPLATE_FIT_LINE}, relevance {planning.RELEVANCE_LINE}, coverage {planning.COVERAGE_LINE}.",
        "",
        md_table(
            ["measure", "value", "goal"],
            [
                ["scope accuracy", s["scope_accuracy"], ">= 0.95"],
                ["single-deliverable tasks scoped single", s["singles_one_slot"], ">= 0.95"],
                ["single-deliverable tasks run as one part (one slot or a direct answer)", s["singles_one_part"], ""],
                ["multi tasks planned", s["multis_planned"], ""],
                ["planner readings: one / several / none", "{one} / {several} / {none}".format(**s["readings"]), ""],
                ["time to scope p90 (s)", s["scope_seconds_p90"], ""],
                ["slot precision (multi tasks)", s["slot_precision"], ">= 0.95"],
                ["aspect recall (multi tasks)", s["aspect_recall"], ">= 0.95"],
                ["must-use accuracy", s["must_use_accuracy"], "1.0"],
                ["plans with a must-not-use expert", s["plans_with_must_not_use"], "0"],
                ["time to plan p50 (s)", s["plan_seconds_p50"], ""],
                ["time to plan p90 (s)", s["plan_seconds_p90"], "< 30"],
                ["slots per multi plan", s["slots_per_multi_plan"], ""],
            ],
        ),
        "",
        f"Scope confusions (label->predicted): {s['scope_confusions'] or 'none'}.",
        "",
        md_table(
            ["task", "slots serving / slots", "aspects covered", "uncovered", "slots serving nothing"],
            [
                [
                    r["id"],
                    f"{r['slots_serving']}/{r['slot_count']}",
                    f"{r['aspects_covered']}/{r['aspect_count']}",
                    ", ".join(r["uncovered"]),
                    "; ".join(r["unserving"]),
                ]
                for r in result["rows"]
                if "slot_count" in r
            ],
        ),
    ]
    payload = {"planner": model, "plan_seconds": seconds, "scope_reading": reading_model, "quick": args.quick, **result}
    if args.sweep:
        grid = sweep(items, Planner(settings, None, 0.0))
        payload["sweep"] = grid
        write_results(
            f"{args.name}_sweep",
            {"grid": grid},
            md_table(list(grid[0]), [list(g.values()) for g in grid]),
            directory=args.out,
        )
    write_results(args.name, payload, "\n".join(lines) + "\n", directory=args.out)
    print("\n".join(lines[:3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
