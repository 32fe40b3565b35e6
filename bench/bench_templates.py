"""Template search benchmark: latency at the real library size and at 100,000 templates, flat vs HNSW.

Run: ``python -m bench.bench_templates`` (``--synthetic N`` to change the large size). Writes
``bench/results/templates.{json,md}``.

* Real library: every valid template of ``config/framework_templates`` in the index the harness builds;
  search latency (one query, k=5) with the query already embedded, and the query embedding time on its own.
* Large library: N synthetic template vectors made from the real ones: a random mix of two real templates'
  vectors plus Gaussian noise, renormalised (spread over the region real templates occupy, not uniform random,
  whose neighbours would be meaningless). Queries are real task texts (the routing evaluation set), embedded
  once. For ``IndexFlatIP`` (exact) and ``IndexHNSWFlat`` (M and efConstruction of
  ``experts/routing/templates.py``, efSearch swept): build time, search p50/p99 and HNSW's recall@5 against the
  exact result.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.common import bench_parser, write_results
from experts.catalog import load_catalog
from experts.embedding import get_embedder
from experts.embedding.faiss_index import HNSW_EF_SEARCH, HNSW_M, build_faiss_index
from experts.routing.templates import load_or_build
from state.paths import config_dir
from state.template import load_library

QUERIES = Path(__file__).resolve().parent / "data" / "routing_eval.yaml"
LABELLED = Path(__file__).resolve().parent / "data" / "template_tasks.yaml"
EF_SEARCH = (64, 128, 256, 512, 1024)


def timed_searches(index: Any, queries: np.ndarray, k: int, reps: int) -> list[float]:
    for q in queries[:10]:
        index.search(q.reshape(1, -1), k)
    samples = []
    for _ in range(reps):
        for q in queries:
            row = q.reshape(1, -1)
            t0 = time.perf_counter()
            index.search(row, k)
            samples.append((time.perf_counter() - t0) * 1000)
    return samples


def stats(samples: list[float]) -> dict[str, float]:
    arr = np.array(samples)
    return {"p50_ms": float(np.percentile(arr, 50)), "p99_ms": float(np.percentile(arr, 99)), "n": len(samples)}


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--synthetic", type=int, default=100_000)
    parser.add_argument("--noise", type=float, default=0.02, help="per-dimension noise of synthetic vectors")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    if args.quick:  # a small synthetic library, one repetition
        args.synthetic, args.reps = 2_000, 1

    embedder = get_embedder()
    report = load_library([config_dir() / "framework_templates"], load_catalog().ids)
    if not report.templates:
        raise SystemExit("no valid templates in config/framework_templates")
    index = load_or_build(report.templates, embedder)
    texts = [i["text"] for i in yaml.safe_load(QUERIES.read_text(encoding="utf-8"))["items"]]
    embed_ms = []
    for t in texts:
        t0 = time.perf_counter()
        embedder.encode([t])
        embed_ms.append((time.perf_counter() - t0) * 1000)
    queries = embedder.encode(texts)
    real = stats(timed_searches(index.faiss_index, queries, 5, args.reps))

    labelled = [i for i in yaml.safe_load(LABELLED.read_text(encoding="utf-8"))["items"] if not i["trivial"]]
    found = index.search_vectors(embedder.encode([i["task"] for i in labelled]), 3)
    quality_rows = [
        {"task": i["task"], "fits": i["fits"], "top3": [(h.template_id, h.similarity) for h in hits]}
        for i, hits in zip(labelled, found, strict=True)
    ]
    top1 = sum(r["top3"][0][0] in r["fits"] for r in quality_rows) / len(quality_rows)
    top3 = sum(any(t in r["fits"] for t, _ in r["top3"]) for r in quality_rows) / len(quality_rows)
    best_fit_top1 = sum(r["top3"][0][0] == r["fits"][0] for r in quality_rows) / len(quality_rows)
    quality = {
        "tasks": len(quality_rows),
        "top1": top1,
        "top3": top3,
        "top1_is_best_fit": best_fit_top1,
        "misses": [r for r in quality_rows if r["top3"][0][0] not in r["fits"]],
    }

    rng = np.random.default_rng(7)
    base = index.vectors
    first, second = rng.integers(0, base.shape[0], (2, args.synthetic))
    mix = rng.uniform(0.0, 1.0, (args.synthetic, 1)).astype(np.float32)
    synth = mix * base[first] + (1 - mix) * base[second]
    synth += rng.normal(scale=args.noise, size=synth.shape).astype(np.float32)
    synth /= np.linalg.norm(synth, axis=1, keepdims=True)
    synth = synth.astype(np.float32)
    large: dict[str, Any] = {}
    t0 = time.perf_counter()
    flat = build_faiss_index(synth, "flat")
    _, exact = flat.search(queries, 5)
    large["flat"] = {"build_s": time.perf_counter() - t0, **stats(timed_searches(flat, queries, 5, args.reps))}
    t0 = time.perf_counter()
    hnsw = build_faiss_index(synth, "hnsw")
    large["hnsw_build_s"] = time.perf_counter() - t0
    large["hnsw"] = {}
    for ef in EF_SEARCH:
        hnsw.hnsw.efSearch = ef
        _, approx = hnsw.search(queries, 5)
        recall = float(np.mean([len(set(a) & set(e)) / 5 for a, e in zip(approx, exact, strict=True)]))
        large["hnsw"][str(ef)] = {"recall_at_5_vs_flat": recall, **stats(timed_searches(hnsw, queries, 5, args.reps))}
    payload = {
        "library": {"templates": len(report.templates), "index_type": type(index.faiss_index).__name__, **real},
        "query_embedding_ms": stats(embed_ms),
        "synthetic": {"n": args.synthetic, "noise": args.noise, "hnsw_m": HNSW_M, **large},
        "queries": len(texts),
        "retrieval_quality": quality,
    }
    md = [
        f"Retrieval quality on {quality['tasks']} labelled tasks (bench/data/template_tasks.yaml, written without "
        f"seeing the templates' descriptions): top-1 {top1:.3f} (the labelled best fit itself: "
        f"{best_fit_top1:.3f}), top-3 {top3:.3f}.",
        "",
        f"Real library: {len(report.templates)} templates ({payload['library']['index_type']}): search k=5 p50 "
        f"{real['p50_ms']:.3f} ms, p99 {real['p99_ms']:.3f} ms (query already embedded). Query embedding alone: "
        f"p50 {payload['query_embedding_ms']['p50_ms']:.2f} ms, p99 {payload['query_embedding_ms']['p99_ms']:.2f} ms.",
        "",
        f"{args.synthetic:,} synthetic templates (real vectors + noise {args.noise}), "
        f"{len(texts)} real task queries, k=5:",
        "",
        "| index | build | p50 | p99 | recall@5 vs exact |",
        "|---|---|---|---|---|",
        f"| IndexFlatIP | {large['flat']['build_s']:.2f} s | {large['flat']['p50_ms']:.3f} ms | "
        f"{large['flat']['p99_ms']:.3f} ms | 1.000 |",
    ]
    for ef, row in large["hnsw"].items():
        md.append(
            f"| IndexHNSWFlat (M={HNSW_M}, efSearch={ef}) | {large['hnsw_build_s']:.2f} s | {row['p50_ms']:.3f} ms | "
            f"{row['p99_ms']:.3f} ms | {row['recall_at_5_vs_flat']:.3f} |"
        )
    md.append(f"\nThe harness uses efSearch {HNSW_EF_SEARCH} (experts/routing/templates.py).")
    write_results("templates", payload, "\n".join(md) + "\n", directory=args.out)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
