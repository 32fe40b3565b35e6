"""``coe experts status``: the memory budget in effect here, and what running coe processes have loaded.

Every process that uses the model pool (``coe run``, ``langgraph dev``, an embedding app) publishes a snapshot
of its pool to ``<data dir>/pool/<pid>.json`` when it changes and removes it at exit. This command reads the
snapshots of live processes (and deletes those of processes that died without cleaning up), so it shows the
models a run in another terminal holds, its reservations, hits, loads, evictions and circuit breakers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.exit_codes import user_errors


def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    profile: Annotated[
        str | None, typer.Option(help="Show the budget of this hardware profile instead of the configured one.")
    ] = None,
    memory_limit: Annotated[
        int | None, typer.Option("--memory-limit", min=64, help="Show the budget under this limit, in MB.")
    ] = None,
) -> None:
    """Show the memory budget, and the models, reservations and breakers of running coe processes."""
    from experts.pool.status import status_dir
    from state.context import resolve_settings

    with user_errors():
        given = {"profile": profile, "memory_limit_mb": memory_limit}
        settings = resolve_settings({k: v for k, v in given.items() if v is not None})
        processes = read_snapshots(status_dir())
    budget = {
        "profile": settings.profile,
        "chosen": settings.profile_source,
        "memory_mb": settings.memory_mb,
        "overhead_mb": settings.memory_overhead_mb,
        "models_mb": (settings.memory_mb or 0) - settings.memory_overhead_mb,
        "max_parallel": settings.max_parallel,
        "n_ctx": settings.n_ctx,
        "preload": settings.preload,
        "preload_threshold": settings.preload_threshold,
        "emergency_threshold": settings.emergency_threshold,
    }
    if as_json:
        print(json.dumps({"budget": budget, "processes": processes}, indent=2))
        return
    print(
        f"profile {budget['profile']} ({budget['chosen']}): {budget['memory_mb']} MB, of which {budget['models_mb']} "
        f"MB for models; {budget['max_parallel']} parallel slots, context {budget['n_ctx']}, preload "
        + (f"on below {budget['preload_threshold']:.0%}" if budget["preload"] else "off")
        + f", emergency eviction above {budget['emergency_threshold']:.0%}"
    )
    if not processes:
        print("no running coe process is using the model pool")
        return
    for proc in processes:
        print()
        print(_process_line(proc))
        models = proc.get("models", [])
        if models:
            print(
                f"  {'model':28} {'state':9} {'in use':>6} {'reserved':>9} {'hits':>6} {'loads':>5} "
                f"{'preloads':>8} {'evicted':>7} {'emergency':>9} {'load s':>7}"
            )
            for m in models:
                load_s = "-" if m.get("load_seconds") is None else f"{m['load_seconds']:.2f}"
                print(
                    f"  {str(m['model'])[:28]:28} {m['state']:9} {m['in_use']:>6} {m['reserved_mb']:>7.0f}MB "
                    f"{m['hits']:>6} {m['loads']:>5} {m['preloads']:>8} {m['evictions']:>7} "
                    f"{m['emergency_evictions']:>9} {load_s:>7}"
                )
        breakers = proc.get("breakers", {})
        if breakers:
            parts = [
                f"{name} {b['state']} ({b['failures']} failures, {b['trips']} trips"
                + (f"; last check {b['health']}" if b.get("health") else "")
                + ")"
                for name, b in breakers.items()
            ]
            print("  breakers: " + "; ".join(parts))


def read_snapshots(folder: Path) -> list[dict[str, Any]]:
    """The pool snapshots of live processes, oldest process first; stale files are removed."""
    found: list[dict[str, Any]] = []
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            pid = int(path.stem)
        except ValueError:
            continue
        if not _alive(pid):
            path.unlink(missing_ok=True)
            continue
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError):
            continue  # being replaced right now
    return sorted(found, key=lambda p: p.get("pid", 0))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _process_line(proc: dict[str, Any]) -> str:
    budget = "no budget" if proc.get("budget_mb") is None else f"budget {proc['budget_mb']:.0f} MB"
    return (
        f"pid {proc.get('pid')} ({proc.get('command', '?')}): "
        f"reserved {proc.get('reserved_mb', 0):.0f} MB of {budget}, "
        f"measured {proc.get('measured_mb', 0):.0f} MB (peak {proc.get('peak_measured_mb', 0):.0f} MB), "
        f"{proc.get('waits', 0)} waits for memory"
    )
