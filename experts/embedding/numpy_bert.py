"""The BERT sentence encoder (mean pooling, L2 normalisation) written out in NumPy: no ONNX Runtime, no torch.

Its vectors match sentence-transformers' to float32 rounding (tests compare against committed reference
vectors); it is about twice as slow as the ONNX backend, which is the default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from experts.embedding.encoder import BertSentenceEncoder
from experts.embedding.model_files import verify_model_files
from experts.embedding.vectors import Vectors
from state.errors import ConfigError

__all__ = ["NumpyMiniLM"]


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
