"""The machine's cores shared by every generation on it, across processes.

llama.cpp runs a generation on ``n_threads`` busy threads (all cores by default). Two generations at once on the
same cores, from two ``coe`` processes or two models of one server, do not each run at half speed: their
spinning threads preempt each other, and four at once on 2 cores made one generation take minutes instead of
seconds. So a CPU generation first takes a *share* of the machine: ``cpu_count // n_threads`` shares exist (at
least one), each a lock file under :func:`state.paths.cpu_share_dir` held with ``flock`` for the generation. A
generation that finds none free waits, polling, and stops waiting when its backend is stopped (Ctrl+C, an
eviction). The kernel drops a dead process' locks, so nothing is left held.

``flock`` locks belong to an open file, so two generations of one process exclude each other as two processes
do. Where ``fcntl`` does not exist (Windows) there is no sharing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

__all__ = ["POLL_SECONDS", "Share", "ShareWaitStopped", "cpu_share", "shares_for"]

POLL_SECONDS = 0.02
"""How often a waiting generation tries the shares again (and checks whether it was stopped)."""


class Stop(Protocol):
    """What stops a wait: a ``threading.Event`` or :class:`experts.backends.protocol.EitherStop`."""

    def wait(self, timeout: float) -> bool: ...


class ShareWaitStopped(Exception):
    """The backend was stopped while its generation waited for a share of the cores."""


def shares_for(n_threads: int, cpu_count: int | None = None) -> int:
    """How many generations of ``n_threads`` threads fit the machine's cores at once (at least one)."""
    return max(1, (cpu_count or os.cpu_count() or 1) // max(1, n_threads))


class Share(NamedTuple):
    """A share of the cores held: which one, and the seconds the generation waited for it."""

    number: int
    waited: float


@contextlib.contextmanager
def cpu_share(directory: Path, n_threads: int, stop: Stop) -> Iterator[Share]:
    """Hold one share of the cores for a generation of ``n_threads`` threads; yields which, and the seconds waited.

    Raises:
        ShareWaitStopped: If ``stop`` is set while waiting.
    """
    try:
        import fcntl
    except ImportError:  # no flock: no sharing
        yield Share(0, 0.0)
        return
    directory.mkdir(parents=True, exist_ok=True)
    names = [directory / f"share-{n}.lock" for n in range(shares_for(n_threads))]
    started = time.perf_counter()
    while True:
        for number, name in enumerate(names):
            handle = name.open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                yield Share(number, time.perf_counter() - started)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            return
        if stop.wait(POLL_SECONDS):
            raise ShareWaitStopped
