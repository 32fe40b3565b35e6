"""Node ``check_parts``: after the slots finish, check that the parts agree; send a part back once if not.

The parts are written apart, so a query can use a column the schema part never defined and two parts can define
one class differently (:mod:`engine.agreement` says what is compared). The first time the run gets here, each
part that disagrees with an earlier one goes back to ``execute_slots`` with the other part's definition as a
constraint of its prompt (``Passport.agreement``); its answer is kept aside (``Passport.first_writings``) and its
dependents keep their text. The second time, a part whose second writing fails its checks where the first passed
gets its first writing back (a send-back never makes a part worse); then, or when nothing disagrees, the run goes
on to ``assemble``, and what still disagrees is a warning of the document. Each step is in the ledger
(``check_parts``, ``send_back``, ``keep_first_writing``).
"""

from __future__ import annotations

from typing import Any

from engine.agreement import Disagreement, Part, disagreements
from engine.slots.checks import own_asserts_failed
from engine.slots.sandbox import SandboxLimits
from state.enums import SlotStatus
from state.framework import topological_order
from state.passport import RESET, FirstWriting, LedgerEntry, Notice, PlannedPassport, SlotState, utcnow
from state.result import SlotResult

NODE = "check_parts"
DISAGREE = "parts disagree"
SEND_BACK_ROUNDS = 1
"""Rounds in which disagreeing parts are written again (bounded: the second comparison only reports)."""


def check_parts(state: PlannedPassport) -> dict[str, Any]:
    """Compare the finished parts; send the disagreeing ones back (first round) or warn about them."""
    rounds = state.part_rounds + 1
    update: dict[str, Any] = {"part_rounds": rounds, "updated_at": utcnow()}
    ledger: list[LedgerEntry] = []
    notices: list[Notice] = []
    results = dict(state.results)
    kept = _first_writings_back(state)
    for sid, first in kept.items():
        results[sid] = first.result
        ledger.append(LedgerEntry(agent="harness", action="keep_first_writing", slot_id=sid, outputs_summary=_why(sid)))
        notices.append(Notice(level="warning", source=NODE, slot_id=sid, message=_why(sid)))
    if kept:
        update["results"] = {sid: first.result for sid, first in kept.items()}
        update["assists"] = {sid: first.assists for sid, first in kept.items()}
        others = [n for n in state.notices if n.slot_id not in kept]  # the second writings' notices go
        notices = [*others, *(n for first in kept.values() for n in first.notices), *notices]
    parts = _parts(state, results)
    limits = SandboxLimits(timeout_s=state.settings.check_timeout_s)
    found = disagreements(parts, state.figures, state.mission.task, limits) if len(parts) > 1 else []
    ledger.insert(0, _entry(parts, rounds, found))
    update["ledger"] = ledger
    if not found or rounds > SEND_BACK_ROUNDS:
        told = [
            Notice(level="warning", source=NODE, slot_id=d.slot_id, message=f"{DISAGREE} ({d.kind}): {d.detail}")
            for d in found
        ]
        said = any(n.source == NODE and n.message.startswith(DISAGREE) for n in state.notices)
        stale = _superseded(state, kept) if rounds == SEND_BACK_ROUNDS + 1 else []
        if kept or said or stale:  # the notices are rebuilt: a later pass (after the completion round) says it once
            base = notices if kept else [*state.notices, *notices]
            base = [n for n in base if not (n.source == NODE and n.message.startswith(DISAGREE))]
            update["notices"] = [RESET, *_without(base, stale), *told]
        else:
            update["notices"] = [*notices, *told]
        return update
    facts: dict[str, list[str]] = {}
    for d in found:
        facts.setdefault(d.slot_id, []).append(d.facts)
        ledger.append(
            LedgerEntry(
                agent="harness", action="send_back", slot_id=d.slot_id, inputs_summary=d.kind, outputs_summary=d.detail
            )
        )
    update["agreement"] = facts
    update["first_writings"] = {
        sid: FirstWriting(
            result=results[sid],
            assists=state.assists.get(sid, []),
            notices=[n for n in state.notices if n.slot_id == sid],
        )
        for sid in facts
    }
    update["slot_states"] = {
        sid: (state.slot_states.get(sid) or SlotState()).model_copy(
            update={"status": SlotStatus.PENDING, "started_at": None, "finished_at": None, "error": None}
        )
        for sid in facts
    }
    return update


def _parts(state: PlannedPassport, results: dict[str, SlotResult]) -> list[Part]:
    fw = state.framework
    return [
        Part(sid, fw.slot(sid).title, results[sid])
        for sid in topological_order(fw)
        if sid in results and (state.slot_states.get(sid) or SlotState()).status == SlotStatus.DONE
    ]


def _first_writings_back(state: PlannedPassport) -> dict[str, FirstWriting]:
    """The parts sent back whose second writing fails its checks where the first passed them.

    A second writing whose only failure is its own asserts, run against the parts it now imports, is kept: that is
    the disagreement itself, said by the next comparison (multipart_recheck_tax3: the first writing "passed" by
    importing a module no part delivers, its tests run against a stand-in).
    """
    back = {}
    for sid, first in state.first_writings.items():
        now = state.results.get(sid)
        first_passed = first.result.quality is not None and first.result.quality.passed
        failed = now.quality.failed_checks if now is not None and now.quality is not None else None
        if first_passed and (failed is None or any(not own_asserts_failed(c) for c in failed)):
            back[sid] = first
    return back


def _superseded(state: PlannedPassport, kept: dict[str, FirstWriting]) -> list[Notice]:
    """The notices of first writings that a second writing replaced: they speak of text the document no longer shows.

    multipart_set4_first, the room clashes: the script part's first writing opened a ``bookings.csv``; sent back,
    its second writing did not, and the document still warned that the kept answer failed on ``bookings.csv``.
    """
    return [n for sid, first in state.first_writings.items() if sid not in kept for n in first.notices]


def _without(notices: list[Notice], gone: list[Notice]) -> list[Notice]:
    """``notices`` less one equal notice for each of ``gone`` (the earliest: a second writing's own come later)."""
    left = list(notices)
    for notice in gone:
        if notice in left:
            left.remove(notice)
    return left


def _why(slot_id: str) -> str:
    return f"the second writing of part {slot_id} failed its checks where the first passed: the first is kept"


def _entry(parts: list[Part], rounds: int, found: list[Disagreement]) -> LedgerEntry:
    return LedgerEntry(
        agent="harness",
        action=NODE,
        inputs_summary=f"{len(parts)} finished part(s), round {rounds}",
        outputs_summary="; ".join(f"[{d.slot_id}] {d.kind}: {d.detail}" for d in found)[:500] or "the parts agree",
    )
