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

Rows are made as texts need them. Every row is centred by the mean over the whole vocabulary, which needs every
row; for the bundled encoder that mean ships with the code (:data:`CENTRE_DIR`, one small file per encoder, its
weights' pinned SHA-256 and :data:`TABLE_VERSION`), so a query's thirty-odd rows cost one encoder call of
milliseconds, where distilling all 30,522 takes about 9 s on two cores: the first command a new user runs pays
nothing for the table. For any other encoder the table is distilled whole, once, and kept in the model cache
beside the ONNX graph (``$COE_MODEL_CACHE`` or ``~/.cache/coe/models``), named after the encoder's model id, the
weights' fingerprint and :data:`TABLE_VERSION`; it is read with a memory map, so loading it costs milliseconds. A
file of the wrong shape or with non-finite values is rebuilt. Rows made on demand are those of the whole table
to float rounding (the encoder's batches differ): a test holds them to it, and to the shipped mean.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

import numpy as np

from experts.embedding.encoder import BertSentenceEncoder, vectors_can_ship
from experts.embedding.model_files import MODEL_SHA256
from experts.embedding.vectors import Vectors, check_vectors
from state.errors import ConfigError
from state.files import atomic_write
from state.paths import model_cache_dir

__all__ = [
    "CENTRE_DIR",
    "TABLE_VERSION",
    "StaticEmbedder",
    "centre_path",
    "distil_table",
    "static_weights",
    "write_centre",
]

logger = logging.getLogger(__name__)

TABLE_VERSION = 1
"""Part of the table's file name and model id: changing how the table is made makes a new one."""
SIF_A = 1e-3
"""Smooth-inverse-frequency constant of :func:`static_weights`."""
DISTIL_BATCH = 2048
"""Tokens per encoder call while distilling (three positions each)."""
CENTRE_DIR = Path(__file__).with_name("static_centres")
"""The shipped means of the bundled encoder's distilled rows (:func:`centre_path`, written by :func:`write_centre`)."""


def distil_rows(encoder: BertSentenceEncoder, ids: np.ndarray) -> Vectors:
    """The pooled vectors of the given token ids, each alone between ``[CLS]`` and ``[SEP]``, in their order."""
    cls_id, sep_id = encoder.special_ids()
    rows = np.empty((ids.size, encoder.dim), dtype=np.float32)
    for start in range(0, ids.size, DISTIL_BATCH):
        batch = ids[start : start + DISTIL_BATCH].astype(np.int64)
        tokens = np.stack([np.full_like(batch, cls_id), batch, np.full_like(batch, sep_id)], axis=1)
        rows[start : start + batch.size] = encoder.embed_ids(tokens, np.ones_like(tokens))
    return rows


def distil_table(encoder: BertSentenceEncoder) -> Vectors:
    """Every vocabulary token's pooled vector: the encoder run on ``[CLS] token [SEP]``, one row per token id."""
    return distil_rows(encoder, np.arange(encoder.vocab_size, dtype=np.int64))


def centre_path(encoder: BertSentenceEncoder) -> Path | None:
    """Where the shipped mean of ``encoder``'s distilled rows lives, or None when no mean can ship for it.

    Only the bundled model's weights are known ahead (their SHA-256 is pinned and checked before the ONNX graph
    is built from them); a user's own model directory has no shipped mean.
    """
    if not vectors_can_ship(encoder):
        return None
    key = f"{TABLE_VERSION}:{encoder.backend}:{encoder.model_id}:{MODEL_SHA256['model.safetensors']}"
    return CENTRE_DIR / f"static-centre-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npy"


def write_centre(encoder: BertSentenceEncoder) -> Path:
    """Distil the whole table of the bundled ``encoder`` and write its mean where :func:`centre_path` says.

    Run it when :data:`TABLE_VERSION` or the bundled model changes; ``tests/unit/test_embedding_static.py`` fails
    until the shipped file is the mean the whole table has.
    """
    path = centre_path(encoder)
    if path is None:
        raise ConfigError("static token table", f"no mean ships for the {encoder.backend} encoder {encoder.model_id}")
    mean = distil_table(encoder).mean(axis=0).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: _save(tmp, mean))
    return path


def _save(tmp: Path, array: np.ndarray) -> None:
    with tmp.open("wb") as handle:  # a file object: given a name, np.save would append ".npy" to it
        np.save(handle, array)


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
        self._weights = static_weights(encoder.vocab_size)
        self._lock = threading.Lock()
        self._made: np.ndarray | None = None
        """Which rows of ``_table`` exist, while rows are made on demand (None: the whole table is there)."""
        self._centre: Vectors | None = None
        table = self._load()
        if table is None:
            self._centre = self._shipped_centre()
            if self._centre is None:
                table = self._build()
            else:
                table = np.zeros((encoder.vocab_size, self.dim), dtype=np.float32)  # pages untouched cost nothing
                self._made = np.zeros(encoder.vocab_size, dtype=bool)
        self._table: Vectors = table

    def _fingerprint(self) -> str:
        key = f"{TABLE_VERSION}:{self.encoder.model_id}:{self.encoder.weights_fingerprint()}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def _load(self) -> Vectors | None:
        """The whole table from the cache, or None when it is missing or unusable (said in the log)."""
        shape = (self.encoder.vocab_size, self.dim)
        if not self.path.is_file():
            return None
        try:
            table: Vectors = np.load(self.path, mmap_mode="r")
        except (OSError, ValueError) as exc:
            logger.warning("the static token table %s cannot be read (%s); rebuilding it", self.path, exc)
            return None
        if table.shape == shape and table.dtype == np.float32:
            return table
        logger.warning("the static token table %s has shape %s, not %s; rebuilding it", self.path, table.shape, shape)
        return None

    def _shipped_centre(self) -> Vectors | None:
        path = centre_path(self.encoder)
        if path is None or not path.is_file():
            return None
        try:
            centre: Vectors = np.load(path)
        except (OSError, ValueError) as exc:
            logger.warning("the shipped mean %s cannot be read (%s); distilling the whole table", path, exc)
            return None
        if centre.shape != (self.dim,) or centre.dtype != np.float32 or not np.isfinite(centre).all():
            logger.warning("the shipped mean %s is not %d finite floats; distilling the whole table", path, self.dim)
            return None
        return centre

    def _finish(self, raw: Vectors, ids: np.ndarray, centre: Vectors) -> Vectors:
        rows: Vectors = ((raw - centre) * self._weights[ids][:, None]).astype(np.float32)
        if not np.isfinite(rows).all():
            raise ConfigError("static token table", f"distilling {self.encoder.model_id} gave non-finite values")
        return rows

    def _build(self) -> Vectors:
        raw = distil_table(self.encoder)
        built = self._finish(raw, np.arange(raw.shape[0]), raw.mean(axis=0))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, lambda tmp: _save(tmp, built))
            logger.info("distilled the static token table %s", self.path)
        except OSError as exc:
            logger.warning("cannot cache the static token table at %s (%s); it is used from memory", self.path, exc)
        return built

    def _make_rows(self, ids: np.ndarray) -> None:
        """Make the rows of ``ids`` that do not exist yet (rows on demand only; one encoder call per 2,048)."""
        if self._made is None or self._centre is None:
            return
        with self._lock:
            missing = np.unique(ids[~self._made[ids]])
            if missing.size:
                self._table[missing] = self._finish(distil_rows(self.encoder, missing), missing, self._centre)
                self._made[missing] = True

    def encode(self, texts: list[str]) -> Vectors:
        """Embed texts: the normalised sum of their tokens' weighted, centred rows."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[list[int]] = []
        for ids in self.encoder.token_ids(texts):
            rows.append([i for i in ids if i != self._cls and i != self._sep] or [self._unk])
        flat = np.fromiter((i for r in rows for i in r), dtype=np.int64)
        self._make_rows(flat)
        starts = np.cumsum([0] + [len(r) for r in rows[:-1]])
        sums = np.add.reduceat(np.asarray(self._table[flat], dtype=np.float32), starts, axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        if not (norms > 0).all():
            raise ConfigError("static embedding", "a text's tokens have a zero vector in the static table")
        return check_vectors(sums / norms, self.dim, "static embedding")
