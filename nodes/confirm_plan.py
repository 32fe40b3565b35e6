"""Node ``confirm_plan``: in confirm and interactive mode, the person approves, rejects or edits the plan.

The plan (slots, experts, dependencies) goes out in a typed ``approve_plan`` interrupt. An answer that does
not fit (an unknown action, an edited plan that fails validation or names an unknown expert) is refused and
the same question is asked again with the reason in ``error``: nothing changes until a valid answer arrives.
Everything before ``interrupt()`` only reads the state, so the node can restart from its top on resume.

- approve: the run goes on to ``execute_slots``;
- reject: the run ends with status ``rejected``, a short document saying so, and the reason in the ledger;
- edit: the edited plan replaces the framework and goes back to ``route_slots`` (slots without an expert are
  routed), then to this node again, so the person sees what will really run.

In autonomous mode the node passes.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from engine.assists.asking import ask
from experts.catalog import load_catalog
from state.enums import Mode, RunStatus
from state.errors import FrameworkError
from state.framework import Framework, parse_framework
from state.hitl import (
    PLAN_ANSWER_FORMAT,
    AnswerError,
    Approval,
    EscalationCategory,
    EscalationSeverity,
    InterruptPayload,
    PlanAnswer,
    PlanSlotView,
    Question,
    parse_plan_answer,
)
from state.io import RunSummary
from state.passport import LedgerEntry, PlannedPassport, SlotState, utcnow

NODE = "confirm_plan"
EDIT_SOURCE = "edited by the person at confirm_plan"


def plan_payload(state: PlannedPassport) -> InterruptPayload:
    """The approve_plan interrupt for the current framework and routing."""
    fw = state.framework
    slots = [
        PlanSlotView(
            id=s.id,
            title=s.title,
            description=s.description,
            expert=state.routing[s.id].expert if s.id in state.routing else s.expert,
            deps=list(s.deps),
        )
        for s in fw.slots
    ]
    framework = fw.model_dump(mode="json", exclude={"source"})
    for entry in framework["slots"]:
        entry["expert"] = next(v.expert for v in slots if v.id == entry["id"])
    return InterruptPayload(
        kind="approve_plan",
        category=EscalationCategory.DECISION,
        severity=EscalationSeverity.MEDIUM,
        node=NODE,
        questions=[
            Question(
                id="plan",
                text=f"Run this plan of {len(slots)} slot(s) for '{fw.title}'?",
                allowed=["approve", "reject", "edit"],
            )
        ],
        allowed=["approve", "reject", "edit"],
        plan=slots,
        framework=framework,
        answer_format=PLAN_ANSWER_FORMAT,
    )


def confirm_plan(state: PlannedPassport) -> dict[str, Any]:
    """Ask for approval of the plan (confirm / interactive mode) and apply the answer."""
    if state.mission.mode is Mode.AUTONOMOUS:
        return {}
    (answer, edited), rounds = ask(plan_payload(state), _parse, interrupt)
    approval = Approval(action=answer.action, reason=answer.reason, rounds=rounds)
    entry = LedgerEntry(
        agent="person",
        action=f"plan_{answer.action}",
        inputs_summary=f"{len(state.framework.slots)} slots; {rounds} answer(s)",
        outputs_summary=answer.reason or answer.action,
    )
    update: dict[str, Any] = {"approval": approval, "updated_at": utcnow(), "ledger": [entry]}
    if answer.action == "reject":
        update.update(_rejected(state, answer.reason))
    elif edited is not None:
        update["framework"] = edited
        update["slot_states"] = {s.id: SlotState() for s in edited.slots}
    return update


def _parse(value: object) -> tuple[PlanAnswer, Framework | None]:
    """The answer and, for an edit, the validated edited plan (raises AnswerError when either does not fit)."""
    answer = parse_plan_answer(value)
    return answer, _edited(answer.framework) if answer.action == "edit" else None


def _edited(data: dict[str, Any] | None) -> Framework:
    try:
        fw = parse_framework(data, source=EDIT_SOURCE)
    except FrameworkError as exc:
        raise AnswerError(f"the edited plan is not valid: {exc}") from None
    catalog = load_catalog()
    for spec in fw.slots:
        if spec.expert is not None and spec.expert not in catalog:
            raise AnswerError(
                f"the edited plan is not valid: slots[{spec.id}].expert: unknown expert id {spec.expert!r}; "
                f"allowed: {', '.join(catalog.ids)}"
            )
    return fw


def _rejected(state: PlannedPassport, reason: str) -> dict[str, Any]:
    fw = state.framework
    why = f": {reason}" if reason else ""
    document = f"# {fw.title}\n\nThe plan was rejected{why}. No expert ran.\n"
    summary = RunSummary(
        thread_id=state.run.thread_id,
        run_id=state.run.run_id,
        status=RunStatus.REJECTED,
        title=fw.title,
        framework_source=fw.source,
        slots=[],
    )
    return {"status": RunStatus.REJECTED, "document": document, "summary": summary}
