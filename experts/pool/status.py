"""Publishing this process's model pool status for ``coe experts status``.

Every process that uses the pool (``coe run``, ``langgraph dev``, an embedding application) writes a snapshot
to ``<data dir>/pool/<pid>.json`` (:func:`state.paths.pool_status_dir`) within a quarter of a second of a change,
and removes it at exit: loaded models, reservations, counters, measured memory and the circuit breakers.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from experts.pool.breaker import breakers
from experts.pool.residency import pool
from state.files import atomic_write
from state.paths import pool_status_dir

__all__ = ["publish_soon", "publish_status", "status_dir"]

logger = logging.getLogger(__name__)

_publish_lock = threading.Lock()
_publish_timer: threading.Timer | None = None
_published: Path | None = None
_PUBLISH_EVERY_S = 0.25


def publish_soon() -> None:
    """Publish the status within a quarter of a second (changes in between are written together)."""
    global _publish_timer
    with _publish_lock:
        if _publish_timer is not None:
            return
        _publish_timer = threading.Timer(_PUBLISH_EVERY_S, _publish_now)
        _publish_timer.daemon = True
        _publish_timer.start()


def _publish_now() -> None:
    global _publish_timer, _published
    with _publish_lock:
        _publish_timer = None
    path = publish_status()
    if path is not None and _published is None:
        _published = path
        atexit.register(_unpublish, path)


def _unpublish(path: Path) -> None:
    """At exit: this process's models are gone with it."""
    with contextlib.suppress(OSError):
        path.unlink()


def status_dir() -> Path:
    """Where processes publish their pool status for ``coe experts status`` (``<data dir>/pool``)."""
    return pool_status_dir()


def publish_status(extra: dict[str, Any] | None = None) -> Path | None:
    """Write this process's pool status to ``status_dir()/<pid>.json`` (atomically); None if it cannot."""
    snapshot = {
        "pid": os.getpid(),
        "at": time.time(),
        "command": " ".join(sys.argv[:3])[:200],
        **pool().status(),
        "breakers": {k: dataclasses.asdict(v) for k, v in breakers.snapshot().items()},
        **(extra or {}),
    }
    folder = status_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{os.getpid()}.json"
        atomic_write(path, lambda tmp: tmp.write_text(json.dumps(snapshot, indent=1, default=str), encoding="utf-8"))
    except OSError as exc:
        logger.debug("cannot publish the pool status: %s", exc)
        return None
    return path
