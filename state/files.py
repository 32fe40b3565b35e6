"""Writing generated files (indexes, caches) so that a reader never sees a half-written one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it over ``path``."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
