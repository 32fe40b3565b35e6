"""Node ``check_parts``: after the slots finish, check that the parts agree; send a part back once if not.

The parts are written apart, so a query can use a column the schema part never defined and two parts can define
one class differently (:mod:`engine.agreement` says what is compared). The first time the run gets here, each
part that disagrees with an earlier one goes back to ``execute_slots`` with the other part's definition as a
constraint of its prompt (``Passport.agreement``); its dependents keep their text. The second time, or when
nothing disagrees, the run goes on to ``assemble``, and what still disagrees is a warning of the document. Each
step is in the ledger (``check_parts``, ``send_back``).
"""

from __future__ import annotations

from typing import Any

from engine.agreement import Part, disagreements
from state.enums import SlotStatus
from state.framework import topological_order
from state.passport import LedgerEntry, Notice, PlannedPassport, SlotState, utcnow

NODE = "check_parts"
SEND_BACK_ROUNDS = 1
"""Rounds in which disagreeing parts are written again (bounded: the second comparison only reports)."""


def check_parts(state: PlannedPassport) -> dict[str, Any]:
    """Compare the finished parts; send the disagreeing ones back (first round) or warn about them."""
    fw = state.framework
    parts = [
        Part(sid, fw.slot(sid).title, state.results[sid])
        for sid in topological_order(fw)
        if sid in state.results and (state.slot_states.get(sid) or SlotState()).status == SlotStatus.DONE
    ]
    found = disagreements(parts) if len(parts) > 1 else []
    rounds = state.part_rounds + 1
    send_back = bool(found) and rounds <= SEND_BACK_ROUNDS
    ledger = [
        LedgerEntry(
            agent="harness",
            action=NODE,
            inputs_summary=f"{len(parts)} finished part(s), round {rounds}",
            outputs_summary="; ".join(f"[{d.slot_id}] {d.kind}: {d.detail}" for d in found)[:500] or "the parts agree",
        )
    ]
    update: dict[str, Any] = {"part_rounds": rounds, "ledger": ledger, "updated_at": utcnow()}
    if not send_back:
        update["notices"] = [
            Notice(level="warning", source=NODE, slot_id=d.slot_id, message=f"parts disagree ({d.kind}): {d.detail}")
            for d in found
        ]
        return update
    facts: dict[str, list[str]] = {}
    for d in found:
        facts.setdefault(d.slot_id, []).append(d.facts)
        ledger.append(
            LedgerEntry(
                agent="harness", action="send_back", slot_id=d.slot_id, inputs_summary=d.kind, outputs_summary=d.detail
            )
        )
    again = {
        sid: (state.slot_states.get(sid) or SlotState()).model_copy(
            update={"status": SlotStatus.PENDING, "started_at": None, "finished_at": None, "error": None}
        )
        for sid in facts
    }
    update.update({"agreement": facts, "slot_states": again})
    return update
