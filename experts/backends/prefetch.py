"""Reading a model file into the page cache in a thread while llama.cpp loads it.

llama.cpp reads and repacks a GGUF file tensor by tensor, so on a cold page cache the disk and the CPU take
turns; a thread that reads the file ahead of it, in llama.cpp's order, keeps the disk busy meanwhile. It reads
into one reused buffer (what matters is that the kernel holds the pages), so it keeps no memory of its own.
Measured in docs/decisions/models.md ("Cold load").
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
