"""The work of one slot: sandboxed prompt -> expert -> outline enforcement (bounded retries) -> assists.

Runs in a scheduler worker thread. It reports everything through its return value (a :class:`SlotOutcome`):
the node that collects it turns that into Passport updates, so nothing here touches graph state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from experts.catalog import ExpertScope
from experts.pool import ChatMessage, ExpertBackend, GenerationRequest
from nodes import prompts
from nodes.assist import AssistResolver
from state.assist import AssistRecord
from state.enums import Mode
from state.errors import CoeError, GenerationStopped, RunFailure
from state.framework import OUTLINE_REFERENCE, SlotSpec
from state.outline import parse_output, retry_feedback
from state.passport import LedgerEntry, Notice, Settings, utcnow
from state.result import SlotResult

ProgressSink = Callable[[dict[str, object]], None]


@dataclass
class SlotOutcome:
    """What one slot's work produced."""

    slot_id: str
    expert: str
    result: SlotResult | None
    error: str | None
    attempts: int
    started_at: datetime
    finished_at: datetime
    ledger: list[LedgerEntry] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    assists: list[AssistRecord] = field(default_factory=list)
    """Every assist request of the answer and how it was resolved."""
    requeue: str | None = None
    """The model pool stopped the slot (nothing of it is kept): ``evicted`` to free memory, run it again from
    scratch; ``cancelled`` because the process is stopping, run it when the run is resumed."""


@dataclass(frozen=True)
class SlotJob:
    """Everything a slot's prompt may contain (context sandboxing: nothing else of the Passport)."""

    spec: SlotSpec
    task: str
    constraints: tuple[str, ...]
    expert: str
    persona: str
    references: Mapping[str, tuple[str, SlotResult]]
    """Referenced slot id -> (its title, its result), only for ids in ``spec.can_reference``."""
    max_tokens: int
    temperature: float
    mode: Mode = Mode.AUTONOMOUS
    """The run's mode: decides whether user assists are kept for the person (interactive)."""


def generation_settings(scope: ExpertScope, settings: Settings) -> tuple[int, float]:
    """(max_tokens, temperature) for an expert: a value the user set explicitly wins over the expert's default."""
    max_tokens = settings.max_tokens
    if "max_tokens" not in settings.explicit and scope.generation.max_tokens is not None:
        max_tokens = scope.generation.max_tokens
    temperature = settings.temperature
    if "temperature" not in settings.explicit and scope.generation.temperature is not None:
        temperature = scope.generation.temperature
    return max_tokens, temperature


def build_messages(job: SlotJob, settings: Settings) -> tuple[ChatMessage, ...]:
    """The system and user messages for a slot's first attempt."""
    system = prompts.SYSTEM_PROMPT.format(
        persona=job.persona,
        output_contract=prompts.OUTPUT_CONTRACT,
        uncertainty_protocol=prompts.UNCERTAINTY_PROTOCOL,
    )
    expected = (
        prompts.EXPECTED_OUTPUTS_BLOCK.format(items="\n".join(f"- {o}" for o in job.spec.expected_outputs))
        if job.spec.expected_outputs
        else ""
    )
    constraints = (
        prompts.CONSTRAINTS_BLOCK.format(items="\n".join(f"- {c}" for c in job.constraints)) if job.constraints else ""
    )
    user = prompts.SLOT_PROMPT.format(
        task=job.task,
        title=job.spec.title,
        description=job.spec.description,
        expected_outputs=expected,
        constraints=constraints,
        references=_references_block(job, settings.reference_max_chars),
    )
    return (ChatMessage("system", system), ChatMessage("user", user))


def _references_block(job: SlotJob, max_chars: int) -> str:
    items: list[str] = []
    for ref_id in job.spec.can_reference:
        if ref_id not in job.references:
            continue
        title, result = job.references[ref_id]
        hints = job.spec.reference_hints.get(ref_id, [])
        if OUTLINE_REFERENCE in hints:
            view, content = "outline only", result.outline_text()
        elif hints:
            found = [(h, result.section_text(h)) for h in hints]
            view = "sections " + ", ".join(hints)
            content = "\n\n".join(text if text is not None else f"(section {h!r} not found)" for h, text in found)
        else:
            view, content = "whole", result.body_text()
        if len(content) > max_chars:
            content = content[: max_chars - 20].rstrip() + "\n[... truncated]"
        items.append(prompts.REFERENCE_ITEM.format(title=title, view=view, content=content))
    return prompts.REFERENCES_BLOCK.format(items="\n".join(items)) if items else ""


