"""Answering a request from the knowledge base: the sentence that answers it best, quoted verbatim, and its citation.

Passages are found by their own vectors; the sentence decides, because a passage mixes several facts and its
vector is an average of them (the calibration in ``bench/bench_assist.py`` shows the sentence score separates
answerable from unanswerable requests better). The quote is always text of the document, never a paraphrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from experts.embedding.encoder import Embedder
from experts.embedding.vectors import check_vectors
from experts.knowledge.ingest import HEADING, Chunk
from state.assist import AssistSource

__all__ = ["RERANK_K", "KbHit", "Quote", "best_quote", "sentence_spans", "source_of"]

RERANK_K = 5
"""Passages whose sentences are compared with a request (the best sentence decides)."""

_TITLE_LINE = 60
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[])|\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)")


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


def best_quote(query: str, hits: list[KbHit], embedder: Embedder, dim: int) -> tuple[KbHit, Quote] | None:
    """The sentence closest to ``query`` among the passages ``hits`` (the best few), and its passage (None: none).

    ``embedder`` is the knowledge base's (``dim`` its dimension): the request and the sentences are compared
    in the space the passages were found in.
    """
    if not hits:
        return None
    owners: list[tuple[KbHit, tuple[int, int]]] = []
    for hit in hits:
        spans = sentence_spans(hit.chunk.text) or [(0, len(hit.chunk.text))]
        owners.extend((hit, span) for span in spans)
    vectors = check_vectors(
        embedder.encode([query.strip()] + [h.chunk.text[a:b] for h, (a, b) in owners]),
        dim,
        "kb sentence vectors",
    )
    sims = vectors[1:] @ vectors[0]
    best = int(np.argmax(sims))
    hit, (start, end) = owners[best]
    follower = owners[best + 1] if best + 1 < len(owners) else None
    if end - start < 60 and follower is not None and follower[0] is hit:
        end = follower[1][1]
    return hit, _quote(hit, (start, end), round(float(sims[best]), 4))


def _quote(hit: KbHit, span: tuple[int, int], score: float) -> Quote:
    text = hit.chunk.text
    start, end = span
    lines: tuple[int | None, int | None] = (None, None)
    if hit.chunk.line_start is not None:
        first = hit.chunk.line_start + text.count("\n", 0, start)
        lines = (first, first + text.count("\n", start, end))
    return Quote(" ".join(text[start:end].split()), score, lines[0], lines[1])


def source_of(hit: KbHit, quote: Quote) -> AssistSource:
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
        if stripped and not HEADING.match(stripped):
            lead = len(piece) - len(piece.lstrip())
            spans.append((pos + lead, pos + lead + len(stripped)))
        pos = end
    return spans
