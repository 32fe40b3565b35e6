"""The measurement of bench/bench_cancel.py (its run needs the real model and the server: about 3 minutes): the
CPU time of a process tree, and the moment it goes idle."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

from bench.bench_cancel import stopped_after, tree_cpu_seconds

BUSY_THEN_IDLE = "import time\nend = time.time() + 0.6\nwhile time.time() < end: pass\ntime.sleep(30)"


def test_a_process_tree_is_seen_busy_then_idle() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BUSY_THEN_IDLE!r}])"],
        start_new_session=True,
    )
    try:
        time.sleep(0.2)
        since = time.monotonic()
        before = tree_cpu_seconds(parent.pid)
        idle_at = asyncio.run(stopped_after(parent.pid, since, limit=10))
        assert tree_cpu_seconds(parent.pid) > before  # the child's time counts in its parent's tree
        assert idle_at is not None and 0.2 < idle_at < 2.0, idle_at
    finally:
        os.killpg(parent.pid, signal.SIGKILL)  # the child too
        parent.wait()
