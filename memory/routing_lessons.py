"""A user's routing lessons in the Store: what ``coe feedback`` taught the router, kept or rolled back, and why.

``coe feedback THREAD good --slot S`` confirms where the router sent slot S; ``bad --slot S --route-to EXPERT``
corrects it. Each is checked (:func:`experts.routing.lesson_check.check_lesson`: plausible, and no drift on the guard
set) and recorded under ``(<user>, "memory", "routing")`` with its verdict: ``kept`` lessons train the router of
the user's later runs (``nodes.scope``, ``nodes.route_slots``), ``refused`` ones stay as a record of what was
asked and why it was not learned. A kept lesson is checked again after the catalog changes
(:meth:`RoutingLessons.current`). ``coe memory forget --run ID`` removes a run's lessons with its facts.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from experts.routing import ExpertRouter
from experts.routing.lesson_check import Lesson, LessonCheck, check_lesson, lessons_version
from memory.store import ItemStore

__all__ = ["LessonRecord", "RoutingLessons"]

_SCAN = 10_000


@dataclass(frozen=True)
class LessonRecord:
    """One lesson as stored."""

    id: str
    text: str
    expert: str
    routed: str
    """Where the router sent the text when the lesson was given."""
    kept: bool
    reason: str
    run_id: str | None
    slot: str | None
    note: str
    created_at: str
    guard: str
    """The guard set's score with the lesson (``right/total``), or empty when it was refused before training."""
    catalog: str = ""
    """The catalog version it was checked under (:func:`experts.routing.lesson_check.lessons_version`; empty: a
    record older than versions, checked again on first use)."""

    @property
    def lesson(self) -> Lesson:
        """The text and expert."""
        return Lesson(self.text, self.expert)


class RoutingLessons:
    """A user's routing lessons in a Store."""

    def __init__(self, store: ItemStore, user: str) -> None:
        self.store = store
        self.namespace = (user, "memory", "routing")

    def records(self) -> list[LessonRecord]:
        """Every lesson given, kept or not, oldest first."""
        items = self.store.search(self.namespace, limit=_SCAN)
        return sorted((_record(item.key, item.value) for item in items), key=lambda r: (r.created_at, r.id))

    def kept(self) -> list[Lesson]:
        """The lessons the router learns from, oldest first (as last checked: see :meth:`current`)."""
        return [r.lesson for r in self.records() if r.kept]

    def current(self, router: ExpertRouter) -> list[Lesson]:
        """The kept lessons, each one checked under ``router``'s catalog as it is now.

        ``router`` is the one without lessons. A kept lesson checked under another catalog version (an expert
        added, removed or edited, new routing examples, a new guard set) is checked again, oldest first, against
        the lessons kept before it, and its record updated: kept, or refused with the reason. So the check runs
        once per catalog change, in the first run after it, and a lesson that would now drift stops training
        the router (the rollback of issue 20, for a change of the catalog rather than of the lessons).
        """
        version = lessons_version(router.catalog)
        records = [r for r in self.records() if r.kept]
        kept: list[Lesson] = []
        for record in records:
            if record.catalog == version:
                kept.append(record.lesson)
                continue
            if record.expert not in router.catalog.ids:
                ok, reason, guard = False, f"refused on a recheck: {record.expert} is no longer an expert", ""
            else:
                check = check_lesson(router, kept, record.lesson)
                ok = check.kept
                reason = "kept" if ok else f"refused on a recheck after the catalog changed: {check.reason}"
                guard = "" if check.guard_after is None else f"{check.guard_after.right}/{check.guard_after.total}"
            updated = replace(record, kept=ok, reason=reason, guard=guard, catalog=version)
            self.store.put(self.namespace, record.id, dict(updated.__dict__), index=False)
            if ok:
                kept.append(record.lesson)
        return kept

    def teach(
        self,
        router: ExpertRouter,
        lesson: Lesson,
        run_id: str | None = None,
        slot: str | None = None,
        note: str = "",
    ) -> tuple[LessonRecord, LessonCheck]:
        """Check ``lesson`` against ``router`` (the one without lessons) and record it, kept or refused."""
        check = check_lesson(router, self.kept(), lesson)
        record = LessonRecord(
            id=str(uuid.uuid4()),
            text=lesson.text,
            expert=lesson.expert,
            routed=check.routed_before,
            kept=check.kept,
            reason=check.reason,
            run_id=run_id,
            slot=slot,
            note=note,
            created_at=datetime.now(UTC).isoformat(timespec="microseconds"),
            guard="" if check.guard_after is None else f"{check.guard_after.right}/{check.guard_after.total}",
            catalog=lessons_version(router.catalog),
        )
        self.store.put(self.namespace, record.id, dict(record.__dict__), index=False)
        return record, check

    def forget_run(self, run_id: str) -> list[LessonRecord]:
        """Remove every lesson given about a run (``run_id`` or a prefix of it); the lessons removed."""
        gone = [r for r in self.records() if r.run_id is not None and r.run_id.startswith(run_id)]
        for record in gone:
            self.store.delete(self.namespace, record.id)
        return gone


def _record(key: str, value: dict[str, Any]) -> LessonRecord:
    def text(name: str) -> str:
        return str(value.get(name) or "")

    return LessonRecord(
        id=key,
        text=text("text"),
        expert=text("expert"),
        routed=text("routed"),
        kept=bool(value.get("kept")),
        reason=text("reason"),
        run_id=value.get("run_id"),
        slot=value.get("slot"),
        note=text("note"),
        created_at=text("created_at"),
        guard=text("guard"),
        catalog=text("catalog"),
    )
