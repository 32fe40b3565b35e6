"""The local knowledge base behind ``{{ASSIST:lookup:...}}``: documents the user adds, chunked, embedded, in FAISS.

``coe kb add PATH...`` reads text (``.txt``, ``.text``, ``.rst``), Markdown (``.md``, ``.markdown``) and PDF
files (directories are walked). Each file is cut into passages that keep their location:

* Markdown: the heading structure is read first (fenced code is skipped), so a passage never straddles two
  sections and carries its heading path (``Encryption > Keys``) and its line range;
* text: a line range;
* PDF (``pypdf``): the page number; a passage never straddles two pages.

The cutting itself is LangChain's ``RecursiveCharacterTextSplitter`` (paragraphs, then lines, then sentences,
then words; :data:`CHUNK_CHARS` characters with :data:`CHUNK_OVERLAP` of overlap), with the Markdown separators
for Markdown files. Passages are embedded with the router's embedder (section path + text) into an exact
inner-product FAISS index (HNSW from :data:`~experts.template_index.HNSW_FROM` passages on, as for templates).

The knowledge base is a directory: ``$COE_KB`` or the run setting ``kb_path``, else ``kb`` in the user data
directory (``$COE_HOME`` or ``platformdirs.user_data_dir("coe")``, where the checkpoints live). Files in it:
``chunks.json`` (every passage with its source and location), ``vectors.npy``, ``kb.index`` (FAISS),
``metadata.json`` (format, embedding model, counts, every source file with its SHA-256; written last). Each is
replaced atomically, so a run that reads the knowledge base while ``coe kb add`` writes it sees the old or
the new one; writers take a lock file. A knowledge base embedded with another model is re-embedded from its
stored passages on first use.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from experts.embedding import Embedder, VectorInvariantError, Vectors, check_vectors
from experts.files import atomic_write
from state.assist import AssistSource
from state.errors import ConfigError, UserError

__all__ = [
    "CHUNK_CHARS",
    "CHUNK_OVERLAP",
    "KB_ENV",
    "SUFFIXES",
    "AddReport",
    "Chunk",
    "KbHit",
    "KnowledgeBase",
    "Quote",
    "add_documents",
    "kb_dir",
    "kb_sources",
    "load_kb",
    "remove_documents",
    "split_document",
]

logger = logging.getLogger(__name__)

KB_ENV = "COE_KB"
FORMAT_VERSION = 1
CHUNK_CHARS = 400
"""Passage size in characters: ~90-100 word pieces, well inside MiniLM's 256 (bench/bench_assist.py compares
sizes: 300-600 gave the same calibrated recall; 400 keeps a cited line range short)."""
CHUNK_OVERLAP = 50
RERANK_K = 5
"""Passages whose sentences are compared with a request (the best sentence decides)."""
SUFFIXES: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".rst": "text",
    ".pdf": "pdf",
}
EMBED_BATCH = 64

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TITLE_LINE = 60
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[])|\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)")


@dataclass(frozen=True)
class Chunk:
    """One passage and where it comes from."""

    id: str
    source: str
    """Absolute path of the document."""
    text: str
    page: int | None = None
    section: str | None = None
    line_start: int | None = None
    line_end: int | None = None

    def embed_text(self) -> str:
        """What is embedded: the heading path, then the passage."""
        return f"{self.section}\n{self.text}" if self.section else self.text


@dataclass(frozen=True)
class KbHit:
    """A search result: a passage and its cosine similarity to the query."""

    chunk: Chunk
    score: float


@dataclass(frozen=True)
class Quote:
    """The sentence(s) of a passage that answer a request best, with their own line range."""

    text: str
    score: float
    """Cosine similarity of the quoted sentence(s) to the request."""
    line_start: int | None
    line_end: int | None


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


def kb_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The knowledge base directory: ``override`` > ``$COE_KB`` > ``kb`` in the user data directory."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get(KB_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    home = os.environ.get("COE_HOME")
    if home:  # the same rule as graph.persistence.data_dir (a lower layer cannot import it)
        return Path(home) / "kb"
    from platformdirs import user_data_dir

    return Path(user_data_dir("coe", appauthor=False)) / "kb"


# --- reading and cutting documents ----------------------------------------------------------------------------


def split_document(path: Path) -> tuple[str, list[Chunk]]:
    """Read one file and cut it into located passages; returns ``(kind, chunks)`` (ids are set by the caller).

    Raises:
        UserError: for an unsupported suffix or a file that cannot be read or decoded.
    """
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise UserError(f"{path}: unsupported file type {path.suffix!r}; supported: {', '.join(sorted(SUFFIXES))}")
    source = str(path.resolve())
    if kind == "pdf":
        return kind, _split_pdf(path, source)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks = _markdown_sections(text) if kind == "markdown" else [(None, 0, len(text))]
    chunks: list[Chunk] = []
    splitter = _splitter(kind)
    for section, start, end in blocks:
        for offset, piece in _split(splitter, text[start:end]):
            first = start + offset
            line_start = text.count("\n", 0, first) + 1
            chunks.append(Chunk("", source, piece, None, section, line_start, line_start + piece.count("\n")))
    return kind, chunks


def _splitter(kind: str) -> Any:
    try:
        from langchain_text_splitters import Language, RecursiveCharacterTextSplitter
    except ImportError:  # pragma: no cover - a core dependency
        raise ConfigError("knowledge base", "langchain-text-splitters is missing: pip install -e .") from None
    if kind == "markdown":
        return RecursiveCharacterTextSplitter.from_language(
            Language.MARKDOWN, chunk_size=CHUNK_CHARS, chunk_overlap=CHUNK_OVERLAP, add_start_index=True
        )
    return RecursiveCharacterTextSplitter(chunk_size=CHUNK_CHARS, chunk_overlap=CHUNK_OVERLAP, add_start_index=True)


def _split(splitter: Any, text: str) -> Iterator[tuple[int, str]]:
    """``(offset in text, passage)`` for every non-empty passage."""
    if not text.strip():
        return
    for doc in splitter.create_documents([text]):
        piece = doc.page_content
        start = int(doc.metadata.get("start_index", -1))
        if start < 0:  # the splitter could not place it (should not happen with add_start_index)
            start = max(text.find(piece), 0)
        if piece.strip():
            yield start, piece


def _markdown_sections(text: str) -> list[tuple[str | None, int, int]]:
    """``(heading path, start, end)`` character ranges: each heading starts a section; code fences are skipped."""
    blocks: list[tuple[str | None, int, int]] = []
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    current: str | None = None
    start = 0
    pos = 0
    for line in text.splitlines(keepends=True):
        fenced = _FENCE.match(line)
        if fenced is not None:
            marker = fenced.group(1)[0]
            fence = None if fence == marker else (fence or marker)
        elif fence is None:
            heading = _HEADING.match(line.rstrip("\n"))
            if heading is not None:
                blocks.append((current, start, pos))
                level = len(heading.group(1))
                stack = [(lv, t) for lv, t in stack if lv < level] + [(level, heading.group(2).strip())]
                current = " > ".join(t for _, t in stack)
                start = pos
        pos += len(line)
    blocks.append((current, start, len(text)))
    return [b for b in blocks if text[b[1] : b[2]].strip()]


def _split_pdf(path: Path, source: str) -> list[Chunk]:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:  # pragma: no cover - a core dependency
        raise ConfigError("knowledge base", "pypdf is missing: pip install -e .") from None
    try:
        reader = PdfReader(str(path))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read the PDF ({exc})") from None
    splitter = _splitter("text")
    chunks: list[Chunk] = []
    for number, page_text in enumerate(pages, start=1):
        for _, piece in _split(splitter, page_text.replace("\r\n", "\n")):
            chunks.append(Chunk("", source, piece, page=number))
    return chunks


def _expand(paths: Iterable[Path]) -> tuple[list[Path], list[str]]:
    """Files to index (directories walked, sorted) and the paths skipped with their reason."""
    files: list[Path] = []
    skipped: list[str] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
            if not found:
                skipped.append(f"{path}: no {', '.join(sorted(SUFFIXES))} files in this directory")
            files.extend(found)
        elif path.is_file():
            if path.suffix.lower() in SUFFIXES:
                files.append(path)
            else:
                skipped.append(f"{path}: unsupported file type {path.suffix!r}")
        else:
            raise UserError(f"{path}: no such file or directory")
    unique: dict[str, Path] = {}
    for f in files:
        unique.setdefault(str(f.resolve()), f)
    return list(unique.values()), skipped


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
        """The sentence closest to ``query`` among the ``k`` best passages, and its passage (None: empty).

        Passages are found by their own vectors; the sentence decides, because a passage mixes several facts
        and its vector is an average of them (the calibration in ``bench/bench_assist.py`` shows the
        sentence score separates answerable from unanswerable requests better). The quote is always text of
        the document, never a paraphrase.
        """
        hits = self.search(query, k)
        if not hits or self.embedder is None:
            return None
        owners: list[tuple[KbHit, tuple[int, int]]] = []
        for hit in hits:
            spans = sentence_spans(hit.chunk.text) or [(0, len(hit.chunk.text))]
            owners.extend((hit, span) for span in spans)
        vectors = check_vectors(
            self.embedder.encode([query.strip()] + [h.chunk.text[a:b] for h, (a, b) in owners]),
            self.vectors.shape[1],
            "kb sentence vectors",
        )
        sims = vectors[1:] @ vectors[0]
        best = int(np.argmax(sims))
        hit, (start, end) = owners[best]
        follower = owners[best + 1] if best + 1 < len(owners) else None
        if end - start < 60 and follower is not None and follower[0] is hit:
            end = follower[1][1]
        return hit, self._quote(hit, (start, end), round(float(sims[best]), 4))

    @staticmethod
    def _quote(hit: KbHit, span: tuple[int, int], score: float) -> Quote:
        text = hit.chunk.text
        start, end = span
        lines: tuple[int | None, int | None] = (None, None)
        if hit.chunk.line_start is not None:
            first = hit.chunk.line_start + text.count("\n", 0, start)
            lines = (first, first + text.count("\n", start, end))
        return Quote(" ".join(text[start:end].split()), score, lines[0], lines[1])

    def source_of(self, hit: KbHit, quote: Quote) -> AssistSource:
        """The citation of a quote: file, page or section, line range, and the quote's relevance score."""
        c = hit.chunk
        return AssistSource(
            kind="document",
            file=c.source,
            page=c.page,
            section=c.section,
            line_start=quote.line_start,
            line_end=quote.line_end,
            score=quote.score,
            excerpt=c.text.strip(),
        )


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence (or list item) of a passage, whitespace trimmed.

    Besides sentence ends, blank lines and list items, a short line without final punctuation (a title, a
    PDF heading) ends where it ends, so it is not glued to the sentence after it; heading lines are dropped.
    """
    cuts = [(m.start(), m.end()) for m in _SENTENCE_END.finditer(text)]
    line_start = 0
    for m in re.finditer(r"\n", text):
        line = text[line_start : m.start()].strip()
        title = bool(line) and len(line) < _TITLE_LINE and line[-1] not in ".,;:!?"
        if title or text.startswith("#", m.end()):
            cuts.append((m.start(), m.end()))
        line_start = m.end()
    spans: list[tuple[int, int]] = []
    pos = 0
    for start, end in [*sorted(cuts), (len(text), len(text))]:
        if start < pos:
            continue
        piece = text[pos:start]
        stripped = piece.strip()
        if stripped and not _HEADING.match(stripped):
            lead = len(piece) - len(piece.lstrip())
            spans.append((pos + lead, pos + lead + len(stripped)))
        pos = end
    return spans


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
        from experts.embedding import get_embedder

        embedder = get_embedder()
    if meta.get("model_id") == embedder.model_id and meta.get("dim") == embedder.dim:
        try:
            import faiss

            vectors = check_vectors(
                np.load(path / "vectors.npy", allow_pickle=False), embedder.dim, f"{path}/vectors.npy"
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
        vectors = _embed(embedder, chunks)
        kb = KnowledgeBase(path, chunks, vectors, _index(vectors), embedder, sources)
        _write(kb)
    return kb


def _embed(embedder: Embedder, chunks: Iterable[Chunk]) -> Vectors:
    texts = [c.embed_text() for c in chunks]
    parts = [embedder.encode(texts[i : i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)]
    joined = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    return check_vectors(joined, embedder.dim, "kb passage vectors")


def _index(vectors: Vectors) -> Any:
    from experts.template_index import build_faiss_index

    return build_faiss_index(vectors)


@contextlib.contextmanager
def _write_lock(path: Path) -> Iterator[None]:
    """One writer at a time (POSIX advisory lock on ``.lock``; elsewhere no lock)."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with (path / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write(kb: KnowledgeBase) -> None:
    import faiss

    path = kb.directory
    path.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (path / "metadata.json").unlink()

    def save_vectors(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            np.save(handle, kb.vectors, allow_pickle=False)

    chunks = json.dumps([asdict(c) for c in kb.chunks], ensure_ascii=False)
    atomic_write(path / "chunks.json", lambda tmp: tmp.write_text(chunks, encoding="utf-8"))
    if kb.chunks:
        atomic_write(path / "vectors.npy", save_vectors)
        atomic_write(path / "kb.index", lambda tmp: faiss.write_index(kb.faiss_index, str(tmp)))
    else:
        for name in ("vectors.npy", "kb.index"):
            with contextlib.suppress(FileNotFoundError):
                (path / name).unlink()
    meta = {
        "format_version": FORMAT_VERSION,
        "model_id": kb.embedder.model_id if kb.embedder is not None else None,
        "dim": kb.embedder.dim if kb.embedder is not None else None,
        "chunks": len(kb.chunks),
        "chunk_chars": CHUNK_CHARS,
        "chunk_overlap": CHUNK_OVERLAP,
        "index_type": type(kb.faiss_index).__name__ if kb.chunks else None,
        "sources": [asdict(s) for s in sorted(kb.sources.values(), key=lambda s: s.path)],
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    atomic_write(path / "metadata.json", lambda tmp: tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8"))


# --- changing it ---------------------------------------------------------------------------------------------------


def add_documents(paths: Iterable[Path], directory: Path | None = None, embedder: Embedder | None = None) -> AddReport:
    """Index files (or directories of files); a file already indexed with the same content is left alone.

    A changed file replaces its old passages. Raises :class:`~state.errors.UserError` for a missing path or an
    unreadable file, before anything is written.
    """
    t0 = time.perf_counter()
    path = directory if directory is not None else kb_dir()
    files, skipped = _expand(paths)
    report = AddReport(skipped=skipped)
    if embedder is None:
        from experts.embedding import get_embedder

        embedder = get_embedder()
    with _write_lock(path):
        kb = _read(path, embedder) if (path / "metadata.json").exists() else _empty(path)
        sources = dict(kb.sources)
        new_chunks: list[Chunk] = []
        replaced: set[str] = set()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for f in files:
            source = str(f.resolve())
            digest = _sha256(f)
            known = sources.get(source)
            if known is not None and known.sha256 == digest:
                report.unchanged.append(source)
                continue
            kind, pieces = split_document(f)
            if not pieces:
                report.skipped.append(f"{source}: no text found")
                continue
            pieces = [_with_id(c, f"{digest[:12]}:{i}") for i, c in enumerate(pieces)]
            new_chunks.extend(pieces)
            (report.updated if known is not None else report.added).append(source)
            replaced.add(source)
            sources[source] = SourceInfo(source, digest, kind, len(pieces), stamp)
        if not new_chunks:
            report.total_chunks = len(kb.chunks)
            report.seconds = time.perf_counter() - t0
            return report
        keep = [i for i, c in enumerate(kb.chunks) if c.source not in replaced]
        new_vectors = _embed(embedder, new_chunks)
        old_vectors = kb.vectors[keep] if keep else np.zeros((0, embedder.dim), dtype=np.float32)
        vectors = check_vectors(np.concatenate([old_vectors, new_vectors]), embedder.dim, "kb passage vectors")
        chunks = (*(kb.chunks[i] for i in keep), *new_chunks)
        updated = KnowledgeBase(path, chunks, vectors, _index(vectors), embedder, sources)
        _write(updated)
    report.chunks = len(new_chunks)
    report.total_chunks = len(chunks)
    report.seconds = time.perf_counter() - t0
    return report


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
        chunks = tuple(kb.chunks[i] for i in keep)
        if chunks and kb.embedder is not None:
            vectors = kb.vectors[keep]
            updated = KnowledgeBase(path, chunks, vectors, _index(vectors), kb.embedder, sources)
        else:
            updated = KnowledgeBase(path, (), np.zeros((0, 1), dtype=np.float32), None, kb.embedder, sources)
        _write(updated)
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
