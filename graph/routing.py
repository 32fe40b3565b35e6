"""Pure, typed routers: they read the Passport and name the next node. No I/O, no side effects."""

from __future__ import annotations

from typing import Literal

from state.enums import RunStatus, SlotStatus
from state.passport import Passport


def after_scope(state: Passport) -> Literal["answer_directly", "select_template"]:
    """A trivial task is answered directly; every other goes on to planning."""
    return "answer_directly" if state.scope is not None and state.scope.kind == "trivial" else "select_template"


def after_confirm(state: Passport) -> Literal["execute_slots", "route_slots", "__end__"]:
    """Rejected: end. Edited: route the edited plan, then confirm it again. Approved (or not asked): execute."""
    if state.status == RunStatus.REJECTED:
        return "__end__"
    if state.approval is not None and state.approval.action == "edit":
        return "route_slots"
    return "execute_slots"


def after_execute(state: Passport) -> Literal["execute_slots", "assemble"]:
    """Loop on ``execute_slots`` while any slot is pending or running; then assemble."""
    if state.framework is None:
        return "assemble"
    for spec in state.framework.slots:
        st = state.slot_states.get(spec.id)
        if st is None or st.status in (SlotStatus.PENDING, SlotStatus.IN_PROGRESS):
            return "execute_slots"
    return "assemble"
