"""Pure, typed routers: they read the Passport and name the next node. No I/O, no side effects."""

from __future__ import annotations

from typing import Literal

from langgraph.types import Send

from nodes.ask_plan_fit import plan_fit_questions
from state.enums import Mode, RunStatus, SlotStatus
from state.passport import AskUser, Passport


def after_guard(state: Passport) -> Literal["refuse_input", "scope"]:
    """A refused input is raised by ``refuse_input``; an accepted one goes on to scoping."""
    return "refuse_input" if state.refused is not None else "scope"


def after_scope(state: Passport) -> Literal["answer_directly", "select_template"]:
    """A trivial task is answered directly; every other goes on to planning."""
    return "answer_directly" if state.scope is not None and state.scope.kind == "trivial" else "select_template"


def after_adapt(state: Passport) -> Literal["ask_plan_fit", "route_slots"]:
    """Interactive mode with slots the plan checks removed or added: ask about them; else route the plan."""
    asks = state.mission is not None and state.mission.mode is Mode.INTERACTIVE and plan_fit_questions(state.defaults)
    return "ask_plan_fit" if asks else "route_slots"


def after_confirm(state: Passport) -> Literal["execute_slots", "route_slots", "__end__"]:
    """Rejected: end. Edited: route the edited plan, then confirm it again. Approved (or not asked): execute."""
    if state.status == RunStatus.REJECTED:
        return "__end__"
    if state.approval is not None and state.approval.action == "edit":
        return "route_slots"
    return "execute_slots"


def after_execute(state: Passport) -> Literal["execute_slots", "check_parts", "assemble"] | list[Send | str]:
    """Loop on ``execute_slots`` while slots run; ask the person for the slots awaiting answers; check the parts.

    The questions wait until no slot is running, so the person gets every pending question at once: one
    ``ask_user`` task per slot (parallel interrupts, answered together or one at a time). Nothing runs next to
    them: a branch only sees its own node's writes, so an ``execute_slots`` of the same step would ask again
    for slots that the person is answering. Execution goes on after the answers.
    """
    if state.framework is None:
        return "assemble"
    asks: list[Send | str] = []
    running = pending = False
    for spec in state.framework.slots:
        st = state.slot_states.get(spec.id)
        if st is None or st.status == SlotStatus.PENDING:
            pending = True
        elif st.status == SlotStatus.IN_PROGRESS:
            running = True
        elif st.status == SlotStatus.AWAITING_USER and spec.id in state.results:
            task = AskUser(
                slot_id=spec.id,
                title=spec.title,
                state=st,
                result=state.results[spec.id],
                records=state.assists.get(spec.id, []),
            )
            asks.append(Send("ask_user", task))
    if running:
        return "execute_slots"
    if asks:
        return asks
    return "execute_slots" if pending else "check_parts"


def after_check_parts(state: Passport) -> Literal["execute_slots", "complete"]:
    """Parts sent back (pending again) run again; otherwise the document is read against the task."""
    return "execute_slots" if _pending(state) else "complete"


def after_complete(state: Passport) -> Literal["execute_slots", "assemble"]:
    """The completion round's parts (added or sent back, pending) run; otherwise the document is assembled."""
    return "execute_slots" if _pending(state) else "assemble"


def _pending(state: Passport) -> bool:
    if state.framework is not None:
        for spec in state.framework.slots:
            st = state.slot_states.get(spec.id)
            if st is not None and st.status == SlotStatus.PENDING:
                return True
    return False
