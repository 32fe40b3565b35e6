"""Expert backends behind one pool interface (llama.cpp in-process, scripted fake)."""

from experts.pool import (
    ChatMessage,
    ExpertBackend,
    Generation,
    GenerationRequest,
    clear_backends,
    get_backend,
)

__all__ = ["ChatMessage", "ExpertBackend", "Generation", "GenerationRequest", "clear_backends", "get_backend"]
