"""The ONNX Runtime embedding backend: the BERT sentence encoder as an ONNX graph built from its weights.

:func:`build_model` writes the encoder (embeddings, attention, mean pooling, L2 normalisation) from the
safetensors weights with standard operators, so no torch is needed; the file is built once into the model cache
under a name that carries the weights' fingerprint, and rebuilt when damaged. Two precisions
(:data:`PRECISIONS`): ``float32`` (backend ``onnx``, the default: the reference's vectors) and ``int8`` (backend
``onnx-int8``, :func:`quantize_model`: faster, but other vectors, so another ``model_id``, and one text per call
since activations are quantised per call). Why, and what was measured: docs/decisions/routing.md.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from experts.embedding.encoder import BertSentenceEncoder, bert_config
from experts.embedding.model_files import is_bundled_model, verify_model_files, weights_key
from experts.embedding.vectors import Vectors
from state.errors import ConfigError
from state.files import atomic_write
from state.paths import model_cache_dir

__all__ = ["PRECISIONS", "OnnxMiniLM", "build_model", "quantize_model"]

logger = logging.getLogger(__name__)

OPSET = 17
_BUILD_VERSION = 1
PRECISIONS: tuple[str, ...] = ("float32", "int8")
_INT8_SETTINGS = "dynamic:qint8:per-channel:reduce-range:MatMul"
"""What :func:`quantize_model` does; part of the int8 file's name, so changing it makes a new file."""


def _fingerprint(model_dir: Path) -> str:
    return hashlib.sha256(f"{_BUILD_VERSION}:".encode() + weights_key(model_dir)).hexdigest()[:16]


class _Graph:
    """An ONNX graph being written: its nodes and initializers in order, and the weights they come from."""

    def __init__(self, model_dir: Path, eps: float) -> None:
        from safetensors.numpy import load_file

        self.path = model_dir / "model.safetensors"
        self.weights = load_file(str(self.path))
        self.eps = eps
        self.inits: list[Any] = []
        self.nodes: list[Any] = []

    def w(self, name: str) -> np.ndarray:
        """A weight by its BERT name (with or without the ``bert.`` prefix), as float32."""
        key = name if name in self.weights else f"bert.{name}"
        if key not in self.weights:
            raise ConfigError(str(self.path), f"weight {name!r} is missing")
        return np.ascontiguousarray(self.weights[key], dtype=np.float32)

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(self, x: str, prefix: str, name: str) -> str:
        """``x @ W.T + b`` with the weight and bias under ``prefix``."""
        mm = self.node("MatMul", [x, self.const(f"{name}.w", self.w(prefix + ".weight").T.copy())], f"{name}.mm")
        return self.node("Add", [mm, self.const(f"{name}.b", self.w(prefix + ".bias"))], name)

    def layer_norm(self, x: str, prefix: str, name: str) -> str:
        gamma, beta = (
            self.const(f"{name}.g", self.w(prefix + ".weight")),
            self.const(f"{name}.beta", self.w(prefix + ".bias")),
        )
        return self.node("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=self.eps)


def build_model(model_dir: Path, *, check: bool = True) -> Any:
    """The ONNX model of a BERT sentence encoder (mean pooling, normalised) from a sentence-transformers dir.

    ``check``: run ONNX's checker on it (1.3 s of a new install's first command here, most of building the graph;
    the bundled model's graph is checked by ``tests/unit/test_embedding.py`` instead, a user's own model here).
    """
    import onnx
    from onnx import TensorProto, helper

    config = bert_config(model_dir, "onnx")
    dim, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    g = _Graph(model_dir, float(config.get("layer_norm_eps", 1e-12)))
    x = _embeddings(g)
    mask_f = g.node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    layer = _layer_constants(g, mask_f, dim, heads)
    for i in range(int(config["num_hidden_layers"])):
        x = _encoder_layer(g, x, i, layer)
    _pool(g, x, mask_f)
    graph = helper.make_graph(
        g.nodes,
        "sentence_encoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", dim])],
        initializer=g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="college-of-experts")
    model.ir_version = min(model.ir_version, 10)
    if check:
        onnx.checker.check_model(model)
    return model


def _embeddings(g: _Graph) -> str:
    """Word + position[0:seq] + token type 0, normalised."""
    seq_shape = g.node("Shape", ["input_ids"], "shape")
    seq_len = g.node("Gather", [seq_shape, g.const("one_i", np.array(1, dtype=np.int64))], "seq_len", axis=0)
    positions = g.node(
        "Range",
        [g.const("zero_i", np.array(0, dtype=np.int64)), seq_len, g.const("step", np.array(1, dtype=np.int64))],
        "positions",
    )
    word = g.node("Gather", [g.const("word_emb", g.w("embeddings.word_embeddings.weight")), "input_ids"], "word")
    pos = g.node("Gather", [g.const("pos_emb", g.w("embeddings.position_embeddings.weight")), positions], "pos")
    x = g.node("Add", [word, pos], "emb_wp")
    x = g.node("Add", [x, g.const("type0", g.w("embeddings.token_type_embeddings.weight")[0])], "emb")
    return g.layer_norm(x, "embeddings.LayerNorm", "emb_ln")


