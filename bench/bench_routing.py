"""Routing benchmark: calibration on the dev split, accuracy on the test split, latency and start-up.

Run: ``python -m bench.bench_routing`` (``--skip-startup`` for the accuracy part only). Writes
``bench/results/routing.{json,md}``.

1. **Calibration** on the dev split of ``bench/data/routing_eval.yaml`` plus the scope authors' probe sentences
   (``bench/data/routing_probes.tsv``): a grid over lambda, the tie margin and the capability and exclusion
   top-k; the best calibration accuracy wins (ties: more dev trap accuracy, then lambda nearest the seed's
   0.3, then the tie margin nearest 0.15). Then the low-confidence threshold: the middle of the widest interval
   of thresholds that keep that accuracy.
2. **Accuracy** (test split, never used for calibration): top-1 overall and on keyword traps, for lambda = 0
   (capability only) and for the chosen lambda with the other settings equal; also for the seed's defaults
   (lambda 0.3, tie margin 0.15); confusion pairs and every miss.
3. **Latency**: routing one chunk including its embedding (p50/p99 over the test texts, repeated), and a batch
   of 8 (p50/p99 per batch and per chunk), on the CPU.
4. **Start-up** (fresh processes): importing and loading the router with a warm cache and with a cold cache
   (an empty cache directory: every scope line is embedded), and ``coe route TEXT`` as a whole process (warm).
5. **Embedding backends**: the NumPy encoder vs sentence-transformers (when installed, ``pip install -e
   ".[reference]"``): import + load time in a fresh process, one-query latency, and the largest difference
   between their vectors on the evaluation texts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.common import write_results
from experts.router import ExpertRouter, RouterParams, get_router, instruction_head

DATA = Path(__file__).resolve().parent / "data" / "routing_eval.yaml"
PROBES = Path(__file__).resolve().parent / "data" / "routing_probes.tsv"
"""Calibration sentences written by the scopes' authors while writing them (expert<TAB>text; no trap labels)."""
ROOT = Path(__file__).resolve().parents[1]

LAMBDAS = [round(x * 0.1, 1) for x in range(0, 11)]
MARGINS = [0.0, 0.01, 0.02, 0.03, 0.05, 0.1, 0.15]
CAP_TOP_K = [1, 2, 3, 4]
HEAD_WEIGHTS = [0.0, 0.1, 0.15, 0.2, 0.3]
HEAD_GAPS = [0.03, 0.05, 0.1, 1.0]
EXC_TOP_K = [1, 2]


def load_items() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load(DATA.read_text(encoding="utf-8"))["items"]
    return items


def load_probes() -> list[dict[str, Any]]:
    rows = []
    for line in PROBES.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            expert, text = line.split("\t", 1)
            rows.append({"text": text.strip(), "expert": expert.strip(), "trap": False, "split": "probe"})
    return rows


def head_vectors(router: ExpertRouter, items: list[dict[str, Any]], vectors: np.ndarray) -> np.ndarray:
    """Each text's instruction-head embedding (its own embedding when it has no head)."""
    heads = {i: instruction_head(it["text"]) for i, it in enumerate(items)}
    rows = [i for i, h in heads.items() if h is not None]
    out = vectors.copy()
    if rows:
        out[rows] = router.embedder.encode([str(heads[i]) for i in rows])
    return out


def accuracy(
    router: ExpertRouter, vectors: tuple[np.ndarray, np.ndarray], items: list[dict[str, Any]]
) -> dict[str, Any]:
    results = router.route_vectors(*vectors)
    ok = [r.expert == it["expert"] for r, it in zip(results, items, strict=True)]
    traps = [o for o, it in zip(ok, items, strict=True) if it["trap"]]
    misses = [
        {
            "text": it["text"],
            "want": it["expert"],
            "got": r.expert,
            "trap": it["trap"],
            "rule": r.rule,
            "score": r.score,
            "want_score": r.scores[it["expert"]],
        }
        for r, it, o in zip(results, items, ok, strict=True)
        if not o
    ]
    return {
        "n": len(ok),
        "accuracy": round(sum(ok) / len(ok), 4),
        "traps_n": len(traps),
        "trap_accuracy": round(sum(traps) / len(traps), 4) if traps else None,
        "fallbacks": sum(r.fallback for r in results),
        "tie_rule_applied": sum(r.rule == "tie_prefers_task_type" for r in results),
        "second_looks": sum(r.head is not None for r in results),
        "confusion": Counter(f"{m['want']} -> {m['got']}" for m in misses).most_common(),
        "misses": misses,
    }


