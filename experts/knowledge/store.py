"""The local knowledge base behind ``{{ASSIST:lookup:...}}``: passages embedded into FAISS, kept in a directory.

Documents are read and cut by :mod:`experts.knowledge.ingest`; passages are embedded with the router's
embedder (section path + text) into an exact inner-product FAISS index (HNSW from
:data:`~experts.embedding.faiss_index.HNSW_FROM` passages on, as for templates); a request is answered by
:mod:`experts.knowledge.quotes`.

The knowledge base is a directory: the run setting ``kb_path``, else ``$COE_KB``, else ``kb`` in the user data
directory (:func:`state.paths.kb_dir`). Files in it: ``chunks.json`` (every passage with its source and
location), ``vectors.npy``, ``kb.index`` (FAISS), ``metadata.json`` (format, embedding model, counts, every
source file with its SHA-256; written last). Each is replaced atomically, so a run that reads the knowledge
base while ``coe kb add`` writes it sees the old or the new one; writers take a lock file. ``vectors.npy`` is
memory-mapped, not read: the vectors are in memory once, in the FAISS index, and a write copies them a block at
a time. A knowledge base embedded with another model is re-embedded from its stored passages on first use.

Adding is resumable: each file's passage vectors are appended, batch by batch, to a staging file
(``staging/<file digest>-<model>.f32``, raw float32 rows) before they join the knowledge base. Ctrl+C (or a
crash) keeps what was embedded: the files finished by then are written into the knowledge base (on Ctrl+C), and
running the same ``coe kb add`` again goes on from the last batch of a file that was cut short (its passages are
cut again from the unchanged file, which gives the same passages).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from experts.embedding.encoder import Embedder
from experts.embedding.factory import get_embedder
from experts.embedding.faiss_index import empty_faiss_index
from experts.embedding.vectors import VectorInvariantError, Vectors, check_vectors
from experts.knowledge.ingest import CHUNK_CHARS, CHUNK_OVERLAP, Chunk, expand_paths, file_sha256, split_document
from experts.knowledge.quotes import RERANK_K, KbHit, Quote, best_quote, source_of
from state.assist import AssistSource
from state.errors import ConfigError
from state.files import atomic_write, exclusive_lock
from state.paths import kb_dir

__all__ = [
    "AddReport",
    "IngestProgress",
    "KnowledgeBase",
    "SourceInfo",
    "add_documents",
    "kb_sources",
    "load_kb",
    "remove_documents",
]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
EMBED_BATCH = 128
"""Passages embedded per call (MiniLM on ONNX Runtime, 2 cores: 138 passages/s at 32, 152 at 64, 169 at 128)."""
VECTOR_BLOCK = 16_384
"""Rows read, written and indexed at a time when vectors are merged (24 MB at 384 dimensions): a knowledge base's
vectors are in memory once, in its FAISS index; ``KnowledgeBase.vectors`` maps ``vectors.npy``."""
STAGING = "staging"


@dataclass(frozen=True)
class SourceInfo:
    """A document in the knowledge base."""

    path: str
    sha256: str
    kind: str
    chunks: int
    added_at: str


@dataclass
class AddReport:
    """What ``add_documents`` did."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Files that were not indexed, each with the reason (``path: reason``)."""
    chunks: int = 0
    """Passages written for the added and updated files."""
    total_chunks: int = 0
    seconds: float = 0.0
    resumed: int = 0
    """Passages whose vectors an earlier, interrupted add had already embedded (not embedded again)."""


@dataclass(frozen=True)
class IngestProgress:
    """How far an add has come: passages embedded of those to embed, files finished, bytes of text."""

    passages_done: int
    passages_total: int
    files_done: int
    files_total: int
    bytes_total: int
    current: str


