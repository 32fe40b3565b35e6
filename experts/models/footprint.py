"""How much memory a GGUF model will hold once loaded, estimated before loading it.

The pool reserves this much before it loads a model (:mod:`experts.models.residency`). The estimate is:

* **weights**: the file's size (the pool loads models without mmap, so llama.cpp reads the whole file into
  its own memory; metadata is a small part of it);
* **KV cache**: ``n_layer * n_ctx * n_head_kv * (key_length + value_length) * 2`` bytes (llama.cpp's default
  f16 cache), from the model's own metadata;
* **compute**: llama.cpp's scratch buffers for one batch, which grow with the context (attention scores)
  and the width of the model, the last token's logits, plus a fixed allowance for the runtime.

Only the header of the file is read (its key-value metadata, not its tensors), once per file version.
``bench/bench_pool.py`` compares the estimate with the memory measured after loading each bundled model.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from state.errors import ModelUnavailableError

__all__ = ["Footprint", "GgufShape", "estimate", "read_shape"]

MIB = 1024 * 1024

_BATCH = 512
"""Tokens llama.cpp evaluates per batch (its default ``n_batch``/``n_ubatch``)."""
_OUTPUTS = 8
"""Logit rows llama.cpp keeps (chat completion asks for the last token's only)."""
_RUNTIME_BYTES = 48 * MIB
"""Fixed allowance per loaded model: llama.cpp's context, the sampler, Python objects."""

# GGUF value types (gguf.h): the size of fixed-width ones, and the codes of strings and arrays.
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING = 8
_ARRAY = 9


@dataclass(frozen=True)
class GgufShape:
    """The parts of a GGUF model's metadata that decide its memory."""

    architecture: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    key_length: int
    value_length: int
    n_vocab: int
    context_length: int
    """The context the model was trained for (a larger ``n_ctx`` is allowed but not useful)."""


@dataclass(frozen=True)
class Footprint:
    """Estimated bytes a loaded model holds, by part."""

    weights: int
    kv_cache: int
    compute: int

    @property
    def total(self) -> int:
        """Everything together: what the pool reserves."""
        return self.weights + self.kv_cache + self.compute

    def describe(self) -> str:
        """A one-line breakdown in MiB."""
        return (
            f"{self.total / MIB:.0f} MiB (weights {self.weights / MIB:.0f}, KV cache {self.kv_cache / MIB:.0f}, "
            f"compute {self.compute / MIB:.0f})"
        )


_shapes: dict[tuple[str, int, int], GgufShape] = {}
_shapes_lock = threading.Lock()


def read_shape(path: Path) -> GgufShape:
    """Read a GGUF file's architecture sizes from its header (cached per path, size and mtime).

    Raises:
        ModelUnavailableError: naming the file, when it is not a GGUF file or lacks a size this needs.
    """
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _shapes_lock:
        cached = _shapes.get(key)
    if cached is not None:
        return cached
    with path.open("rb") as fh:
        meta = _read_metadata(fh, path)
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelUnavailableError(f"{path}: GGUF metadata has no general.architecture")

    def number(name: str, default: int | None = None) -> int:
        value = meta.get(f"{arch}.{name}", default)
        if isinstance(value, list):  # per-layer values (some architectures): the largest decides memory
            value = max(value) if value else default
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ModelUnavailableError(f"{path}: GGUF metadata has no {arch}.{name}; cannot estimate its memory")
        return int(value)

    n_embd = number("embedding_length")
    n_head = number("attention.head_count")
    head_dim = n_embd // max(n_head, 1)
    tokens = meta.get("tokenizer.ggml.tokens")
    shape = GgufShape(
        architecture=arch,
        n_layer=number("block_count"),
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=number("attention.head_count_kv", n_head),
        key_length=number("attention.key_length", head_dim),
        value_length=number("attention.value_length", head_dim),
        n_vocab=tokens if isinstance(tokens, int) else number("vocab_size", 32000),
        context_length=number("context_length", 4096),
    )
    with _shapes_lock:
        _shapes[key] = shape
    return shape


def estimate(path: Path, n_ctx: int) -> Footprint:
    """Estimate the memory of ``path`` loaded with a context of ``n_ctx`` tokens.

    Raises:
        ModelUnavailableError: If the file's header cannot be read.
    """
    shape = read_shape(path)
    kv = shape.n_layer * n_ctx * shape.n_head_kv * (shape.key_length + shape.value_length) * 2
    batch = min(_BATCH, n_ctx)
    # Attention scores for one batch against the whole context (f32, per head) and a few activations of the
    # model's width per token, logits for a few outputs, and the runtime; checked against the memory measured
    # after loading each bundled model and generating with it (bench/bench_pool.py).
    compute = 4 * batch * (n_ctx * shape.n_head + 8 * shape.n_embd) + 4 * _OUTPUTS * shape.n_vocab + _RUNTIME_BYTES
    return Footprint(weights=path.stat().st_size, kv_cache=kv, compute=compute)


def _read_metadata(fh: IO[bytes], path: Path) -> dict[str, Any]:
    """The header's key-value pairs; arrays of strings are replaced by their length (the vocabulary)."""

    def read(n: int) -> bytes:
        data = fh.read(n)
        if len(data) != n:
            raise ModelUnavailableError(f"{path}: truncated GGUF header")
        return data

    def u32() -> int:
        return int(struct.unpack("<I", read(4))[0])

    def u64() -> int:
        return int(struct.unpack("<Q", read(8))[0])

    def string() -> str:
        return read(u64()).decode("utf-8", errors="replace")

    def value(kind: int) -> Any:
        if kind in _FORMATS:
            return struct.unpack(_FORMATS[kind], read(_FIXED[kind]))[0]
        if kind == _STRING:
            return string()
        if kind == _ARRAY:
            item, count = u32(), u64()
            if item == _STRING:
                for _ in range(count):
                    fh.seek(u64(), 1)
                return count
            if item in _FIXED:
                if count > 4096:  # a large numeric array (token types, scores): skip it
                    fh.seek(count * _FIXED[item], 1)
                    return count
                return [value(item) for _ in range(count)]
            return [value(item) for _ in range(count)]
        raise ModelUnavailableError(f"{path}: unknown GGUF value type {kind}")

    if read(4) != b"GGUF":
        raise ModelUnavailableError(f"{path}: not a GGUF file (bad magic)")
    version = u32()
    if version < 2:
        raise ModelUnavailableError(f"{path}: GGUF version {version} is too old (2 or later is supported)")
    u64()  # tensor count
    meta: dict[str, Any] = {}
    for _ in range(u64()):
        key = string()
        meta[key] = value(u32())
    return meta
