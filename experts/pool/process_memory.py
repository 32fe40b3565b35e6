"""The memory the process really uses, and giving the C heap's freed memory back to the system."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

__all__ = ["process_rss_bytes", "trim_heap"]


def process_rss_bytes() -> int:
    """This process's resident memory, from ``/proc/self/statm`` (0 where there is no /proc)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # pragma: no cover - non-Linux
        return 0


def trim_heap() -> None:
    """Give memory freed by the C heap back to the system (glibc's ``malloc_trim``; a no-op elsewhere).

    Generations allocate and free large buffers from the heap of each worker thread; glibc keeps freed memory
    in those heaps, so a long-running process's memory crept up by about 100 MiB every few runs without it
    (tests/integration/test_pool_lifecycle.py). ``execute_slots`` calls this when a run's slots are done.
    """
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc.malloc_trim(0)


_libc: Any = None
