"""Node ``select_template``: choose the framework the run will execute, or the template it will be adapted from.

In order: the framework given in the run options (``--framework FILE``); with ``use_templates`` on (the
default): for a task that ``scope`` judged a single expert's work, one slot that answers it, and otherwise the
best template of the library for the task, retrieved by meaning (``adapt_template`` then fits it to the task),
unless even the best one is under :data:`~engine.planning.planner.TEMPLATE_FIT_LINE`: then the plan is built from the
deliverables the task names (:func:`engine.planning.planner.aspect_framework`, one slot per aspect; one slot when it
names only one); with it off, the documented last-resort framework, a single slot that answers the whole task.

A retrieved template is recorded in the Passport (``template``, and ``adaptation`` with its similarity) and its
unmodified framework is the run's framework until ``adapt_template`` replaces it.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from engine.planning.planner import TEMPLATE_FIT_LINE, plan_from_aspects
from experts.catalog import load_catalog
from experts.embedding import get_embedder
from experts.routing import library, library_dir
from experts.routing.aspects import kinds_apart, named_deliverables
from memory.store import EpisodeMemory
from state.adaptation import AdaptationRecord
from state.context import RunContext
from state.framework import Framework, fallback_framework, validate_framework
from state.passport import GuardedPassport, LedgerEntry, Notice, SlotState, utcnow

NODE = "select_template"


def select_template(state: GuardedPassport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Pick the framework (given, one slot, or a template's to adapt), validate it, initialise its slots."""
    given = state.framework  # validated by guard when the caller gave one; None otherwise
    update: dict[str, Any] = {}
    if given is not None:
        fw, reason = given, f"framework given by the caller ({given.source})"
    elif state.scope is not None and state.scope.kind == "single":
        fw = validate_framework(fallback_framework(state.mission.task, source="scope:single_expert"))
        reason = f"single-expert task ({state.scope.reason})"
    elif state.scope is not None and state.scope.firm:
        # the task names its deliverables, of different kinds: a part for each, not a template's generic parts
        # (multipart_set5_rules2: "a small command-line tool ... and a README "Usage" section" fitted a CLI template
        # of six parts, packaging and a usage guide among them, 1,059 s where the task asked for two)
        why = f"the task names its deliverables ({kinds_apart(named_deliverables(state.mission.task))}): one part each"
        fw, record = plan_from_aspects(state.mission.task, get_embedder(), why)
        reason, update = record.reason, {"adaptation": record}
    elif state.settings.use_templates:
        fw, reason, update = _from_library(state.mission.task, runtime, state.run.user)
    else:
        fw, reason = validate_framework(fallback_framework(state.mission.task)), "last-resort one-slot framework"
    if "template" not in update:  # a retrieved template's slots are set once adapt_template has fitted it
        update["slot_states"] = {s.id: SlotState() for s in fw.slots}
    entry = LedgerEntry(
        agent="harness",
        action="select_framework",
        inputs_summary=reason,
        outputs_summary=f"{fw.id}: {len(fw.slots)} slots",
    )
    return {**update, "framework": fw, "updated_at": utcnow(), "ledger": [entry]}


def _from_library(task: str, runtime: Runtime[RunContext], user: str) -> tuple[Framework, str, dict[str, Any]]:
    catalog = load_catalog()
    templates, index = library(catalog.ids, get_embedder(), catalog.template_dirs)
    if index is None:
        notice = Notice(level="warning", source=NODE, message=f"no valid templates in {library_dir()}; one slot used")
        return validate_framework(fallback_framework(task)), "no template library", {"notices": [notice]}
    hits = index.search(task, 3)
    hit, remembered = hits[0], ""
    if hit.similarity >= TEMPLATE_FIT_LINE and runtime.store is not None:
        hit, remembered = _remembered(task, [h for h in hits if h.similarity >= TEMPLATE_FIT_LINE], runtime, user)
    if hit.similarity < TEMPLATE_FIT_LINE:
        why = f"no template fits (the nearest, {hit.template_id}, at {hit.similarity:.3f} < {TEMPLATE_FIT_LINE})"
        fw, record = plan_from_aspects(task, get_embedder(), why)
        return fw, record.reason, {"adaptation": record}
    template = templates[hit.template_id]
    runtime.stream_writer({"event": "template_selected", "template": template.id, "similarity": hit.similarity})
    record = AdaptationRecord(seed_id=template.id, similarity=hit.similarity)
    seed = validate_framework(template.to_framework())  # every framework that reaches execution is valid
    return seed, f"template {template.id} from the library{remembered}", {"template": template, "adaptation": record}


def _remembered(task: str, fitting: list[Any], runtime: Runtime[RunContext], user: str) -> tuple[Any, str]:
    """The template to use given how earlier runs of similar tasks went (episodic memory), and why.

    A template whose plan worked for a similar task (completed, every check passed) is preferred among those that
    fit; the best template is passed over when it failed for a similar task and never worked for one.
    """
    assert runtime.store is not None
    similar = EpisodeMemory(runtime.store, user, get_embedder).similar(task)
    worked = {e.template: (e, s) for e, s in similar if e.template and e.worked}
    failed = {e.template: (e, s) for e, s in similar if e.template and not e.worked and e.template not in worked}
    for candidate in fitting:
        if candidate.template_id in worked:
            episode, score = worked[candidate.template_id]
            why = "" if candidate is fitting[0] else f", preferred over {fitting[0].template_id}"
            return candidate, f" (it worked for a similar task, run {episode.run_id[:8]} at {score:.2f}{why})"
    if fitting[0].template_id in failed:
        episode, score = failed[fitting[0].template_id]
        for candidate in fitting[1:]:
            if candidate.template_id not in failed:
                return candidate, (
                    f" ({fitting[0].template_id} was passed over: it ended {episode.status} for a similar task, "
                    f"run {episode.run_id[:8]} at {score:.2f})"
                )
    return fitting[0], ""
