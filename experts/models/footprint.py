"""How much memory a GGUF model will hold once loaded, estimated before loading it.

The pool reserves this much before it loads a model (:mod:`experts.pool.residency`). The estimate is:

* **weights**: the file's size (the pool loads models without mmap, so llama.cpp reads the whole file into
  its own memory; metadata is a small part of it);
* **KV cache**: ``n_layer * n_ctx * n_head_kv * (key_length + value_length) * 2`` bytes (llama.cpp's default
  f16 cache), from the model's own metadata;
* **compute**: llama.cpp's scratch buffers for one batch, which grow with the context (attention scores)
  and the width of the model, the last token's logits, plus a fixed allowance for the runtime.

Only the header of the file is read (its key-value metadata and its tensors' descriptions, not their data),
once per file version. Every length and count in it is checked against the file's size before it is used, and
every tensor must lie inside the file, so a damaged, truncated or foreign file is a
:class:`~state.errors.ModelUnavailableError` naming the path ("is not a valid GGUF file (...)"), never an
``OverflowError`` or a ``MemoryError``. ``bench/bench_pool.py`` compares the estimate with the memory measured
after loading each bundled model.

ggml's own ``gguf`` package is not used for this: its ``GGUFReader`` maps the whole file and turns every
vocabulary string into NumPy arrays (20 s and about 0.5 GB against our 0.6 s and 0.1 MB for a 1.1 GB model),
and a damaged file raises a bare ``ValueError`` or ``IndexError`` that names neither the file nor the fault.
"""

from __future__ import annotations

import math
import os
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
_VERSIONS = (2, 3)
"""GGUF versions with 64-bit lengths and counts (llama.cpp reads these)."""
_MAX_KEY = 65_535
"""The longest key the GGUF specification allows, in bytes."""
_MAX_KEPT_STRING = 1024 * 1024
"""Longer string values (none that this module needs) are skipped, not read."""
_MAX_KEPT_ARRAY = 4096
"""Longer numeric arrays (token types, scores) are skipped; only their length is kept."""
_MAX_DIMS = 4
"""GGML_MAX_DIMS."""
_MAX_SIZE = 2**31
"""No architecture size (layers, width, heads, context, vocabulary) is larger."""

