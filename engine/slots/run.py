"""The work of one slot: a prompt that fits -> candidates -> checks -> the best kept verbatim -> assists.

Runs in a scheduler worker thread. It reports everything through its return value (a :class:`SlotOutcome`):
the node that collects it turns that into Passport updates, so nothing here touches graph state.

1. **The contract fits the deliverable** (:mod:`engine.slots.contracts`): the slot's deliverable (code, prose, plan,
   table, data) decides the outline's size, what its sections hold, the grammar and the answer budget.
2. **The prompt always fits** the model's context (:mod:`engine.slots.prompt`): referenced slots are cut to the
   budget, then the answer budget, then the task text; what was cut is in the ledger. A prompt never fails a slot
   for its length.
3. **The first answer** is drawn at the expert's temperature (0: greedy) and checked (:mod:`engine.slots.checks`). A
   plan's slot starts its answer with its own title (the grammar writes it), so it answers its part instead of
   retitling and copying a referenced one.
   Every answer is watched as it is written: one that loops is stopped there (:mod:`engine.slots.loop_watch`) and counts
  as
   degenerate, as it would have at the end of its token budget.
4. **Two prompts.** A slot that is the whole task also draws *plain* candidates: the task alone, as the person
   wrote it (no persona, no contract, no grammar: the prompt the bare model would get), put in the contract's
   shape with its words kept (a code slot keeps its code block; prose, a plan or a table is the one section).
   The first plain answer is greedy (temperature 0, whatever the expert's temperature): the bare model's answer
   (under the prose repeat penalty). For code the kinds alternate, each drawn once at its first temperature, then
   sampled; for prose, plans and tables a plain answer is drawn only once a contract answer loops (the contract's
   prompt alone carries the uncertainty protocol, and a plain answer invents what it does not know), then the
   kinds alternate. A task that hands over one function to complete draws the plain candidate first: measured on
   HumanEval, the bare prompt's greedy answer is the better first try, and the contract's prompt is then a
   second, different greedy try instead of a sample (``docs/decisions.md``).
5. **More candidates only when needed.** An answer that breaks the output contract gets fresh-prompt retries
   (``max_outline_retries``): the original prompt plus what was wrong, never the failed answer itself, at a
   higher temperature. A compliant answer that fails a hard check (code that does not run or fails the task's
   examples, degenerate text) gets samples up to ``best_of`` candidates in all (three times as many, in three
   times the time, where the task's own examples run: :data:`RUNNABLE_EXAMPLES_DRAWS`). Drawing stops as soon as a
   candidate passes every hard check, or once the slot has spent ``candidate_time_factor`` times its first
   answer's time. Still failing, one last candidate may come from a bigger model (``escalate``).
6. **Selection, never synthesis** (:mod:`engine.slots.selection`): the best-scoring candidate is kept verbatim; a tie
   among prose candidates may be broken by a judge prompt. When every candidate looped, the kept one's repeated
   sentences are removed and its caveat stays; a section of the kept answer that says what an earlier one says,
   repeats the task or copies a referenced slot is removed and the rest renumbered (:mod:`engine.slots.kept_answer`:
   nothing is reworded). Every candidate, its checks and the choice are in the result's
   :class:`~state.quality.SlotQuality` and the ledger.
7. Assists are resolved in the kept answer (:mod:`engine.assists.resolver`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from engine.assists.resolver import AssistResolver
from engine.slots.checks import CheckContext, check_answer, copies_task, extract_examples
from engine.slots.contracts import Contract
from engine.slots.kept_answer import computed, without_loops, without_repeated_sections, without_unfinished_end
from engine.slots.loop_watch import LoopWatch
from engine.slots.program_of_thought import Calculation, calculable, calculate, result_check
from engine.slots.prompt import SlotJob, fit_prompt, plain_prompt, plain_result
from engine.slots.sandbox import SandboxLimits
from engine.slots.selection import best, judge, score
from engine.slots.streaming import generate_streamed
from experts.backends import ExpertBackend, Generation, GenerationRequest
from experts.catalog import ExpertScope
from state.assist import AssistRecord
from state.errors import BackendError, CoeError, GenerationStopped
from state.outline import parse_output, retry_feedback
from state.passport import LedgerEntry, Notice, utcnow
from state.quality import CandidateRecord, CheckResult, SlotQuality
from state.result import SlotResult
from state.settings import Settings

__all__ = ["ProgressSink", "SlotOutcome", "generation_settings", "run_slot"]

ProgressSink = Callable[[dict[str, object]], None]

SAMPLE_TEMPERATURES = (0.3, 0.5, 0.7)
"""Temperatures of the extra candidates, in turn (never below the expert's own)."""
RUNNABLE_EXAMPLES_DRAWS = 3
"""A code slot whose task gives examples that run may draw this many times ``best_of`` candidates, in this many times
the time: its check is a real reward (HumanEval/10's fifth candidate was the first to pass; at twice, /54 and /98
were stopped by the time limit at their sixth and failed, at three times they passed; docs/decisions.md)."""


ARITHMETIC_EXPERTS = ("math_reasoning",)
"""Experts whose answers have their arithmetic computed by the harness (:mod:`engine.slots.inline_arithmetic`)."""
JUDGED = ("prose", "plan", "table")
"""Deliverables whose checks are weak enough that a judge may break a tie between passing candidates."""


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


def generation_settings(scope: ExpertScope, settings: Settings) -> tuple[int, float]:
    """(max_tokens, temperature) for an expert: a value the user set explicitly wins over the expert's default."""
    max_tokens = settings.max_tokens
    if "max_tokens" not in settings.explicit and scope.generation.max_tokens is not None:
        max_tokens = scope.generation.max_tokens
    temperature = settings.temperature
    if "temperature" not in settings.explicit and scope.generation.temperature is not None:
        temperature = scope.generation.temperature
    return max_tokens, temperature


# --- candidates --------------------------------------------------------------------------------------------------


class _DrawFailed(Exception):
    """The backend failed one draw (its message, without the node: the node names itself)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _loops(draw: _Draw) -> bool:
    """Whether a candidate's text is degenerate (the repetition check failed)."""
    return any(c.name == "prose.repetition" and not c.passed for c in draw.checks)


@dataclass
class _Draw:
    """One candidate: what was asked, what came back, and how it scored."""

    record: CandidateRecord
    result: SlotResult
    checks: list[CheckResult]
    signals: dict[str, float]
    gen: Generation

    @property
    def passes(self) -> bool:
        return all(c.passed for c in self.checks if c.severity == "hard")


def run_slot(
    job: SlotJob,
    backend: ExpertBackend,
    settings: Settings,
    emit: ProgressSink,
    resolver: AssistResolver | None = None,
) -> SlotOutcome:
    """Run one slot to a result (or a failure). Never raises for backend errors: they become the outcome.

    Placeholders stay in the text through checks and selection (the parser ignores them); the kept answer then
    goes through assist resolution (``resolver``, default: one for the run's settings and mode).
    """
    started = utcnow()
    slot_id = job.spec.id
    emit({"event": "slot_started", "slot": slot_id, "title": job.spec.title, "expert": job.expert})
    contract = job.slot_contract
    ledger: list[LedgerEntry] = []
    notices: list[Notice] = []
    draws: list[_Draw] = []
    limits = SandboxLimits(timeout_s=settings.check_timeout_s)
    references = tuple(result.body_text() for _, result in job.references.values())
    retries_left = settings.max_outline_retries
    samples_left = settings.best_of - 1
    first_seconds = 0.0
    slot_t0 = time.perf_counter()
    # A plan's slot starts its answer with its own title: left to write the first title, a small model copied a
    # referenced slot's title and then its text, word for word (docs/decisions.md)
    first_title = None if job.whole_task or copies_task(job.spec.title, job.task) else job.spec.title
    reported_cuts: set[str] = set()
    calculation: Calculation | None = None  # the math slot's result, computed by a program: checks every candidate

    def draw(
        origin: str, owner: ExpertBackend, model: str, temperature: float, feedback: str | None, plain: bool = False
    ) -> _Draw:
        prompt = plain_prompt(job, settings.reference_max_chars) if plain else fit_prompt(job, settings, feedback)
        for cut in prompt.cuts:
            if cut not in reported_cuts:
                reported_cuts.add(cut)
                ledger.append(LedgerEntry(agent="harness", action="prompt_cut", slot_id=slot_id, outputs_summary=cut))
        attempt = len(draws) + 1
        grammar = (
            contract.grammar(first_title=first_title)
            if settings.use_grammar and owner.supports_grammar() and not plain
            else None
        )
        meta = {
            "slot_id": slot_id,
            "slot_title": job.spec.title,
            "expert": job.expert,
            "model": model,
            "attempt": attempt,
            "candidate": f"c{attempt}",
            "origin": origin,
            "prompt": "plain" if plain else "contract",
        }
        t0 = time.perf_counter()
        watch = LoopWatch()
        request = GenerationRequest(
            messages=prompt.messages,
            max_tokens=prompt.max_tokens,
            temperature=temperature,
            grammar=grammar,
            seed=attempt,
            # prose loops less under llama.cpp's repeat penalty; code repeats its own tokens by nature
            repeat_penalty=1.0 if contract.code_first else settings.repeat_penalty,
            slot_id=slot_id,
            slot_title=job.spec.title,
            attempt=attempt,
            cancel=job.cancel,
            halt=watch.halt,
            on_token=watch.feed,
        )
        try:
            gen = generate_streamed(owner, request, job.stream, meta)
        except GenerationStopped:
            raise
        except BackendError as exc:
            raise _DrawFailed(exc.message) from exc
        except CoeError as exc:
            raise _DrawFailed(str(exc)) from exc
        except Exception as exc:  # a backend's own error type is unknown: this draw failed
            raise _DrawFailed(f"{type(exc).__name__}: {exc}") from exc
        seconds = time.perf_counter() - t0
        if plain:  # one part by design, a plan's too
            result = plain_result(
                gen.text, contract, job.spec.title, slot_id=slot_id, expert=job.expert, attempts=attempt
            )
        else:
            result = parse_output(
                gen.text,
                slot_id=slot_id,
                expert=job.expert,
                attempts=attempt,
                min_items=contract.min_items,
                max_items=contract.max_items,
            )
        truncated = gen.finish_reason == "length"
        if truncated and not result.compliant:
            cut = f"the answer was cut off at the {prompt.max_tokens}-token limit; keep every section short"
            result = result.model_copy(update={"problems": [cut, *result.problems]})
        checks, signals = check_answer(
            result,
            CheckContext(job.task, contract, references, truncated=truncated, limits=limits, persona=job.persona),
        )
        halted = gen.finish_reason == "halted"
        if halted:  # stopped for looping: degenerate, whatever is left of the loop in the parsed text
            loop = CheckResult(name="prose.repetition", passed=False, detail=f"stopped while looping: {watch.reason}")
            checks = [c for c in checks if c.name != loop.name] + [loop]
        if calculation is not None and calculation.values:
            checks.append(result_check(result.body_text(), calculation))
        record = CandidateRecord(
            id=f"c{attempt}",
            origin=origin,
            prompt="plain" if plain else "contract",
            model=model,
            temperature=temperature,
            seed=attempt,
            compliant=result.compliant,
            problems=result.problems[:8],
            checks=checks,
            score=score(checks),
            completion_tokens=gen.completion_tokens,
            seconds=round(seconds, 3),
        )
        failed = [c for c in checks if c.severity == "hard" and not c.passed]
        ledger.append(
            LedgerEntry(
                agent=job.expert if origin != "escalated" else model,
                action="generate" if attempt == 1 else f"generate_{origin}",
                slot_id=slot_id,
                inputs_summary=(
                    f"{job.spec.title}; {record.id} ({origin}, {record.prompt} prompt, t={temperature:g}); "
                    f"{sum(len(m.content) for m in prompt.messages)} chars"
                ),
                outputs_summary=(
                    f"{len(gen.text)} chars"
                    + (f" (stopped at {gen.completion_tokens} tokens: it looped)" if halted else "")
                    + f", {len(result.sections)} sections, "
                    + ("compliant" if result.compliant else "non-compliant: " + "; ".join(result.problems[:3]))
                    + f"; score {record.score:g}"
                    + (f"; failed {', '.join(c.name for c in failed)}" if failed else "; checks passed")
                )[:500],
                duration_ms=int(seconds * 1000),
                prompt_tokens=gen.prompt_tokens,
                completion_tokens=gen.completion_tokens,
            )
        )
        made = _Draw(record, result, checks, signals, gen)
        draws.append(made)
        return made

    own_model = job.model
    two_prompts = job.whole_task
    plain_first = two_prompts and contract.function is not None

    def plain_turn() -> bool:  # the next draw's prompt
        if not two_prompts:
            return False
        if contract.code_first:  # code and data: the two kinds alternate, from the first one
            return (len(draws) % 2 == 0) == plain_first
        # Prose, plans, tables: the plain prompt is the way out of a loop. Only the contract's prompt carries the
        # uncertainty protocol, so a plain answer is drawn once a contract answer loops, then the kinds alternate.
        looped = next((i for i, d in enumerate(draws) if d.record.prompt == "contract" and _loops(d)), None)
        return looped is not None and (len(draws) - looped) % 2 == 1

    def temperature_of(plain: bool) -> float:  # the next draw's
        if not any((d.record.prompt == "plain") == plain for d in draws):  # a prompt's first draw: no sampling
            return 0.0 if plain else job.temperature  # the plain one is the bare model's own answer: greedy
        sampled = len(draws) - 2 if two_prompts else len(draws) - 1
        return max(job.temperature, SAMPLE_TEMPERATURES[sampled % len(SAMPLE_TEMPERATURES)])

    try:
        if settings.calculate and job.whole_task and calculable(job.task, job.expert):  # a plan's part: maybe no number
            calculation = _calculation(job, backend, limits, ledger, emit)
            slot_t0 = time.perf_counter()  # the candidates' time bound counts the candidates' time only
        plain = plain_turn()
        first = draw("first", backend, own_model, temperature_of(plain), None, plain=plain)
        first_seconds = first.record.seconds
        time_factor = settings.candidate_time_factor
        if settings.best_of > 1 and contract.language == "python" and extract_examples(job.task).count:
            # The task's own examples run: a candidate that passes them is found by drawing more, not by a judge
            samples_left += settings.best_of * (RUNNABLE_EXAMPLES_DRAWS - 1)
            time_factor *= RUNNABLE_EXAMPLES_DRAWS
        while not any(d.passes for d in draws):
            leader = max(draws, key=lambda d: d.record.score)
            if leader.result.compliant and samples_left <= 0:
                break
            if not leader.result.compliant and retries_left <= 0:
                break
            spent = time.perf_counter() - slot_t0
            if draws[1:] and spent > time_factor * max(first_seconds, 1.0):
                break
            origin = "sample" if leader.result.compliant else "retry"
            if origin == "sample":
                samples_left -= 1
            else:
                retries_left -= 1
            plain = plain_turn()
            emit(_retry_event(slot_id, draws))
            draw(origin, backend, own_model, temperature_of(plain), None if plain else _feedback(leader), plain=plain)
        leader = max(draws, key=lambda d: d.record.score)
        if not leader.passes and leader.result.compliant and job.escalation is not None and settings.escalate:
            name, bigger = job.escalation
            emit(_retry_event(slot_id, draws))
            draw("escalated", bigger, name, 0.0, _feedback(leader))
    except GenerationStopped as exc:
        if exc.reason == "evicted":
            emit({"event": "slot_evicted", "slot": slot_id, "attempt": len(draws) + 1, "error": str(exc)})
        ledger.append(LedgerEntry(agent="harness", action=exc.reason, slot_id=slot_id, outputs_summary=str(exc)[:500]))
        return SlotOutcome(
            slot_id, job.expert, None, str(exc), len(draws) + 1, started, utcnow(), ledger, notices, requeue=exc.reason
        )
    except _DrawFailed as exc:
        if not draws:
            return _failed(job, exc.message, 1, started, ledger, emit)
        ledger.append(  # a later draw failed: the candidates drawn so far still compete
            LedgerEntry(agent=job.expert, action="generate_failed", slot_id=slot_id, outputs_summary=exc.message[:500])
        )
    chosen, judged = _choose(draws, contract, job, backend)
    quality = SlotQuality(
        deliverable=contract.deliverable,
        language=contract.language,
        checks=chosen.checks,
        signals=chosen.signals,
        candidates=[d.record.model_copy(update={"chosen": d is chosen}) for d in draws],
        chosen=chosen.record.id,
        judged=judged,
        tokens_generated=sum(d.gen.completion_tokens for d in draws)
        + (calculation.completion_tokens if calculation is not None else 0),
        tokens_kept=chosen.gen.completion_tokens,
    )
    result = chosen.result.model_copy(update={"attempts": len(draws), "quality": quality})
    if _loops(chosen):  # every candidate looped: the person gets the kept one's words once, with its caveat
        result = without_loops(result, job.task, ledger)
    if contract.code_first:  # the note's unfinished end is a soft failure, never retried: it goes
        result = without_unfinished_end(result, ledger)
    result = without_repeated_sections(result, job.task, references, ledger, job.others)
    if job.expert in ARITHMETIC_EXPERTS:
        result = computed(result, ledger)
    if len(draws) > 1:  # the choice goes to the ledger whenever there was one
        ledger.append(
            LedgerEntry(
                agent="harness",
                action="select",
                slot_id=slot_id,
                inputs_summary=", ".join(f"{d.record.id} {d.record.score:g}" for d in draws),
                outputs_summary=(
                    f"kept {chosen.record.id} ({chosen.record.origin}) verbatim"
                    + (" after a judge broke a tie" if judged else "")
                ),
            )
        )
    if not result.compliant:
        notices.append(
            Notice(
                level="warning",
                source="outline_enforcer",
                slot_id=slot_id,
                message=(
                    f"accepted without the required structure after {len(draws)} attempts "
                    f"({'; '.join(result.problems)}); best-effort parse used"
                ),
            )
        )
    failed = [c for c in quality.failed_checks if c.name != "contract.structure"]
    if failed:
        listed = "; ".join(f"{c.name}: {c.detail}" if c.detail else c.name for c in failed[:3])
        notices.append(
            Notice(
                level="warning",
                source="checks",
                slot_id=slot_id,
                message=f"kept answer ({chosen.record.id} of {len(draws)}) fails its checks: {listed}",
            )
        )
    resolver = resolver or AssistResolver(
        settings,
        job.mode,
        emit=emit,
        cancel=job.cancel,
        facts=job.facts,
        lessons=job.lessons,
    )
    resolution = resolver.resolve(result, job.spec.title)
    ledger.extend(resolution.ledger)
    notices.extend(resolution.notices)
    result = resolution.result
    emit({"event": "slot_done", "slot": slot_id, "attempts": len(draws), "compliant": result.compliant})
    return SlotOutcome(
        slot_id, job.expert, result, None, len(draws), started, utcnow(), ledger, notices, resolution.records
    )


def _calculation(
    job: SlotJob, backend: ExpertBackend, limits: SandboxLimits, ledger: list[LedgerEntry], emit: ProgressSink
) -> Calculation | None:
    """The task's result, computed by a program (None: the backend failed; the slot goes on without the check).

    The program is written by the bigger model when one is installed (the code model escalation would use), else
    by the slot's own; the ledger says what it printed, or why it gives no check.
    """
    model, owner = job.escalation if job.escalation is not None else (job.model, backend)
    t0 = time.perf_counter()
    calc: Calculation | None = None
    try:
        calc = calculate(job.task, owner, model, limits, slot_id=job.spec.id, cancel=job.cancel)
        note = calc.note
    except GenerationStopped:
        raise
    except Exception as exc:  # a backend's own error type is unknown: the slot goes on without the check
        note = f"no program: {type(exc).__name__}: {exc}"
    checks = calc is not None and bool(calc.values)
    emit({"event": "slot_calculated", "slot": job.spec.id, "note": note, "check": checks})
    ledger.append(
        LedgerEntry(
            agent=model,
            action="calculate",
            slot_id=job.spec.id,
            inputs_summary="a Python program that prints the task's result, run in the sandbox",
            outputs_summary=note[:500],
            duration_ms=int((time.perf_counter() - t0) * 1000),
            prompt_tokens=calc.prompt_tokens if calc is not None else 0,
            completion_tokens=calc.completion_tokens if calc is not None else 0,
        )
    )
    return calc


def _problems(draw: _Draw) -> list[str]:
    failed = [
        f"{c.name}: {c.detail}" if c.detail else c.name for c in draw.checks if c.severity == "hard" and not c.passed
    ]
    return [*draw.result.problems, *[f for f in failed if not f.startswith("contract.structure")]]


def _retry_event(slot_id: str, draws: list[_Draw]) -> dict[str, object]:
    """The progress event of one more candidate: what was wrong with the one drawn last.

    Not the leader's problems: while the leader stays the same, a person watching read the same problems at every
    attempt and took the candidates for copies of each other.
    """
    last = draws[-1]
    return {
        "event": "slot_retry",
        "slot": slot_id,
        "attempt": len(draws) + 1,
        "candidate": last.record.id,
        "problems": _problems(last),
    }


def _feedback(draw: _Draw) -> str:
    """What was wrong with a candidate, for the next prompt (the problems, not the candidate's text)."""
    parts = []
    if draw.result.problems:
        parts.append(retry_feedback(draw.result))
    failed = [c for c in draw.checks if c.severity == "hard" and not c.passed and c.name != "contract.structure"]
    if failed:
        parts.append("It failed these checks:\n" + "\n".join(f"- {c.name}: {c.detail}" for c in failed))
    return "\n\n".join(parts)


def _choose(draws: list[_Draw], contract: Contract, job: SlotJob, backend: ExpertBackend) -> tuple[_Draw, bool]:
    """The kept candidate: the best score; a tie among prose candidates may go to the judge; else the earliest.

    Only candidates that follow the output contract are judged: a tie among broken answers is no choice of content.
    """
    top_ids = {c.id for c in best([d.record for d in draws])}
    tied = [d for d in draws if d.record.id in top_ids]
    if len(tied) > 1 and contract.deliverable in JUDGED and all(d.result.compliant for d in tied):
        rubric = f"{job.spec.title}: {job.spec.description}"
        picked = judge([(d.record.id, d.result.raw) for d in tied], rubric, backend, slot_id=f"{job.spec.id}@judge")
        if picked is not None:
            return next(d for d in tied if d.record.id == picked), True
    return tied[0], False


def _failed(
    job: SlotJob, error: str, attempt: int, started: datetime, ledger: list[LedgerEntry], emit: ProgressSink
) -> SlotOutcome:
    emit({"event": "slot_failed", "slot": job.spec.id, "attempt": attempt, "error": error})
    ledger.append(
        LedgerEntry(agent=job.expert, action="generate_failed", slot_id=job.spec.id, outputs_summary=error[:500])
    )
    return SlotOutcome(job.spec.id, job.expert, None, error, attempt, started, utcnow(), ledger, [])
