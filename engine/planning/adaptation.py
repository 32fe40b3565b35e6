"""Adapting a retrieved template to the task with the model: constrained edit operations, retries, fallbacks.

The model answers with edit operations (:mod:`state.adaptation`) under a grammar built for this template
(:func:`experts.backends.grammar.adaptation_grammar`: slot ids and expert ids are alternatives, strings are bounded),
so it cannot name a slot or expert that does not exist. The plan is applied and validated; a plan with
problems is retried at most ``max_retries`` times with the problems in the prompt. Then the seed template is
used unmodified, and if even that fails validation, the one-slot framework. Everything is recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import engine.prompts as prompts
from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from experts.backends.grammar import adaptation_grammar
from experts.routing import AS_IS_SIMILARITY
from state.adaptation import AdaptationAttempt, AdaptationRecord, Plan, apply_operations, parse_plan
from state.framework import Framework, fallback_framework, validation_errors
from state.template import Template

MAX_OPERATIONS = 4
"""Operations a plan may have: enough for real edits, few enough to finish within the token budget."""
MIN_ATTEMPT_SECONDS = 1.0
"""An attempt is not started with less time than this left of the budget."""
RETRY_TEMPERATURE = 0.5
"""A retry samples (greedy decoding would repeat the same plan); the first attempt is greedy."""
SLOT_ID = "adapt_template"


def adaptation_messages(template: Template, task: str, experts: list[str]) -> list[ChatMessage]:
    """The system and user messages that ask for an adaptation plan."""
    lines = []
    for slot in template.slots:
        deps = f", after {', '.join(slot.deps)}" if slot.deps else ""
        lines.append(
            prompts.ADAPT_SLOT_LINE.format(
                id=slot.id,
                title=slot.title,
                expert=slot.expert or "any expert",
                deps=deps,
                description=slot.description,
            )
        )
    low, high = template.adaptable.slot_count
    user = prompts.ADAPT_PROMPT.format(
        task=task,
        title=template.title,
        pattern=template.pattern,
        min_slots=low,
        max_slots=high,
        slots="\n".join(lines),
        experts=", ".join(experts),
    )
    return [ChatMessage("system", prompts.ADAPT_SYSTEM.format(max_ops=MAX_OPERATIONS)), ChatMessage("user", user)]


def adapt(
    template: Template,
    similarity: float,
    task: str,
    backend: ExpertBackend,
    experts: list[str],
    *,
    max_retries: int = 2,
    max_tokens: int = 512,
    time_budget: float | None = None,
    as_written: frozenset[str] = frozenset(),
) -> tuple[Framework, AdaptationRecord]:
    """The framework to run for ``task`` from its best template, and the record of how it was made.

    ``time_budget`` bounds the planner's attempts together (seconds; None: no bound): an answer still being
    written when it runs out is ended there and counts as failed, and no attempt starts without time left.
    ``as_written``: ids of slots written in the task's own words (added for its deliverables); the planner's
    MODIFY and REMOVE of them are left out. A real run's planner cut one such title mid-phrase ("... policy for
    our 40-person") and wrote its description twice, and that was its only edit.
    """
    record = AdaptationRecord(seed_id=template.id, similarity=similarity)
    if similarity >= AS_IS_SIMILARITY:
        seed = template.to_framework()
        return seed, record.model_copy(update={"as_is": True, "reason": f"similarity {similarity:.3f} >= 0.95"})
    messages = adaptation_messages(template, task, experts)
    grammar = None
    if backend.supports_grammar():
        grammar = adaptation_grammar([s.id for s in template.slots], experts, max_ops=MAX_OPERATIONS)
    attempts: list[AdaptationAttempt] = []
    started = time.perf_counter()
    for attempt in range(1, max_retries + 2):
        left = None if time_budget is None else time_budget - (time.perf_counter() - started)
        if left is not None and left < MIN_ATTEMPT_SECONDS:
            break
        request = GenerationRequest(
            messages=tuple(messages),
            max_tokens=max_tokens,
            temperature=0.0 if attempt == 1 else RETRY_TEMPERATURE,
            grammar=grammar,
            seed=attempt,
            slot_id=SLOT_ID,
            slot_title="Adapt the template",
            attempt=attempt,
            time_limit=left,
        )
        tried = _attempt(template, experts, backend, request, time_budget, as_written)
        attempts.append(tried.record)
        if tried.framework is not None and tried.plan is not None:
            reason = f"adapted in {attempt} attempt(s)"
            if tried.left_out:
                reason += f"; left out the edits of the task's own slots ({', '.join(tried.left_out)})"
            update = {"operations": tried.plan.operations, "rationale": tried.plan.rationale, "reason": reason}
            return tried.framework, record.model_copy(update={**update, "attempts": attempts})
        if tried.text is None:  # a backend failure ends adaptation; the fallbacks still give a framework
            break
        messages += [
            ChatMessage("assistant", tried.text),
            ChatMessage(
                "user", prompts.ADAPT_RETRY.format(errors="\n".join(f"- {e}" for e in tried.record.errors[:8]))
            ),
        ]
    return _fallback(template, task, record, attempts)


@dataclass(frozen=True)
class _Attempt:
    """One attempt: its record, and the framework its plan gave (None: it failed)."""

    record: AdaptationAttempt
    text: str | None = None
    """What the planner wrote (None: the backend failed)."""
    plan: Plan | None = None
    framework: Framework | None = None
    left_out: tuple[str, ...] = ()
    """The edits of the task's own slots that were left out."""


