"""Small synthetic GGUF files and installed-looking distributions for the model-file tests."""

from __future__ import annotations

import math
import struct
from pathlib import Path

META: dict[str, object] = {
    "general.architecture": "llama",
    "general.alignment": 32,
    "llama.block_count": 2,
    "llama.embedding_length": 64,
    "llama.attention.head_count": 4,
    "llama.context_length": 512,
    "tokenizer.ggml.tokens": ["<s>", "</s>", "a", "b"],
}
"""Metadata of a tiny llama model."""

TENSORS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("token_embd.weight", (64, 4)),
    ("blk.0.attn_q.weight", (64, 64)),
    ("blk.1.attn_q.weight", (64, 64)),
    ("output.weight", (64, 4)),
)
"""F32 tensors: name and shape (the data is about 34 KiB, so the file has samples past its header)."""


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _value(value: object) -> bytes:
    if isinstance(value, str):
        return struct.pack("<I", 8) + _string(value)
    if isinstance(value, list):
        return struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_string(str(v)) for v in value)
    if isinstance(value, float):
        return struct.pack("<If", 6, value)
    return struct.pack("<II", 4, int(value))  # type: ignore[call-overload]


def gguf_bytes(
    meta: dict[str, object] | None = None, tensors: tuple[tuple[str, tuple[int, ...]], ...] = TENSORS
) -> bytes:
    """A complete GGUF v3 file: header, tensor descriptions, 32-byte aligned F32 data."""
    meta = META if meta is None else meta
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    head += b"".join(_string(key) + _value(value) for key, value in meta.items())
    offset = 0
    data = b""
    for i, (name, dims) in enumerate(tensors):
        head += _string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", 0, offset)
        chunk = bytes([i + 1]) * (4 * math.prod(dims))
        chunk += b"\0" * (-len(chunk) % 32)
        data += chunk
        offset += len(chunk)
    return head + b"\0" * (-len(head) % 32) + data


def write_gguf(path: Path, meta: dict[str, object] | None = None) -> Path:
    """Write :func:`gguf_bytes` to ``path``."""
    path.write_bytes(gguf_bytes(meta))
    return path


def install_distribution(site: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """Make ``site`` hold an installed distribution (``.dist-info`` and files) that importlib.metadata finds.

    The caller puts ``site`` on ``sys.path`` (``monkeypatch.syspath_prepend``).
    """
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    for relative, content in files.items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
