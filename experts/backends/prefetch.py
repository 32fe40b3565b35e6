"""Reading a model file into the page cache in the background while llama.cpp loads it.

llama.cpp loads a GGUF file tensor by tensor: it reads one, repacks it for the CPU's vector instructions, then
reads the next, so on a cold page cache the disk and the CPU take turns instead of working together. Measured
on this project's 2-core machine (``bench/results/pool.md``): the 1.5B model loaded in 3.6 s from a cold cache
against 2.9 s from a warm one, while reading the whole file cold took 1.2 s. A thread that reads the file
ahead of llama.cpp, in the order llama.cpp reads it, keeps the disk busy while llama.cpp computes: the cold
load came down to 3.1 s, within 7% of the warm one.

The thread reads into one reused buffer (the data itself is thrown away: what matters is that the kernel now
holds the pages), so it costs no memory of its own, and a file that is already cached costs a memory copy on
the second core. ``posix_fadvise(WILLNEED)`` was measured too and does not help: the kernel reads the range
before the call returns, so nothing overlaps.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from types import TracebackType

__all__ = ["Prefetch"]

logger = logging.getLogger(__name__)

CHUNK_BYTES = 8 * 1024 * 1024


class Prefetch:
    """Reads ``path`` once, sequentially, in a daemon thread, for as long as the ``with`` block lasts.

    Leaving the block stops the reader at its next chunk and waits for it. Errors are logged, never raised:
    the load that follows reports a missing or unreadable file in its own words.

    Attributes:
        bytes_read: How much of the file the reader got through.
        seconds: How long it read, once stopped or finished.
        error: The ``OSError`` that stopped it early, if any.
    """

    def __init__(self, path: Path, *, chunk_bytes: int = CHUNK_BYTES) -> None:
        if chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
        self.path = path
        self.chunk_bytes = chunk_bytes
        self.bytes_read = 0
        self.seconds: float | None = None
        self.error: OSError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"prefetch {path.name}", daemon=True)

    def __enter__(self) -> Prefetch:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def done(self) -> bool:
        """Whether the reader has stopped (finished, stopped or failed)."""
        return self.seconds is not None

    def _run(self) -> None:
        started = time.perf_counter()
        buffer = memoryview(bytearray(self.chunk_bytes))
        try:
            with self.path.open("rb", buffering=0) as fh:
                if hasattr(os, "posix_fadvise"):  # not on macOS
                    os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
                while not self._stop.is_set():
                    n = fh.readinto(buffer)
                    if not n:
                        break
                    self.bytes_read += n
        except OSError as exc:
            self.error = exc
            logger.debug("prefetching %s stopped: %s", self.path, exc)
        finally:
            self.seconds = time.perf_counter() - started