def calibrate(
    router: ExpertRouter, vectors: tuple[np.ndarray, np.ndarray], items: list[dict[str, Any]]
) -> dict[str, Any]:
    grid = []
    for lam, margin, cap_k, exc_k in itertools.product(LAMBDAS, MARGINS, CAP_TOP_K, EXC_TOP_K):
        params = RouterParams(
            lam=lam, threshold=-1.0, tie_margin=margin, cap_top_k=cap_k, exc_top_k=exc_k, head_weight=0.0
        )
        acc = accuracy(router.with_params(params), vectors, items)
        grid.append(
            {
                "lam": lam,
                "tie_margin": margin,
                "cap_top_k": cap_k,
                "exc_top_k": exc_k,
                "accuracy": acc["accuracy"],
                "trap_accuracy": acc["trap_accuracy"],
            }
        )
    best = max(
        grid,
        key=lambda g: (g["accuracy"], g["trap_accuracy"], -abs(g["lam"] - 0.3), -abs(g["tie_margin"] - 0.15)),
    )
    params = RouterParams(
        lam=best["lam"],
        threshold=-1.0,
        tie_margin=best["tie_margin"],
        cap_top_k=best["cap_top_k"],
        exc_top_k=best["exc_top_k"],
        head_weight=0.0,
    )
    # stage 2: the second look at close calls (head weight and gap), the rest fixed
    head_grid = []
    for weight, gap in itertools.product(HEAD_WEIGHTS, HEAD_GAPS):
        p = RouterParams(**{**params.__dict__, "head_weight": weight, "head_gap": gap})
        acc = accuracy(router.with_params(p), vectors, items)
        head_grid.append(
            {
                "head_weight": weight,
                "head_gap": gap,
                "accuracy": acc["accuracy"],
                "trap_accuracy": acc["trap_accuracy"],
                "second_looks": acc["second_looks"],
            }
        )
    best_head = max(head_grid, key=lambda g: (g["accuracy"], g["trap_accuracy"], -g["second_looks"]))
    params = RouterParams(
        **{**params.__dict__, "head_weight": best_head["head_weight"], "head_gap": best_head["head_gap"]}
    )
    thresholds = [round(x * 0.01, 2) for x in range(0, 51)]
    accs = []
    for t in thresholds:
        p = RouterParams(**{**params.__dict__, "threshold": t})
        accs.append(accuracy(router.with_params(p), vectors, items)["accuracy"])
    top = max(accs)
    # the widest run of consecutive thresholds at the top accuracy; take its middle
    runs, start = [], None
    for i, a in enumerate([*accs, -1.0]):
        if a == top and start is None:
            start = i
        elif a != top and start is not None:
            runs.append((start, i - 1))
            start = None
    lo, hi = max(runs, key=lambda r: r[1] - r[0])
    threshold = round((thresholds[lo] + thresholds[hi]) / 2, 2)
    chosen = {**best, **best_head, "threshold": threshold}
    best_at_lambda0 = max((g for g in grid if g["lam"] == 0.0), key=lambda g: (g["accuracy"], g["trap_accuracy"]))
    return {
        "chosen": chosen,
        "dev_threshold_curve": dict(zip(thresholds, accs, strict=True)),
        "best_dev_at_lambda_0": best_at_lambda0,
        "grid_size": len(grid),
        "head_grid": head_grid,
        "top_grid": sorted(grid, key=lambda g: (-g["accuracy"], -(g["trap_accuracy"] or 0)))[:15],
    }


def percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples), q))


def latency(router: ExpertRouter, texts: list[str], reps: int) -> dict[str, Any]:
    for t in texts[:5]:
        router.route(t)  # warm-up
    single = []
    for _ in range(reps):
        for t in texts:
            t0 = time.perf_counter()
            router.route(t)
            single.append((time.perf_counter() - t0) * 1000)
    batches = []
    for _ in range(reps):
        for i in range(0, len(texts) - 7, 8):
            t0 = time.perf_counter()
            router.route_many(texts[i : i + 8])
            batches.append((time.perf_counter() - t0) * 1000)
    embed_only = []
    for t in texts:
        t0 = time.perf_counter()
        router.embedder.encode([t])
        embed_only.append((time.perf_counter() - t0) * 1000)
    return {
        "single_ms": {"p50": percentile(single, 50), "p99": percentile(single, 99), "n": len(single)},
        "single_embedding_only_ms_p50": percentile(embed_only, 50),
        "batch8_ms": {"p50": percentile(batches, 50), "p99": percentile(batches, 99), "n": len(batches)},
        "batch8_per_chunk_ms_p50": percentile(batches, 50) / 8,
        "text_words": {"min": min(len(t.split()) for t in texts), "max": max(len(t.split()) for t in texts)},
    }