# ggml tensor types (ggml.h): elements per block and bytes per block, from gguf-py's GGML_QUANT_SIZES. A type
# not listed here (a newer one) is checked only for where it starts.
_QK = 256
_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4),  # F32
    1: (1, 2),  # F16
    2: (32, 2 + 16),  # Q4_0
    3: (32, 2 + 2 + 16),  # Q4_1
    6: (32, 2 + 4 + 16),  # Q5_0
    7: (32, 2 + 2 + 4 + 16),  # Q5_1
    8: (32, 2 + 32),  # Q8_0
    9: (32, 4 + 4 + 32),  # Q8_1
    10: (_QK, 2 + 2 + _QK // 16 + _QK // 4),  # Q2_K
    11: (_QK, 2 + _QK // 4 + _QK // 8 + 12),  # Q3_K
    12: (_QK, 2 + 2 + _QK // 2 + 12),  # Q4_K
    13: (_QK, 2 + 2 + _QK // 2 + _QK // 8 + 12),  # Q5_K
    14: (_QK, 2 + _QK // 2 + _QK // 4 + _QK // 16),  # Q6_K
    15: (_QK, 4 + _QK + _QK // 8),  # Q8_K
    16: (_QK, 2 + _QK // 4),  # IQ2_XXS
    17: (_QK, 2 + _QK // 4 + _QK // 32),  # IQ2_XS
    18: (_QK, 2 + _QK // 4 + _QK // 8),  # IQ3_XXS
    19: (_QK, 2 + _QK // 8 + _QK // 16),  # IQ1_S
    20: (32, 2 + 16),  # IQ4_NL
    21: (_QK, 2 + _QK // 4 + _QK // 8 + _QK // 32 + 4),  # IQ3_S
    22: (_QK, 2 + _QK // 4 + _QK // 16),  # IQ2_S
    23: (_QK, 2 + 2 + _QK // 2 + _QK // 64),  # IQ4_XS
    24: (1, 1),  # I8
    25: (1, 2),  # I16
    26: (1, 4),  # I32
    27: (1, 8),  # I64
    28: (1, 8),  # F64
    29: (_QK, _QK // 8 + _QK // 16 + _QK // 32),  # IQ1_M
    30: (1, 2),  # BF16
    34: (_QK, 2 + 4 * 13),  # TQ1_0
    35: (_QK, 2 + 64),  # TQ2_0
    39: (32, 1 + 16),  # MXFP4
}


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


_shapes: dict[tuple[str, int, int, int, int], GgufShape] = {}
_shapes_lock = threading.Lock()


def read_shape(path: Path) -> GgufShape:
    """Read a GGUF file's architecture sizes from its header (cached per file version).

    The whole header is checked: every length and count against the file's size, and every tensor's extent.

    Raises:
        ModelUnavailableError: naming the file, when it cannot be read, is not a valid GGUF file or lacks a size
            this needs.
    """
    try:
        with path.open("rb") as fh:
            stat = os.fstat(fh.fileno())
            key = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
            with _shapes_lock:
                cached = _shapes.get(key)
            if cached is not None:
                return cached
            meta = _Header(fh, path, stat.st_size).metadata()
    except IsADirectoryError:
        raise ModelUnavailableError(f"{path} is a directory, not a GGUF file; give the path of a .gguf file") from None
    except OSError as exc:
        raise ModelUnavailableError(
            f"cannot read {path} ({exc.strerror or exc}); check the path and its permissions"
        ) from exc
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise _invalid(path, "its metadata has no general.architecture")

    def number(name: str, default: int | None = None) -> int:
        value = meta.get(f"{arch}.{name}", default)
        if isinstance(value, list):  # per-layer values (some architectures): the largest decides memory
            value = max(value) if value and all(_is_number(v) for v in value) else default
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _invalid(path, f"its metadata has no {arch}.{name}, which sizes its memory")
        if not (math.isfinite(value) and 0 <= value <= _MAX_SIZE):
            raise _invalid(path, f"{arch}.{name} is {value!r}, not a size")
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
    try:
        weights = path.stat().st_size
    except OSError as exc:
        raise ModelUnavailableError(f"cannot read {path} ({exc.strerror or exc})") from exc
    kv = shape.n_layer * n_ctx * shape.n_head_kv * (shape.key_length + shape.value_length) * 2
    batch = min(_BATCH, n_ctx)
    # Attention scores for one batch against the whole context (f32, per head) and a few activations of the
    # model's width per token, logits for a few outputs, and the runtime; checked against the memory measured
    # after loading each bundled model and generating with it (bench/bench_pool.py).
    compute = 4 * batch * (n_ctx * shape.n_head + 8 * shape.n_embd) + 4 * _OUTPUTS * shape.n_vocab + _RUNTIME_BYTES
    return Footprint(weights=weights, kv_cache=kv, compute=compute)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _label(text: str) -> str:
    """A key or tensor name for a message: quoted, escaped and at most 80 characters."""
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _invalid(path: Path, reason: str) -> ModelUnavailableError:
    return ModelUnavailableError(
        f"{path} is not a valid GGUF file ({reason}); give the path of a complete .gguf model (copy or download "
        "it again if it was damaged)"
    )


class _Header:
    """Reads a GGUF header, checking every length and count against the bytes left in the file."""

    def __init__(self, fh: IO[bytes], path: Path, size: int) -> None:
        self.fh = fh
        self.path = path
        self.size = size
        self.pos = 0

    def fail(self, reason: str) -> ModelUnavailableError:
        return _invalid(self.path, reason)

    def need(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise self.fail(
                f"truncated GGUF header: {what} needs {n} bytes at byte {self.pos}, the file has {self.size}"
            )

    def read(self, n: int, what: str) -> bytes:
        self.need(n, what)
        data = self.fh.read(n)
        if len(data) != n:  # the file shrank while being read
            raise self.fail(f"truncated GGUF header: it ends at byte {self.pos + len(data)}")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.fh.seek(n, os.SEEK_CUR)
        self.pos += n

    def u32(self, what: str) -> int:
        return int(struct.unpack("<I", self.read(4, what))[0])

    def u64(self, what: str) -> int:
        return int(struct.unpack("<Q", self.read(8, what))[0])

    def count(self, what: str, smallest: int) -> int:
        """A count of items of at least ``smallest`` bytes each, which must fit in the rest of the file."""
        n = self.u64(what)
        if n * smallest > self.size - self.pos:
            raise self.fail(f"{what} is {n}, more than the {self.size - self.pos} bytes left in the file can hold")
        return n

    def string(self, what: str, keep: int) -> str | None:
        """A string; one longer than ``keep`` bytes is skipped (None)."""
        n = self.u64(f"the length of {what}")
        if n > keep:
            self.skip(n, what)
            return None
        return self.read(n, what).decode("utf-8", errors="replace")

    def value(self, kind: int, key: str) -> Any:
        """A value of type ``kind``; ``key`` names it in messages."""
        if kind in _FORMATS:
            return struct.unpack(_FORMATS[kind], self.read(_FIXED[kind], key))[0]
        if kind == _STRING:
            return self.string(key, _MAX_KEPT_STRING)
        if kind == _ARRAY:
            item = self.u32(f"the item type of {key}")
            if item == _STRING:  # the vocabulary, merges: only their number is kept
                count = self.count(f"the length of {key}", 8)
                for _ in range(count):
                    self.skip(self.u64(f"the length of a string in {key}"), f"a string in {key}")
                return count
            if item in _FIXED:
                count = self.count(f"the length of {key}", _FIXED[item])
                if count > _MAX_KEPT_ARRAY:
                    self.skip(count * _FIXED[item], key)
                    return count
                return [self.value(item, key) for _ in range(count)]
            raise self.fail(f"{key} is an array of value type {item}, which GGUF metadata does not use")
        raise self.fail(f"unknown value type {kind} for {key}")

    def metadata(self) -> dict[str, Any]:
        """The key-value pairs (arrays of strings are replaced by their length), after checking the tensors."""
        if self.size == 0:
            raise self.fail("the file is empty: not a GGUF file")
        magic = self.fh.read(4)
        if magic != b"GGUF":
            raise self.fail(f"it starts with {magic!r} instead of b'GGUF': not a GGUF file, or a damaged one")
        self.pos = 4
        version = self.u32("the version")
        if version not in _VERSIONS:
            raise self.fail(f"GGUF version {version}; llama.cpp reads versions {' and '.join(map(str, _VERSIONS))}")
        n_tensors = self.count("the tensor count", 24)
        n_pairs = self.count("the key-value count", 13)
        meta: dict[str, Any] = {}
        for _ in range(n_pairs):
            at = self.pos
            key = self.string(f"the key at byte {at}", _MAX_KEY)
            if key is None:
                raise self.fail(f"the key at byte {at} is longer than {_MAX_KEY} bytes")
            label = _label(key)
            meta[key] = self.value(self.u32(f"the value type of {label}"), label)
        self.tensors(n_tensors, meta.get("general.alignment", 32))
        return meta

    def tensors(self, count: int, alignment: object) -> None:
        """Check that every tensor described lies inside the file (a truncated file fails here)."""
        if (
            not isinstance(alignment, int)
            or isinstance(alignment, bool)
            or alignment <= 0
            or alignment & (alignment - 1)
        ):
            raise self.fail(f"general.alignment is {alignment!r}, not a power of two")
        described: list[tuple[str, list[int], int, int]] = []
        for _ in range(count):
            at = self.pos
            text = self.string(f"the tensor name at byte {at}", _MAX_KEY)
            if text is None:
                raise self.fail(f"the tensor name at byte {at} is longer than {_MAX_KEY} bytes")
            name = _label(text)
            n_dims = self.u32(f"the dimensions of tensor {name}")
            if n_dims > _MAX_DIMS:
                raise self.fail(f"tensor {name} has {n_dims} dimensions (at most {_MAX_DIMS})")
            dims = [self.u64(f"the shape of tensor {name}") for _ in range(n_dims)]
            kind = self.u32(f"the type of tensor {name}")
            described.append((name, dims, kind, self.u64(f"the offset of tensor {name}")))
        data = self.pos + (-self.pos % alignment)
        for name, dims, kind, offset in described:
            if offset % alignment:
                raise self.fail(f"tensor {name} starts at {offset}, not a multiple of the alignment {alignment}")
            nbytes = 1 if math.prod(dims) else 0  # a type this table does not know: at least its first byte
            block = _BLOCKS.get(kind)
            if block is not None and dims:
                if dims[0] % block[0]:
                    raise self.fail(f"tensor {name} has rows of {dims[0]}, not a multiple of its type's block")
                nbytes = dims[0] // block[0] * block[1] * math.prod(dims[1:])
            if data + offset + nbytes > self.size:
                raise self.fail(
                    f"truncated: tensor {name} ends at byte {data + offset + nbytes}, the file has {self.size}"
                )
