"""Experts: the catalog, the router, and the backends behind one pool interface.

The catalog of scope documents is ``catalog``; the embedder and dual-embedding router are ``embedding``,
``embedding_onnx``, ``router`` and ``router_cache``; the backends are llama.cpp in-process and a scripted fake.
Only the pool interface is imported here; the router and the embedder load on first use.
"""

from experts.pool import (
    ChatMessage,
    ExpertBackend,
    Generation,
    GenerationRequest,
    clear_backends,
    get_backend,
)

__all__ = ["ChatMessage", "ExpertBackend", "Generation", "GenerationRequest", "clear_backends", "get_backend"]
