"""Node ``route_slots``: give every slot an expert, and record why.

This version has a single general expert, so every slot goes to it; the decision is still recorded per slot,
in the same shape the embedding router will fill with scores.
"""

from __future__ import annotations

from typing import Any

from nodes.prompts import GENERAL_EXPERT_ID
from state.errors import RunFailure
from state.passport import LedgerEntry, Passport, RoutingDecision, SlotState, utcnow


def route_slots(state: Passport) -> dict[str, Any]:
    """Assign the general expert to every slot."""
    if state.framework is None:
        raise RunFailure("route_slots", "no framework selected")
    decisions = {
        s.id: RoutingDecision(slot_id=s.id, expert=GENERAL_EXPERT_ID, reason="the only configured expert")
        for s in state.framework.slots
    }
    states = {
        sid: (state.slot_states.get(sid) or SlotState()).model_copy(update={"expert": d.expert})
        for sid, d in decisions.items()
    }
    return {
        "routing": decisions,
        "slot_states": states,
        "updated_at": utcnow(),
        "ledger": [
            LedgerEntry(
                agent="harness",
                action="route",
                inputs_summary=f"{len(decisions)} slots",
                outputs_summary=f"all slots -> {GENERAL_EXPERT_ID}",
            )
        ],
    }