def run_slot(
    job: SlotJob,
    backend: ExpertBackend,
    settings: Settings,
    emit: ProgressSink,
    resolver: AssistResolver | None = None,
) -> SlotOutcome:
    """Run one slot to a result (or a failure). Never raises for backend errors: they become the outcome.

    Placeholders stay in the text through outline enforcement (the parser ignores them); the accepted result
    then goes through assist resolution (``resolver``, default: one for the run's settings and mode).
    """
    started = utcnow()
    slot_id = job.spec.id
    emit({"event": "slot_started", "slot": slot_id, "title": job.spec.title, "expert": job.expert})
    messages = build_messages(job, settings)
    grammar = None
    if settings.use_grammar and backend.supports_grammar():
        from experts.grammar import OUTLINE_GRAMMAR

        grammar = OUTLINE_GRAMMAR
    ledger: list[LedgerEntry] = []
    notices: list[Notice] = []
    max_attempts = 1 + settings.max_outline_retries
    result: SlotResult | None = None
    attempt = 0
    for attempt in range(1, max_attempts + 1):
        t0 = time.perf_counter()
        try:
            gen = backend.generate(
                GenerationRequest(
                    messages=messages,
                    max_tokens=job.max_tokens,
                    temperature=job.temperature,
                    grammar=grammar,
                    seed=attempt,
                    slot_id=slot_id,
                    slot_title=job.spec.title,
                    attempt=attempt,
                )
            )
        except GenerationStopped as exc:
            if exc.reason == "evicted":
                emit({"event": "slot_evicted", "slot": slot_id, "attempt": attempt, "error": str(exc)})
            ledger.append(
                LedgerEntry(agent="harness", action=exc.reason, slot_id=slot_id, outputs_summary=str(exc)[:500])
            )
            return SlotOutcome(
                slot_id, job.expert, None, str(exc), attempt, started, utcnow(), ledger, notices, requeue=exc.reason
            )
        except CoeError as exc:
            return _failed(job, str(exc), attempt, started, ledger, notices, emit)
        except Exception as exc:  # a backend's own error type is unknown: record it as the slot's failure
            return _failed(job, f"{type(exc).__name__}: {exc}", attempt, started, ledger, notices, emit)
        result = parse_output(gen.text, slot_id=slot_id, expert=job.expert, attempts=attempt)
        if gen.finish_reason == "length" and not result.compliant:
            cut = f"the answer was cut off at the {job.max_tokens}-token limit; keep every section short"
            result = result.model_copy(update={"problems": [cut, *result.problems]})
        ledger.append(
            LedgerEntry(
                agent=job.expert,
                action="generate" if attempt == 1 else "generate_retry",
                slot_id=slot_id,
                inputs_summary=f"{job.spec.title}; attempt {attempt}; {sum(len(m.content) for m in messages)} chars",
                outputs_summary=(
                    f"{len(gen.text)} chars, {len(result.sections)} sections, "
                    + ("compliant" if result.compliant else "non-compliant: " + "; ".join(result.problems[:3]))
                ),
                duration_ms=int((time.perf_counter() - t0) * 1000),
                prompt_tokens=gen.prompt_tokens,
                completion_tokens=gen.completion_tokens,
            )
        )
        if result.compliant:
            break
        if attempt < max_attempts:
            emit({"event": "slot_retry", "slot": slot_id, "attempt": attempt + 1, "problems": result.problems})
            messages = (
                *messages,
                ChatMessage("assistant", gen.text),
                ChatMessage(
                    "user",
                    prompts.RETRY_PROMPT.format(
                        feedback=retry_feedback(result), output_contract=prompts.OUTPUT_CONTRACT
                    ),
                ),
            )
    if result is None:  # unreachable: max_attempts >= 1
        raise RunFailure("execute_slots", "no attempt was made", slot_id=slot_id)
    if not result.compliant:
        notices.append(
            Notice(
                level="warning",
                source="outline_enforcer",
                slot_id=slot_id,
                message=(
                    f"accepted without the required structure after {attempt} attempts "
                    f"({'; '.join(result.problems)}); best-effort parse used"
                ),
            )
        )
    resolution = (resolver or AssistResolver(settings, job.mode, emit=emit)).resolve(result, job.spec.title)
    ledger.extend(resolution.ledger)
    notices.extend(resolution.notices)
    result = resolution.result
    emit({"event": "slot_done", "slot": slot_id, "attempts": attempt, "compliant": result.compliant})
    return SlotOutcome(
        slot_id, job.expert, result, None, attempt, started, utcnow(), ledger, notices, resolution.records
    )


def _failed(
    job: SlotJob,
    error: str,
    attempt: int,
    started: datetime,
    ledger: list[LedgerEntry],
    notices: list[Notice],
    emit: ProgressSink,
) -> SlotOutcome:
    emit({"event": "slot_failed", "slot": job.spec.id, "attempt": attempt, "error": error})
    ledger.append(
        LedgerEntry(agent=job.expert, action="generate_failed", slot_id=job.spec.id, outputs_summary=error[:500])
    )
    notices.append(Notice(level="error", source="execute_slots", slot_id=job.spec.id, message=error))
    return SlotOutcome(job.spec.id, job.expert, None, error, attempt, started, utcnow(), ledger, notices)
