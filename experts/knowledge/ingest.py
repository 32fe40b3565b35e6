"""Reading documents and cutting them into located passages for the knowledge base.

``coe kb add PATH...`` reads text (``.txt``, ``.text``, ``.rst``), Markdown (``.md``, ``.markdown``) and PDF
files (directories are walked). Each file is cut into passages that keep their location:

* Markdown: the heading structure is read first (fenced code is skipped), so a passage never straddles two
  sections and carries its heading path (``Encryption > Keys``) and its line range;
* text: a line range;
* PDF (``pypdf``): the page number; a passage never straddles two pages.

The cutting itself is LangChain's ``RecursiveCharacterTextSplitter`` (paragraphs, then lines, then sentences,
then words; :data:`CHUNK_CHARS` characters with :data:`CHUNK_OVERLAP` of overlap), with the Markdown separators
for Markdown files.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from state.errors import ConfigError, UserError

__all__ = ["CHUNK_CHARS", "CHUNK_OVERLAP", "SUFFIXES", "Chunk", "expand_paths", "file_sha256", "split_document"]

CHUNK_CHARS = 400
"""Passage size in characters: ~90-100 word pieces, well inside MiniLM's 256 (bench/bench_assist.py compares
sizes: 300-600 gave the same calibrated recall; 400 keeps a cited line range short)."""
CHUNK_OVERLAP = 50
SUFFIXES: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".rst": "text",
    ".pdf": "pdf",
}

WINDOW = 1_000_000
"""The most characters handed to the splitter at once (see :func:`_windows`)."""
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
"""A Markdown ATX heading line (also used to drop heading lines from quotes)."""
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True, slots=True)
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
    sections = _markdown_sections(text) if kind == "markdown" else [(None, 0, len(text))]
    blocks = [window for section in sections for window in _windows(text, *section)]
    chunks: list[Chunk] = []
    splitter = _splitter(kind)
    counted, line = 0, 1  # newlines are counted once, forward from the last passage (passages start in order)
    for section, start, end in blocks:
        for offset, piece in _split(splitter, text[start:end]):
            first = start + offset
            if first < counted:
                counted, line = 0, 1
            line += text.count("\n", counted, first)
            counted = first
            chunks.append(Chunk("", source, piece, None, section, line, line + piece.count("\n")))
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


def _windows(text: str, section: str | None, start: int, end: int) -> Iterator[tuple[str | None, int, int]]:
    """A section in pieces of at most :data:`WINDOW` characters, cut at a blank line (else a line end).

    The splitter holds several copies of what it is given (splits, merges, documents): a 50 MB text file handed to
    it whole raised the peak memory by 160 MB, in windows by nothing measurable. Passages only cross a blank line
    when both sides are short, so a cut there changes at most the passage on each side of it.
    """
    while end - start > WINDOW:
        cut = text.rfind("\n\n", start, start + WINDOW)
        if cut <= start:
            cut = text.rfind("\n", start, start + WINDOW)
        cut = cut + 1 if cut > start else start + WINDOW
        yield section, start, cut
        start = cut
    yield section, start, end


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
            heading = HEADING.match(line.rstrip("\n"))
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


def expand_paths(paths: Iterable[Path]) -> tuple[list[Path], list[str]]:
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


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (a re-added file with the same digest is left alone)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
