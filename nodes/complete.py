"""Node ``complete``: read the written document against the task and give what it lacks one more round.

After ``check_parts``, the parts are read against the task (:func:`engine.completion.read_gaps`): an aspect whose
form no part delivers (the OpenAPI document nobody wrote), a part that failed or failed its checks, a part that only
repeats another, work a part asked an expert for (a query, a review). The first time the run gets here, the gaps
that fit the budget (``COE_COMPLETION_SECONDS``, estimated from the run's own part times; at most
:data:`MAX_ACTIONS`) get one round: a part added and routed (:func:`engine.slot_routing.route_specs`) or a part
written again with the gap as feedback, its answer before kept aside. In interactive mode the person is asked first
(a ``clarify`` interrupt: run / skip). The round's parts run in ``execute_slots`` and pass ``check_parts`` (which
only reports by then); the second time here, a part written again that is not better gets its earlier answer back,
an added part takes the place of the assist marker that asked for it, and what the document still lacks is read
again: it goes to the document's "Still missing" section. One round, bounded; each step is in the ledger and the
stream (``completion_round``).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from engine.agreement import Part
from engine.assists.asking import ask_choice
from engine.completion import read_gaps, round_seconds
from engine.planning.planner import aspect_slot
from engine.slot_routing import route_specs
from experts.catalog import load_catalog
from experts.routing.aspects import Aspect, task_aspects
from state.assist import AssistRecord, AssistSource
from state.completion import CompletionGap
from state.context import RunContext
from state.enums import Mode, SlotStatus
from state.framework import MAX_SLOTS, SlotSpec, descendants, topological_order, validate_framework
from state.hitl import Question
from state.passport import RESET, CompletionRound, FirstWriting, LedgerEntry, Notice, PlannedPassport, SlotState, utcnow
from state.result import SlotResult

NODE = "complete"
MAX_ACTIONS = 4
"""Actions in one round at most: a run that lacks more than this is not finished by one more round."""
PRIORITY = {"expert_work": 0, "form": 1, "piece": 1, "failed": 2, "restates": 3}
"""What the round does first when the budget does not hold every action: missing work before rewriting."""
REFERENCED_PARTS = 2
"""An added part reads at most this many written parts (the nearest to its aspect by shared words)."""
QUESTION_ID = "completion_round"


def complete(state: PlannedPassport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Plan and start the round (first visit), or read its outcome (after its parts ran)."""
    done = state.completion
    if done is None:
        return _plan(state, runtime)
    if done.decision == "ran" and not done.finished:
        return _outcome(state, done)
    return {}


# ---------------------------------------------------------------- the first visit: what the round does


