"""Routing as the catalog grows: accuracy at 12 and 42 experts, routing time at 12, 42 and 100, time to add one.

The catalog starts as the twelve shipped experts; the thirty experts of ``bench/data/catalog/user30`` (written
by a helper as a user would, from their own capability lists) are then added one at a time with
``experts.catalog.add_expert``, as ``coe experts add`` adds them, then the fifty-eight of
``bench/data/catalog/more58``. Measured:

* accuracy (top-1) on the 42-expert routing sets: ``routing_catalog42_heldout.yaml`` (written by a second
  helper who read only the experts' one-line summaries, never tuned on) and ``routing_catalog42_dev.yaml``;
* accuracy on the existing routing sets (the test split of ``routing_eval.yaml``, ``routing_heldout2.yaml``,
  ``routing_heldout3.yaml``), labelled with shipped experts, at 12 and at 42 experts: what adding thirty
  experts costs the routing of the work the shipped experts do. Scored twice: against the original labels, and
  with the labels a blind helper gave the same texts for the 42-expert catalog (``routing_existing_labels42.yaml``:
  a text routed to the added expert the helper named for it counts as right, since that expert is now the best
  one for it; the helper's picks among the shipped experts always matched the original labels);
* the time to add one expert (copy, check, and the router's index rebuilt for it: its lines embedded, the
  others' read from the per-expert cache, the learned term's added layer fitted again, its shipped layer read
  from its cache) and the p50 time to route one text, warm, at 12, 42 and 100 experts.

``python -m bench.bench_catalog`` writes ``bench/results/catalog.{json,md}``; ``--quick`` adds two experts and
routes a few texts (a test of the bench, not a measurement).
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.common import bench_parser, environment, md_table, median, percentile, write_results
from experts.catalog.scopes import load_shipped

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
USER30 = DATA / "catalog" / "user30"
MORE58 = DATA / "catalog" / "more58"
HELDOUT42 = DATA / "routing_catalog42_heldout.yaml"
DEV42 = DATA / "routing_catalog42_dev.yaml"
LABELS42 = DATA / "routing_existing_labels42.yaml"
EXISTING = {
    "routing_eval (test split)": DATA / "routing_eval.yaml",
    "routing_heldout2": DATA / "routing_heldout2.yaml",
    "routing_heldout3": DATA / "routing_heldout3.yaml",
}


def load_set(path: Path, split: str | None = None) -> list[dict[str, Any]]:
    """The items of a routing set (only ``split``'s when given), each with its 42-catalog labels if it has some.

    ``labels42``: the experts a blind helper named for the text in the 42-expert catalog
    (:data:`LABELS42`; checked against the text, so a set edited since is noticed).
    """
    items: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))["items"]
    relabelled = {(r["set"], r["index"]): r for r in yaml.safe_load(LABELS42.read_text(encoding="utf-8"))["labels"]}
    for index, item in enumerate(items):
        row = relabelled.get((path.stem, index))
        if row is not None:
            if row["text"] != item["text"]:
                raise ValueError(f"{LABELS42}: {path.stem} item {index} is not the text it labels")
            item["labels42"] = [e for e in (row["expert"], row["also"]) if e]
    return [i for i in items if split is None or i.get("split") == split]


def score(router: Any, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Top-1 accuracy over the items whose expert is in the router's catalog, overall and on keyword traps."""
    known = [i for i in items if i["expert"] in router.index.expert_ids]
    results = router.route_many([i["text"] for i in known]) if known else []
    right = [r.expert == i["expert"] for r, i in zip(results, known, strict=True)]
    traps = [ok for ok, i in zip(right, known, strict=True) if i.get("trap")]
    misses = Counter(f"{i['expert']} -> {r.expert}" for r, i, ok in zip(results, known, right, strict=True) if not ok)
    shipped = set(load_shipped().ids)
    relabelled = [
        ok or (r.expert in i.get("labels42", []) and r.expert not in shipped)
        for r, i, ok in zip(results, known, right, strict=True)
    ]
    return {
        "texts": len(known),
        "left_out": len(items) - len(known),
        "accuracy": round(sum(right) / len(known), 4) if known else None,
        "accuracy_labels42": round(sum(relabelled) / len(known), 4)
        if known and any("labels42" in i for i in known)
        else None,
        "traps": len(traps),
        "trap_accuracy": round(sum(traps) / len(traps), 4) if traps else None,
        "fallbacks": sum(r.fallback for r in results),
        "misses": dict(misses.most_common()),
        "missed": [
            {"text": i["text"], "label": i["expert"], "routed": r.expert, "trap": bool(i.get("trap"))}
            for r, i, ok in zip(results, known, right, strict=True)
            if not ok
        ],
    }


def route_times(router: Any, texts: list[str]) -> dict[str, float]:
    """Milliseconds to route one text, warm (the first stage built, a warm-up pass first)."""
    for text in texts[:5]:
        router.route(text)
    samples = []
    for text in texts:
        t0 = time.perf_counter()
        router.route(text)
        samples.append((time.perf_counter() - t0) * 1000)
    return {"p50": round(percentile(samples, 50), 2), "p90": round(percentile(samples, 90), 2), "n": len(samples)}


def add_timed(directory: Path) -> dict[str, float]:
    """Add one expert and build the router for the grown catalog; seconds for each step."""
    from experts.catalog import add_expert, load_catalog
    from experts.routing.router import get_router

    t0 = time.perf_counter()
    add_expert(directory)
    t1 = time.perf_counter()
    router = get_router(catalog=load_catalog())
    t2 = time.perf_counter()
    router.route("Write a function that parses a date")  # builds the static first stage for the new catalog
    t3 = time.perf_counter()
    return {
        "add_s": round(t1 - t0, 3),
        "index_s": round(t2 - t1, 3),
        "first_stage_s": round(t3 - t2, 3),
        "total_s": round(t3 - t0, 3),
        "embedded_experts": router.index.embedded_experts,
    }


def stage(label: str, items: dict[str, list[dict[str, Any]]], texts: list[str]) -> dict[str, Any]:
    """Accuracy on every set and routing time with the current catalog."""
    from experts.catalog import load_catalog
    from experts.routing.router import get_router

    router = get_router(catalog=load_catalog())
    return {
        "label": label,
        "experts": len(router.index.expert_ids),
        "router": router.version,
        "route_ms": route_times(router, texts),
        "sets": {name: score(router, set_items) for name, set_items in items.items()},
    }


def run(quick: bool) -> dict[str, Any]:
    """Grow the catalog from 12 to 42 to 100 experts in a fresh COE_HOME and index cache, measuring each stage."""
    sets = {
        "catalog42 held-out": load_set(HELDOUT42),
        "catalog42 dev": load_set(DEV42),
        **{name: load_set(path, "test" if "eval" in name else None) for name, path in EXISTING.items()},
    }
    user = sorted(p for p in USER30.iterdir() if p.is_dir())
    more = sorted(p for p in MORE58.iterdir() if p.is_dir())
    if quick:
        user, more = user[:2], more[:1]
        sets = {name: items[:6] for name, items in sets.items()}
    texts = [i["text"] for i in sets["catalog42 held-out"]] + [i["text"] for i in sets["routing_heldout3"]]
    with (
        tempfile.TemporaryDirectory(prefix="coe-bench-catalog-") as tmp,
        environment(COE_HOME=str(Path(tmp) / "home"), COE_EXPERT_EMBEDDINGS=str(Path(tmp) / "index")),
    ):
        return _grow(sets, user, more, texts, quick)


def _grow(
    sets: dict[str, list[dict[str, Any]]], user: list[Path], more: list[Path], texts: list[str], quick: bool
) -> dict[str, Any]:
    stages: list[dict[str, Any]] = []
    adds: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    stages.append(stage("shipped", sets, texts))
    cold = time.perf_counter() - t0
    for directory in user:
        adds.append({"expert": directory.name, "to": 13 + len(adds), **add_timed(directory)})
    stages.append(stage("shipped + user30", sets, texts))
    for directory in more:
        adds.append({"expert": directory.name, "to": 13 + len(adds), **add_timed(directory)})
    stages.append(stage("shipped + user30 + more58", sets, texts))
    return {"quick": quick, "cold_start_s": round(cold, 2), "stages": stages, "adds": adds}


def summarise(result: dict[str, Any]) -> str:
    stages, adds = result["stages"], result["adds"]
    names = list(stages[0]["sets"])
    rows = []
    for s in stages:
        cells = []
        for name in names:
            sc = s["sets"][name]
            relabelled = "" if sc.get("accuracy_labels42") is None else f" / {sc['accuracy_labels42']:.3f}"
            cells.append("-" if sc["accuracy"] is None else f"{sc['accuracy']:.3f}{relabelled} ({sc['texts']})")
        rows.append([s["experts"], s["router"], f"{s['route_ms']['p50']:.1f}", *cells])
    table = md_table(["experts", "router", "route ms p50", *[f"{n} (texts)" for n in names]], rows)
    by_size = []
    for lo, hi in ((13, 42), (43, 100)):
        part = [a for a in adds if lo <= a["to"] <= hi]
        if part:
            by_size.append(
                [
                    f"{lo}-{hi}",
                    len(part),
                    f"{median(a['total_s'] for a in part):.2f}",
                    f"{median(a['index_s'] for a in part):.2f}",
                    f"{median(a['first_stage_s'] for a in part):.2f}",
                    f"{median(a['add_s'] for a in part):.3f}",
                    ", ".join(sorted({str(a["embedded_experts"]) for a in part})),
                ]
            )
    adds_table = md_table(
        ["catalog grows to", "adds", "s per add p50", "index s", "first stage s", "copy+check s", "experts embedded"],
        by_size,
    )
    held = next((s for s in stages if s["experts"] == 42), stages[-1])["sets"]["catalog42 held-out"]
    misses = "\n".join(f"- {k}: {v}" for k, v in held["misses"].items()) or "- none"
    return (
        f"Command: `python -m bench.bench_catalog{' --quick' if result['quick'] else ''}`. Accuracy is top-1 over the "
        "texts whose expert is in the catalog (so the 42-expert sets count only their shipped experts' texts at 12). "
        "The existing sets show two figures: the original labels / counting a text routed to the added expert a blind "
        "helper named for it in the 42-expert catalog (routing_existing_labels42.yaml; at 100 experts the 58 later "
        "ones have no such labels). "
        f"First router (12 experts, nothing cached): {result['cold_start_s']} s.\n\n{table}\n\n"
        f"Time to add one expert (copy and check, the router's index rebuilt, its static first stage rebuilt):\n\n"
        f"{adds_table}\n\nMisses on the held-out 42-expert set at 42 experts (label -> routed):\n\n{misses}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    args = parser.parse_args(argv)
    result = run(args.quick)
    name = "catalog"
    json_path, md_path = write_results(name, result, f"# Routing as the catalog grows\n\n{summarise(result)}", args.out)
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
