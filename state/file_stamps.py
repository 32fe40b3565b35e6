"""Telling in milliseconds whether a large verified file is still the one that was verified.

A full SHA-256 of a model file costs about a second per gigabyte, and a run checks its model files every time it
starts. So when a file has been hashed in full, a :class:`FileStamp` of it is recorded, and later loads compare a
fresh stamp with it instead of hashing again. A stamp is:

* the file's identity on disk: size, inode, modification time and *change* time. A tool (or ``os.utime``) can put
  the modification time back after writing, but not the change time: the kernel sets it on every write, on
  ``utime`` itself, on ``chmod`` and on rename;
* a SHA-256 of the size and of fixed samples of the content (the first and last MiB, and 16 blocks of 64 KiB spread
  evenly in between), so content that changed without the file system noticing is seen where it is sampled.

A stamp that differs only means "hash the whole file again": the full SHA-256 decides.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import BinaryIO

__all__ = ["SAMPLE_BLOCK", "SAMPLE_BLOCKS", "SAMPLE_EDGE", "FileStamp", "sample_ranges", "sha256_file"]

SAMPLE_EDGE = 1024 * 1024
"""Bytes sampled at each end of the file (headers and the last tensors)."""
SAMPLE_BLOCK = 64 * 1024
"""Bytes of each sample in between."""
SAMPLE_BLOCKS = 16
"""Samples spread evenly between the ends."""

_CHUNK = 4 * 1024 * 1024


def sha256_file(path: Path) -> str:
    """The SHA-256 of a whole file, read in 4 MiB chunks.

    Raises:
        OSError: If the file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sample_ranges(size: int) -> list[tuple[int, int]]:
    """The ``(offset, length)`` ranges sampled in a file of ``size`` bytes, in file order (they may overlap)."""
    edge = min(SAMPLE_EDGE, size)
    block = min(SAMPLE_BLOCK, size)
    spread = [((size - block) * i // (SAMPLE_BLOCKS + 1), block) for i in range(1, SAMPLE_BLOCKS + 1)]
    return [(0, edge), *spread, (size - edge, edge)]


def _sample_sha256(handle: BinaryIO, size: int) -> str:
    digest = hashlib.sha256(size.to_bytes(8, "little"))
    for offset, length in sample_ranges(size):
        handle.seek(offset)
        data = handle.read(length)
        if len(data) != length:  # shrank while being read: a stamp that matches nothing
            digest.update(b"short read")
        digest.update(data)
    return digest.hexdigest()


@dataclass(frozen=True)
class FileStamp:
    """What identifies one version of a file cheaply (see the module docstring)."""

    size: int
    inode: int
    mtime_ns: int
    ctime_ns: int
    sample_sha256: str

    @classmethod
    def of(cls, path: Path) -> FileStamp:
        """Stamp ``path`` now: one ``fstat`` and about 3 MiB read.

        Raises:
            OSError: If the file cannot be opened or read.
        """
        with path.open("rb") as handle:
            stat = os.fstat(handle.fileno())
            sample = _sample_sha256(handle, stat.st_size)
        return cls(stat.st_size, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, sample)

    def to_json(self) -> dict[str, int | str]:
        """The stamp as a JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> FileStamp | None:
        """A stamp read back from :meth:`to_json`, or None if ``data`` is not one."""
        if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
            return None
        stamp = cls(**data)
        numbers = (stamp.size, stamp.inode, stamp.mtime_ns, stamp.ctime_ns)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
            return None
        return stamp if isinstance(stamp.sample_sha256, str) else None

    def differences(self, other: FileStamp) -> list[str]:
        """What differs from ``other``, in words (for the log), e.g. ``["change time", "sampled content"]``."""
        words = {
            "size": "size",
            "inode": "inode",
            "mtime_ns": "modification time",
            "ctime_ns": "change time",
            "sample_sha256": "sampled content",
        }
        return [words[f.name] for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]
