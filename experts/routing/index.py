"""The expert routing index: capability and exclusion line vectors in FAISS, cached on disk by content hash.

Layout of the cache directory (``config/expert_embeddings/``, or ``$COE_EXPERT_EMBEDDINGS``; when the project
directory is read-only, the user cache directory):

* ``capability_vectors.npy`` / ``exclusion_vectors.npy``: float32 [lines x dim], unit vectors;
* ``capability.index`` / ``exclusion.index``: FAISS ``IndexFlatIP`` over those vectors;
* ``lines.json``: for every row, the expert it belongs to and the line's text;
* ``expert_ids.json``: expert ids in catalog order;
* ``probe_buckets.npy`` / ``probe_idf.npy`` / ``probe_weights.npy`` / ``probe_layers.npy``: the learned term (a
  classifier over the texts' words, its shipped experts fitted among themselves, see
  :class:`experts.routing.lexical.LexicalProbe`), when the catalog has routing examples;
* ``metadata.json``: content hash, embedding model id, dimension, counts, build time. Written last.
* ``experts/``: each expert's embedded lines on their own (:class:`ExpertVectorCache`) and the learned term's
  base layer (``probe-base-<hash>.npz``), so adding an expert embeds and fits that expert alone.

The content hash covers every embedded line, the experts' kinds, the routing examples, which experts are
shipped (the learned term's base layer), the embedding model id and the cache format, so editing a scope
document or the examples (or switching models) rebuilds the index on the next use; nothing is built at import
time. Every file is replaced atomically, and a reader that finds files that do not agree with the metadata
rebuilds instead of trusting them.
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

from experts.catalog.scopes import Catalog
from experts.embedding.encoder import Embedder, vectors_can_ship
from experts.embedding.static import StaticEmbedder
from experts.embedding.vectors import VectorInvariantError, Vectors, check_vectors, load_vectors
from experts.routing.lexical import PROBE_KIND, LexicalProbe, train_probe
from state.errors import ConfigError
from state.files import atomic_write
from state.paths import expert_index_dir, expert_index_fallback_dir

__all__ = [
    "EXAMPLES_FILE",
    "GUARD_FILE",
    "ExpertIndex",
    "ExpertVectorCache",
    "LineIndex",
    "base_positions",
    "cache_dir",
    "load_examples",
    "load_or_build_index",
    "probe_training_rows",
    "seeds_ship",
    "write_expert_seeds",
]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 3
EXAMPLES_FILE = "routing_examples.tsv"
"""Labelled example requests beside the scope documents (``expert<TAB>text`` a line; ``#`` comments)."""
GUARD_FILE = "routing_guard.tsv"
"""The routing lessons' guard set beside them (same format; never trained on; :mod:`experts.routing.lesson_check`).
Added experts' exam tasks join it."""
PROBE_ARRAYS = ("buckets", "idf", "weights", "layers")
"""The learned term's arrays, each cached as ``probe_<name>.npy``."""
SEED_DIR = Path(__file__).with_name("expert_seeds")
"""The shipped experts' vectors for the bundled encoder (:meth:`ExpertVectorCache.seed_path`)."""


def load_examples(catalog: Catalog, name: str = EXAMPLES_FILE) -> list[tuple[str, str]]:
    """The catalog's routing examples (or another ``expert<TAB>text`` file beside them) as ``(expert, text)``.

    None when the file is absent.

    Raises:
        ConfigError: naming the file and line of a malformed row or an unknown expert.
    """
    path = catalog.directory / name
    added = list({EXAMPLES_FILE: catalog.extra_examples, GUARD_FILE: catalog.extra_guard}.get(name, ()))
    if not path.is_file():
        return added
    rows, errors = [], []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        expert, sep, text = raw.partition("\t")
        if not sep or not text.strip():
            errors.append(f"line {number}: expected expert<TAB>text")
        elif expert.strip() in catalog.left_out:
            continue  # benched: out of routing, its examples with it
        elif expert.strip() not in catalog.ids:
            errors.append(f"line {number}: unknown expert {expert.strip()!r}")
        else:
            rows.append((expert.strip(), " ".join(text.split())))
    if errors:
        raise ConfigError(str(path), "invalid routing examples:\n" + "\n".join(f"  - {e}" for e in errors))
    return rows + added


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
    probe: LexicalProbe | None = None
    """The learned term; None when the catalog has no routing examples."""
    examples: int = 0
    """How many routing examples the probe was trained on (besides the capability lines)."""
    embedded_experts: int = 0
    """Experts whose lines this build embedded (the others' vectors came from the per-expert cache)."""

    def aggregate(self, lines: LineIndex, queries: Vectors, top_k: int) -> Vectors:
        """Per (query, expert): the mean of the ``top_k`` best line similarities.

        Every line is scored, so the similarities are one matrix product: the same numbers an exhaustive FAISS
        search returns, without the full sort by similarity that it adds and this aggregation throws away
        (about half of the routing time outside the embedding).
        """
        n, n_lines = queries.shape[0], lines.vectors.shape[0]
        full = np.empty((n, n_lines + 1), dtype=np.float32)  # the last column pads short experts
        np.matmul(queries, lines.vectors.T, out=full[:, :n_lines])
        full[:, n_lines] = -np.inf
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
    return expert_index_dir()


def content_hash(catalog: Catalog, embedder: Embedder, examples: list[tuple[str, str]] | None = None) -> str:
    """The cache key: catalog routing content + routing examples + embedding model + cache format."""
    rows = examples if examples is not None else load_examples(catalog)
    examples_hash = hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()
    probe = f"{PROBE_KIND}:{','.join(map(str, base_positions(catalog)))}"
    payload = (
        f"{FORMAT_VERSION}\n{embedder.model_id}\n{embedder.dim}\n{catalog.routing_hash()}\n{examples_hash}\n{probe}"
    )
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


def base_positions(catalog: Catalog) -> list[int]:
    """The learned term's base layer: the positions of the shipped experts (not added, installed or promoted)."""
    return [pos for pos, expert in enumerate(catalog.ids) if catalog.origin(expert).kind == "shipped"]


def probe_training_rows(catalog: Catalog) -> tuple[list[str], list[int]]:
    """What the learned term is trained on: every capability line and routing example, with its expert's position."""
    ids = catalog.ids
    texts = [line for scope in catalog for line in scope.capabilities]
    labels = [pos for pos, scope in enumerate(catalog) for _ in scope.capabilities]
    for expert, text in load_examples(catalog):
        texts.append(text)
        labels.append(ids.index(expert))
    return texts, labels


class ExpertVectorCache:
    """Each expert's embedded scope lines, cached on disk by their content.

    Adding, editing or removing one expert embeds that expert's lines alone; the others' vectors are read back.

    One file per expert and embedder: ``experts/<sha256 of model, dimension, lines>.npy`` holding the capability
    rows, then the exclusion rows. Entries no expert uses any more are left; they are small (a few hundred KB).

    A new install has none yet: the shipped experts' vectors for the bundled encoder (and for the static table
    distilled from it) ship with the package
    (``expert_seeds/``, under the same keys, written by :func:`write_expert_seeds`) and are read when the cache
    has no entry, so a first run embeds only the experts a user added or edited (docs/decisions/routing.md).
    """

    def __init__(self, directory: Path | None, seeds: Path | None = SEED_DIR) -> None:
        self.directory = directory
        self.seeds = seeds

    @staticmethod
    def key(embedder: Embedder, capabilities: list[str], exclusions: list[str]) -> str:
        """The cache key of one expert's lines under one embedder."""
        payload = json.dumps([FORMAT_VERSION, embedder.model_id, embedder.dim, capabilities, exclusions])
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def seed_path(self, embedder: Embedder, key: str) -> Path | None:
        """Where the shipped vectors under ``key`` live, or None when none can ship for ``embedder``.

        Only the bundled encoder's weights are known ahead (pinned by SHA-256); a user's own model has no seed.
        """
        if self.seeds is None or not seeds_ship(embedder):
            return None
        return self.seeds / _seed_name(embedder, key)

    def vectors(self, catalog: Catalog, embedder: Embedder) -> tuple[list[Vectors], int]:
        """Each expert's vectors, and how many experts were embedded now (the others were read back).

        Per expert, in catalog order: its capability rows, then its exclusion rows (unit vectors).
        """
        lines = [scope.capabilities + scope.exclusions for scope in catalog]
        keys = [self.key(embedder, scope.capabilities, scope.exclusions) for scope in catalog]
        out = [self._cached(embedder, key, len(rows)) for key, rows in zip(keys, lines, strict=True)]
        missing = [pos for pos, cached in enumerate(out) if cached is None]
        if missing:
            texts = [line for pos in missing for line in lines[pos]]
            embedded = check_vectors(embedder.encode(texts), embedder.dim, "expert scope vectors")
            start = 0
            for pos in missing:
                block = embedded[start : start + len(lines[pos])]
                start += len(lines[pos])
                out[pos] = block
                self._write(keys[pos], block)
        return [v for v in out if v is not None], len(missing)

    def _path(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}.npy"

    def _cached(self, embedder: Embedder, key: str, rows: int) -> Vectors | None:
        """The user cache's vectors under ``key``, else the shipped ones, else None."""
        for path in (self._path(key), self.seed_path(embedder, key)):
            vectors = self._read(path, rows, embedder.dim)
            if vectors is not None:
                return vectors
        return None

    @staticmethod
    def _read(path: Path | None, rows: int, dim: int) -> Vectors | None:
        if path is None or not path.is_file():
            return None
        try:
            return load_vectors(path, dim, rows)
        except (OSError, ValueError, VectorInvariantError) as exc:
            logger.info("expert vectors %s cannot be read (%s); embedding again", path, exc)
            return None

    def _write(self, key: str, vectors: Vectors) -> None:
        path = self._path(key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)

            def save(tmp: Path) -> None:
                with tmp.open("wb") as handle:
                    np.save(handle, vectors, allow_pickle=False)

            atomic_write(path, save)
        except OSError as exc:
            logger.warning("cannot cache expert vectors in %s: %s", path.parent, exc.strerror or exc)


def seeds_ship(embedder: Embedder) -> bool:
    """Whether the shipped experts' vectors under ``embedder`` ship.

    The bundled encoder's do, and so do those of the static table distilled from it (the router's first stage:
    embedding its expert lines was 2.1 s of a profiled first command before they shipped).
    """
    if isinstance(embedder, StaticEmbedder):
        return vectors_can_ship(embedder.encoder)
    return vectors_can_ship(embedder)


def _seed_name(embedder: Embedder, key: str) -> str:
    return f"expert-{embedder.backend}-{key[:32]}.npy"


def write_expert_seeds(catalog: Catalog, embedder: Embedder, directory: Path = SEED_DIR) -> list[Path]:
    """Embed every expert of ``catalog`` and write the vectors that ship (old seeds of the backend removed).

    Run it after changing a shipped scope document's lines (``write_expert_seeds(load_catalog(),
    get_embedder("onnx"))``, and again with ``StaticEmbedder(get_embedder("onnx"))`` for the router's first stage);
    ``tests/unit/test_expert_seeds.py`` fails until the seeds are the catalog's.
    """
    if not seeds_ship(embedder):
        raise ValueError(f"no expert vectors ship for the {embedder.backend} encoder {embedder.model_id}")
    vectors, _ = ExpertVectorCache(None, seeds=None).vectors(catalog, embedder)  # embedded, not read back
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob(f"expert-{embedder.backend}-*.npy"):
        old.unlink()
    written = []
    for scope, block in zip(catalog, vectors, strict=True):
        path = directory / _seed_name(embedder, ExpertVectorCache.key(embedder, scope.capabilities, scope.exclusions))
        with path.open("wb") as handle:
            np.save(handle, block, allow_pickle=False)
        written.append(path)
    return written


def build_index(
    catalog: Catalog,
    embedder: Embedder,
    probe: LexicalProbe | None = None,
    vector_cache: ExpertVectorCache | None = None,
) -> ExpertIndex:
    """Embed every scope line of the catalog and train the learned term.

    Args:
        catalog: The expert catalog whose scope lines are embedded and whose routing examples train the probe.
        embedder: The model that embeds the lines.
        probe: The learned term, when the caller has it already: it reads words, not vectors, so another
            embedder's index of the same catalog and examples can share it instead of training it again.
        vector_cache: Where each expert's vectors are kept, so that only experts whose lines changed are
            embedded (default: none, every line is embedded; no disk access).
    """
    t0 = time.perf_counter()
    ids = catalog.ids
    cache = vector_cache if vector_cache is not None else ExpertVectorCache(None)
    per_expert, embedded_experts = cache.vectors(catalog, embedder)
    cap_owners, cap_texts, exc_owners, exc_texts = [], [], [], []
    cap_rows, exc_rows = [], []
    for pos, (scope, rows) in enumerate(zip(catalog, per_expert, strict=True)):
        n_cap = len(scope.capabilities)
        cap_owners += [pos] * n_cap
        cap_texts += scope.capabilities
        exc_owners += [pos] * len(scope.exclusions)
        exc_texts += scope.exclusions
        cap_rows.append(rows[:n_cap])
        exc_rows.append(rows[n_cap:])
    cap_vecs = check_vectors(np.concatenate(cap_rows), embedder.dim, "expert capability vectors")
    exc_vecs = check_vectors(np.concatenate(exc_rows), embedder.dim, "expert exclusion vectors")
    examples = load_examples(catalog)
    if examples and probe is None:
        texts, labels = probe_training_rows(catalog)
        labelled = np.asarray(labels, dtype=np.int64)
        probe = train_probe(texts, labelled, len(ids), base=base_positions(catalog), cache=cache.directory)
    return ExpertIndex(
        expert_ids=ids,
        capability=_line_index(cap_vecs, cap_owners, cap_texts),
        exclusion=_line_index(exc_vecs, exc_owners, exc_texts),
        dim=embedder.dim,
        model_id=embedder.model_id,
        content_hash=content_hash(catalog, embedder, examples),
        directory=None,
        built=True,
        seconds=time.perf_counter() - t0,
        probe=probe if examples else None,
        examples=len(examples),
        embedded_experts=embedded_experts,
    )


def load_or_build_index(
    catalog: Catalog,
    embedder: Embedder,
    directory: Path | None = None,
    part: str | None = None,
    probe: LexicalProbe | None = None,
) -> ExpertIndex:
    """Load the cached index if it matches the catalog and embedder, else build it and write the cache.

    A cache that cannot be written (read-only install) is written to the user cache directory instead;
    if neither can be written, the index is used from memory and a warning is logged.

    Args:
        catalog: The expert catalog whose scope lines (and routing examples) are embedded.
        embedder: The model that embeds them; queries must come from the same model.
        directory: The cache directory (default: :func:`cache_dir`).
        part: A subdirectory for a second index kept beside the main one (the router's static first stage):
            a directory holds one index, and two embedders sharing one would rebuild each other's.
        probe: The learned term of another index of the same catalog (see :func:`build_index`): used instead of
            training one or keeping the cached copy, so both indexes hold the same arrays.
    """
    t0 = time.perf_counter()
    wanted = content_hash(catalog, embedder)
    primary = directory if directory is not None else cache_dir()
    fallback = expert_index_fallback_dir() if directory is None else None
    candidates = [primary] if fallback is None else [primary, fallback]
    if part is not None:
        candidates = [path / part for path in candidates]
    for path in candidates:
        loaded = _try_load(path, wanted, embedder)
        if loaded is not None:
            if probe is not None and loaded.probe is not None:
                loaded = _with(loaded, probe=probe)  # the same examples trained both (the content hash covers them)
            return _with(loaded, directory=path, built=False, seconds=time.perf_counter() - t0)
    index = build_index(catalog, embedder, probe, ExpertVectorCache(_writable(candidates, "experts")))
    for path in candidates:
        try:
            _write(path, index)
        except OSError as exc:
            logger.warning("cannot write the expert index cache to %s: %s", path, exc.strerror or exc)
            continue
        return _with(index, directory=path, built=True, seconds=time.perf_counter() - t0)
    return _with(index, directory=None, built=True, seconds=time.perf_counter() - t0)


def _writable(candidates: list[Path], name: str) -> Path | None:
    """The first candidate directory's ``name`` subdirectory that can be written, or None."""
    for path in candidates:
        target = path / name
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(target, os.W_OK):
            return target
    return None


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
            vectors = load_vectors(path / f"{kind}_vectors.npy", embedder.dim)
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
        probe = None
        if meta["counts"].get("examples", 0):
            arrays = {name: np.load(path / f"probe_{name}.npy", allow_pickle=False) for name in PROBE_ARRAYS}
            if arrays["weights"].ndim != 2 or arrays["weights"].shape[1] != len(ids):
                logger.warning("expert index probe in %s disagrees with its metadata; rebuilding", path)
                return None
            try:
                probe = LexicalProbe(
                    buckets=arrays["buckets"].astype(np.int64),
                    idf=arrays["idf"].astype(np.float32),
                    unseen_idf=tuple(float(u) for u in meta["probe_unseen_idf"]),
                    weights=arrays["weights"].astype(np.float32),
                    layers=arrays["layers"].astype(np.int64),
                )
            except ValueError as exc:
                raise VectorInvariantError(f"{path}/probe_weights.npy", str(exc)) from exc
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
        probe=probe,
        examples=int(meta["counts"].get("examples", 0)),
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
    if index.probe is not None:
        for name in PROBE_ARRAYS:
            array = getattr(index.probe, name)

            def save_probe(tmp: Path, values: np.ndarray = array) -> None:
                with tmp.open("wb") as handle:
                    np.save(handle, values, allow_pickle=False)

            atomic_write(path / f"probe_{name}.npy", save_probe)
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
        "counts": {
            "capability": len(index.capability.texts),
            "exclusion": len(index.exclusion.texts),
            "examples": index.examples if index.probe is not None else 0,
        },
        "probe_unseen_idf": list(index.probe.unseen_idf) if index.probe is not None else None,
        "index_type": "IndexFlatIP",
        "build_seconds": round(index.seconds, 3),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    atomic_write(path / "metadata.json", lambda tmp: tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8"))
