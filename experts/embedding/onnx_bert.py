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
from experts.embedding.model_files import verify_model_files, weights_key
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


def build_model(model_dir: Path) -> Any:
    """The ONNX model of a BERT sentence encoder (mean pooling, normalised) from a sentence-transformers dir."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    config = bert_config(model_dir, "onnx")
    dim, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    head_dim = dim // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    weights = load_file(str(model_dir / "model.safetensors"))

    def w(name: str) -> np.ndarray:
        key = name if name in weights else f"bert.{name}"
        if key not in weights:
            raise ConfigError(str(model_dir / "model.safetensors"), f"weight {name!r} is missing")
        return np.ascontiguousarray(weights[key], dtype=np.float32)

    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        mm = node("MatMul", [x, const(f"{name}.w", weight.T.copy())], f"{name}.mm")
        return node("Add", [mm, const(f"{name}.b", bias)], name)

    def layer_norm(x: str, prefix: str, name: str) -> str:
        return node(
            "LayerNormalization",
            [x, const(f"{name}.g", w(prefix + ".weight")), const(f"{name}.beta", w(prefix + ".bias"))],
            name,
            axis=-1,
            epsilon=eps,
        )

    # embeddings: word + position[0:seq] + token type 0
    seq_shape = node("Shape", ["input_ids"], "shape")
    seq_len = node("Gather", [seq_shape, const("one_i", np.array(1, dtype=np.int64))], "seq_len", axis=0)
    positions = node(
        "Range",
        [const("zero_i", np.array(0, dtype=np.int64)), seq_len, const("step", np.array(1, dtype=np.int64))],
        "positions",
    )
    word = node("Gather", [const("word_emb", w("embeddings.word_embeddings.weight")), "input_ids"], "word")
    pos = node("Gather", [const("pos_emb", w("embeddings.position_embeddings.weight")), positions], "pos")
    x = node("Add", [word, pos], "emb_wp")
    x = node("Add", [x, const("type0", w("embeddings.token_type_embeddings.weight")[0])], "emb")
    x = layer_norm(x, "embeddings.LayerNorm", "emb_ln")

    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    # additive attention bias: (1 - mask) * -1e9, shaped (b, 1, 1, s)
    inv = node("Sub", [const("one_f", np.array(1.0, dtype=np.float32)), mask_f], "mask_inv")
    bias = node("Mul", [inv, const("neg", np.array(-1e9, dtype=np.float32))], "mask_bias2")
    bias = node("Unsqueeze", [bias, const("axes12", np.array([1, 2], dtype=np.int64))], "mask_bias")
    split_shape = const("heads_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, dim], dtype=np.int64))
    scale = const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    sqrt_half = const("sqrt_half", np.array(1.0 / math.sqrt(2.0), dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))

    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}."
        q, k, v = (
            linear(x, w(p + f"attention.self.{n}.weight"), w(p + f"attention.self.{n}.bias"), f"l{i}.{n}")
            for n in ("query", "key", "value")
        )
        qh = node("Transpose", [node("Reshape", [q, split_shape], f"l{i}.qr")], f"l{i}.qh", perm=[0, 2, 1, 3])
        kh = node("Transpose", [node("Reshape", [k, split_shape], f"l{i}.kr")], f"l{i}.kh", perm=[0, 2, 3, 1])
        vh = node("Transpose", [node("Reshape", [v, split_shape], f"l{i}.vr")], f"l{i}.vh", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [qh, kh], f"l{i}.qk"), scale], f"l{i}.scaled")
        probs = node("Softmax", [node("Add", [scores, bias], f"l{i}.masked")], f"l{i}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, vh], f"l{i}.ctx4")], f"l{i}.ctxt", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge_shape], f"l{i}.ctx")
        attn = linear(ctx, w(p + "attention.output.dense.weight"), w(p + "attention.output.dense.bias"), f"l{i}.ao")
        x = layer_norm(node("Add", [attn, x], f"l{i}.res1"), p + "attention.output.LayerNorm", f"l{i}.ln1")
        h = linear(x, w(p + "intermediate.dense.weight"), w(p + "intermediate.dense.bias"), f"l{i}.ff1")
        erf = node("Erf", [node("Mul", [h, sqrt_half], f"l{i}.hs")], f"l{i}.erf")
        phi = node(
            "Mul",
            [node("Add", [erf, const(f"l{i}.one", np.array(1.0, dtype=np.float32))], f"l{i}.erf1"), half],
            f"l{i}.phi",
        )
        h = node("Mul", [h, phi], f"l{i}.gelu")
        out = linear(h, w(p + "output.dense.weight"), w(p + "output.dense.bias"), f"l{i}.ff2")
        x = layer_norm(node("Add", [out, x], f"l{i}.res2"), p + "output.LayerNorm", f"l{i}.ln2")

    # mean pooling over real tokens, then L2 normalisation
    mask3 = node("Unsqueeze", [mask_f, const("axis2", np.array([2], dtype=np.int64))], "mask3")
    summed = node(
        "ReduceSum",
        [node("Mul", [x, mask3], "masked_h"), const("axis1", np.array([1], dtype=np.int64))],
        "summed",
        keepdims=0,
    )
    count = node("ReduceSum", [mask3, "axis1"], "count", keepdims=0)
    count = node("Max", [count, const("tiny", np.array(1e-9, dtype=np.float32))], "count_safe")
    pooled = node("Div", [summed, count], "pooled")
    norm = node("ReduceL2", [pooled], "norm", axes=[1], keepdims=1)  # opset 17: axes is an attribute here
    norm = node("Max", [norm, const("tiny_n", np.array(1e-12, dtype=np.float32))], "norm_safe")
    nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"], name="embedding"))

    graph = helper.make_graph(
        nodes,
        "sentence_encoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", dim])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="college-of-experts")
    model.ir_version = min(model.ir_version, 10)
    onnx.checker.check_model(model)
    return model


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
            "set COE_MODEL_CACHE to a writable directory or COE_EMBED_BACKEND=numpy",
        ) from exc


def _cached_model(model_dir: Path, precision: str = "float32") -> Path:
    cache = model_cache_dir()
    path = cache / f"sentence-encoder-{model_dir.name}-{_fingerprint(model_dir)}.onnx"
    if not path.is_file():
        import onnx

        verify_model_files(model_dir, ("model.safetensors",))  # the weights the graph is built from
        model = build_model(model_dir)
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
