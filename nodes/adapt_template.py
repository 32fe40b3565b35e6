"""Node ``adapt_template``: fit the template ``select_template`` retrieved to the task, with the planner model.

Only when a template was retrieved; otherwise (a given framework, a single-expert task, a plan built from the
task's aspects, templates off) the node passes. In order:

1. the template is fitted to the task (:func:`engine.planning.planner.fit_template`): slots that serve nothing the task
   asks for are removed, and every deliverable the task names that no slot covers gets a slot;
2. a template at least :data:`~experts.routing.AS_IS_SIMILARITY` similar to the task is used as it is;
   otherwise the planner model (``Settings.planner_model``, :func:`engine.planning.planner_model.planner_model`;
   the base model, with a warning, when it is not installed) writes constrained edit operations within
   ``plan_seconds`` (:func:`engine.planning.adaptation.adapt`: retries, then the fitted template, then one slot);
3. the result passes the same relevance and coverage tier again (:func:`engine.planning.planner.fit_plan`), so a slot
   the planner added that serves nothing, or an aspect it removed, is caught.

The fits, operations, rationale, attempts, fallback and time to the plan are recorded in ``adaptation`` and the
ledger. Removed and added slots, and a slot the plan added without dependencies, are autonomous defaults.
"""

from __future__ import annotations

from typing import Any

from engine.planning.planner import plan_from_template
from engine.planning.planner_model import planner_model
from experts.catalog import load_catalog
from experts.embedding import get_embedder
from state.adaptation import PlanFit
from state.framework import Framework
from state.passport import LedgerEntry, Notice, PlannedPassport, SlotState, utcnow
from state.scope_decision import AppliedDefault

NODE = "adapt_template"


def adapt_template(state: PlannedPassport) -> dict[str, Any]:
    """Adapt the retrieved template to the task; record how (nothing to do without a retrieved template)."""
    template, seed = state.template, state.adaptation
    if template is None or seed is None or seed.similarity is None:
        return {}
    catalog = load_catalog()
    planner = planner_model(state.settings)
    notices = []
    if planner.problem is not None:
        message = f"the planner model is unavailable ({planner.problem}); templates are adapted by the base model"
        notices.append(Notice(level="warning", source=NODE, message=message))
    fw, record = plan_from_template(
        template,
        seed.similarity,
        state.mission.task,
        planner.backend,
        list(catalog.ids),
        get_embedder(),
        time_budget=state.settings.plan_seconds,
    )
    operations = ", ".join(op.op + " " + (op.slot or op.id or "") for op in record.operations)
    entry = LedgerEntry(
        agent="router",
        action="adapt_template",
        inputs_summary=f"seed {template.id} (similarity {seed.similarity:.3f})",
        outputs_summary=(
            f"{record.reason}; fallback {record.fallback}; {len(record.operations)} operations"
            + (f": {operations}" if operations else "")
            + (f"; rationale: {record.rationale[:200]}" if record.rationale else "")
            + _fit_summary(record.fits)
            + f"; {record.seconds or 0:.1f} s to the plan"
        ),
    )
    update: dict[str, Any] = {
        "framework": fw,
        "adaptation": record,
        "slot_states": {s.id: SlotState() for s in fw.slots},
        "updated_at": utcnow(),
        "ledger": [entry],
    }
    added = [op.id for op in record.operations if op.op == "ADD" and op.id and not op.deps]
    defaults = [
        AppliedDefault(
            rule="missing_deps_parallel",
            node=NODE,
            slot_id=slot_id,
            detail=f"slot {slot_id} was added without dependencies: it runs in parallel with the others",
            question=f"Does slot {slot_id} need the output of another slot first?",
            alternatives=[s.id for s in fw.slots if s.id != slot_id],
        )
        for slot_id in added
        if any(s.id == slot_id for s in fw.slots)
    ]
    defaults += _fit_defaults(record.fits, fw)
    if defaults:
        update["defaults"] = defaults
    if record.fallback != "none":
        notices.append(Notice(level="warning", source=NODE, message=record.reason))
    if notices:
        update["notices"] = notices
    return update


def _fit_summary(fits: list[PlanFit]) -> str:
    removed = [s for fit in fits for s in fit.removed]
    added = [s for fit in fits for s in fit.added]
    return (f"; removed as unasked: {', '.join(removed)}" if removed else "") + (
        f"; added for uncovered aspects: {', '.join(added)}" if added else ""
    )


def _fit_defaults(fits: list[PlanFit], fw: Framework) -> list[AppliedDefault]:
    """The removals and additions of the plan checks, as autonomous defaults (what the person could undo)."""
    applied = []
    for fit in fits:
        for slot_id in fit.removed:
            applied.append(
                AppliedDefault(
                    rule="irrelevant_slot_removed",
                    node=NODE,
                    slot_id=slot_id,
                    detail=f"slot {slot_id} scored {fit.relevance[slot_id]:.3f} against the task and its aspects",
                    question=f"Slot {slot_id} looks unrelated to the task. Remove it?",
                    alternatives=["remove", "keep"],
                )
            )
        for aspect, slot_id in zip(fit.missing, fit.added, strict=True):
            if any(s.id == slot_id for s in fw.slots):
                applied.append(
                    AppliedDefault(
                        rule="uncovered_aspect_added",
                        node=NODE,
                        slot_id=slot_id,
                        detail=f"no slot covered {aspect!r} (best {fit.coverage[aspect]:.3f}): slot {slot_id} added",
                        question=f"The task asks for {aspect!r} and no slot covers it. Add a slot for it?",
                        alternatives=["add", "leave out"],
                    )
                )
    return applied
