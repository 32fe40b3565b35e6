"""Route slots to experts with the dual-embedding router and settle their model bindings; say why.

Shared by ``nodes.route_slots`` (every slot of a plan, before any runs) and ``nodes.complete`` (the parts the
completion round adds). All slots given are routed in one batch (one embedding call). A slot whose framework entry
names an expert keeps it. Each decision records the net score of every expert, the runner-up and the autonomous
default that changed the raw winner, if any (the tie rule, the low-confidence fallback); the ledger gets one entry
per slot.

Each expert's model binding is settled before any slot runs: a faux expert runs on the base model; a true expert on
its own model, when true experts are enabled and (for the llama backend) the model is installed. When it is not,
the scope's ``fallback`` decides: ``base`` runs the expert as a persona over the base model and says so in a notice
and the ledger; ``error`` stops the run with what to install (the run can be resumed after installing it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.slots.contracts import deliverable_of
from experts.catalog import GENERAL_EXPERT, Catalog, ExpertScope, load_catalog, resolve_binding
from experts.catalog.exams import EXAM_SOURCE
from experts.catalog.versions import pinned, shadow_pin
from experts.routing import RouteResult, RouterParams, get_router
from experts.routing.lesson_check import router_with_lessons
from experts.routing.scoping import function_to_complete, python_code_asked
from memory.routing_lessons import RoutingLessons
from memory.store import ItemStore
from state.errors import RunFailure
from state.framework import SlotSpec, slot_text
from state.passport import LedgerEntry, Notice, RoutingDecision
from state.scope_decision import AppliedDefault
from state.settings import Settings

__all__ = ["CODER", "Routed", "route_specs"]

NODE = "route_slots"
CODER = "python_coder"
"""The expert of code handed over to complete (a ``def`` with only a docstring)."""


@dataclass
class Routed:
    """The decisions for the slots routed, in their order, with the ledger, notices and defaults they made."""

    decisions: dict[str, RoutingDecision] = field(default_factory=dict)
    ledger: list[LedgerEntry] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    applied: list[AppliedDefault] = field(default_factory=list)


def route_specs(
    slots: Sequence[SlotSpec], *, source: str, settings: Settings, store: ItemStore | None, user: str
) -> Routed:
    """Route ``slots`` (of a framework from ``source``) and settle the experts' model bindings.

    With a ``store``, the router has learned ``user``'s routing lessons (``coe feedback``); each decision's
    reason says how many.
    """
    catalog = load_catalog()
    pin = shadow_pin(source)
    if pin is not None:  # a shadow run: its slot is answered by the candidate version it names
        catalog, _ = pinned(catalog, dict([pin]))
    to_route = [s for s in slots if s.expert is None]
    decisions: dict[str, RoutingDecision] = {}
    applied: list[AppliedDefault] = []
    router_version = ""
    if to_route:
        router = get_router(RouterParams.from_settings(settings), catalog)
        router_version = f" by router {router.version}"
        lessons = RoutingLessons(store, user).current(router) if store is not None else []
        router = router_with_lessons(router, lessons)
        learned = f"; the router has learned {len(lessons)} routing lesson(s) of yours" if lessons else ""
        for spec, res in zip(to_route, router.route_many([slot_text(s) for s in to_route]), strict=True):
            applied += _defaults(spec.id, res, catalog)
            decisions[spec.id] = RoutingDecision(
                slot_id=spec.id,
                expert=res.expert,
                score=res.score,
                runner_up=res.runner_up,
                runner_up_score=res.runner_up_score,
                scores=res.scores,
                fallback=res.fallback,
                rule=res.rule,
                stage=res.stage,
                reason=res.explain() + learned,
            )
    notices: list[Notice] = []
    for spec in slots:
        tested = source.startswith(EXAM_SOURCE) or (pin is not None and pin[0] == spec.expert)
        if spec.expert in catalog.benched and not tested:  # an exam or a shadow run tests the expert itself
            reason = f"the framework names {spec.expert}, which is out of routing ({catalog.benched[spec.expert]})"
            decisions[spec.id] = RoutingDecision(
                slot_id=spec.id, expert=GENERAL_EXPERT, reason=f"{reason}; the generalist takes it"
            )
            notices.append(Notice(level="warning", source=NODE, message=f"slot {spec.id}: {reason}"))
        elif spec.expert is not None:
            decisions[spec.id] = RoutingDecision(slot_id=spec.id, expert=spec.expert, reason="set by the framework")
        elif CODER in catalog and decisions[spec.id].expert != CODER and (why := _python_work(spec.description)):
            # Python code asked for in so many words is the coder's work, whatever its subject's words are about.
            decisions[spec.id] = decisions[spec.id].model_copy(
                update={
                    "expert": CODER,
                    "reason": f"{why} goes to {CODER} (the router's pick: {decisions[spec.id].expert})",
                }
            )

    ledger: list[LedgerEntry] = []
    bindings: dict[str, tuple[str | None, str]] = {}
    for expert_id in sorted({d.expert for d in decisions.values()}):
        bindings[expert_id] = _binding(catalog.get(expert_id), settings, notices, ledger)
    ordered: dict[str, RoutingDecision] = {}
    for spec in slots:
        model, binding = bindings[decisions[spec.id].expert]
        deliverable, language = deliverable_of(spec, decisions[spec.id].expert)
        version = catalog.get(decisions[spec.id].expert).version
        ordered[spec.id] = decisions[spec.id].model_copy(
            update={
                "model": model,
                "binding": binding,
                "deliverable": deliverable,
                "language": language,
                "version": version,
            }
        )
    ledger[:0] = [
        LedgerEntry(
            agent="router",
            action="route",
            slot_id=sid,
            inputs_summary=f"{len(d.scores)} experts scored{router_version}"
            if d.scores
            else "expert named by the framework",
            outputs_summary=f"{_served_by(catalog, d.expert)}; {d.reason}; model: {_model(d)}; "
            + f"delivers {d.deliverable}"
            + (f" ({d.language})" if d.language else "")
            + (f"; scores: {_scores(d.scores)}" if d.scores else ""),
        )
        for sid, d in ordered.items()
    ]
    return Routed(ordered, ledger, notices, applied)


def _python_work(description: str) -> str | None:
    """Why a slot is Python code whatever its words are about (None: it is not said in so many words)."""
    if function_to_complete(description):
        return "a function handed over to complete"
    if python_code_asked(description):
        return "Python code asked for with a test that calls it, or by name"
    return None


def _defaults(slot_id: str, res: RouteResult, catalog: Catalog) -> list[AppliedDefault]:
    """The autonomous defaults that decided a slot's expert (what an interactive run would ask instead)."""
    applied: list[AppliedDefault] = []
    question = f"Which expert should take slot {slot_id}: {res.expert} or {res.runner_up}?"
    if res.rule == "tie_prefers_task_type":
        applied.append(
            AppliedDefault(
                rule="tie_prefers_task_type",
                node=NODE,
                slot_id=slot_id,
                detail=f"{res.expert} (task type) preferred over {res.raw_best} (domain) in a close call",
                question=question,
                alternatives=[res.expert, res.raw_best],
            )
        )
    by_capability = max(res.capability, key=lambda e: res.capability[e]) if res.capability else res.expert
    excluded = by_capability != res.raw_best and res.raw_best == res.expert  # the exclusion penalty decided
    if excluded and catalog.get(by_capability).kind == "domain":
        applied.append(
            AppliedDefault(
                rule="context_not_expertise",
                node=NODE,
                slot_id=slot_id,
                detail=(
                    f"{by_capability}'s domain words read as context: it leads on capability alone "
                    f"({res.capability[by_capability]:.3f}) but its exclusions send the slot to {res.expert}"
                ),
                question=f"Does slot {slot_id} need {by_capability} expertise, or is that domain only its context?",
                alternatives=[res.expert, by_capability],
            )
        )
    return applied


