"""``python -m cli`` with one pause point, so a test can SIGKILL the process at an exact place in a run.

Usage (from the project root)::

    python -m tests.integration.paused_cli --pause POINT --marker FILE -- run "task" --framework ...

Everything after ``--`` goes to the ``coe`` command unchanged. POINT is one of

* ``enter:NODE`` / ``enter:NODE#N``: at the start of the (Nth, default first) call of graph node NODE in this
  process, before it did anything;
* ``leave:NODE``: after NODE returned its update, before LangGraph saved it;
* ``slot_done:SLOT``: after slot SLOT's work (generation, checks) returned in its worker thread, before the
  scheduler hands the result to ``execute_slots`` (so it is not saved).

At the point the process writes its pid to FILE and sleeps; the test kills it with SIGKILL from outside, which
is the same as a kill at that instant in an unmodified ``coe`` process. Nothing else changes: the hooks wrap
the node functions (``functools.wraps`` keeps the signatures LangGraph inspects) before the graph is built.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

NODES = (
    "guard",
    "scope",
    "select_template",
    "adapt_template",
    "route_slots",
    "confirm_plan",
    "execute_slots",
    "check_parts",
    "assemble",
)


def _pause(marker: Path) -> None:
    marker.write_text(str(os.getpid()), encoding="utf-8")
    time.sleep(3600)
    raise SystemExit("paused_cli: nobody killed the process")


def _wrap_node(fn: Callable[..., Any], when: str, nth: int, marker: Path) -> Callable[..., Any]:
    calls = 0

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if when == "enter" and calls == nth:
            _pause(marker)
        out = fn(*args, **kwargs)
        if when == "leave" and calls == nth:
            _pause(marker)
        return out

    return wrapper


def install(point: str, marker: Path) -> None:
    """Install the pause hook named by POINT (before ``graph`` is imported)."""
    when, _, target = point.partition(":")
    if when in ("enter", "leave"):
        name, _, nth = target.partition("#")
        if name not in NODES:
            raise SystemExit(f"paused_cli: unknown node {name!r}; one of {', '.join(NODES)}")
        if "graph.builder" in sys.modules:
            raise SystemExit("paused_cli: the graph was built before the hook was installed")
        package = importlib.import_module("nodes")
        setattr(package, name, _wrap_node(getattr(package, name), when, int(nth or 1), marker))
    elif when == "slot_done":
        module = importlib.import_module("nodes.execute_slots")
        original = module.run_slot

        @functools.wraps(original)
        def run_slot(job: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(job, *args, **kwargs)
            if job.spec.id == target:
                _pause(marker)
            return out

        module.run_slot = run_slot  # type: ignore[attr-defined]
    else:
        raise SystemExit(f"paused_cli: unknown pause point {point!r}")


def main() -> None:
    """Parse the pause options, install the hook, run ``coe`` with the remaining arguments."""
    parser = argparse.ArgumentParser(prog="paused_cli")
    parser.add_argument("--pause", required=True)
    parser.add_argument("--marker", required=True, type=Path)
    parser.add_argument("coe_args", nargs=argparse.REMAINDER)
    ns = parser.parse_args()
    args = ns.coe_args[1:] if ns.coe_args[:1] == ["--"] else ns.coe_args
    install(ns.pause, ns.marker)
    from cli.main import app

    sys.argv = ["coe", *args]
    app()


if __name__ == "__main__":
    main()
