"""Expert backends: the protocol every backend implements, in-process llama.cpp, remote servers and the fake."""

from experts.backends.endpoint import Endpoint
from experts.backends.protocol import ChatMessage, ExpertBackend, Generation, GenerationRequest

__all__ = ["ChatMessage", "Endpoint", "ExpertBackend", "Generation", "GenerationRequest"]
