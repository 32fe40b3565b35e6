"""Routing lessons: a person's word on where a text should have gone, learned within bounds, kept only without drift.

A lesson is a text and the expert a person says it belongs to (``coe feedback THREAD good --slot S`` confirms the
slot's expert; ``bad --slot S --route-to EXPERT`` corrects it). Lessons join the learned term's training rows
(:func:`experts.routing.index.probe_training_rows`) as routing examples of their own, each counted
:data:`LESSON_WEIGHT` times; the capability and exclusion vectors never change. Bounds:

* **at most** :data:`MAX_LESSONS` lessons count (the latest ones), and a text has one lesson (the latest word);
* **plausible**: the expert a lesson names must score at most :data:`PLAUSIBLE_GAP` below the router's choice for
  the text. A router that erred had the right expert close behind; "Write a SQL query joining orders and
  customers" taught to the poet is refused (the poet is a whole point below the SQL expert);
* **no drift**: the router with the lessons routes the guard set (``routing_guard.tsv`` beside the scope
  documents, texts never trained on) and must get at most :data:`DRIFT_TOLERANCE` fewer of them right than the
  router without any lesson. A lesson that breaks this is rolled back: it is kept as a record, marked, and never
  trained on.

Measured in ``bench/bench_feedback.py`` (``bench/results/feedback.md``); the choices are in ``docs/decisions.md``.
This module stores nothing: :mod:`memory.routing_lessons` keeps a user's lessons in the Store.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, replace

import numpy as np

from experts.catalog.scopes import Catalog
from experts.routing.index import EXAMPLES_FILE, GUARD_FILE, base_positions, load_examples, probe_training_rows
from experts.routing.lexical import LexicalProbe, train_probe
from experts.routing.router import ExpertRouter, FastStage, routing_text

__all__ = [
    "DRIFT_TOLERANCE",
    "GUARD_FILE",
    "LESSON_WEIGHT",
    "MAX_LESSONS",
    "PLAUSIBLE_GAP",
    "GuardScore",
    "Lesson",
    "LessonCheck",
    "check_lesson",
    "guard_score",
    "lessons_version",
    "router_with_lessons",
]

MAX_LESSONS = 200
"""The most lessons that count (the latest): against the 1,000-odd routing examples, a person's word can correct
the texts they route without outweighing what the examples teach."""
LESSON_WEIGHT = 2
"""How many training rows a lesson is: one row moves a text's own routing too little to correct it when its words
are common (``bench/bench_feedback.py``)."""
PLAUSIBLE_GAP = 0.4
"""How far below the router's choice a lesson's expert may score (net score). On the bench's lessons, the right
expert of a misrouted text was 0.02-0.33 behind, a deliberately wrong one 0.44-1.27 (``bench/bench_feedback.py``)."""
DRIFT_TOLERANCE = 1
"""How many more guard texts the router with lessons may route wrongly than the router without any (about the noise
of one routing decision on a 125-text set: a lesson that fixes one text may tip one near-tie elsewhere)."""


@dataclass(frozen=True)
class Lesson:
    """A text and the expert a person says it belongs to."""

    text: str
    expert: str


@dataclass(frozen=True)
class GuardScore:
    """How a router does on the guard set."""

    right: int
    total: int
    wrong: tuple[tuple[str, str, str], ...]
    """Each guard text it routes wrongly: (text, its expert, where the router sent it)."""

    @property
    def accuracy(self) -> float:
        """The share of guard texts routed to their expert (1.0 for an empty guard set)."""
        return self.right / self.total if self.total else 1.0


@dataclass(frozen=True)
class LessonCheck:
    """Whether a new lesson is kept, and why."""

    kept: bool
    reason: str
    gap: float
    """How far the lesson's expert scored below the router's choice (0 when it was the choice)."""
    routed_before: str
    """Where the router (with the lessons kept so far) sends the text."""
    routed_after: str | None
    """Where it sends the text with the new lesson (None when the lesson was refused before training)."""
    guard_base: GuardScore
    guard_after: GuardScore | None


def guard_score(router: ExpertRouter, catalog: Catalog) -> GuardScore:
    """Route the catalog's guard set (none: a perfect empty score)."""
    guard = load_examples(catalog, GUARD_FILE)
    if not guard:
        return GuardScore(0, 0, ())
    results = router.route_many([text for _, text in guard])
    wrong = tuple(
        (text, expert, r.expert) for (expert, text), r in zip(guard, results, strict=True) if r.expert != expert
    )
    return GuardScore(len(guard) - len(wrong), len(guard), wrong)


