"""The knowledge base behind lookup assists: documents read and cut, embedded, searched and quoted."""

from experts.knowledge.ingest import CHUNK_CHARS, CHUNK_OVERLAP, SUFFIXES, Chunk, split_document
from experts.knowledge.quotes import KbHit, Quote, sentence_spans
from experts.knowledge.store import (
    AddReport,
    IngestProgress,
    KnowledgeBase,
    SourceInfo,
    add_documents,
    kb_sources,
    load_kb,
    remove_documents,
)

__all__ = [
    "CHUNK_CHARS",
    "CHUNK_OVERLAP",
    "SUFFIXES",
    "AddReport",
    "IngestProgress",
    "Chunk",
    "KbHit",
    "KnowledgeBase",
    "Quote",
    "SourceInfo",
    "add_documents",
    "kb_sources",
    "load_kb",
    "remove_documents",
    "sentence_spans",
    "split_document",
]
