"""Every decode of a share of the cores runs on that share's one thread, whoever asks."""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from experts.backends.decode_thread import on_decode_thread

WHO = contextvars.ContextVar("who", default="nobody")


def test_callers_on_different_threads_decode_on_their_shares_one_thread() -> None:
    def ident() -> int:
        return threading.get_ident()

    with ThreadPoolExecutor(2) as callers:
        seen = {callers.submit(on_decode_thread, 70, ident).result() for _ in range(6)}
    seen.add(on_decode_thread(70, ident))  # and from the main thread
    assert len(seen) == 1 and threading.get_ident() not in seen
    assert on_decode_thread(71, ident) not in seen  # another share, another thread


def test_the_callers_context_and_exceptions_cross_over() -> None:
    WHO.set("slot-a")
    assert on_decode_thread(72, WHO.get) == "slot-a"  # a stream writer read while tokens are written

    def fails() -> None:
        raise ValueError("llama_decode returned 2")

    with pytest.raises(ValueError, match="returned 2"):
        on_decode_thread(72, fails)
    assert on_decode_thread(72, lambda: "still serving") == "still serving"


def test_a_decode_asked_for_on_the_decode_thread_runs_there_without_waiting_for_itself() -> None:
    inner = on_decode_thread(73, lambda: on_decode_thread(73, threading.get_ident))
    assert inner == on_decode_thread(73, threading.get_ident)
