"""``coe prune``: the checkpoint retention policy (delete finished runs older than N days, compact the rest)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.exit_codes import user_errors

if TYPE_CHECKING:
    from graph.retention import ThreadInfo


def prune(
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than",
            metavar="DAYS",
            help="Delete finished runs (completed, partial, failed, rejected) last updated more than DAYS ago "
            "(fractions allowed) [env: COE_RETENTION_DAYS].",
        ),
    ] = None,
    keep_unfinished: Annotated[
        bool,
        typer.Option(
            "--keep-unfinished/--delete-unfinished",
            help="Keep runs that can still be resumed (stopped half-way or waiting for an answer) whatever "
            "their age (default), or delete them too when they are older than DAYS.",
        ),
    ] = True,
    compact: Annotated[
        bool,
        typer.Option(
            "--compact",
            help="Also drop the intermediate checkpoints of the finished runs that are kept, keeping the "
            "latest (the result and ledger stay; the step history goes).",
        ),
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be deleted or compacted.")] = False,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="Where runs are saved: sqlite:///PATH or postgresql://... Default: $COE_CHECKPOINT_URL, else "
            "the SQLite file in the user data directory.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a machine-readable JSON report.")] = False,
) -> None:
    """Delete finished runs older than DAYS; unfinished and waiting runs are kept unless asked."""
    from graph import open_checkpointer
    from graph.retention import prune_runs, retention_days

    with user_errors():
        days = retention_days(older_than)
        with open_checkpointer(checkpoint) as saver:
            report = prune_runs(
                saver,
                timedelta(days=days),
                keep_unfinished=keep_unfinished,
                compact=compact,
                dry_run=dry_run,
            )
    verb = "would " if dry_run else ""
    if as_json:
        payload: dict[str, Any] = {
            "dry_run": dry_run,
            "cutoff": report.cutoff.isoformat(timespec="seconds"),
            "deleted": [_row(i) for i in report.deleted],
            "compacted": [_row(i) for i in report.compacted],
            "kept": len(report.kept),
            "running": [i.thread_id for i in report.kept if i.status == "running"],
            "stale_leases": report.stale_leases,
        }
        print(json.dumps(payload, indent=2))
        return
    for label, items in ((f"{verb}delete", report.deleted), (f"{verb}compact", report.compacted)):
        for info in items:
            updated = info.updated_at.isoformat(timespec="seconds") if info.updated_at else "?"
            print(f"{label:<14} {info.thread_id}  {info.status:<10} {updated}")
    running = [i.thread_id for i in report.kept if i.status == "running"]
    if running:
        print(f"kept {len(running)} running run(s) (a process holds the lease): {', '.join(running)}")
    print(
        f"{len(report.deleted)} run(s) {verb}deleted, {len(report.compacted)} {verb}compacted, "
        f"{len(report.kept)} kept (cutoff {report.cutoff.isoformat(timespec='seconds')})"
        + (f"; {len(report.stale_leases)} left-over lease(s) cleaned" if report.stale_leases else "")
    )


def _row(info: ThreadInfo) -> dict[str, Any]:
    return {
        "thread_id": info.thread_id,
        "status": info.status,
        "updated": info.updated_at.isoformat(timespec="seconds") if info.updated_at else None,
    }
