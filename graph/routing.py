"""Pure, typed routers: they read the Passport and name the next node. No I/O, no side effects."""

from __future__ import annotations

from typing import Literal

from state.enums import SlotStatus
from state.passport import Passport


def after_execute(state: Passport) -> Literal["execute_slots", "assemble"]:
    """Loop on ``execute_slots`` while any slot is pending or running; then assemble."""
    if state.framework is None:
        return "assemble"
    for spec in state.framework.slots:
        st = state.slot_states.get(spec.id)
        if st is None or st.status in (SlotStatus.PENDING, SlotStatus.IN_PROGRESS):
            return "execute_slots"
    return "assemble"
