"""Node ``route_slots``: give every slot of the plan an expert and a model, and record why.

The routing itself (the router, the rules that override it, the model bindings) is :mod:`engine.slot_routing`,
shared with the completion round's added parts.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from engine.slot_routing import route_specs
from state.context import RunContext
from state.passport import PlannedPassport, SlotState, utcnow


def route_slots(state: PlannedPassport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Route every slot of the framework and settle the experts' model bindings.

    With a Store, the router has learned the run's user's routing lessons (``coe feedback``).
    """
    routed = route_specs(
        state.framework.slots,
        source=state.framework.source,
        settings=state.settings,
        store=runtime.store,
        user=state.run.user,
    )
    states = {
        sid: (state.slot_states.get(sid) or SlotState()).model_copy(update={"expert": d.expert})
        for sid, d in routed.decisions.items()
    }
    update: dict[str, Any] = {
        "routing": routed.decisions,
        "slot_states": states,
        "updated_at": utcnow(),
        "ledger": routed.ledger,
    }
    if routed.notices:
        update["notices"] = routed.notices
    if routed.applied:
        update["defaults"] = routed.applied
    if state.approval is not None and state.approval.action == "edit":
        update["approval"] = None  # the edited plan is routed now; confirm_plan asks about it again
    return update
