"""The LangGraph Store's vector index on the bundled embedder: the facts' semantic search where a store has one.

A store opened with :func:`store_index` embeds the ``text`` field of the items put with ``index=["text"]`` (the
facts of :mod:`memory.store`) and answers ``search(namespace, query=...)`` with a cosine score, the same score
the project's own scan computes from the same vectors, so the calibrated line holds on both. Where a store has no
index (:func:`why_no_index` says why), the facts are searched by that scan. The ``langgraph dev`` server's store
is configured without one: the server hands the graph a wrapper that does not say whether its store has an index,
and the scan gives the same scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experts.embedding.factory import get_embedder

__all__ = ["DIMS", "FIELDS", "embed_texts", "store_index", "why_no_index"]

DIMS = 384
"""The bundled embedder's dimension (all-MiniLM-L6-v2, every backend): a store's index is declared before the
embedder loads, so the number is fixed here and checked when the first texts are embedded."""
FIELDS = ["text"]
"""The field of an item that is embedded (a fact's sentence)."""


def embed_texts(texts: Sequence[str]) -> list[list[float]]:
    """The bundled embedder's unit vectors of ``texts`` (the Store's ``embed`` function)."""
    vectors = get_embedder().encode(list(texts))
    if vectors.shape[1] != DIMS:
        raise ValueError(f"the embedder makes {vectors.shape[1]}-dimensional vectors; the store's index holds {DIMS}")
    return [[float(x) for x in row] for row in vectors]


def store_index() -> dict[str, Any]:
    """The ``index`` argument of a LangGraph store (``IndexConfig``) on the bundled embedder."""
    return {"dims": DIMS, "embed": embed_texts, "fields": list(FIELDS)}


def why_no_index(store: Any) -> str | None:
    """Why ``store`` cannot search by meaning itself (None: it has a vector index)."""
    if getattr(store, "index_config", None):
        return None
    kind = type(store).__name__
    if kind == "SqliteStore":
        return "this Python's sqlite3 cannot load extensions, so the SQLite store has no sqlite-vec index"
    if kind in ("PostgresStore", "AsyncPostgresStore"):
        return "the PostgreSQL store is opened without pgvector"
    return f"the store ({kind}) has no vector index"