# --- the loaded knowledge base ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class KnowledgeBase:
    """Passages, their vectors and the FAISS index over them."""

    directory: Path
    chunks: tuple[Chunk, ...]
    vectors: Vectors
    faiss_index: Any
    embedder: Embedder | None
    """None for an empty knowledge base (nothing to embed a query against)."""
    sources: dict[str, SourceInfo]

    @property
    def empty(self) -> bool:
        """Whether there is nothing to search."""
        return not self.chunks

    def search(self, query: str, k: int = 5) -> list[KbHit]:
        """The ``k`` passages most similar to ``query``, best first (empty for an empty knowledge base)."""
        if self.empty or self.embedder is None:
            return []
        vector = check_vectors(self.embedder.encode([query.strip()]), self.vectors.shape[1], "kb query vector")
        return self.search_vectors(vector, k)[0]

    def search_vectors(self, queries: Vectors, k: int = 5) -> list[list[KbHit]]:
        """Search with already embedded queries (unit vectors)."""
        queries = check_vectors(queries, self.vectors.shape[1], "kb query vectors")
        if self.empty:
            return [[] for _ in range(queries.shape[0])]
        k = max(1, min(k, len(self.chunks)))
        sims, rows = self.faiss_index.search(queries, k)
        return [
            [KbHit(self.chunks[int(r)], round(float(s), 4)) for s, r in zip(srow, rrow, strict=True) if r >= 0]
            for srow, rrow in zip(sims, rows, strict=True)
        ]

    def best_quote(self, query: str, k: int = RERANK_K) -> tuple[KbHit, Quote] | None:
        """The sentence closest to ``query`` among the ``k`` best passages, and its passage (None: nothing found).

        See :mod:`experts.knowledge.quotes`.
        """
        if self.embedder is None:
            return None
        return best_quote(query, self.search(query, k), self.embedder, self.vectors.shape[1])

    def source_of(self, hit: KbHit, quote: Quote) -> AssistSource:
        """The citation of a quote: file, page or section, line range, and the quote's relevance score."""
        return source_of(hit, quote)


_loaded: dict[str, tuple[tuple[int, int], KnowledgeBase]] = {}
_loaded_lock = threading.Lock()


def load_kb(directory: Path | None = None, embedder: Embedder | None = None) -> KnowledgeBase:
    """The knowledge base in ``directory`` (default :func:`kb_dir`), cached per process until it changes.

    A missing or empty knowledge base loads without touching the embedding model.

    Raises:
        ConfigError: when the files are damaged beyond what a rebuild from ``chunks.json`` can repair.
    """
    path = directory if directory is not None else kb_dir()
    meta_path = path / "metadata.json"
    try:
        stat = meta_path.stat()
        signature = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        return _empty(path)
    key = str(path.resolve())
    with _loaded_lock:
        cached = _loaded.get(key)
        if cached is not None and cached[0] == signature and (embedder is None or cached[1].embedder is embedder):
            return cached[1]
        kb = _read(path, embedder)
        _loaded[key] = (signature, kb)
        return kb


def _empty(path: Path) -> KnowledgeBase:
    return KnowledgeBase(path, (), np.zeros((0, 1), dtype=np.float32), None, None, {})


def _read(path: Path, embedder: Embedder | None) -> KnowledgeBase:
    try:
        meta = json.loads((path / "metadata.json").read_text(encoding="utf-8"))
        raw_chunks = json.loads((path / "chunks.json").read_text(encoding="utf-8"))
        chunks = tuple(Chunk(**c) for c in raw_chunks)
        sources = {s["path"]: SourceInfo(**s) for s in meta.get("sources", [])}
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ConfigError(str(path), f"the knowledge base cannot be read ({exc}); remove it and add again") from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise ConfigError(
            str(path / "metadata.json"),
            f"knowledge base format {meta.get('format_version')!r}, this version reads {FORMAT_VERSION}; re-add",
        )
    if not chunks:
        return KnowledgeBase(path, (), np.zeros((0, 1), dtype=np.float32), None, None, sources)
    if embedder is None:
        embedder = get_embedder()
    if meta.get("model_id") == embedder.model_id and meta.get("dim") == embedder.dim:
        try:
            import faiss

            vectors = check_vectors(
                np.load(path / "vectors.npy", mmap_mode="r", allow_pickle=False), embedder.dim, f"{path}/vectors.npy"
            )
            index = faiss.read_index(str(path / "kb.index"))
            if vectors.shape[0] == len(chunks) == index.ntotal and index.d == embedder.dim:
                return KnowledgeBase(path, chunks, vectors, index, embedder, sources)
            logger.warning("knowledge base files in %s disagree with each other; re-embedding", path)
        except (OSError, ValueError, RuntimeError, VectorInvariantError) as exc:
            logger.warning("knowledge base index in %s cannot be used (%s); re-embedding", path, exc)
    else:
        logger.warning("knowledge base in %s was embedded with %s; re-embedding", path, meta.get("model_id"))
    with _write_lock(path):
        return _write(path, chunks, sources, embedder, [(_embed(embedder, chunks), None)])