def _layer_constants(g: _Graph, mask_f: str, dim: int, heads: int) -> dict[str, str]:
    """What every encoder layer shares, named by key: the attention bias, head shapes, scale, GELU's constants.

    The additive attention bias is ``(1 - mask) * -1e9``, shaped (b, 1, 1, s).
    """
    head_dim = dim // heads
    inv = g.node("Sub", [g.const("one_f", np.array(1.0, dtype=np.float32)), mask_f], "mask_inv")
    bias = g.node("Mul", [inv, g.const("neg", np.array(-1e9, dtype=np.float32))], "mask_bias2")
    return {
        "bias": g.node("Unsqueeze", [bias, g.const("axes12", np.array([1, 2], dtype=np.int64))], "mask_bias"),
        "split": g.const("heads_shape", np.array([0, 0, heads, head_dim], dtype=np.int64)),
        "merge": g.const("merge_shape", np.array([0, 0, dim], dtype=np.int64)),
        "scale": g.const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32)),
        "sqrt_half": g.const("sqrt_half", np.array(1.0 / math.sqrt(2.0), dtype=np.float32)),
        "half": g.const("half", np.array(0.5, dtype=np.float32)),
    }


def _encoder_layer(g: _Graph, x: str, i: int, c: dict[str, str]) -> str:
    """Encoder layer ``i``: self-attention, then the feed-forward block (exact ``Erf``-based GELU).

    Each block is added to its input and normalised.
    """
    p, n = f"encoder.layer.{i}.", f"l{i}."
    q, k, v = (g.linear(x, p + f"attention.self.{part}", n + part) for part in ("query", "key", "value"))
    qh = g.node("Transpose", [g.node("Reshape", [q, c["split"]], n + "qr")], n + "qh", perm=[0, 2, 1, 3])
    kh = g.node("Transpose", [g.node("Reshape", [k, c["split"]], n + "kr")], n + "kh", perm=[0, 2, 3, 1])
    vh = g.node("Transpose", [g.node("Reshape", [v, c["split"]], n + "vr")], n + "vh", perm=[0, 2, 1, 3])
    scores = g.node("Mul", [g.node("MatMul", [qh, kh], n + "qk"), c["scale"]], n + "scaled")
    probs = g.node("Softmax", [g.node("Add", [scores, c["bias"]], n + "masked")], n + "probs", axis=-1)
    ctx = g.node("Transpose", [g.node("MatMul", [probs, vh], n + "ctx4")], n + "ctxt", perm=[0, 2, 1, 3])
    ctx = g.node("Reshape", [ctx, c["merge"]], n + "ctx")
    attn = g.linear(ctx, p + "attention.output.dense", n + "ao")
    x = g.layer_norm(g.node("Add", [attn, x], n + "res1"), p + "attention.output.LayerNorm", n + "ln1")
    h = g.linear(x, p + "intermediate.dense", n + "ff1")
    erf = g.node("Erf", [g.node("Mul", [h, c["sqrt_half"]], n + "hs")], n + "erf")
    one = g.const(n + "one", np.array(1.0, dtype=np.float32))
    phi = g.node("Mul", [g.node("Add", [erf, one], n + "erf1"), c["half"]], n + "phi")
    out = g.linear(g.node("Mul", [h, phi], n + "gelu"), p + "output.dense", n + "ff2")
    return g.layer_norm(g.node("Add", [out, x], n + "res2"), p + "output.LayerNorm", n + "ln2")


def _pool(g: _Graph, x: str, mask_f: str) -> None:
    """Mean pooling over the real tokens, then L2 normalisation, into the output ``embedding``."""
    from onnx import helper

    mask3 = g.node("Unsqueeze", [mask_f, g.const("axis2", np.array([2], dtype=np.int64))], "mask3")
    summed = g.node(
        "ReduceSum",
        [g.node("Mul", [x, mask3], "masked_h"), g.const("axis1", np.array([1], dtype=np.int64))],
        "summed",
        keepdims=0,
    )
    count = g.node("ReduceSum", [mask3, "axis1"], "count", keepdims=0)
    count = g.node("Max", [count, g.const("tiny", np.array(1e-9, dtype=np.float32))], "count_safe")
    pooled = g.node("Div", [summed, count], "pooled")
    norm = g.node("ReduceL2", [pooled], "norm", axes=[1], keepdims=1)  # opset 17: axes is an attribute here
    norm = g.node("Max", [norm, g.const("tiny_n", np.array(1e-12, dtype=np.float32))], "norm_safe")
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"], name="embedding"))


