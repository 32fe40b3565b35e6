"""The process's embedder: which backend computes the bundled model's sentence embeddings.

Two backends compute the same embedding (``$COE_EMBED_BACKEND``, a process variable of
:data:`state.settings.PROCESS_ENV`):

* ``onnx`` (the default): ONNX Runtime over an ONNX graph of the encoder built from the safetensors weights
  (:mod:`experts.embedding.onnx_bert`); the fastest on a CPU.
* ``sentence-transformers``: the reference implementation (:mod:`experts.embedding.reference`; torch).

A third, ``onnx-int8``, is the ONNX graph with int8 weights: faster, but its vectors are close to the others',
not equal, so it names a model of its own. ONNX Runtime imports in a fraction of a second, where torch and
sentence-transformers take seconds; that is what keeps ``coe route`` a short command.
"""

from __future__ import annotations

import threading
from pathlib import Path

from experts.embedding.encoder import Embedder
from experts.embedding.model_files import default_model_dir
from experts.embedding.onnx_bert import OnnxMiniLM
from experts.embedding.reference import SentenceTransformerEmbedder
from state.errors import ConfigError
from state.settings import process_env

__all__ = ["BACKEND_ENV", "EMBED_BACKENDS", "get_embedder"]

EMBED_BACKENDS: tuple[str, ...] = ("onnx", "onnx-int8", "sentence-transformers")
BACKEND_ENV = "COE_EMBED_BACKEND"

_embedders: dict[tuple[str, str], Embedder] = {}
_embedders_lock = threading.Lock()


def get_embedder(backend: str | None = None) -> Embedder:
    """Return the process-wide embedder for ``backend`` (default: ``$COE_EMBED_BACKEND``, else ``onnx``).

    Raises:
        ConfigError: for an unknown backend, a missing model package or missing optional dependencies.
    """
    source = "argument backend"
    if backend is None:
        backend = process_env(BACKEND_ENV) or "onnx"
        source = f"environment variable {BACKEND_ENV}"
    if backend not in EMBED_BACKENDS:
        raise ConfigError(source, f"unknown embedding backend {backend!r}; allowed: {', '.join(EMBED_BACKENDS)}")
    model_dir = default_model_dir()
    key = (backend, str(model_dir))
    with _embedders_lock:
        embedder = _embedders.get(key)
        if embedder is None:
            embedder = _create(backend, model_dir)
            _embedders[key] = embedder
        return embedder


def _create(backend: str, model_dir: Path) -> Embedder:
    if backend in ("onnx", "onnx-int8"):
        return OnnxMiniLM(model_dir, "int8" if backend == "onnx-int8" else "float32")
    return SentenceTransformerEmbedder(model_dir)