def _attempt(
    template: Template,
    experts: list[str],
    backend: ExpertBackend,
    request: GenerationRequest,
    time_budget: float | None,
    as_written: frozenset[str],
) -> _Attempt:
    """Ask the planner once, then parse, filter, apply and validate its plan."""
    t0 = time.perf_counter()
    try:
        gen = backend.generate(request)
    except Exception as exc:  # a backend failure ends adaptation; the fallbacks still give a framework
        return _Attempt(AdaptationAttempt(attempt=request.attempt, errors=[f"{type(exc).__name__}: {exc}"]))
    plan, errors = parse_plan(gen.text)
    left_out: list[str] = []
    if plan is not None and as_written:
        kept = [op for op in plan.operations if not (op.op in ("MODIFY", "REMOVE") and op.slot in as_written)]
        left_out = [f"{op.op} {op.slot}" for op in plan.operations if op not in kept]
        plan = plan.model_copy(update={"operations": kept})
    if gen.finish_reason == "time":
        errors = [f"the planner's time ({time_budget:g} s) ran out before the plan was finished"]
        plan = None
    elif gen.finish_reason == "length":
        errors = [f"the answer was cut off at {request.max_tokens} tokens; use fewer, shorter operations", *errors]
        plan = None
    framework = None
    if plan is not None:
        framework, errors = apply_operations(template, plan, experts)
    seconds = round(time.perf_counter() - t0, 3)
    tried = AdaptationAttempt(attempt=request.attempt, raw=gen.text[:2000], plan=plan, errors=errors, seconds=seconds)
    return _Attempt(tried, gen.text, plan, framework, tuple(left_out))


def _fallback(
    template: Template, task: str, record: AdaptationRecord, attempts: list[AdaptationAttempt]
) -> tuple[Framework, AdaptationRecord]:
    """No valid adaptation: the seed template unmodified, else (it is not valid either) the one-slot framework."""
    seed = template.to_framework()
    if not validation_errors(seed):
        why = f"no valid adaptation after {len(attempts)} attempt(s); the seed template is used unmodified"
        if not attempts:
            why = "no planner time (plan_seconds); the seed template is used as fitted"
        return seed, record.model_copy(update={"attempts": attempts, "fallback": "seed", "reason": why})
    why = "neither an adaptation nor the seed template is valid; the one-slot framework is used"
    return fallback_framework(task), record.model_copy(
        update={"attempts": attempts, "fallback": "single_slot", "reason": why}
    )