def _served_by(catalog: Catalog, expert_id: str) -> str:
    """``expert tax_advisor v1.2 (user)``: which version of the expert, from where, serves the slot."""
    return f"expert {expert_id} v{catalog.get(expert_id).version} ({catalog.origin(expert_id).label()})"


def _scores(scores: dict[str, float]) -> str:
    return ", ".join(f"{e} {s:.3f}" for e, s in scores.items())


def _model(decision: RoutingDecision) -> str:
    base = "base model" if decision.model is None else decision.model
    return f"{base} ({decision.binding})"


def _binding(
    scope: ExpertScope, settings: Settings, notices: list[Notice], ledger: list[LedgerEntry]
) -> tuple[str | None, str]:
    """(model, binding) for an expert: None is the base model; a fallback is announced, a fatal one raised."""
    binding = resolve_binding(settings, scope)
    if binding.fatal:
        raise RunFailure(NODE, f"expert {scope.id}: its model is unavailable: {binding.problem}")
    if binding.problem is not None:
        message = f"expert {scope.id} runs on the base model: its own model is unavailable ({binding.problem})"
        notices.append(Notice(level="warning", source=NODE, message=message))
        ledger.append(LedgerEntry(agent="harness", action="model_fallback", outputs_summary=message[:500]))
    return binding.model, binding.kind
