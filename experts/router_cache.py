"""The expert routing index: capability and exclusion line vectors in FAISS, cached on disk by content hash.

Layout of the cache directory (``config/expert_embeddings/``, or ``$COE_EXPERT_EMBEDDINGS``; when the project
directory is read-only, the user cache directory):

* ``capability_vectors.npy`` / ``exclusion_vectors.npy``: float32 [lines x dim], unit vectors;
* ``capability.index`` / ``exclusion.index``: FAISS ``IndexFlatIP`` over those vectors;
* ``lines.json``: for every row, the expert it belongs to and the line's text;
* ``expert_ids.json``: expert ids in catalog order;
* ``metadata.json``: content hash, embedding model id, dimension, counts, build time. Written last.

The content hash covers every embedded line, the experts' kinds, the embedding model id and the cache
format, so editing a scope document (or switching models) rebuilds the index on the next use; nothing is
built at import time. Every file is replaced atomically, and a reader that finds files that do not agree
with the metadata rebuilds instead of trusting them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from experts.catalog import Catalog, config_dir
from experts.embedding import Embedder, VectorInvariantError, Vectors, check_vectors
from experts.files import atomic_write

__all__ = ["CACHE_ENV", "ExpertIndex", "LineIndex", "cache_dir", "load_or_build_index"]

logger = logging.getLogger(__name__)

CACHE_ENV = "COE_EXPERT_EMBEDDINGS"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class LineIndex:
    """Embedded scope lines of every expert, with a FAISS inner-product index over them."""

    vectors: Vectors
    owners: npt.NDArray[np.int64]
    """For every row, the position of its expert in ``ExpertIndex.expert_ids``."""
    texts: tuple[str, ...]
    faiss_index: Any
    _grid: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict, compare=False, repr=False)

    def padded(self, n_experts: int) -> npt.NDArray[np.int64]:
        """Row numbers of each expert's lines as an (experts, most lines) grid padded with ``len(lines)``."""
        cached = self._grid.get(n_experts)
        if cached is None:
            cols = [np.flatnonzero(self.owners == e) for e in range(n_experts)]
            width = max((c.size for c in cols), default=0)
            cached = np.full((n_experts, max(width, 1)), self.vectors.shape[0], dtype=np.int64)
            for e, c in enumerate(cols):
                cached[e, : c.size] = c
            self._grid[n_experts] = cached
        return cached


@dataclass(frozen=True)
class ExpertIndex:
    """Everything the router needs, as loaded from (or written to) the cache."""

    expert_ids: tuple[str, ...]
    capability: LineIndex
    exclusion: LineIndex
    dim: int
    model_id: str
    content_hash: str
    directory: Path | None
    built: bool
    """Whether this load built the index (cold cache) rather than reading it."""
    seconds: float

    def aggregate(self, lines: LineIndex, queries: Vectors, top_k: int) -> Vectors:
        """Per (query, expert): the mean of the ``top_k`` best line similarities (FAISS search)."""
        n, n_lines = queries.shape[0], lines.vectors.shape[0]
        sims, rows = lines.faiss_index.search(queries, n_lines)
        full = np.full((n, n_lines + 1), -np.inf, dtype=np.float32)  # the last column pads short experts
        np.put_along_axis(full, rows, sims, axis=1)
        grid = lines.padded(len(self.expert_ids))  # (experts, most lines), padded with n_lines
        block = full[:, grid]  # (n, experts, most lines)
        k = max(1, min(top_k, grid.shape[1]))
        top = -np.partition(-block, k - 1, axis=2)[:, :, :k] if k < grid.shape[1] else block
        counts = np.minimum((grid < n_lines).sum(axis=1), k).astype(np.float32)  # an expert with < k lines
        top = np.where(np.isfinite(top), top, 0.0)
        out: Vectors = (top.sum(axis=2) / np.maximum(counts, 1.0)).astype(np.float32)
        out[:, counts == 0] = 0.0
        return out


def cache_dir() -> Path:
    """``$COE_EXPERT_EMBEDDINGS``, else ``config/expert_embeddings`` of the project."""
    override = os.environ.get(CACHE_ENV, "").strip()
    return Path(override).expanduser() if override else config_dir() / "expert_embeddings"


def _fallback_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("coe")) / "expert_embeddings"


def content_hash(catalog: Catalog, embedder: Embedder) -> str:
    """The cache key: catalog routing content + embedding model + cache format."""
    payload = f"{FORMAT_VERSION}\n{embedder.model_id}\n{embedder.dim}\n{catalog.routing_hash()}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _faiss_index(vectors: Vectors) -> Any:
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def _line_index(vectors: Vectors, owners: list[int], texts: list[str], faiss_index: Any = None) -> LineIndex:
    return LineIndex(
        vectors=vectors,
        owners=np.asarray(owners, dtype=np.int64),
        texts=tuple(texts),
        faiss_index=faiss_index if faiss_index is not None else _faiss_index(vectors),
    )


