"""Node ``ask_plan_fit``: in interactive mode, the person decides the plan checks' removals and additions.

``adapt_template`` removes template slots that serve nothing the task asks for and adds a slot for every
deliverable the task names that no slot covers, recording each as an autonomous default with its question. In
interactive mode this node puts those questions to the person in one ``clarify`` interrupt (one question per
slot: remove / keep, add / leave out) and applies the answers: a kept slot comes back as it was (its
dependencies and references limited to the slots the plan still has), a slot left out is removed and its
dependents take over its dependencies. The graph comes here only in interactive mode when the checks changed
something (``graph.routing.after_adapt``); called otherwise, it passes.

Everything before ``interrupt()`` only reads the state, so the node restarts safely on resume.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from engine.assists.asking import ask
from engine.planning.planner import prune_slots
from state.enums import Mode
from state.framework import SlotSpec, validate_framework
from state.hitl import EscalationCategory, EscalationSeverity, InterruptPayload, Question, parse_clarify_answer
from state.passport import LedgerEntry, PlannedPassport, SlotState, utcnow
from state.scope_decision import AppliedDefault

NODE = "ask_plan_fit"
ASKED_RULES = ("irrelevant_slot_removed", "uncovered_aspect_added")
UNDO = {"irrelevant_slot_removed": "keep", "uncovered_aspect_added": "leave out"}
"""The answer that undoes each default (the other allowed answer keeps it)."""


def ask_plan_fit(state: PlannedPassport) -> dict[str, Any]:
    """Interactive mode: ask about each slot the plan checks removed or added, and apply the answers."""
    if state.mission.mode is not Mode.INTERACTIVE:
        return {}
    asked = plan_fit_questions(state.defaults)
    if not asked:
        return {}
    questions = [question for question, _ in asked]
    payload = InterruptPayload(
        kind="clarify",
        category=EscalationCategory.DECISION,
        severity=EscalationSeverity.MEDIUM,
        node=NODE,
        questions=questions,
        answer_format=(
            '{"' + questions[0].id + '": "' + questions[0].allowed[0] + '", ...} (one answer per question id)'
            if len(questions) > 1
            else " or ".join(f'"{a}"' for a in questions[0].allowed)
        ),
    )
    answers, rounds = ask(payload, lambda value: parse_clarify_answer(value, questions), interrupt)
    fits = state.adaptation.fits if state.adaptation is not None else []
    restored = {s.id: s for fit in fits for s in fit.removed_slots}
    slots = list(state.framework.slots)
    entries = []
    for question, default in asked:
        answer = answers[question.id]
        entries.append(
            LedgerEntry(
                agent="person",
                action=f"plan_fit_{answer.replace(' ', '_')}",
                slot_id=default.slot_id,
                inputs_summary=f"{question.text} ({rounds} answer(s))",
                outputs_summary=f"{answer}: {default.detail}"[:500],
            )
        )
        if answer != UNDO[default.rule] or default.slot_id is None:
            continue
        if default.rule == "uncovered_aspect_added":
            slots = prune_slots(slots, {default.slot_id})
        elif default.slot_id in restored and all(s.id != default.slot_id for s in slots):
            slots.append(_kept(restored[default.slot_id], slots))
    fw = validate_framework(state.framework.model_copy(update={"slots": slots}))
    return {
        "framework": fw,
        "slot_states": {s.id: SlotState() for s in fw.slots},
        "updated_at": utcnow(),
        "ledger": entries,
    }


def plan_fit_questions(defaults: list[AppliedDefault]) -> list[tuple[Question, AppliedDefault]]:
    """The questions this node asks: one per removal or addition ``adapt_template`` recorded."""
    out = []
    for default in defaults:
        if default.node != "adapt_template" or default.rule not in ASKED_RULES or default.slot_id is None:
            continue
        kept = "remove" if default.rule == "irrelevant_slot_removed" else "add"
        question = Question(
            id=f"{kept}:{default.slot_id}",
            text=f"{default.question} ({default.detail})",
            allowed=[kept, UNDO[default.rule]],
            default=kept,
        )
        out.append((question, default))
    return out


def _kept(spec: SlotSpec, slots: list[SlotSpec]) -> SlotSpec:
    """A removed slot brought back: only the dependencies and references the plan still has."""
    ids = {s.id for s in slots}
    refs = [r for r in spec.can_reference if r in ids]
    return spec.model_copy(
        update={
            "deps": [d for d in spec.deps if d in ids],
            "can_reference": refs,
            "reference_hints": {k: v for k, v in spec.reference_hints.items() if k in refs},
        }
    )
