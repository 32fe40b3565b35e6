"""A candidate's share of live slots: which candidates shadow real runs, and the slots waiting for their turn.

``coe experts shadow ID VERSION --share 0.2`` sets a candidate's share (:func:`set_share`): after a run ends, each
slot its expert served (done, checked, no dependencies) is offered to the candidate with that probability (a
hash of the thread, slot and version, so a slot is offered or not the same way every time), and an offered slot
is queued here (:func:`enqueue`) with everything needed to answer it again: the task, the slot, the served
answer's check score and text. Queuing costs the run a few milliseconds; the answering happens later, in spare
time (:mod:`graph.shadow`: the server's idle worker, or ``coe experts shadow --queued``), never inside the run.

A share may carry an automatic promotion rule: after ``promote_after`` shadow slots, the candidate is promoted
when its wins pass the served answers' by ``margin`` or more (and its exam allows it, as for ``promote``).

Layout in ``$COE_HOME/experts/.shadow/``: ``<id>@<version>.share.json`` (the share and its rule) and
``queue.sqlite`` (the waiting slots: one SQLite table, so runs in several processes can queue while a worker
takes jobs; the file is the operator's, mode 0600: it holds the users' tasks, as the checkpoint store does).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experts.catalog.versions import candidate, candidates
from state.errors import ConfigError
from state.paths import user_experts_dir

__all__ = [
    "MAX_PENDING",
    "TAKEN_SECONDS",
    "Share",
    "enqueue",
    "finish",
    "offered",
    "pending",
    "put_back",
    "set_share",
    "share",
    "shares",
    "take",
]

SHADOW = ".shadow"
QUEUE_FILE = "queue.sqlite"
MAX_PENDING = 50
"""Waiting slots kept per candidate: past that, a run's slots are not queued (the queue never grows unbounded)."""
TAKEN_SECONDS = 3600.0
"""A job taken this long ago and neither finished nor put back (its worker was killed) is offered again."""


@dataclass(frozen=True)
class Share:
    """How much of an expert's live work a candidate version answers in shadow, and when it is promoted."""

    share: float
    """The probability that a slot the expert served is queued for the candidate (0 < share <= 1)."""
    promote_after: int | None = None
    """Promote automatically once this many shadow slots are scored (None: only by hand)."""
    margin: int = 1
    """Candidate wins minus served wins needed for the automatic promotion."""

    def line(self) -> str:
        """``share 20% of live slots; promoted after 10 slots by a margin of 3`` (or ``...; promoted by hand``)."""
        rule = (
            f"promoted after {self.promote_after} slots by a margin of {self.margin}"
            if self.promote_after
            else "promoted by hand"
        )
        return f"share {self.share:.0%} of live slots; {rule}"


def _root() -> Path:
    return user_experts_dir() / SHADOW


def _share_path(expert_id: str, version: str) -> Path:
    return _root() / f"{expert_id}@{version}.share.json"


def set_share(
    expert_id: str, version: str, fraction: float, *, promote_after: int | None = None, margin: int = 1
) -> Share | None:
    """Set candidate ``version``'s share of ``expert_id``'s live slots (0 stops it); returns the share now in force.

    Raises:
        ConfigError: no such candidate, a share outside [0, 1], or a rule with no slots or a negative margin.
    """
    candidate(expert_id, version, "to shadow")
    if not 0.0 <= fraction <= 1.0:
        raise ConfigError("--share", f"must be between 0 and 1, got {fraction}", "share")
    if promote_after is not None and promote_after < 1:
        raise ConfigError("--promote-after", f"must be at least 1 slot, got {promote_after}", "promote_after")
    if margin < 0:
        raise ConfigError("--margin", f"must not be negative, got {margin}", "margin")
    path = _share_path(expert_id, version)
    if fraction == 0.0:
        path.unlink(missing_ok=True)
        return None
    given = Share(fraction, promote_after, margin)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(given), indent=2), encoding="utf-8")
    return given


