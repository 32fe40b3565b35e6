"""Template retrieval: every template embedded once, searched by meaning with FAISS, cached by content hash.

Each template is embedded from its :meth:`~state.template.Template.retrieval_text` (title, pattern,
description, subtypes, slot titles) with the same embedder as the router. Vectors, ids, the FAISS index and
metadata are kept in ``config/template_embeddings/`` (``$COE_TEMPLATE_EMBEDDINGS``; the user cache directory
when the project is read-only) and rebuilt on first use after any template, the embedding model or the cache
format changes; nothing is built at import time.

The index type follows the library's size (:mod:`experts.embedding.faiss_index`).

A new install has no cache yet: the shipped library's vectors for the bundled encoder ship with the package
(``template_seeds/``, keyed by the content hash, written by :func:`write_seed`), so the first run reads them
instead of embedding every template (2.9 s less before the first slot: docs/decisions/routing.md). Any other content
(an edited or added template) or another encoder is embedded as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experts.embedding.encoder import Embedder, vectors_can_ship
from experts.embedding.faiss_index import build_faiss_index
from experts.embedding.vectors import VectorInvariantError, Vectors, check_vectors, load_vectors
from state.files import atomic_write
from state.paths import template_index_dir, templates_dir
from state.template import Template, load_library

__all__ = [
    "AS_IS_SIMILARITY",
    "TemplateHit",
    "TemplateIndex",
    "library",
    "library_dir",
    "load_or_build",
    "seed_path",
    "write_seed",
]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
AS_IS_SIMILARITY = 0.95
"""A template this similar to the task is used as it is, without adaptation."""
SEED_DIR = Path(__file__).with_name("template_seeds")
"""The shipped library's vectors for the bundled encoder (:func:`seed_path`)."""


@dataclass(frozen=True)
class TemplateHit:
    """One search result."""

    template_id: str
    similarity: float


@dataclass(frozen=True)
class TemplateIndex:
    """Template vectors and their FAISS index."""

    ids: tuple[str, ...]
    vectors: Vectors
    faiss_index: Any
    embedder: Embedder
    content_hash: str
    built: bool
    directory: Path | None

    def search(self, query: str, k: int = 5) -> list[TemplateHit]:
        """The ``k`` templates most similar to ``query`` (cosine similarity, best first)."""
        vector = self.embedder.encode([query.strip()])
        return self.search_vectors(vector, k)[0]

    def search_vectors(self, queries: Vectors, k: int = 5) -> list[list[TemplateHit]]:
        """Search with already embedded queries."""
        queries = check_vectors(queries, self.vectors.shape[1], "template search query vectors")
        k = max(1, min(k, len(self.ids)))
        sims, rows = self.faiss_index.search(queries, k)
        return [
            [TemplateHit(self.ids[int(r)], round(float(s), 4)) for s, r in zip(srow, rrow, strict=True) if r >= 0]
            for srow, rrow in zip(sims, rows, strict=True)
        ]


def library_dir() -> Path:
    """The template library: ``$COE_TEMPLATES``, else ``config/framework_templates`` of the project."""
    return templates_dir()


_libraries: dict[tuple[Any, ...], tuple[dict[str, Template], TemplateIndex | None]] = {}


def library(
    known_experts: tuple[str, ...], embedder: Embedder, extra: tuple[Path, ...] = ()
) -> tuple[dict[str, Template], TemplateIndex | None]:
    """The valid templates of :func:`library_dir` (and the ``extra`` directories) and their index (None: none).

    Kept per process until a library file changes, so the nodes of one run (and later runs) load, validate
    and index the library once.

    Args:
        known_experts: The catalog's expert ids (a template naming another is invalid).
        embedder: The model that embeds the templates.
        extra: Template directories the added experts bring (``Catalog.template_dirs``).
    """
    directories = [library_dir(), *extra]
    files = [f for d in directories if d.is_dir() for f in sorted(d.glob("*.y*ml"))]
    key = (
        tuple(str(d) for d in directories),
        tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files),
        known_experts,
        embedder.model_id,
    )
    cached = _libraries.get(key)
    if cached is None:
        templates = load_library(directories, known_experts).templates
        cached = (templates, load_or_build(templates, embedder) if templates else None)
        _libraries[key] = cached
    return cached


def cache_dir() -> Path:
    """``$COE_TEMPLATE_EMBEDDINGS``, else ``config/template_embeddings`` of the project."""
    return template_index_dir()


