"""The one OS thread each share of the cores decodes on, for the life of the process.

llama.cpp, built with OpenMP as llama-cpp-python builds it, runs a decode on a team of threads led by the thread
that called it, and each calling thread keeps its own team. Once two threads of one process have decoded, every
decode is slower, whichever model: HumanEval/2's 90 tokens on the 1.5B took 3.9 s called from one thread and
4.5-4.7 s from either of two threads taking turns; the 0.5B 2.45 s against 3.0 s (2 cores, one process, nothing
else running; docs/decisions/models.md). The graph runs slots on pool threads, the planner and a benchmark's bare
side on others, so a run paid that on every token.

So every decode runs on the thread of the share of the cores it holds (:mod:`experts.backends.cpu_share`): a share
is held by one generation at a time, so its thread is free when the share is held, and there are as many of these
threads as shares (one on a 2-core machine). The call runs in a copy of the caller's context, so what reads
context variables while tokens are written (the stream a slot writes to) sees the caller's.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["on_decode_thread"]

T = TypeVar("T")

_PREFIX = "coe-decode-"
_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}


def on_decode_thread(share: int, call: Callable[[], T]) -> T:
    """``call()`` run on share ``share``'s decode thread (created on first use); its result or its exception."""
    name = f"{_PREFIX}{share}"
    if threading.current_thread().name.startswith(name + "_"):  # already there (a decode inside a decode)
        return call()
    with _lock:
        pool = _pools.get(share)
        if pool is None:
            pool = _pools[share] = ThreadPoolExecutor(1, thread_name_prefix=name)
    return pool.submit(contextvars.copy_context().run, call).result()
