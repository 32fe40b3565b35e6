"""A static token table distilled from the sentence encoder: the router's fast first stage.

The encoder's cost is its 36 weight products per text (see :mod:`experts.embedding.onnx_bert`); a lookup table costs
none. :func:`distil_table` runs the encoder once on every token of its vocabulary alone (``[CLS] token
[SEP]``) and keeps the pooled vector per token. A text's static vector is then the weighted mean of its tokens'
rows, normalised: tokenising and one sum, well under a millisecond.

Two adjustments, both measured on the routing calibration texts (``bench/bench_routing.py``):

* the table is **centred** (the mean row over the vocabulary is subtracted): every row carries the ``[CLS]`` and
  ``[SEP]`` context it was made in, a common component that otherwise dominates the cosine between texts;
* rows are **weighted** by ``a / (a + p(rank))`` with a Zipf ``p`` over the token id, taken as a frequency rank
  (smooth inverse frequency). The wordpiece vocabulary is only roughly ordered by frequency, so this is a proxy,
  but it measured better than equal weights.

Static vectors are another embedding (bag of tokens: no word order, no context), so they have a ``model_id`` of
their own and an expert index of their own. The router uses them only where they are decisive and defers
every other text to the encoder (see :mod:`experts.routing.router`).

The table is built once per encoder and kept in the model cache beside the ONNX graph
(``$COE_MODEL_CACHE`` or ``~/.cache/coe/models``), named after the encoder's model id, the weights'
fingerprint and :data:`TABLE_VERSION`; it is read with a memory map, so loading it costs milliseconds. A file
of the wrong shape or with non-finite values is rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np

from experts.embedding.encoder import BertSentenceEncoder
from experts.embedding.vectors import Vectors, check_vectors
from state.errors import ConfigError
from state.files import atomic_write
from state.paths import model_cache_dir

__all__ = ["TABLE_VERSION", "StaticEmbedder", "distil_table", "static_weights"]

logger = logging.getLogger(__name__)

TABLE_VERSION = 1
"""Part of the table's file name and model id: changing how the table is made makes a new one."""
SIF_A = 1e-3
"""Smooth-inverse-frequency constant of :func:`static_weights`."""
DISTIL_BATCH = 2048
"""Tokens per encoder call while distilling (three positions each)."""


def distil_table(encoder: BertSentenceEncoder) -> Vectors:
    """Every vocabulary token's pooled vector: the encoder run on ``[CLS] token [SEP]``, one row per token id."""
    cls_id, sep_id = encoder.special_ids()
    size = encoder.vocab_size
    table = np.empty((size, encoder.dim), dtype=np.float32)
    for start in range(0, size, DISTIL_BATCH):
        ids = np.arange(start, min(size, start + DISTIL_BATCH), dtype=np.int64)
        tokens = np.stack([np.full_like(ids, cls_id), ids, np.full_like(ids, sep_id)], axis=1)
        table[start : start + ids.size] = encoder.embed_ids(tokens, np.ones_like(tokens))
    return table


def static_weights(size: int) -> Vectors:
    """Smooth inverse frequency per token id, with a Zipf frequency over the id as its rank."""
    rank = np.arange(1, size + 1, dtype=np.float64)
    p = 1.0 / (rank * np.log(1.78 * size))
    out: Vectors = (SIF_A / (SIF_A + p)).astype(np.float32)
    return out


class StaticEmbedder:
    """Sentence vectors from the table distilled from ``encoder``, with the encoder's own tokenizer.

    Args:
        encoder: The sentence encoder to distil (its vectors are never mixed with these: other ``model_id``).
        cache: Where the table file lives (default: the model cache).
    """

    backend = "static"

    def __init__(self, encoder: BertSentenceEncoder, cache: Path | None = None) -> None:
        self.encoder = encoder
        self.dim = encoder.dim
        self.model_id = f"{encoder.model_id}:static-v{TABLE_VERSION}"
        self._cls, self._sep = encoder.special_ids()
        self._unk = encoder.unk_id()
        self.path = (cache if cache is not None else model_cache_dir()) / f"static-table-{self._fingerprint()}.npy"
        self._table = self._load_or_build()

    def _fingerprint(self) -> str:
        key = f"{TABLE_VERSION}:{self.encoder.model_id}:{self.encoder.weights_fingerprint()}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def _load_or_build(self) -> Vectors:
        shape = (self.encoder.vocab_size, self.dim)
        if self.path.is_file():
            try:
                table: Vectors = np.load(self.path, mmap_mode="r")
            except (OSError, ValueError) as exc:
                logger.warning("the static token table %s cannot be read (%s); rebuilding it", self.path, exc)
            else:
                if table.shape == shape and table.dtype == np.float32:
                    return table
                logger.warning(
                    "the static token table %s has shape %s, not %s; rebuilding it", self.path, table.shape, shape
                )
        raw = distil_table(self.encoder)
        built: Vectors = ((raw - raw.mean(axis=0)) * static_weights(shape[0])[:, None]).astype(np.float32)
        if not np.isfinite(built).all():
            raise ConfigError("static token table", f"distilling {self.encoder.model_id} gave non-finite values")

        def save(tmp: Path) -> None:
            with tmp.open("wb") as handle:  # a file object: given a name, np.save would append ".npy" to it
                np.save(handle, built)

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, save)
            logger.info("distilled the static token table %s", self.path)
        except OSError as exc:
            logger.warning("cannot cache the static token table at %s (%s); it is used from memory", self.path, exc)
        return built

    def encode(self, texts: list[str]) -> Vectors:
        """Embed texts: the normalised sum of their tokens' weighted, centred rows."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[list[int]] = []
        for ids in self.encoder.token_ids(texts):
            rows.append([i for i in ids if i != self._cls and i != self._sep] or [self._unk])
        flat = np.fromiter((i for r in rows for i in r), dtype=np.int64)
        starts = np.cumsum([0] + [len(r) for r in rows[:-1]])
        sums = np.add.reduceat(np.asarray(self._table[flat], dtype=np.float32), starts, axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        if not (norms > 0).all():
            raise ConfigError("static embedding", "a text's tokens have a zero vector in the static table")
        return check_vectors(sums / norms, self.dim, "static embedding")