def _python(code: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


LOAD_ROUTER = """
import json, time
t0 = time.perf_counter()
from experts.router import get_router
t1 = time.perf_counter()
r = get_router()
t2 = time.perf_counter()
r.route("Write a Python script that analyses medical records")
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_route_s": t3 - t2, "total_s": t3 - t0,
                  "built": r.index.built}))
"""

BACKEND_LOAD = """
import json, sys, time
t0 = time.perf_counter()
from experts.embedding import get_embedder
e = get_embedder(sys.argv[1] if len(sys.argv) > 1 else "{backend}")
t1 = time.perf_counter()
e.encode(["warm up"])
samples = []
for _ in range(30):
    s = time.perf_counter(); e.encode(["Write a Python script that analyses medical records from a HIPAA database"])
    samples.append(time.perf_counter() - s)
samples.sort()
print(json.dumps({{"import_and_load_s": t1 - t0, "query_ms_p50": samples[15] * 1000}}))
"""


def startup(reps: int) -> dict[str, Any]:
    warm = [_python(LOAD_ROUTER) for _ in range(reps)]
    assert not any(w["built"] for w in warm), "the warm-cache runs rebuilt the index"
    cold = []
    for _ in range(max(1, reps // 2)):
        with tempfile.TemporaryDirectory() as empty:
            cold.append(_python(LOAD_ROUTER, {"COE_EXPERT_EMBEDDINGS": empty}))
    assert all(c["built"] for c in cold)
    cli = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "cli", "route", "Write a Python script that analyses medical records", "--json"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=600,
        )
        cli.append(time.perf_counter() - t0)

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    return {
        "warm": {k: med(warm, k) for k in ("import_s", "load_s", "first_route_s", "total_s")},
        "cold": {k: med(cold, k) for k in ("import_s", "load_s", "first_route_s", "total_s")},
        "coe_route_process_s": {"median": statistics.median(cli), "max": max(cli), "n": len(cli)},
        "raw": {"warm": warm, "cold": cold, "coe_route": cli},
    }


def backends(texts: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {b: _python(BACKEND_LOAD.format(backend=b)) for b in ("onnx", "numpy")}
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        out["sentence-transformers"] = "not installed (pip install -e '.[reference]')"
        return out
    out["sentence-transformers"] = _python(BACKEND_LOAD.format(backend="sentence-transformers"))
    from experts.embedding import get_embedder

    ref = get_embedder("sentence-transformers").encode(texts)
    for name in ("onnx", "numpy"):
        vec = get_embedder(name).encode(texts)
        out[f"{name}_vs_reference"] = {
            "max_abs_difference": float(np.abs(vec - ref).max()),
            "min_cosine": float((vec * ref).sum(axis=1).min()),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="repetitions for latency and start-up")
    parser.add_argument("--skip-startup", action="store_true")
    args = parser.parse_args()

    items = load_items()
    dev = [i for i in items if i["split"] == "dev"] + load_probes()
    test = [i for i in items if i["split"] == "test"]
    router = get_router()
    dev_full = router.embedder.encode([i["text"] for i in dev])
    test_full = router.embedder.encode([i["text"] for i in test])
    dev_vecs = (dev_full, head_vectors(router, dev, dev_full))
    test_vecs = (test_full, head_vectors(router, test, test_full))

    cal = calibrate(router, dev_vecs, dev)
    c = cal["chosen"]
    chosen = RouterParams(
        lam=c["lam"],
        threshold=c["threshold"],
        tie_margin=c["tie_margin"],
        cap_top_k=c["cap_top_k"],
        exc_top_k=c["exc_top_k"],
        head_weight=c["head_weight"],
        head_gap=c["head_gap"],
    )
    lam0 = RouterParams(**{**chosen.__dict__, "lam": 0.0})
    no_head = RouterParams(**{**chosen.__dict__, "head_weight": 0.0})
    seed = RouterParams(**{**chosen.__dict__, "lam": 0.3, "tie_margin": 0.15})
    no_tie = RouterParams(**{**chosen.__dict__, "tie_margin": 0.0})
    current = router.params
    evaluation = {
        "chosen": accuracy(router.with_params(chosen), test_vecs, test),
        "lambda_0": accuracy(router.with_params(lam0), test_vecs, test),
        "seed_defaults_lambda_0.3_margin_0.15": accuracy(router.with_params(seed), test_vecs, test),
        "chosen_without_tie_rule": accuracy(router.with_params(no_tie), test_vecs, test),
        "chosen_without_second_look": accuracy(router.with_params(no_head), test_vecs, test),
        "shipped_defaults": accuracy(router, test_vecs, test),
    }
    lat = latency(router.with_params(chosen), [i["text"] for i in test], args.reps)
    start = None if args.skip_startup else startup(args.reps)
    emb = None if args.skip_startup else backends([i["text"] for i in items])

    payload = {
        "data": {
            "file": str(DATA.relative_to(ROOT)),
            "calibration": len(dev),
            "test": len(test),
            "test_traps": sum(i["trap"] for i in test),
        },
        "catalog": {
            "experts": list(router.index.expert_ids),
            "capability_lines": len(router.index.capability.texts),
            "exclusion_lines": len(router.index.exclusion.texts),
            "embedder": router.embedder.model_id,
            "embed_backend": router.embedder.backend,
        },
        "shipped_params": current.__dict__,
        "calibration": cal,
        "test": evaluation,
        "latency": lat,
        "startup": start,
        "embedding_backends": emb,
    }
    md = [
        f"Calibration: {len(dev)} texts (dev split + scope authors' probes); held-out test: {len(test)} texts "
        f"({payload['data']['test_traps']} keyword traps). Catalog: {len(router.index.expert_ids)} experts, "
        f"{payload['catalog']['capability_lines']} capability and {payload['catalog']['exclusion_lines']} "
        f"exclusion lines, {router.embedder.model_id} ({router.embedder.backend} backend).",
        "",
        f"Calibrated: lambda {c['lam']}, tie margin {c['tie_margin']}, capability top-k {c['cap_top_k']}, "
        f"exclusion top-k {c['exc_top_k']}, second look weight {c['head_weight']} under gap {c['head_gap']}, "
        f"threshold {c['threshold']} (calibration accuracy {c['accuracy']:.3f}, "
        f"dev traps {c['trap_accuracy']:.3f}). Shipped defaults: {current.__dict__}.",
        "",
        f"Best calibration accuracy with lambda 0: {cal['best_dev_at_lambda_0']['accuracy']:.3f} "
        f"({cal['best_dev_at_lambda_0']}).",
        "",
        "| test split | accuracy | on traps | fallbacks | tie rule applied | second looks |",
        "|---|---|---|---|---|---|",
    ]
    for name, acc in evaluation.items():
        md.append(
            f"| {name} | {acc['accuracy']:.3f} ({acc['n']}) | {acc['trap_accuracy']:.3f} ({acc['traps_n']}) | "
            f"{acc['fallbacks']} | {acc['tie_rule_applied']} | {acc['second_looks']} |"
        )
    md += [
        "",
        "Confusion (chosen): " + (", ".join(f"{k} x{v}" for k, v in evaluation["chosen"]["confusion"]) or "none"),
    ]
    md += [
        "",
        "Confusion (lambda 0): " + (", ".join(f"{k} x{v}" for k, v in evaluation["lambda_0"]["confusion"]) or "none"),
    ]
    md += [
        "",
        f"Latency (chosen parameters, {lat['text_words']['min']}-{lat['text_words']['max']} words per text): "
        f"one chunk incl. embedding p50 {lat['single_ms']['p50']:.2f} ms, p99 {lat['single_ms']['p99']:.2f} ms "
        f"(embedding alone p50 {lat['single_embedding_only_ms_p50']:.2f} ms); batch of 8 p50 "
        f"{lat['batch8_ms']['p50']:.2f} ms, p99 {lat['batch8_ms']['p99']:.2f} ms "
        f"({lat['batch8_per_chunk_ms_p50']:.2f} ms per chunk).",
    ]
    if start is not None:
        md += [
            "",
            f"Start-up (fresh process, median of {args.reps}): warm cache {start['warm']['total_s']:.2f} s "
            f"(import {start['warm']['import_s']:.2f}, load {start['warm']['load_s']:.2f}, first route "
            f"{start['warm']['first_route_s']:.3f}); cold cache {start['cold']['total_s']:.2f} s "
            f"(load incl. embedding every scope line {start['cold']['load_s']:.2f}); `coe route` whole process "
            f"{start['coe_route_process_s']['median']:.2f} s (max {start['coe_route_process_s']['max']:.2f}).",
            "",
            f"Embedding backends: {json.dumps(emb)}",
        ]
    write_results("routing", payload, "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
