"""Node ``adapt_template``: fit the template ``select_template`` retrieved to the task, with the planner model.

Only when a template was retrieved; otherwise (a given framework, a single-expert task, templates off) the node
passes. A template at least :data:`~experts.routing.AS_IS_SIMILARITY` similar to the task is used as it is.
Otherwise the planner model (``Settings.planner_model``, through :func:`experts.catalog.resolve_binding`; the
base model, with a warning, when it is not installed) writes constrained edit operations
(:func:`engine.adaptation.adapt`: retries, then the unmodified template, then the one-slot framework).
The operations, rationale, attempts and any fallback are recorded in ``adaptation`` and the ledger; a slot the
plan added without dependencies is recorded as an autonomous default.
"""

from __future__ import annotations

from typing import Any

from engine.adaptation import adapt
from experts.catalog import load_catalog, resolve_binding
from experts.models import ExpertBackend, get_backend
from state.framework import validate_framework
from state.passport import LedgerEntry, Notice, PlannedPassport, SlotState, utcnow
from state.scope import AppliedDefault
from state.settings import Settings

NODE = "adapt_template"


def adapt_template(state: PlannedPassport) -> dict[str, Any]:
    """Adapt the retrieved template to the task; record how (nothing to do without a retrieved template)."""
    template, seed = state.template, state.adaptation
    if template is None or seed is None or seed.similarity is None:
        return {}
    catalog = load_catalog()
    planner, notices = _planner(state.settings)
    fw, record = adapt(template, seed.similarity, state.mission.task, planner, list(catalog.ids))
    validate_framework(fw)  # every framework that reaches execution is valid
    operations = ", ".join(op.op + " " + (op.slot or op.id or "") for op in record.operations)
    entry = LedgerEntry(
        agent="router",
        action="adapt_template",
        inputs_summary=f"seed {template.id} (similarity {seed.similarity:.3f})",
        outputs_summary=(
            f"{record.reason}; fallback {record.fallback}; {len(record.operations)} operations"
            + (f": {operations}" if operations else "")
            + (f"; rationale: {record.rationale[:200]}" if record.rationale else "")
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
    if defaults:
        update["defaults"] = defaults
    if record.fallback != "none":
        notices.append(Notice(level="warning", source=NODE, message=record.reason))
    if notices:
        update["notices"] = notices
    return update


def _planner(settings: Settings) -> tuple[ExpertBackend, list[Notice]]:
    """The backend that adapts templates: the planner model when it is available, else the base model."""
    binding = resolve_binding(settings, model=settings.planner_model)
    notices = []
    if binding.problem is not None:
        message = f"the planner model is unavailable ({binding.problem}); templates are adapted by the base model"
        notices.append(Notice(level="warning", source=NODE, message=message))
    return get_backend(settings, binding.model), notices