def _plan(state: PlannedPassport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    gaps = _gaps(state)
    budget = state.settings.completion_seconds
    if not gaps:
        record = CompletionRound(decision="nothing to do", finished=True, budget_s=budget)
        return _closed(record, "the document answers every aspect the parts can be checked for", runtime)
    if budget <= 0:
        record = CompletionRound(decision="off", gaps=gaps, finished=True, missing=[g.detail for g in gaps])
        return _closed(record, "the completion round is off (COE_COMPLETION_SECONDS=0)", runtime)
    planned, estimate = _fit(state, gaps, budget)
    if not planned:
        why = f"one action would take about {estimate:.0f} s, over the budget of {budget:.0f} s"
        return _closed(_not_run("over budget", gaps, [], estimate, budget), why, runtime)
    entries: list[LedgerEntry] = []
    if state.mission.mode is Mode.INTERACTIVE:
        answer, rounds = _ask(planned, estimate)
        entries.append(
            LedgerEntry(
                agent="person",
                action=f"completion_{answer}",
                inputs_summary=f"asked before the completion round ({rounds} answer(s))",
                outputs_summary=answer,
            )
        )
        if answer == "skip":
            record = _not_run("declined", gaps, planned, estimate, budget)
            return _closed(record, "the person chose to skip the round", runtime, entries)
    return _start(state, runtime, gaps, planned, estimate, entries)


def _not_run(
    decision: Literal["over budget", "declined"],
    gaps: list[CompletionGap],
    planned: list[CompletionGap],
    estimate: float,
    budget: float,
) -> CompletionRound:
    return CompletionRound(
        decision=decision,
        gaps=gaps,
        planned=planned,
        finished=True,
        estimate_s=estimate,
        budget_s=budget,
        missing=[g.detail for g in gaps],
    )


def _gaps(state: PlannedPassport, planned_parts: int | None = None) -> list[CompletionGap]:
    """The gaps of the document as ``state`` holds it; ``planned_parts``: the plan's parts before the round."""
    fw, results = state.framework, state.results
    parts, failed = [], {}
    for sid in topological_order(fw):
        st = state.slot_states.get(sid) or SlotState()
        spec = fw.slot(sid)
        if st.status == SlotStatus.DONE and sid in results:
            parts.append(Part(sid, spec.title, results[sid]))
        elif st.status == SlotStatus.FAILED:
            failed[sid] = (f"{spec.title}\n{spec.description}", st.error or "no answer")
    several = (len(fw.slots) if planned_parts is None else planned_parts) > 1
    return read_gaps(state.mission.task, parts, failed=failed, assists=state.assists, several=several)


def _fit(state: PlannedPassport, gaps: list[CompletionGap], budget: float) -> tuple[list[CompletionGap], float]:
    """The gaps the round acts on, first by :data:`PRIORITY`, as many as the budget holds; and their time."""
    ordered = sorted(gaps, key=lambda g: PRIORITY[g.kind])
    room = MAX_SLOTS - len(state.framework.slots)
    chosen: list[CompletionGap] = []
    for gap in ordered:
        adds = gap.adds
        if len(chosen) >= MAX_ACTIONS or (adds and room <= 0):
            continue
        if any(c.slot_id == gap.slot_id and c.kind in ("failed", "restates") for c in chosen) and not adds:
            continue  # one rewriting per part
        chosen.append(gap)
        room -= adds
    seconds = _part_seconds(state)
    while chosen and round_seconds(seconds, len(chosen)) > budget:
        chosen.pop()
    return chosen, round_seconds(seconds, max(len(chosen), 1))


def _part_seconds(state: PlannedPassport) -> list[float]:
    """Each finished part's writing time: its generations' time in the ledger, else its wall time.

    Not the wall time first: a part's wall time also holds its waits between candidates and for admission. A
    generation's time still holds its wait for the model's lock (parts written side by side share one model and
    two cores), so the estimate stays high: on mp-todo-api the wall-time median (over 120 s) let one action into a
    240 s budget, and the round's one added part took 24 s.
    """
    spent: dict[str, float] = {}
    for e in state.ledger:
        if e.slot_id is not None and e.action.startswith("generate"):
            spent[e.slot_id] = spent.get(e.slot_id, 0.0) + e.duration_ms / 1000
    out = []
    for sid, st in state.slot_states.items():
        if st.status != SlotStatus.DONE or st.started_at is None or st.finished_at is None:
            continue
        out.append(spent.get(sid) or (st.finished_at - st.started_at).total_seconds())
    return out


def _ask(planned: list[CompletionGap], estimate: float) -> tuple[str, int]:
    listed = "; ".join(f"{g.action()} ({g.detail})" for g in planned)
    question = Question(
        id=QUESTION_ID,
        text=f"The document still lacks something. One more round would {listed}. About {estimate:.0f} s. Run it?",
        allowed=["run", "skip"],
        default="run",
    )
    return ask_choice(NODE, question, '"run" or "skip"', interrupt)


def _start(
    state: PlannedPassport,
    runtime: Runtime[RunContext],
    gaps: list[CompletionGap],
    planned: list[CompletionGap],
    estimate: float,
    entries: list[LedgerEntry],
) -> dict[str, Any]:
    """Add the round's parts (routed) and send its rewritten parts back, with their feedback."""
    fw = state.framework
    slots = list(fw.slots)
    taken = {s.id for s in slots}
    added: dict[str, int] = {}
    earlier: dict[str, FirstWriting] = {}
    feedback: dict[str, list[str]] = {}
    states: dict[str, SlotState] = {}
    catalog = load_catalog()
    for index, gap in enumerate(planned):
        if gap.adds:
            spec = _added_slot(state, gap, len(slots) + 1, taken, set(catalog.ids))
            slots.append(spec)
            added[spec.id] = index
            entries.append(_entry("add_part", spec.id, gap, f"part {spec.id} ({spec.title}) added"))
            continue
        sid = str(gap.slot_id)
        st = state.slot_states.get(sid) or SlotState()
        if sid in state.results and st.status == SlotStatus.DONE:
            earlier[sid] = FirstWriting(
                result=state.results[sid],
                assists=state.assists.get(sid, []),
                notices=[n for n in state.notices if n.slot_id == sid],
            )
        if gap.feedback:
            feedback[sid] = [gap.feedback]
        states[sid] = st.model_copy(
            update={"status": SlotStatus.PENDING, "started_at": None, "finished_at": None, "error": None}
        )
        for blocked in descendants(fw, [sid]):  # the parts a failed one blocked run after it
            bst = state.slot_states.get(blocked) or SlotState()
            if bst.status == SlotStatus.BLOCKED:
                states[blocked] = bst.model_copy(update={"status": SlotStatus.PENDING, "blocked_by": []})
        entries.append(_entry("write_again", sid, gap, f"part {sid} is written again"))
    new_fw = validate_framework(fw.model_copy(update={"slots": slots}))
    update: dict[str, Any] = {"framework": new_fw, "updated_at": utcnow()}
    ledger = [_summary_entry("ran", gaps, planned, estimate, state.settings.completion_seconds), *entries]
    fresh = [s for s in slots if s.id in added]
    if fresh:
        routed = route_specs(fresh, source=fw.source, settings=state.settings, store=runtime.store, user=state.run.user)
        update["routing"] = routed.decisions
        ledger += routed.ledger
        if routed.notices:
            update["notices"] = routed.notices
        for sid, decision in routed.decisions.items():
            states[sid] = SlotState(expert=decision.expert)
    update["slot_states"] = states
    update["ledger"] = ledger
    update["completion"] = CompletionRound(
        decision="ran",
        gaps=gaps,
        planned=planned,
        added=added,
        earlier=earlier,
        feedback=feedback,
        estimate_s=estimate,
        budget_s=state.settings.completion_seconds,
        stale=[n for n in state.notices if n.slot_id is not None and n.slot_id in states and n.slot_id not in added],
    )
    runtime.stream_writer(
        {
            "event": "completion_round",
            "decision": "ran",
            "actions": [g.action() for g in planned],
            "estimate_s": round(estimate, 1),
        }
    )
    return update


def _added_slot(
    state: PlannedPassport, gap: CompletionGap, number: int, taken: set[str], experts: set[str]
) -> SlotSpec:
    """The part that answers a missing form or the work a part asked for."""
    fw = state.framework
    if gap.kind == "expert_work":
        asker = fw.slot(str(gap.slot_id))
        words = gap.aspect.split()
        spec = aspect_slot(Aspect(gap.aspect, words[0] if words else ""), number, taken)
        expert = gap.domain if gap.domain in experts else None
        return spec.model_copy(
            update={
                "description": f"{spec.description} The part {asker.title!r} asked for this work.",
                "expert": expert,
                "deps": [asker.id],
                "can_reference": [asker.id],
            }
        )
    aspect = next((a for a in task_aspects(state.mission.task) if a.text == gap.aspect), Aspect(gap.aspect, ""))
    spec = aspect_slot(aspect, number, taken)
    refs = _nearest_parts(state, gap.aspect)
    return spec.model_copy(
        update={"description": f"{spec.description} {gap.feedback}", "deps": refs, "can_reference": refs}
    )


def _nearest_parts(state: PlannedPassport, text: str) -> list[str]:
    """The written parts that share the most words with ``text`` (at most :data:`REFERENCED_PARTS`)."""
    wanted = set(re.findall(r"[a-z]{4,}", text.lower()))
    scored = []
    for spec in state.framework.slots:
        st = state.slot_states.get(spec.id) or SlotState()
        if st.status != SlotStatus.DONE or spec.id not in state.results:
            continue
        words = set(re.findall(r"[a-z]{4,}", f"{spec.title} {spec.description}".lower()))
        scored.append((len(wanted & words), spec.id))
    scored.sort(key=lambda pair: -pair[0])
    return [sid for _, sid in scored[:REFERENCED_PARTS]]


# ---------------------------------------------------------------- the second visit: what the round gave


def _outcome(state: PlannedPassport, record: CompletionRound) -> dict[str, Any]:
    """Keep the better writing of each rewritten part, point each asking part at its added one, say what is left."""
    results = dict(state.results)
    assists = {sid: list(records) for sid, records in state.assists.items()}
    states: dict[str, SlotState] = {}
    ledger: list[LedgerEntry] = []
    notices = list(state.notices)
    back = {
        sid: first for sid, first in record.earlier.items() if not _better(results.get(sid), first.result, state, sid)
    }
    for sid, first in back.items():
        results[sid] = first.result
        assists[sid] = list(first.assists)
        notices = [n for n in notices if n.slot_id != sid] + list(first.notices)
        states[sid] = (state.slot_states.get(sid) or SlotState()).model_copy(
            update={"status": SlotStatus.DONE, "error": None}
        )
        why = f"the new writing of part {sid} is not better than the earlier one: the earlier is kept"
        ledger.append(LedgerEntry(agent="harness", action="keep_earlier_writing", slot_id=sid, outputs_summary=why))
    for sid, index in record.added.items():
        gap = record.planned[index]
        st = state.slot_states.get(sid) or SlotState()
        if gap.kind != "expert_work" or st.status != SlotStatus.DONE or gap.slot_id not in results:
            continue
        asker = str(gap.slot_id)
        pointed = _point_at(results[asker], assists.get(asker, []), gap, sid, state)
        if pointed is not None:
            results[asker], assists[asker] = pointed
            ledger.append(
                LedgerEntry(
                    agent="harness",
                    action="assist_answered_by_part",
                    slot_id=asker,
                    outputs_summary=f"{gap.assist_id} is answered by the added part {sid}",
                )
            )
    kept = {g.slot_id for g in record.planned if g.kind in ("failed", "restates")} - set(back)
    notices = [n for n in notices if not (n.slot_id in kept and n in record.stale)]  # the new writing's stay
    merged = state.model_copy(
        update={"results": results, "assists": assists, "slot_states": {**state.slot_states, **states}}
    )
    left = _gaps(merged, planned_parts=len(state.framework.slots) - len(record.added))
    missing = [g.detail for g in left]
    notices = [n for n in notices if n.source != NODE] + [
        Notice(level="warning", source=NODE, slot_id=g.slot_id, message=f"still missing: {g.detail}") for g in left
    ]
    ledger.insert(
        0,
        LedgerEntry(
            agent="harness",
            action="completion_outcome",
            inputs_summary=f"{len(record.planned)} action(s) taken",
            outputs_summary=("still missing: " + "; ".join(missing))[:500] if missing else "nothing is missing",
        ),
    )
    changed = {sid for sid in results if results[sid] is not state.results.get(sid)}
    update: dict[str, Any] = {
        "completion": record.model_copy(update={"finished": True, "missing": missing}),
        "ledger": ledger,
        "notices": [RESET, *notices],
        "updated_at": utcnow(),
    }
    if changed:
        update["results"] = {sid: results[sid] for sid in changed}
        update["assists"] = {sid: assists[sid] for sid in changed if sid in assists}
    if states:
        update["slot_states"] = states
    return update


def _better(new: SlotResult | None, old: SlotResult, state: PlannedPassport, sid: str) -> bool:
    """Whether the new writing of a part is kept: it is done, and passes, or fails no more checks than the old."""
    st = state.slot_states.get(sid) or SlotState()
    if new is None or st.status != SlotStatus.DONE or new.quality is None:
        return False
    if new.quality.passed or old.quality is None:
        return True
    return not old.quality.passed and len(new.quality.failed_checks) <= len(old.quality.failed_checks)


def _point_at(
    result: SlotResult, records: list[AssistRecord], gap: CompletionGap, added: str, state: PlannedPassport
) -> tuple[SlotResult, list[AssistRecord]] | None:
    """The asking part with its marker replaced by a pointer to the added part, and its record resolved."""
    record = next((r for r in records if r.id == gap.assist_id and r.marker), None)
    if record is None or record.marker is None:
        return None
    title = state.framework.slot(added).title
    pointer = f'(see the part "{title}")'
    marker = record.marker

    def fill(text: str) -> str:
        return text.replace(marker, pointer)

    expert = (state.slot_states.get(added) or SlotState()).expert or "the routed expert"
    excerpt = (state.results[added].body_text() if added in state.results else "")[:300]
    source = AssistSource(kind="expert", expert=expert, excerpt=excerpt or title)
    resolved = record.model_copy(
        update={
            "status": "resolved",
            "value": pointer,
            "marker": None,
            "reason": None,
            "sources": [source],
            "trail": [*record.trail, f"answered by the part {added} ({title}), written by {expert}"],
        }
    )
    new = result.model_copy(
        update={
            "raw": fill(result.raw),
            "sections": [s.model_copy(update={"title": fill(s.title), "body": fill(s.body)}) for s in result.sections],
        }
    )
    return new, [resolved if r.id == record.id else r for r in records]


# ---------------------------------------------------------------- records


def _closed(
    record: CompletionRound, why: str, runtime: Runtime[RunContext], entries: list[LedgerEntry] | None = None
) -> dict[str, Any]:
    """The run goes on to ``assemble`` without a round: the record, the ledger, what is missing as notices."""
    ledger = [
        *(entries or []),
        _summary_entry(record.decision, record.gaps, record.planned, record.estimate_s, record.budget_s, why),
    ]
    update: dict[str, Any] = {"completion": record, "ledger": ledger, "updated_at": utcnow()}
    if record.missing:
        update["notices"] = [
            Notice(level="warning", source=NODE, slot_id=g.slot_id, message=f"still missing: {g.detail}")
            for g in record.gaps
        ]
    runtime.stream_writer({"event": "completion_round", "decision": record.decision, "actions": [], "estimate_s": 0})
    return update


def _summary_entry(
    decision: str,
    gaps: list[CompletionGap],
    planned: list[CompletionGap],
    estimate: float,
    budget: float,
    why: str = "",
) -> LedgerEntry:
    found = "; ".join(g.detail for g in gaps) or "no gap found"
    acts = "; ".join(g.action() for g in planned)
    out = f"{decision}" + (f": {why}" if why else "") + (f"; actions: {acts}" if acts else "")
    if planned:
        out += f"; about {estimate:.0f} s of a {budget:.0f} s budget"
    return LedgerEntry(
        agent="harness", action="completion_round", inputs_summary=found[:500], outputs_summary=out[:500]
    )


def _entry(action: str, slot_id: str, gap: CompletionGap, what: str) -> LedgerEntry:
    return LedgerEntry(
        agent="harness", action=action, slot_id=slot_id, inputs_summary=gap.detail[:500], outputs_summary=what
    )