def _embed(embedder: Embedder, chunks: Iterable[Chunk]) -> Vectors:
    texts = [c.embed_text() for c in chunks]
    parts = [embedder.encode(texts[i : i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)]
    joined = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    return check_vectors(joined, embedder.dim, "kb passage vectors")


@contextlib.contextmanager
def _write_lock(path: Path) -> Iterator[None]:
    """One writer at a time (an exclusive lock on ``.lock``)."""
    path.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path / ".lock"):
        yield


VectorPart = tuple[Vectors, Sequence[int] | None] | Path
"""Rows of a new ``vectors.npy``: a matrix's rows (all of them, or those at the given positions), or a staging
file's."""


def _write(
    path: Path,
    chunks: Sequence[Chunk],
    sources: dict[str, SourceInfo],
    embedder: Embedder | None,
    parts: list[VectorPart],
) -> KnowledgeBase:
    """Write a knowledge base whose vectors are ``parts`` one after the other (a row per chunk), and return it.

    ``metadata.json`` goes first and comes back last, so a reader never pairs it with files of another version.
    The vectors are copied to ``vectors.npy`` and into a new FAISS index a block at a time
    (:data:`VECTOR_BLOCK`); the returned knowledge base maps the file instead of holding a second copy.
    """
    import faiss

    path.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (path / "metadata.json").unlink()
    vectors: Vectors = np.zeros((0, 1), dtype=np.float32)
    index: Any = None
    if chunks and embedder is not None:
        vectors, index = _write_vectors(path, parts, embedder.dim)
        if vectors.shape[0] != len(chunks):
            raise VectorInvariantError(f"{path}/vectors.npy", f"{vectors.shape[0]} rows for {len(chunks)} passages")
        atomic_write(path / "kb.index", lambda tmp: faiss.write_index(index, str(tmp)))
    else:
        for name in ("vectors.npy", "kb.index"):
            with contextlib.suppress(FileNotFoundError):
                (path / name).unlink()

    def save_chunks(tmp: Path) -> None:  # one passage at a time: no second copy of every passage as one string
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write("[")
            for number, chunk in enumerate(chunks):
                handle.write(("," if number else "") + json.dumps(asdict(chunk), ensure_ascii=False))
            handle.write("]")

    atomic_write(path / "chunks.json", save_chunks)
    meta = {
        "format_version": FORMAT_VERSION,
        "model_id": embedder.model_id if embedder is not None else None,
        "dim": embedder.dim if embedder is not None else None,
        "chunks": len(chunks),
        "chunk_chars": CHUNK_CHARS,
        "chunk_overlap": CHUNK_OVERLAP,
        "index_type": type(index).__name__ if index is not None else None,
        "sources": [asdict(s) for s in sorted(sources.values(), key=lambda s: s.path)],
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    atomic_write(path / "metadata.json", lambda tmp: tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8"))
    if index is None:
        return KnowledgeBase(path, (), vectors, None, embedder, sources)
    return KnowledgeBase(path, tuple(chunks), vectors, index, embedder, sources)


def _write_vectors(path: Path, parts: list[VectorPart], dim: int) -> tuple[Vectors, Any]:
    """``vectors.npy`` written from ``parts`` block by block, each block added to a new FAISS index as well.

    Returns the file memory-mapped, and the index.
    """
    count = sum(_rows(part, dim) for part in parts)
    index = empty_faiss_index(dim, count)
    header = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
        "fortran_order": False,
        "shape": (count, dim),
    }

    def save(tmp: Path) -> None:
        with tmp.open("wb") as out:
            np.lib.format.write_array_header_1_0(out, header)
            for part in parts:
                for block in _blocks(part, dim):
                    index.add(block)
                    out.write(block.tobytes())

    atomic_write(path / "vectors.npy", save)
    vectors = np.load(path / "vectors.npy", mmap_mode="r", allow_pickle=False)
    return vectors, index


def _rows(part: VectorPart, dim: int) -> int:
    if isinstance(part, Path):
        return part.stat().st_size // (dim * 4)
    matrix, rows = part
    return matrix.shape[0] if rows is None else len(rows)


def _blocks(part: VectorPart, dim: int) -> Iterator[Vectors]:
    """A part's rows, :data:`VECTOR_BLOCK` at a time; a staging file's are checked (it is read back from disk)."""
    if isinstance(part, Path):
        with part.open("rb") as handle:
            while (block := np.fromfile(handle, dtype=np.float32, count=VECTOR_BLOCK * dim)).size:
                yield check_vectors(block.reshape(-1, dim), dim, str(part))
        return
    matrix, rows = part
    for first in range(0, _rows(part, dim), VECTOR_BLOCK):
        picked = matrix[first : first + VECTOR_BLOCK] if rows is None else matrix[rows[first : first + VECTOR_BLOCK]]
        yield np.ascontiguousarray(picked, dtype=np.float32)


# --- changing it ---------------------------------------------------------------------------------------------------


def add_documents(
    paths: Iterable[Path],
    directory: Path | None = None,
    embedder: Embedder | None = None,
    progress: Callable[[IngestProgress], None] | None = None,
) -> AddReport:
    """Index files (or directories of files); a file already indexed with the same content is left alone.

    A changed file replaces its old passages. Raises :class:`~state.errors.UserError` for a missing path or an
    unreadable file, before anything is written. ``progress`` is called after every batch of passages.
    Interrupted (``KeyboardInterrupt``), the files finished so far are written before it propagates; what was
    embedded of the others stays staged, and the next add of them goes on from there (see the module notes).
    """
    t0 = time.perf_counter()
    path = directory if directory is not None else kb_dir()
    files, skipped = expand_paths(paths)
    report = AddReport(skipped=skipped)
    if embedder is None:
        embedder = get_embedder()
    with _write_lock(path):
        kb = _read(path, embedder) if (path / "metadata.json").exists() else _empty(path)
        known_before = set(kb.sources)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        todo: list[tuple[str, SourceInfo, list[Chunk], int]] = []
        for f in files:
            source = str(f.resolve())
            digest = file_sha256(f)
            known = kb.sources.get(source)
            if known is not None and known.sha256 == digest:
                report.unchanged.append(source)
                continue
            kind, pieces = split_document(f)
            if not pieces:
                report.skipped.append(f"{source}: no text found")
                continue
            for number, piece in enumerate(pieces):  # in place: one list of passages at a time
                pieces[number] = _with_id(piece, f"{digest[:12]}:{number}")
            todo.append((source, SourceInfo(source, digest, kind, len(pieces), stamp), pieces, f.stat().st_size))
        done: list[tuple[str, SourceInfo, list[Chunk], Path]] = []
        try:
            _embed_files(embedder, path, todo, done, report, progress)
        finally:  # Ctrl+C too: the finished files are kept
            if done:
                kb = _merged(kb, done, embedder)
                for *_, staged in done:
                    staged.unlink(missing_ok=True)
        for source, *_ in done:
            (report.updated if source in known_before else report.added).append(source)
    report.chunks = sum(len(pieces) for _, _, pieces, _ in done)
    report.total_chunks = len(kb.chunks)
    report.seconds = time.perf_counter() - t0
    return report


def _embed_files(
    embedder: Embedder,
    path: Path,
    todo: list[tuple[str, SourceInfo, list[Chunk], int]],
    done: list[tuple[str, SourceInfo, list[Chunk], Path]],
    report: AddReport,
    progress: Callable[[IngestProgress], None] | None,
) -> None:
    """Embed each file's passages into its staging file, appending each finished file to ``done``."""
    total = sum(len(pieces) for _, _, pieces, _ in todo)
    size = sum(nbytes for *_, nbytes in todo)
    finished = 0
    for number, (source, info, pieces, _) in enumerate(todo):

        def tick(count: int, base: int = finished, number: int = number, source: str = source) -> None:
            if progress is not None:
                progress(IngestProgress(base + count, total, number, len(todo), size, source))

        staged = _staged(path, info.sha256, embedder)
        report.resumed += _embed_staged(embedder, pieces, staged, tick)
        finished += len(pieces)
        done.append((source, info, pieces, staged))
    if progress is not None:
        progress(IngestProgress(finished, total, len(todo), len(todo), size, ""))


def _staged(path: Path, digest: str, embedder: Embedder) -> Path:
    """The staging file of one file's vectors, for one embedding model."""
    model = hashlib.sha256(f"{embedder.model_id}:{embedder.dim}".encode()).hexdigest()[:12]
    return path / STAGING / f"{digest[:24]}-{model}.f32"


def _embed_staged(embedder: Embedder, pieces: list[Chunk], staged: Path, tick: Callable[[int], None]) -> int:
    """Embed the passages batch by batch, appending the rows to ``staged``; rows already there are not embedded again.

    Returns how many were already staged.
    """
    row = embedder.dim * 4
    staged.parent.mkdir(parents=True, exist_ok=True)
    have = min(staged.stat().st_size // row, len(pieces)) if staged.exists() else 0
    with staged.open("ab") as out:
        out.truncate(have * row)  # a batch cut short by a crash is dropped whole
        tick(have)
        for start in range(have, len(pieces), EMBED_BATCH):
            texts = [c.embed_text() for c in pieces[start : start + EMBED_BATCH]]
            batch = check_vectors(embedder.encode(texts), embedder.dim, "kb passage vectors")
            out.write(np.ascontiguousarray(batch, dtype=np.float32).tobytes())
            out.flush()
            tick(min(start + EMBED_BATCH, len(pieces)))
    return have


def _merged(
    kb: KnowledgeBase, done: list[tuple[str, SourceInfo, list[Chunk], Path]], embedder: Embedder
) -> KnowledgeBase:
    """The knowledge base written with the finished files' passages in place of their old ones."""
    replaced = {source for source, *_ in done}
    keep = [i for i, c in enumerate(kb.chunks) if c.source not in replaced]
    parts: list[VectorPart] = [(kb.vectors, keep)] if keep else []
    parts += [staged for *_, staged in done]
    chunks = [*(kb.chunks[i] for i in keep), *(c for _, _, pieces, _ in done for c in pieces)]
    sources = {**kb.sources, **{source: info for source, info, _, _ in done}}
    return _write(kb.directory, chunks, sources, embedder, parts)


def remove_documents(
    paths: Iterable[Path], directory: Path | None = None, embedder: Embedder | None = None
) -> list[str]:
    """Remove documents (a directory removes every document under it); returns the removed sources."""
    path = directory if directory is not None else kb_dir()
    if not (path / "metadata.json").exists():
        return []
    with _write_lock(path):
        kb = _read(path, embedder)
        wanted = [str(p.expanduser().resolve()) for p in paths]
        gone = sorted(s for s in kb.sources if any(s == w or s.startswith(w.rstrip(os.sep) + os.sep) for w in wanted))
        if not gone:
            return []
        keep = [i for i, c in enumerate(kb.chunks) if c.source not in gone]
        sources = {k: v for k, v in kb.sources.items() if k not in gone}
        _write(path, [kb.chunks[i] for i in keep], sources, kb.embedder, [(kb.vectors, keep)])
    return gone


def kb_sources(directory: Path | None = None) -> list[SourceInfo]:
    """The documents in the knowledge base, read from its metadata only (no model is loaded)."""
    path = directory if directory is not None else kb_dir()
    try:
        meta = json.loads((path / "metadata.json").read_text(encoding="utf-8"))
        return [SourceInfo(**s) for s in meta.get("sources", [])]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(str(path / "metadata.json"), f"cannot be read ({exc})") from None


def _with_id(chunk: Chunk, chunk_id: str) -> Chunk:
    return Chunk(chunk_id, chunk.source, chunk.text, chunk.page, chunk.section, chunk.line_start, chunk.line_end)