def build_index(catalog: Catalog, embedder: Embedder) -> ExpertIndex:
    """Embed every scope line of the catalog (no disk access)."""
    t0 = time.perf_counter()
    ids = catalog.ids
    cap_owners, cap_texts, exc_owners, exc_texts = [], [], [], []
    for pos, scope in enumerate(catalog):
        for line in scope.capabilities:
            cap_owners.append(pos)
            cap_texts.append(line)
        for line in scope.exclusions:
            exc_owners.append(pos)
            exc_texts.append(line)
    vectors = embedder.encode(cap_texts + exc_texts)
    cap_vecs = check_vectors(vectors[: len(cap_texts)], embedder.dim, "expert capability vectors")
    exc_vecs = check_vectors(vectors[len(cap_texts) :], embedder.dim, "expert exclusion vectors")
    return ExpertIndex(
        expert_ids=ids,
        capability=_line_index(cap_vecs, cap_owners, cap_texts),
        exclusion=_line_index(exc_vecs, exc_owners, exc_texts),
        dim=embedder.dim,
        model_id=embedder.model_id,
        content_hash=content_hash(catalog, embedder),
        directory=None,
        built=True,
        seconds=time.perf_counter() - t0,
    )


def load_or_build_index(catalog: Catalog, embedder: Embedder, directory: Path | None = None) -> ExpertIndex:
    """Load the cached index if it matches the catalog and embedder, else build it and write the cache.

    A cache that cannot be written (read-only install) is written to the user cache directory instead;
    if neither can be written, the index is used from memory and a warning is logged.
    """
    t0 = time.perf_counter()
    wanted = content_hash(catalog, embedder)
    primary = directory if directory is not None else cache_dir()
    candidates = [primary] if directory is not None or os.environ.get(CACHE_ENV) else [primary, _fallback_dir()]
    for path in candidates:
        loaded = _try_load(path, wanted, embedder)
        if loaded is not None:
            return _with(loaded, directory=path, built=False, seconds=time.perf_counter() - t0)
    index = build_index(catalog, embedder)
    for path in candidates:
        try:
            _write(path, index)
        except OSError as exc:
            logger.warning("cannot write the expert index cache to %s: %s", path, exc.strerror or exc)
            continue
        return _with(index, directory=path, built=True, seconds=time.perf_counter() - t0)
    return _with(index, directory=None, built=True, seconds=time.perf_counter() - t0)


def _with(index: ExpertIndex, **changes: Any) -> ExpertIndex:
    from dataclasses import replace

    return replace(index, **changes)


def _try_load(path: Path, wanted: str, embedder: Embedder) -> ExpertIndex | None:
    meta_path = path / "metadata.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("content_hash") != wanted:
        logger.info("expert index in %s is stale or absent; rebuilding", path)
        return None
    try:
        import faiss

        ids = tuple(json.loads((path / "expert_ids.json").read_text(encoding="utf-8")))
        lines = json.loads((path / "lines.json").read_text(encoding="utf-8"))
        parts = {}
        for kind in ("capability", "exclusion"):
            vectors = check_vectors(
                np.load(path / f"{kind}_vectors.npy", allow_pickle=False), embedder.dim, f"{path}/{kind}_vectors.npy"
            )
            owners = [int(o) for o, _ in lines[kind]]
            texts = [str(t) for _, t in lines[kind]]
            index = faiss.read_index(str(path / f"{kind}.index"))
            if (
                vectors.shape[0] != len(owners)
                or index.ntotal != len(owners)
                or index.d != embedder.dim
                or len(owners) != meta["counts"][kind]
            ):
                logger.warning("expert index files in %s disagree with its metadata; rebuilding", path)
                return None
            parts[kind] = _line_index(vectors, owners, texts, index)
    except VectorInvariantError as exc:
        logger.warning("expert index in %s is damaged (%s); rebuilding", path, exc)
        return None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        logger.warning("expert index in %s cannot be read (%s); rebuilding", path, exc)
        return None
    return ExpertIndex(
        expert_ids=ids,
        capability=parts["capability"],
        exclusion=parts["exclusion"],
        dim=embedder.dim,
        model_id=embedder.model_id,
        content_hash=wanted,
        directory=path,
        built=False,
        seconds=0.0,
    )


def _write(path: Path, index: ExpertIndex) -> None:
    import faiss

    path.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (path / "metadata.json").unlink()  # readers see no cache, never a half-written one
    lines: dict[str, list[list[Any]]] = {}
    for kind, part in (("capability", index.capability), ("exclusion", index.exclusion)):

        def save_npy(tmp: Path, vectors: Vectors = part.vectors) -> None:
            with tmp.open("wb") as handle:
                np.save(handle, vectors, allow_pickle=False)

        def save_index(tmp: Path, faiss_index: Any = part.faiss_index) -> None:
            faiss.write_index(faiss_index, str(tmp))

        atomic_write(path / f"{kind}_vectors.npy", save_npy)
        atomic_write(path / f"{kind}.index", save_index)
        lines[kind] = [[int(o), t] for o, t in zip(part.owners.tolist(), part.texts, strict=True)]
    atomic_write(path / "lines.json", lambda tmp: tmp.write_text(json.dumps(lines, indent=0), encoding="utf-8"))
    atomic_write(
        path / "expert_ids.json", lambda tmp: tmp.write_text(json.dumps(list(index.expert_ids)), encoding="utf-8")
    )
    meta = {
        "format_version": FORMAT_VERSION,
        "content_hash": index.content_hash,
        "model_id": index.model_id,
        "dim": index.dim,
        "experts": len(index.expert_ids),
        "counts": {"capability": len(index.capability.texts), "exclusion": len(index.exclusion.texts)},
        "index_type": "IndexFlatIP",
        "build_seconds": round(index.seconds, 3),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    atomic_write(path / "metadata.json", lambda tmp: tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8"))
