"""Node ``select_template``: choose the framework the run will execute.

In order: the framework given in the run options (``--framework FILE``); with ``use_templates`` on (the
default): for a task that ``scope`` judged a single expert's work, one slot that answers it, and otherwise the
best template of the library for the task, retrieved by meaning and adapted to it (:mod:`nodes.adaptation`;
its fallbacks end at the one-slot framework); with it off, the documented last-resort framework, a single slot
that answers the whole task.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from experts.pool import ExpertBackend
from state.context import RunContext
from state.errors import RunFailure
from state.framework import Framework, fallback_framework, validate_framework
from state.passport import LedgerEntry, Notice, Passport, SlotState, utcnow
from state.scope import AppliedDefault

NODE = "select_template"


def select_template(state: Passport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Pick the framework (given, from the template library, or fallback), validate it, initialise slots."""
    if state.mission is None or state.settings is None:
        raise RunFailure(NODE, "the mission and settings must be set by guard first")
    given = state.framework  # validated by guard when the caller gave one; None otherwise
    update: dict[str, Any] = {}
    ledger: list[LedgerEntry] = []
    if given is not None:
        fw, reason = given, f"framework given by the caller ({given.source})"
    elif state.scope is not None and state.scope.kind == "single":
        fw = validate_framework(fallback_framework(state.mission.task, source="scope:single_expert"))
        reason = f"single-expert task ({state.scope.reason})"
    elif state.settings.use_templates:
        fw, reason, extra = _from_library(state, runtime)
        ledger += extra.pop("ledger", [])
        update.update(extra)
    else:
        fw, reason = validate_framework(fallback_framework(state.mission.task)), "last-resort one-slot framework"
    ledger.insert(
        0,
        LedgerEntry(
            agent="harness",
            action="select_framework",
            inputs_summary=reason,
            outputs_summary=f"{fw.id}: {len(fw.slots)} slots",
        ),
    )
    return {
        **update,
        "framework": fw,
        "slot_states": {s.id: SlotState() for s in fw.slots},
        "updated_at": utcnow(),
        "ledger": ledger,
    }


def _from_library(state: Passport, runtime: Runtime[RunContext]) -> tuple[Framework, str, dict[str, Any]]:
    from experts.catalog import load_catalog
    from experts.embedding import get_embedder
    from experts.template_index import library, library_dir
    from nodes.adaptation import adapt

    assert state.mission is not None and state.settings is not None
    task = state.mission.task
    catalog = load_catalog()
    templates, index = library(catalog.ids, get_embedder())
    if index is None:
        notice = Notice(level="warning", source=NODE, message=f"no valid templates in {library_dir()}; one slot used")
        return validate_framework(fallback_framework(task)), "no template library", {"notices": [notice]}
    hit = index.search(task, 1)[0]
    template = templates[hit.template_id]
    runtime.stream_writer({"event": "template_selected", "template": template.id, "similarity": hit.similarity})
    planner, notices = _planner(state)
    fw, record = adapt(template, hit.similarity, task, planner, list(catalog.ids))
    validate_framework(fw)  # every framework that reaches execution is valid
    ledger = [
        LedgerEntry(
            agent="router",
            action="adapt_template",
            inputs_summary=f"seed {template.id} (similarity {hit.similarity:.3f})",
            outputs_summary=(
                f"{record.reason}; fallback {record.fallback}; {len(record.operations)} operations"
                + (
                    f": {', '.join(op.op + ' ' + (op.slot or op.id or '') for op in record.operations)}"
                    if record.operations
                    else ""
                )
                + (f"; rationale: {record.rationale[:200]}" if record.rationale else "")
            ),
        )
    ]
    extra: dict[str, Any] = {"adaptation": record, "ledger": ledger}
    added = [op.id for op in record.operations if op.op == "ADD" and op.id and not op.deps]
    if added:
        extra["defaults"] = [
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
    if record.fallback != "none":
        notices.append(Notice(level="warning", source=NODE, message=record.reason))
    if notices:
        extra["notices"] = notices
    return fw, f"template {template.id} from the library", extra


def _planner(state: Passport) -> tuple[ExpertBackend, list[Notice]]:
    """The backend that adapts templates: the planner model when it is available, else the base model."""
    from experts.pool import get_backend, model_unavailable

    assert state.settings is not None
    settings = state.settings
    model = settings.planner_model
    if not model:
        return get_backend(settings), []
    problem = model_unavailable(settings, model)
    if problem is not None:
        message = f"the planner model is unavailable ({problem}); templates are adapted by the base model"
        return get_backend(settings), [Notice(level="warning", source=NODE, message=message)]
    return get_backend(settings, model), []
