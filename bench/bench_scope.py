"""Trivial-task detection benchmark: calibration of the margin and word limit, then precision and recall.

Run: ``python -m bench.bench_scope``. Writes ``bench/results/scope.{json,md}``.

Calibration on ``bench/data/trivial_calibration.yaml`` (written with the prototypes): the margin and maximum
word count with the best F1 (ties: the larger margin, the fewer words). Reported on
``bench/data/template_tasks.yaml``, written by someone who saw neither the prototypes nor the calibration
set: precision and recall on a balanced set (all 16 trivial tasks and 16 others, every 7th) and on all 133.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import yaml

from bench.common import write_results
from experts.catalog import config_dir, load_catalog
from experts.embedding import get_embedder
from experts.scope import MARGIN, MAX_WORDS, classify
from experts.template_index import load_or_build
from state.template import load_library

DATA = Path(__file__).resolve().parent / "data"


def score(rows: list[tuple[bool, bool]]) -> dict[str, float]:
    tp = sum(p and t for p, t in rows)
    fp = sum(p and not t for p, t in rows)
    fn = sum(t and not p for p, t in rows)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 3), "recall": round(recall, 3), "f1": round(f1, 3), "n": len(rows)}


def evaluate(items: list[dict[str, Any]], index: Any, margin: float, words: int) -> dict[str, float]:
    embedder = get_embedder()
    rows = [
        (classify(i["task"], embedder, index, margin=margin, max_words=words).kind == "trivial", bool(i["trivial"]))
        for i in items
    ]
    return score(rows)


def main() -> int:
    library = load_library([config_dir() / "framework_templates"], load_catalog().ids).templates
    index = load_or_build(library, get_embedder())
    calibration = yaml.safe_load((DATA / "trivial_calibration.yaml").read_text(encoding="utf-8"))["items"]
    grid = []
    for margin, words in itertools.product([-0.1, -0.05, 0.0, 0.02, 0.05, 0.1, 0.15, 0.2], [10, 12, 15, 20, 25]):
        grid.append({"margin": margin, "max_words": words, **evaluate(calibration, index, margin, words)})
    best = max(grid, key=lambda g: (g["f1"], g["margin"], -g["max_words"]))
    held = yaml.safe_load((DATA / "template_tasks.yaml").read_text(encoding="utf-8"))["items"]
    trivial = [i for i in held if i["trivial"]]
    others = [i for i in held if not i["trivial"]][::7][: len(trivial)]
    shipped = {"margin": MARGIN, "max_words": MAX_WORDS}
    results = {
        name: {
            "balanced": evaluate(trivial + others, index, p["margin"], p["max_words"]),
            "all": evaluate(held, index, p["margin"], p["max_words"]),
        }
        for name, p in (("calibrated", best), ("shipped", shipped))
    }
    payload = {"calibration": {"best": best, "grid": grid}, "held_out": results, "shipped": shipped}
    md = [
        f"Calibrated on {len(calibration)} sentences: margin {best['margin']}, max words {best['max_words']} "
        f"(F1 {best['f1']}). Shipped: margin {MARGIN}, max words {MAX_WORDS}.",
        "",
        "| parameters | set | precision | recall | F1 |",
        "|---|---|---|---|---|",
    ]
    for name, sets in results.items():
        for set_name, r in sets.items():
            label = f"{set_name} ({r['n']} tasks)"
            md.append(f"| {name} | {label} | {r['precision']} | {r['recall']} | {r['f1']} |")
    write_results("scope", payload, "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
