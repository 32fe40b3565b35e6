"""A person's verdict on a finished run, from the CLI (``coe feedback``) or the HTTP API (``POST .../feedback``).

The verdict joins the run's after-action record (:class:`memory.store.EpisodeMemory`): a run called bad as a
whole no longer counts as one that worked. A verdict on a slot the router placed is also a routing lesson
(:class:`memory.routing_lessons.RoutingLessons`): good confirms the slot's expert, bad with ``route_to`` corrects it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from experts.catalog import load_catalog
from experts.embedding import Embedder
from experts.routing import RouterParams, get_router
from experts.routing.lesson_check import Lesson
from memory.routing_lessons import LessonRecord, RoutingLessons
from memory.store import EpisodeMemory, ItemStore
from state.errors import ConfigError, InputError
from state.framework import slot_text
from state.passport import Passport

__all__ = ["VERDICTS", "FeedbackOutcome", "give_feedback"]

VERDICTS = ("good", "bad")


@dataclass(frozen=True)
class FeedbackOutcome:
    """What a verdict did."""

    run_id: str
    verdict: str
    target: str
    """``slot S``, ``expert E`` or ``the run``."""
    lesson: LessonRecord | None
    """The routing lesson it taught (kept or refused), if it taught one."""

    def lines(self) -> list[str]:
        """What to tell the person, one line each."""
        out = [f"recorded: {self.target} of run {self.run_id[:8]} was {self.verdict}"]
        if self.lesson is not None and self.lesson.kept:
            out.append(
                f"routing lesson kept: slots like {self.lesson.slot} go to {self.lesson.expert} "
                f"(guard set {self.lesson.guard})"
            )
        elif self.lesson is not None:
            out.append(f"routing lesson not kept: {self.lesson.reason}")
        elif self.target.startswith("slot") and self.verdict == "bad":
            out.append("routing unchanged: say which expert the slot should have gone to, to correct its routing")
        return out

    def to_json(self) -> dict[str, object]:
        """The HTTP API's answer."""
        lesson = None if self.lesson is None else {**self.lesson.__dict__}
        return {"run_id": self.run_id, "verdict": self.verdict, "target": self.target, "lesson": lesson}


def give_feedback(
    state: Passport,
    store: ItemStore,
    embedder: Embedder | Callable[[], Embedder],
    verdict: str,
    slot: str | None = None,
    expert: str | None = None,
    route_to: str | None = None,
    note: str = "",
    names: Mapping[str, str] | None = None,
) -> FeedbackOutcome:
    """Record a verdict on the thread's latest run (``state``) and teach the router what it says about a slot.

    Args:
        state: The thread's state; its latest run is the one judged.
        store: Where the run's after-action record and the user's lessons are.
        embedder: The embedder of the after-action records (or a function that makes it).
        verdict: good or bad.
        slot: Judge one slot (its id).
        expert: Judge one expert of the run (its id).
        route_to: With a bad verdict on a slot: the expert it should have gone to.
        note: What was good or bad, in words.
        names: How the caller names the fields in errors (the CLI's ``--route-to`` is the API's ``route_to``).

    Raises:
        InputError: naming the field that is wrong (a verdict that is not good or bad, an unknown slot, expert or
            ``route_to``, ``route_to`` without a bad verdict on a slot or on a slot the router did not place).
        ConfigError: when the thread has no run, or its run has not finished.
    """
    name = {"verdict": "verdict", "slot": "slot", "expert": "expert", "route_to": "route_to", **(names or {})}
    if verdict not in VERDICTS:
        raise InputError(name["verdict"], f"{verdict!r} is not one of good, bad")
    if route_to is not None and (verdict != "bad" or slot is None):
        raise InputError(name["route_to"], f"corrects a slot's routing: give it with bad and {name['slot']} ID")
    if state.run is None:
        raise ConfigError("thread id", "no run is saved on that thread")
    slots = {s.id: s for s in state.framework.slots} if state.framework is not None else {}
    if slot is not None and slot not in slots:
        raise InputError(name["slot"], f"{slot!r} is not a slot of that run; its slots: {', '.join(slots) or 'none'}")
    worked = {st.expert for st in state.slot_states.values() if st.expert}
    if expert is not None and expert not in worked:
        raise InputError(
            name["expert"], f"{expert!r} did not work on that run; its experts: {', '.join(sorted(worked)) or 'none'}"
        )
    lesson = _lesson(state, slot, verdict, route_to, name["route_to"])
    try:
        EpisodeMemory(store, state.run.user, embedder).add_feedback(state.run.run_id, verdict, slot, expert, note)
    except KeyError:
        raise ConfigError(
            "thread id", f"run {state.run.run_id[:8]} has no after-action record (it has not finished)"
        ) from None
    record = None
    if lesson is not None:
        router = get_router(RouterParams.from_settings(state.settings) if state.settings else None)
        record, _ = RoutingLessons(store, state.run.user).teach(router, lesson, state.run.run_id, slot, note)
    target = f"slot {slot}" if slot else f"expert {expert}" if expert else "the run"
    return FeedbackOutcome(state.run.run_id, verdict, target, record)


def _lesson(state: Passport, slot: str | None, verdict: str, route_to: str | None, field: str) -> Lesson | None:
    """The lesson a verdict on a slot teaches: good confirms its expert, bad with ``route_to`` corrects it."""
    if slot is None or (verdict == "bad" and route_to is None):
        return None
    decision = state.routing.get(slot)
    if decision is None or decision.reason == "set by the framework":
        if route_to is not None:
            raise InputError(field, f"slot {slot}'s expert was set by the framework, not by the router")
        return None  # the router did not choose this slot's expert: nothing to learn
    if route_to is not None and route_to not in load_catalog().ids:
        raise InputError(field, f"{route_to!r} is not an expert; see coe experts list")
    assert state.framework is not None  # a routed slot is a slot of the framework
    spec = next(s for s in state.framework.slots if s.id == slot)
    return Lesson(slot_text(spec), route_to or decision.expert)