def quantize_model(source: Path, target: Path) -> None:
    """Write the int8 version of the float encoder at ``source`` to ``target`` (ONNX Runtime dynamic quantisation).

    Only the ``MatMul`` nodes whose right-hand side is a weight are quantised (the attention products of two
    activations are not): weights to int8 per output column, in 7 bits (``reduce_range``), because the AVX2 and
    AVX-512 kernels without VNNI add pairs of u8 x s8 products in int16, which 8-bit weights can overflow.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(source))
    # ONNX Runtime's optional pre-processing (symbolic shape inference, graph fusions) adds nothing to a graph
    # that is built with its shapes; without this marker quantize_dynamic warns through the root logger, which
    # configures logging for the whole process.
    onnx.helper.set_model_props(model, {"onnx.quant.pre_process": "onnxruntime.quant"})
    quantize_dynamic(
        model,
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=True,
        op_types_to_quantize=["MatMul"],
    )


def _write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """:func:`state.files.atomic_write` into the model cache, whose failure is a configuration error."""
    cache = path.parent
    try:
        cache.mkdir(parents=True, exist_ok=True)
        atomic_write(path, write)
    except OSError as exc:
        raise ConfigError(
            "embedding model",
            f"cannot write the ONNX encoder to {cache}: {exc.strerror or exc}; "
            "set COE_MODEL_CACHE to a writable directory",
        ) from exc


def _cached_model(model_dir: Path, precision: str = "float32") -> Path:
    cache = model_cache_dir()
    path = cache / f"sentence-encoder-{model_dir.name}-{_fingerprint(model_dir)}.onnx"
    if not path.is_file():
        import onnx

        verify_model_files(model_dir, ("model.safetensors",))  # the weights the graph is built from
        model = build_model(model_dir, check=not is_bundled_model(model_dir))
        _write_atomically(path, lambda tmp: onnx.save_model(model, str(tmp)))
        logger.info("built the ONNX sentence encoder %s", path)
    if precision == "float32":
        return path
    import onnxruntime as ort

    settings = hashlib.sha256(f"{_INT8_SETTINGS}:{ort.__version__}".encode()).hexdigest()[:8]
    quantized = path.with_name(f"{path.stem}-int8-{settings}.onnx")
    if not quantized.is_file():
        _write_atomically(quantized, lambda tmp: quantize_model(path, tmp))
        logger.info("quantised the ONNX sentence encoder to int8: %s", quantized)
    return quantized


class OnnxMiniLM(BertSentenceEncoder):
    """Sentence embeddings with ONNX Runtime over a graph built from the model's weights.

    Args:
        model_dir: The sentence-transformers model directory.
        precision: ``float32`` (the reference's vectors) or ``int8`` (faster, other vectors: see the module
            docstring); the int8 encoder reports its own ``backend`` and ``model_id``.
    """

    backend = "onnx"

    def __init__(self, model_dir: Path, precision: str = "float32") -> None:
        if precision not in PRECISIONS:
            raise ConfigError(
                "argument precision", f"unknown precision {precision!r}; allowed: {', '.join(PRECISIONS)}"
            )
        if precision == "int8":
            self.backend = "onnx-int8"
        super().__init__(model_dir)
        self.precision = precision
        if precision == "int8":
            self.model_id = f"{self.model_id}:int8"
            # activations are quantised with one range per call: in a batch, a text's vector would depend on the
            # other texts and on the padding (cosine 0.98 to its own vector alone), so texts go one at a time
            self.batch_size = 1
        self._path = _cached_model(model_dir, precision)
        self._session: Any = None
        self._session_lock = threading.Lock()

    def _get_session(self) -> Any:
        """The ONNX Runtime session, created on the first embedding.

        Creating it takes about a quarter of a second, which ``coe route`` skips when the router's static first
        stage decides.
        """
        with self._session_lock:
            if self._session is None:
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = max(1, min(4, os.cpu_count() or 1))
                options.inter_op_num_threads = 1
                # ONNX Runtime's default short spin-wait between parallel sections is kept: turning it off made a
                # 29-token query 30% slower (4.4 vs 3.3 ms); routing runs before the slots' generation.
                try:
                    self._session = ort.InferenceSession(str(self._path), options, providers=["CPUExecutionProvider"])
                except Exception as exc:  # a damaged cache file: rebuild once
                    logger.warning("the cached ONNX encoder %s cannot be loaded (%s); rebuilding it", self._path, exc)
                    self._path.unlink(missing_ok=True)
                    self._path = _cached_model(self.model_dir, self.precision)
                    self._session = ort.InferenceSession(str(self._path), options, providers=["CPUExecutionProvider"])
            return self._session

    def _embed(self, tokens: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> Vectors:
        (vectors,) = self._get_session().run(["embedding"], {"input_ids": tokens, "attention_mask": mask})
        out: Vectors = vectors
        return out