def share(expert_id: str, version: str) -> Share | None:
    """The candidate's share in force, if any."""
    try:
        data = json.loads(_share_path(expert_id, version).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Share(float(data["share"]), data.get("promote_after"), int(data.get("margin", 1)))


def shares() -> dict[str, dict[str, Share]]:
    """Every share in force whose candidate is still kept: expert id -> version -> share."""
    found: dict[str, dict[str, Share]] = {}
    try:
        paths = sorted(_root().glob("*@*.share.json"))
    except OSError:
        return found
    for path in paths:
        expert_id, _, version = path.name.removesuffix(".share.json").partition("@")
        given = share(expert_id, version)
        if given is not None and version in candidates(expert_id):
            found.setdefault(expert_id, {})[version] = given
    return found


def offered(thread_id: str, slot_id: str, version: str, fraction: float) -> bool:
    """Whether a slot falls in a candidate's share: a hash of the three names, so the same slot always answers alike."""
    digest = hashlib.sha256(f"{thread_id}/{slot_id}/{version}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


@contextmanager
def _queue() -> Iterator[sqlite3.Connection]:
    path = _root() / QUEUE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = not path.exists()
    with closing(sqlite3.connect(path, timeout=30.0, isolation_level=None)) as conn:
        if fresh:
            os.chmod(path, 0o600)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, expert TEXT NOT NULL, version TEXT NOT NULL, "
            "thread_id TEXT NOT NULL, slot_id TEXT NOT NULL, job TEXT NOT NULL, queued_at REAL NOT NULL, "
            "taken_at REAL, UNIQUE (expert, version, thread_id, slot_id))"
        )
        yield conn


def enqueue(job: dict[str, Any]) -> bool:
    """Queue one slot for a candidate (``job`` names ``expert``, ``version``, ``thread_id`` and ``slot_id``).

    False when the candidate's queue is full or the slot is queued for it already (a resumed run ends twice).
    """
    with _queue() as conn:
        conn.execute("BEGIN IMMEDIATE")
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM jobs WHERE expert = ? AND version = ?", (job["expert"], job["version"])
        ).fetchone()
        if count >= MAX_PENDING:
            conn.execute("COMMIT")
            return False
        added = conn.execute(
            "INSERT OR IGNORE INTO jobs (expert, version, thread_id, slot_id, job, queued_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (job["expert"], job["version"], job["thread_id"], job["slot_id"], json.dumps(job), time.time()),
        ).rowcount
        conn.execute("COMMIT")
    return bool(added)


def take() -> tuple[int, dict[str, Any]] | None:
    """Take the oldest waiting job (or one a killed worker left taken for :data:`TAKEN_SECONDS`); None when none.

    A job whose candidate is no longer kept (promoted, removed since it was queued) is dropped on the way.
    """
    while True:
        now = time.time()
        with _queue() as conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT id, job FROM jobs WHERE taken_at IS NULL OR taken_at < ? ORDER BY id LIMIT 1",
                (now - TAKEN_SECONDS,),
            ).fetchone()
            if row is not None:
                conn.execute("UPDATE jobs SET taken_at = ? WHERE id = ?", (now, row[0]))
            conn.execute("COMMIT")
        if row is None:
            return None
        job_id, job = int(row[0]), json.loads(row[1])
        if job["version"] in candidates(job["expert"]):
            return job_id, job
        finish(job_id)


def finish(job_id: int) -> None:
    """Drop a job that was answered (or can never be: its candidate is gone)."""
    with _queue() as conn:
        conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))


def put_back(job_id: int) -> None:
    """Return a taken job to the queue (its worker yielded to a user's run)."""
    with _queue() as conn:
        conn.execute("UPDATE jobs SET taken_at = NULL WHERE id = ?", (job_id,))


def pending() -> list[dict[str, Any]]:
    """The queued jobs, oldest first: id, expert, version, thread, slot, queued and taken times."""
    if not (_root() / QUEUE_FILE).exists():
        return []
    with _queue() as conn:
        rows = conn.execute(
            "SELECT id, expert, version, thread_id, slot_id, queued_at, taken_at FROM jobs ORDER BY id"
        ).fetchall()
    names = ("id", "expert", "version", "thread_id", "slot_id", "queued_at", "taken_at")
    return [dict(zip(names, row, strict=True)) for row in rows]
