"""Node ``scope``: decide how much planning the task needs (trivial, single expert or multi-slot plan).

Only when the run chooses its framework from the template library (``use_templates``) and the caller gave
none; otherwise the decision is recorded as unclassified and the run goes on to ``select_template``.
A trivial task goes to ``answer_directly``; a single-expert task gets a one-slot plan; a multi-slot task gets a
template adapted to it. A task read as a plan is read again by the planner model (``Settings.scope_reading``,
:mod:`engine.planning.scope_reading`): one piece of work makes it single (not by the base model standing in for
a planner model that is not installed: the plan stands, with a warning). When the scope is unclear, or the
model overturns the plan, interactive mode asks the person (a ``clarify`` interrupt: single or multi); the other
modes take the narrower reading and record that default in ``Passport.defaults`` with the question it stands for.
Classification only reads the state, so the node restarts safely on resume (the reading is asked again, the
same greedy answer in about 2 s).
With a Store, the router that classifies has learned the run's user's routing lessons, as ``route_slots``'s has.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from engine.assists.asking import ask_choice
from engine.planning.planner_model import planner_model
from engine.planning.scope_reading import read_scope, second_reading
from experts.catalog import load_catalog
from experts.embedding import get_embedder
from experts.routing import RouterParams, classify, get_router, library
from experts.routing.aspects import named_deliverables
from experts.routing.lesson_check import router_with_lessons
from memory.routing_lessons import RoutingLessons
from state.context import RunContext
from state.enums import Mode
from state.hitl import Question
from state.passport import GuardedPassport, LedgerEntry, Notice, utcnow
from state.scope_decision import AppliedDefault, ScopeDecision

NODE = "scope"
ASKED_RULES = ("unclear_scope_narrower", "planner_reads_one")
"""The readings interactive mode puts to the person; the others apply them as defaults, recorded."""


def scope(state: GuardedPassport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Classify the task when templates are in use; record the decision and any default it applied."""
    task = state.mission.task
    words = len(task.split())
    if state.framework is not None or not state.settings.use_templates:
        why = "a framework was given" if state.framework is not None else "template selection is off"
        decision = ScopeDecision(kind="unclassified", words=words, reason=f"not classified: {why}")
        return {"scope": decision, "updated_at": utcnow()}
    catalog = load_catalog()
    _, index = library(catalog.ids, get_embedder(), catalog.template_dirs)
    router = get_router(RouterParams.from_settings(state.settings), catalog)
    lessons = RoutingLessons(runtime.store, state.run.user).current(router) if runtime.store is not None else []
    router = router_with_lessons(router, lessons)
    decision = classify(task, get_embedder(), index, router)
    reading, unread = None, None
    if decision.kind == "multi" and state.settings.scope_reading and not decision.firm:
        planner = planner_model(state.settings)
        if planner.problem is None:
            reading = read_scope(task, planner.backend)
            decision = second_reading(decision, reading, planner.name)
        else:  # the base model's reading was measured no better than the pass alone: not worth its seconds
            unread = planner.problem
    asked = decision.rule in ASKED_RULES and state.mission.mode is Mode.INTERACTIVE
    if asked:
        decision = _ask_scope(decision)
    if state.turns:  # a follow-up: is it more of the same kind of work as the last turn?
        if decision.kind == "trivial" and named_deliverables(task):
            # "Now write a test for f7" is short, but it asks for work: a direct answer is three sentences
            decision = decision.model_copy(
                update={"kind": "single", "reason": f"a follow-up that asks for work ({decision.reason})"}
            )
        same = decision.expert is not None and decision.expert in state.turns[-1].experts
        decision = decision.model_copy(update={"transition": "same_domain" if same else "new_domain"})
    update: dict[str, Any] = {
        "scope": decision,
        "updated_at": utcnow(),
        "ledger": [
            LedgerEntry(
                agent="person" if asked else "router",
                action="scope",
                inputs_summary=f"{words} words",
                outputs_summary=f"{decision.kind}: {decision.reason}"
                + (f"; the router has learned {len(lessons)} routing lesson(s) of yours" if lessons else "")
                + (f"; follow-up turn, {decision.transition.replace('_', ' ')}" if decision.transition else ""),
            )
        ],
    }
    if reading is not None:
        said = {"one": "one piece of work", "several": "several pieces of work", "none": "no reading"}[reading.answer]
        update["ledger"].append(
            LedgerEntry(
                agent="planner",
                action="scope_reading",
                inputs_summary="a task read as a plan",
                outputs_summary=f"{said} in {reading.seconds:.1f} s"
                + (f": {reading.detail}" if reading.detail else ""),
                duration_ms=int(reading.seconds * 1000),
            )
        )
    if unread is not None:
        message = f"the planner model is unavailable ({unread}); the plan was not read a second time"
        update["notices"] = [Notice(level="warning", source=NODE, message=message)]
    if decision.rule in ASKED_RULES:
        update["defaults"] = [
            AppliedDefault(
                rule=decision.rule,
                node=NODE,
                detail=decision.reason,
                question=(
                    f"Should one expert ({decision.expert}) answer the whole task, "
                    "or should it be planned as several parts?"
                ),
                alternatives=["single", "multi"],
            )
        ]
    return update


def _ask_scope(decision: ScopeDecision) -> ScopeDecision:
    """Interactive mode: the scope is unclear, so ask the person instead of taking the narrower reading."""
    question = Question(
        id="scope",
        text=(
            f"Should one expert ({decision.expert}) answer the whole task (single), "
            "or should it be planned as several parts (multi)?"
        ),
        allowed=["single", "multi"],
        default="single",
    )
    kind, _ = ask_choice(NODE, question, '"single" or "multi" (or {"scope": "single"})', interrupt)
    return decision.model_copy(
        update={"kind": kind, "rule": None, "reason": f"the person chose {kind} ({decision.reason})"}
    )