def _bounded(lessons: list[Lesson]) -> list[Lesson]:
    """The latest lesson per text, the latest :data:`MAX_LESSONS` of them, in the order given."""
    latest: dict[str, Lesson] = {}
    for lesson in lessons:
        key = " ".join(lesson.text.lower().split())
        latest.pop(key, None)
        latest[key] = lesson
    return list(latest.values())[-MAX_LESSONS:]


_probes: dict[str, LexicalProbe] = {}
_probes_lock = threading.Lock()


def probe_with_lessons(catalog: Catalog, lessons: list[Lesson]) -> LexicalProbe:
    """The learned term trained on the catalog's rows and the lessons (cached in the process by their content)."""
    bounded = _bounded(lessons)
    content = [catalog.routing_hash(), str(catalog.directory), base_positions(catalog)]
    key = hashlib.sha256(json.dumps([*content, [(x.text, x.expert) for x in bounded]]).encode()).hexdigest()
    with _probes_lock:
        probe = _probes.get(key)
        if probe is None:
            texts, labels = probe_training_rows(catalog)
            for lesson in bounded:
                texts += [routing_text(lesson.text)] * LESSON_WEIGHT
                labels += [catalog.ids.index(lesson.expert)] * LESSON_WEIGHT
            labelled = np.asarray(labels, dtype=np.int64)
            probe = train_probe(texts, labelled, len(catalog.ids), base=base_positions(catalog))
            _probes[key] = probe
    return probe


def router_with_lessons(router: ExpertRouter, lessons: list[Lesson]) -> ExpertRouter:
    """``router`` whose learned term also knows ``lessons`` (the router itself when there are none)."""
    bounded = [x for x in _bounded(lessons) if x.expert in router.catalog.ids]
    if not bounded or router.index.probe is None:
        return router
    probe = probe_with_lessons(router.catalog, bounded)
    fast = router.fast

    def first_stage() -> ExpertRouter | None:
        base = fast.router() if fast is not None else None
        return None if base is None else _swap(base, probe, None)

    return _swap(router, probe, FastStage(first_stage) if fast is not None else None)


def _swap(router: ExpertRouter, probe: LexicalProbe, fast: FastStage | None) -> ExpertRouter:
    return ExpertRouter(router.catalog, router.embedder, replace(router.index, probe=probe), router.params, fast)


def lessons_version(catalog: Catalog) -> str:
    """What a lesson's check depends on, as a short hash: the experts' routing lines, the examples, the guard set.

    A kept lesson checked under another version is checked again before it trains a router
    (:meth:`memory.routing_lessons.RoutingLessons.current`): a new expert or new examples may make it implausible, or
    make it cost guard texts.
    """
    digest = hashlib.sha256(catalog.routing_hash().encode("utf-8"))
    for name in (EXAMPLES_FILE, GUARD_FILE):
        path = catalog.directory / name
        digest.update(name.encode("utf-8") + b"\0" + (path.read_bytes() if path.is_file() else b""))
    digest.update(json.dumps(catalog.extra_guard).encode("utf-8"))  # added experts' exam tasks guard too
    return digest.hexdigest()[:16]


def check_lesson(router: ExpertRouter, kept: list[Lesson], lesson: Lesson) -> LessonCheck:
    """Whether ``lesson`` may join the ``kept`` ones: plausible, and no drift on the guard set.

    Args:
        router: The router without any lesson (the shipped one, with the run's parameters).
        kept: The lessons kept so far.
        lesson: The new one.
    """
    if lesson.expert not in router.catalog.ids:
        raise ValueError(f"unknown expert {lesson.expert!r}")
    result = router_with_lessons(router, kept).route(lesson.text)
    gap = round(max(0.0, result.score - result.scores[lesson.expert]), 4)
    base = guard_score(router, router.catalog)
    if gap > PLAUSIBLE_GAP:
        reason = (
            f"not plausible: {lesson.expert} scores {gap:.2f} below {result.expert} for this text (a lesson's "
            f"expert may be at most {PLAUSIBLE_GAP} behind); to send such slots to {lesson.expert} anyway, name the "
            "expert in the framework (coe run --framework FILE, a slot's expert field)"
        )
        return LessonCheck(False, reason, gap, result.expert, None, base, None)
    after = router_with_lessons(router, [*kept, lesson])
    score = guard_score(after, router.catalog)
    routed_after = after.route(lesson.text).expert
    if score.right < base.right - DRIFT_TOLERANCE:
        lost = "; ".join(f"{text[:60]!r} -> {got} (not {want})" for text, want, got in score.wrong[:3])
        reason = (
            f"rolled back: with it the router gets {score.right}/{score.total} guard texts right against "
            f"{base.right}/{base.total} without lessons ({lost})"
        )
        return LessonCheck(False, reason, gap, result.expert, routed_after, base, score)
    return LessonCheck(True, "kept", gap, result.expert, routed_after, base, score)
