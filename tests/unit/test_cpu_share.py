"""The machine's cores shared by generations: a share is held for a generation, the next one waits for it, a
stopped wait gives up, another process' share counts, and the llama backend takes one around a generation."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from experts.backends.cpu_share import ShareWaitStopped, cpu_share, shares_for


def test_shares_fit_the_cores() -> None:
    assert shares_for(2, cpu_count=2) == 1
    assert shares_for(4, cpu_count=16) == 4
    assert shares_for(32, cpu_count=16) == 1  # more threads than cores: still one generation at a time


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: one share")
def test_each_share_held_at_once_is_told_apart(tmp_path: Path) -> None:
    # one thread each of 2 cores: two shares, and the second generation gets the other one (its decode thread)
    with cpu_share(tmp_path, 1, threading.Event()) as one, cpu_share(tmp_path, 1, threading.Event()) as other:
        assert (one.number, other.number) == (0, 1) and one.waited < 1 and other.waited < 1


def test_a_second_generation_waits_for_the_share(tmp_path: Path) -> None:
    events: list[str] = []
    held = threading.Event()

    def first() -> None:
        with cpu_share(tmp_path, 64, threading.Event()):
            events.append("first in")
            held.set()
            time.sleep(0.3)
            events.append("first out")

    worker = threading.Thread(target=first)
    worker.start()
    held.wait(5)
    with cpu_share(tmp_path, 64, threading.Event()) as share:
        events.append("second in")
    worker.join()
    assert events == ["first in", "first out", "second in"] and share.waited >= 0.2 and share.number == 0


def test_a_stopped_wait_gives_up(tmp_path: Path) -> None:
    stop = threading.Event()
    with cpu_share(tmp_path, 64, threading.Event()):
        threading.Timer(0.1, stop.set).start()
        started = time.perf_counter()
        with pytest.raises(ShareWaitStopped), cpu_share(tmp_path, 64, stop):
            pass
        assert time.perf_counter() - started < 2


def test_another_process_share_counts_and_its_death_frees_it(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, threading, time; from pathlib import Path;"
            "from experts.backends.cpu_share import cpu_share\n"
            f"with cpu_share(Path({str(tmp_path)!r}), 64, threading.Event()):\n"
            "    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        stop = threading.Event()
        threading.Timer(0.3, stop.set).start()
        with pytest.raises(ShareWaitStopped), cpu_share(tmp_path, 64, stop):
            pass
    finally:
        holder.kill()
        holder.communicate()
    with cpu_share(tmp_path, 64, threading.Event()) as share:  # the kernel dropped the dead process' lock
        assert share.waited < 1