def content_hash(templates: dict[str, Template], embedder: Embedder) -> str:
    """The cache key: every template's retrieval text + the embedding model + the cache format."""
    payload = [[tid, templates[tid].retrieval_text()] for tid in sorted(templates)]
    text = f"{FORMAT_VERSION}\n{embedder.model_id}\n{embedder.dim}\n{json.dumps(payload, ensure_ascii=False)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_or_build(templates: dict[str, Template], embedder: Embedder, directory: Path | None = None) -> TemplateIndex:
    """The index for these templates: read from the cache when it matches, else built and written."""
    wanted = content_hash(templates, embedder)
    path = directory if directory is not None else cache_dir()
    loaded = _try_load(path, wanted, embedder)
    if loaded is not None:
        return loaded
    ids = tuple(sorted(templates))
    t0 = time.perf_counter()
    vectors = _seeded(embedder, wanted, len(ids))
    if vectors is None:
        vectors = _embed(templates, ids, embedder)
    index = TemplateIndex(ids, vectors, build_faiss_index(vectors), embedder, wanted, True, None)
    try:
        _write(path, index, time.perf_counter() - t0)
        return TemplateIndex(ids, vectors, index.faiss_index, embedder, wanted, True, path)
    except OSError as exc:
        logger.warning("cannot write the template index cache to %s: %s", path, exc.strerror or exc)
        return index


def seed_path(embedder: Embedder, content: str) -> Path | None:
    """Where the shipped vectors of the library with ``content`` hash live, or None when none can ship.

    Only the bundled encoder's weights are known ahead (pinned by SHA-256); a user's own model has no seed.
    """
    if not vectors_can_ship(embedder):
        return None
    return SEED_DIR / f"templates-{embedder.backend}-{content[:16]}.npy"


def write_seed(templates: dict[str, Template], embedder: Embedder) -> Path:
    """Embed the library and write its vectors where :func:`seed_path` says (old seeds removed).

    Run it after changing a shipped template (``write_seed(templates, get_embedder("onnx"))`` with the shipped
    library, as ``tests/unit/test_templates_seed.py`` loads it); that test fails until the seed is the library's.
    """
    path = seed_path(embedder, content_hash(templates, embedder))
    if path is None:
        raise ValueError(f"no template vectors ship for the {embedder.backend} encoder {embedder.model_id}")
    vectors = _embed(templates, tuple(sorted(templates)), embedder)
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob(f"templates-{embedder.backend}-*.npy"):
        old.unlink()
    with path.open("wb") as handle:
        np.save(handle, vectors, allow_pickle=False)
    return path


def _embed(templates: dict[str, Template], ids: tuple[str, ...], embedder: Embedder) -> Vectors:
    """The templates' retrieval texts embedded, in ``ids`` order."""
    return check_vectors(
        embedder.encode([templates[t].retrieval_text() for t in ids]), embedder.dim, "template vectors"
    )


def _seeded(embedder: Embedder, content: str, count: int) -> Vectors | None:
    """The shipped vectors of this exact library, or None (no seed for it, or one that does not fit)."""
    path = seed_path(embedder, content)
    if path is None or not path.is_file():
        return None
    try:
        return load_vectors(path, embedder.dim, count)
    except (OSError, ValueError, VectorInvariantError) as exc:
        logger.warning("the shipped template vectors %s cannot be used (%s); embedding the library", path, exc)
        return None


def _try_load(path: Path, wanted: str, embedder: Embedder) -> TemplateIndex | None:
    try:
        meta = json.loads((path / "metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("content_hash") != wanted:
        return None
    try:
        import faiss

        ids = tuple(str(i) for i in json.loads((path / "template_ids.json").read_text(encoding="utf-8")))
        vectors = load_vectors(path / "template_vectors.npy", embedder.dim)
        index = faiss.read_index(str(path / "template.index"))
        if len(ids) != vectors.shape[0] or index.ntotal != len(ids) or index.d != embedder.dim:
            logger.warning("template index files in %s disagree with each other; rebuilding", path)
            return None
    except (OSError, ValueError, RuntimeError, VectorInvariantError) as exc:
        logger.warning("template index in %s cannot be used (%s); rebuilding", path, exc)
        return None
    return TemplateIndex(ids, vectors, index, embedder, wanted, False, path)


def _write(path: Path, index: TemplateIndex, seconds: float) -> None:
    import faiss

    path.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (path / "metadata.json").unlink()

    def save_vectors(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            np.save(handle, index.vectors, allow_pickle=False)

    atomic_write(path / "template_vectors.npy", save_vectors)
    atomic_write(path / "template.index", lambda tmp: faiss.write_index(index.faiss_index, str(tmp)))
    atomic_write(path / "template_ids.json", lambda tmp: tmp.write_text(json.dumps(list(index.ids)), encoding="utf-8"))
    meta = {
        "format_version": FORMAT_VERSION,
        "content_hash": index.content_hash,
        "model_id": index.embedder.model_id,
        "dim": index.embedder.dim,
        "templates": len(index.ids),
        "index_type": type(index.faiss_index).__name__,
        "build_seconds": round(seconds, 3),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    atomic_write(path / "metadata.json", lambda tmp: tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8"))
