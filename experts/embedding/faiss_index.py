"""Inner-product FAISS indexes over unit vectors: exact search while that is fast, HNSW beyond.

Shared by the template index and the knowledge base. Index type by size, from ``bench/bench_templates.py``:
exact ``IndexFlatIP`` up to :data:`HNSW_FROM` vectors (a search costs microseconds at the template library's
size and loses nothing), HNSW above it: at 100,000 vectors exact search takes ~9 ms a query, HNSW with
efSearch 512 ~0.5 ms at a recall@5 of ~0.95 against exact search (the benchmark sweeps efSearch; 64 gave 0.69,
1024 passed 1 ms).
"""

from __future__ import annotations

from typing import Any

from experts.embedding.vectors import Vectors

__all__ = ["HNSW_EF_CONSTRUCTION", "HNSW_EF_SEARCH", "HNSW_FROM", "HNSW_M", "build_faiss_index", "empty_faiss_index"]

HNSW_FROM = 20_000
"""From this many vectors on, the index is HNSW instead of exact search."""
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 512


def build_faiss_index(vectors: Vectors, kind: str | None = None) -> Any:
    """An inner-product FAISS index over unit vectors: ``flat`` (exact) or ``hnsw``; by size when None."""
    index = empty_faiss_index(vectors.shape[1], vectors.shape[0], kind)
    index.add(vectors)
    return index


def empty_faiss_index(dim: int, count: int, kind: str | None = None) -> Any:
    """The index :func:`build_faiss_index` would build for ``count`` vectors, empty: to be filled block by block."""
    import faiss

    kind = kind or ("hnsw" if count >= HNSW_FROM else "flat")
    index: Any
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
    return index
