"""The work of one slot, as named stages: prepare, calculate, draw, check, choose, vote, tidy, resolve assists, record.

Runs in a scheduler worker thread and reports everything through its :class:`SlotOutcome`: the node that collects
it turns that into Passport updates, so nothing here touches graph state. The draws follow a pure policy
(:mod:`engine.slots.draw_policy`); each is a whole prompt (:mod:`engine.slots.prompt`), watched as it is written
(:mod:`engine.slots.loop_watch`: one that loops is stopped there) and checked (:mod:`engine.slots.checks`). The best
candidate is kept verbatim (:mod:`engine.slots.selection`: selection, never synthesis), cut of what it should not
hold without a word reworded (:mod:`engine.slots.kept_answer`), and its assists resolved
(:mod:`engine.assists.resolver`). Why each rule is as it is: ``docs/decisions.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from engine.assists.resolver import AssistResolver, Resolution
from engine.slots.checks import (
    CheckContext,
    check_answer,
    copies_task,
    extract_examples,
    module_name,
    python_modules,
)
from engine.slots.checks.text import PYTHON_TAGS
from engine.slots.contracts import Contract
from engine.slots.draw_policy import Drawn, DrawPolicy, NextDraw
from engine.slots.job import SlotJob
from engine.slots.kept_answer import (
    computed,
    imported,
    without_loops,
    without_repeated_sections,
    without_unfinished_end,
    without_unprinted_output,
    without_written_sources,
)
from engine.slots.loop_watch import LoopWatch, cut_counting
from engine.slots.program_of_thought import (
    RECALCULATE_TEMPERATURE,
    Calculation,
    Verdict,
    answer_program,
    asks_a_size,
    asks_a_value,
    calculable,
    calculate,
    concludes_check,
    is_money,
    result_check,
    verdict,
    with_working,
)
from engine.slots.prompt import Prompt, fit_prompt, plain_prompt, plain_result
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

ARITHMETIC_EXPERTS = ("math_reasoning",)
"""Experts whose answers have their arithmetic computed by the harness (:mod:`engine.slots.inline_arithmetic`)."""
COMPUTED_BEST_OF = 2
"""Candidates in all for a slot whose result a program computed: the first, and one naming the value."""
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
    emit({"event": "slot_started", "slot": job.spec.id, "title": job.spec.title, "expert": job.expert})
    slot = _prepare(job, settings)
    try:
        slot.calculation = _calculation(slot, backend, emit)
        _draw_candidates(slot, backend, emit)
    except GenerationStopped as exc:
        return _stopped(slot, exc, started, emit)
    except _DrawFailed as exc:  # the first draw failed: there is nothing to choose from
        return _failed(job, exc.message, 1, started, slot.ledger, emit)
    chosen, judged = _choose(slot.draws, slot.contract, job, backend)
    try:
        slot.verdict = _vote(slot, chosen, backend, emit)
    except GenerationStopped as exc:
        return _stopped(slot, exc, started, emit)
    kept = _stating(slot, chosen)
    restated, chosen = kept is not chosen, kept
    quality = _quality(slot, chosen, judged)
    result = _tidy(chosen.result.model_copy(update={"attempts": len(slot.draws), "quality": quality}), slot, chosen)
    _record_choice(slot, chosen, judged, restated)
    notices = _caveats(result, result.quality or quality, slot, chosen)  # the checks of the text delivered
    resolution = (resolver or _resolver(job, settings, emit)).resolve(result, job.spec.title)
    return _done(slot, resolution, notices, started, emit)


# --- prepare -----------------------------------------------------------------------------------------------------


def _prepare(job: SlotJob, settings: Settings) -> _Slot:
    """What every draw of the slot shares: its contract, the sandbox's limits, the referenced slots' text."""
    # A plan's slot starts its answer with its own title: left to write the first title, a small model copied a
    # referenced slot's title and then its text, word for word (docs/decisions.md)
    first_title = None if job.whole_task or copies_task(job.spec.title, job.task) else job.spec.title
    return _Slot(
        job=job,
        settings=settings,
        contract=job.slot_contract,
        limits=SandboxLimits(timeout_s=settings.check_timeout_s),
        references=tuple(result.body_text() for _, result in job.references.values()),
        modules=python_modules(
            {**job.beside, **{ref: result for ref, (_, result) in job.references.items()}}, job.task
        ),
        first_title=first_title,
    )


def _calculation(slot: _Slot, backend: ExpertBackend, emit: ProgressSink) -> Calculation | None:
    """The task's result, computed by a program, when the slot is the whole task and asks for one (else None).

    None as well when the backend failed: the slot goes on without the check. The program is written by the bigger
    model when one is installed (the code model escalation would use), else by the slot's own; the ledger says what
    it printed, or why it gives no check. A first program that does not run (none came back, it looped, it
    failed), or ran and left out part of a quantity the task gives in two units ("1 hour 40 minutes":
    :func:`engine.units.split_compounds`), grew by a percentage's number (:func:`engine.units.percent_unscaled`) or
    took the other kind of spread than the task names (:func:`engine.spread.wrong_spread`), is drawn once more,
    sampled: a slot without a program's value has no check on its number at all.
    """
    job = slot.job
    asked = calculable(job.task, job.expert, writes_code=slot.contract.code_first)
    if not (slot.settings.calculate and job.whole_task and asked):  # a part: maybe no number
        return None
    calc = _program_run(slot, backend, emit, 0.0)
    if calc is not None and not calc.values and (not calc.output or calc.error):  # none ran, or ran amiss: one more
        why = f"the first program {calc.error}" if calc.output else "the first gave no program that ran"
        again = _program_run(slot, backend, emit, RECALCULATE_TEMPERATURE, why=why)
        return again if again is not None else calc
    return calc


def _vote(slot: _Slot, chosen: _Draw, backend: ExpertBackend, emit: ProgressSink) -> Verdict | None:
    """The vote on the kept answer and the program (None without a computed result).

    More programs, sampled at :data:`RECALCULATE_TEMPERATURE`, are drawn only while the values disagree, or to
    confirm a value the kept answer was told (two at most: :func:`~engine.slots.program_of_thought.verdict`).
    """
    calc = slot.calculation
    if calc is None or not calc.values:
        return None
    early = list(slot.recalculations)  # drawn for a candidate's vote already (:func:`_second_opinion`): they count

    def again() -> Calculation | None:
        return early.pop(0) if early else _recalculated(slot, backend, emit)

    text = chosen.result.body_text()
    own = answer_program(text, slot.job.task, slot.limits)  # the answer's own program votes with it
    return verdict(text, calc, again, told=chosen.told, own=own)


def _recalculated(
    slot: _Slot, backend: ExpertBackend, emit: ProgressSink, why: str = "the values so far disagree"
) -> Calculation | None:
    """One more program for the vote, sampled, numbered after the ones drawn before, and kept with them."""
    drawn = _program_run(slot, backend, emit, RECALCULATE_TEMPERATURE, len(slot.recalculations) + 1, why=why)
    slot.recalculations.append(drawn)
    return drawn


def _second_opinion(slot: _Slot, draw: _Draw, backend: ExpertBackend, emit: ProgressSink) -> None:
    """A second program votes on ``draw`` before an answer is drawn told the first program's value.

    Only for a candidate not told the value whose one failed hard check is ``math.result``, once a slot. When the
    second program prints the candidate's value, the answer and a program outvote the first program (the vote's
    ``answer``): the candidate passes and no answer is drawn told a value two voices reject. On GSM8K train rows
    40-49 four of ten runs drew that told answer and kept the first one anyway, by the vote that came after it
    (docs/decisions/answers.md). Otherwise the program is kept for the vote on the answer finally kept.
    """
    failed = [c.name for c in draw.checks if c.severity == "hard" and not c.passed]
    calc = slot.calculation
    if draw.told or failed != ["math.result"] or calc is None or not calc.values or slot.recalculations:
        return
    second = _recalculated(slot, backend, emit, why="the answer does not state its value")
    if second is None or not second.values or not result_check(draw.result.body_text(), second).passed:
        return
    sided = CheckResult(
        name="math.result",
        passed=True,
        detail=f"the answer states what a second program printed ({second.result[:60]!r}), against the "
        f"first program's {calc.result[:60]!r}",
    )
    draw.checks = [sided if c.name == "math.result" else c for c in draw.checks]
    draw.record = draw.record.model_copy(update={"checks": draw.checks, "score": score(draw.checks)})


def _stating(slot: _Slot, chosen: _Draw) -> _Draw:
    """The kept candidate once two programs outvoted ``chosen``.

    An earlier candidate that was not told the value and states the programs' result is kept instead (the vote
    then sides with it); else ``chosen`` stays.
    """
    vote = slot.verdict
    if vote is None or vote.agreement != "computed":
        return chosen
    for draw in slot.draws:
        if draw is not chosen and not draw.told and result_check(draw.result.body_text(), vote.shown).passed:
            slot.verdict = Verdict("answer", vote.shown, vote.other)
            return draw
    return chosen


def _program_run(
    slot: _Slot,
    backend: ExpertBackend,
    emit: ProgressSink,
    temperature: float,
    draw: int = 0,
    why: str = "the values so far disagree",
) -> Calculation | None:
    """One program for the task, run in the sandbox and ledgered (None when the backend failed).

    ``draw`` 0 at a temperature is the first program drawn again (``why`` it was); 1 and 2 are the vote's.
    """
    job = slot.job
    model, owner = job.escalation if job.escalation is not None else (job.model, backend)
    t0 = time.perf_counter()
    calc: Calculation | None = None
    try:
        calc = calculate(
            job.task,
            owner,
            model,
            slot.limits,
            slot_id=job.spec.id,
            cancel=job.cancel,
            temperature=temperature,
            draw=draw,
        )
        note = calc.note
    except GenerationStopped:
        raise
    except Exception as exc:  # a backend's own error type is unknown: the slot goes on without the check
        note = f"no program: {type(exc).__name__}: {exc}"
    checks = calc is not None and bool(calc.values)
    emit({"event": "slot_calculated", "slot": job.spec.id, "note": note, "check": checks, "again": bool(temperature)})
    slot.ledger.append(
        LedgerEntry(
            agent=model,
            action="calculate" if not temperature else "recalculate",
            slot_id=job.spec.id,
            inputs_summary="a Python program that prints the task's result, run in the sandbox"
            + (f" ({f'number {draw + 1}' if draw else 'again'}, at t={temperature:g}: {why})" if temperature else ""),
            outputs_summary=note[:500],
            duration_ms=int((time.perf_counter() - t0) * 1000),
            prompt_tokens=calc.prompt_tokens if calc is not None else 0,
            completion_tokens=calc.completion_tokens if calc is not None else 0,
        )
    )
    return calc


def _policy(slot: _Slot) -> DrawPolicy:
    """The slot's draw policy, from its job, its contract and the run's settings."""
    job, settings, contract = slot.job, slot.settings, slot.contract
    runnable = settings.best_of > 1 and contract.language == "python" and bool(extract_examples(job.task).count)
    # a computed result is shown with the answer (with_working), so a disagreeing answer gets one more draw with
    # the value named, not four and a bigger model's (128 s against 7.6 s: docs/decisions/answers.md)
    computed = slot.calculation is not None and bool(slot.calculation.values)
    # a task whose result a program computed: the bare prompt's worked answer first, then the contract's, told the
    # value (GSM8K and the held-out quantity questions: as often right or more, less time; docs/decisions/answers.md)
    worked = computed and job.whole_task
    return DrawPolicy(
        temperature=job.temperature,
        two_prompts=job.whole_task,
        plain_first=job.whole_task and (contract.function is not None or worked),
        alternate=contract.code_first or worked,
        best_of=min(settings.best_of, COMPUTED_BEST_OF) if computed else settings.best_of,
        outline_retries=settings.max_outline_retries,
        runnable_examples=runnable,
        time_factor=settings.candidate_time_factor,
        escalation=job.escalation is not None and settings.escalate and not computed,
    )


# --- draw and check ----------------------------------------------------------------------------------------------


class _DrawFailed(Exception):
    """The backend failed one draw (its message, without the node: the node names itself)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Draw:
    """One candidate: what was asked, what came back, and how it scored."""

    record: CandidateRecord
    result: SlotResult
    checks: list[CheckResult]
    signals: dict[str, float]
    gen: Generation
    told: bool = False
    """Its prompt named the computed value (an earlier answer did not state it): its agreement is no vote."""

    @property
    def passes(self) -> bool:
        return all(c.passed for c in self.checks if c.severity == "hard")

    @property
    def seen(self) -> Drawn:
        """What the draw policy reads of this candidate."""
        record = self.record
        return Drawn(
            record.prompt, record.origin, record.score, self.result.compliant, self.passes, _loops(self), record.seconds
        )


def _fails(draw: _Draw, check: str) -> bool:
    """Whether a candidate failed the check named ``check``."""
    return any(c.name == check and not c.passed for c in draw.checks)


def _loops(draw: _Draw) -> bool:
    """Whether a candidate's text is degenerate (the repetition check failed)."""
    return _fails(draw, "prose.repetition")


def _draw_candidates(slot: _Slot, backend: ExpertBackend, emit: ProgressSink) -> None:
    """Draw as the policy says until it stops; the time it bounds counts the candidates' time only.

    A later draw that fails ends the drawing (recorded) and the candidates drawn so far still compete; a failed
    first draw raises :class:`_DrawFailed`.
    """
    job, policy = slot.job, _policy(slot)
    t0 = time.perf_counter()
    while (plan := policy.next([d.seen for d in slot.draws], time.perf_counter() - t0)) is not None:
        if slot.draws:
            emit(_retry_event(job.spec.id, slot.draws))
        source = None if plan.feedback_from is None else slot.draws[plan.feedback_from]
        feedback = None if source is None else _feedback(source)
        told = source is not None and _fails(source, "math.result")  # its feedback names the computed value
        bigger = job.escalation if plan.model == "escalation" else None
        model, owner = bigger if bigger is not None else (job.model, backend)
        try:
            made = slot.draw(plan, owner, model, feedback, told=told)
        except _DrawFailed as exc:
            if not slot.draws:
                raise
            slot.ledger.append(
                LedgerEntry(
                    agent=job.expert, action="generate_failed", slot_id=job.spec.id, outputs_summary=exc.message[:500]
                )
            )
            return
        _second_opinion(slot, made, backend, emit)


@dataclass
class _Slot:
    """A slot's run in progress: what its draws share, and the candidates and ledger entries so far."""

    job: SlotJob
    settings: Settings
    contract: Contract
    limits: SandboxLimits
    references: tuple[str, ...]
    """The referenced slots' text (an answer that copies it fails its own-work check)."""
    modules: dict[str, str]
    """The referenced code slots' Python modules by the name each is delivered under (this slot's code may import
    them)."""
    first_title: str | None
    """The title the grammar writes first (a plan's slot answers its own part), None: the model's own."""
    calculation: Calculation | None = None
    """The task's result computed by a program: every candidate is checked against it."""
    verdict: Verdict | None = None
    """The vote on the kept answer and the programs (a second one drawn when they disagree)."""
    recalculations: list[Calculation | None] = field(default_factory=list)
    """The programs drawn for the vote, in order: a second when a candidate and the first disagree
    (:func:`_second_opinion`), more when the kept answer's vote needs them."""
    ledger: list[LedgerEntry] = field(default_factory=list)
    draws: list[_Draw] = field(default_factory=list)
    reported_cuts: set[str] = field(default_factory=set)

    def draw(
        self, plan: NextDraw, owner: ExpertBackend, model: str, feedback: str | None, *, told: bool = False
    ) -> _Draw:
        """Draw one candidate from ``owner`` as ``plan`` says, check it, and record it.

        ``told``: the feedback names the computed value (the candidate's agreement with it is no vote).
        """
        job, attempt, plain = self.job, len(self.draws) + 1, plan.prompt == "plain"
        prompt = (
            plain_prompt(job, self.settings.reference_max_chars) if plain else fit_prompt(job, self.settings, feedback)
        )
        self._report_cuts(prompt)
        watch = LoopWatch()
        request = self._request(prompt, plan, owner, attempt, watch)
        t0 = time.perf_counter()
        gen = self._generate(owner, request, plan, model, attempt)
        seconds = time.perf_counter() - t0
        if gen.finish_reason == "halted" and watch.counting is not None and (cut := cut_counting(gen.text)):
            gen = replace(gen, text=cut[0])  # the model's own cases up to its counting run, the block closed
        result = self._parse(gen, plain, attempt, prompt.max_tokens)
        if self.corrects_arithmetic:  # before the checks: a corrected step's result is what the answer states
            result = computed(result, self.ledger, candidate=f"c{attempt}")
        if self.contract.deliverable == "code" and (self.contract.language or "").lower() in PYTHON_TAGS:
            result = imported(result, self.ledger, candidate=f"c{attempt}")  # before the checks, as computed
        said = (*job.feedback, *([feedback] if feedback else []))
        checks, signals = self._check(result, gen, watch, said, bounded=request.grammar is not None)
        record = CandidateRecord(
            id=f"c{attempt}",
            origin=plan.origin,
            prompt=plan.prompt,
            model=model,
            temperature=plan.temperature,
            seed=attempt,
            compliant=result.compliant,
            problems=result.problems[:8],
            checks=checks,
            score=score(checks),
            completion_tokens=gen.completion_tokens,
            seconds=round(seconds, 3),
        )
        self.ledger.append(_draw_entry(job, record, prompt, gen, result, seconds))
        made = _Draw(record, result, checks, signals, gen, told)
        self.draws.append(made)
        return made

    @property
    def corrects_arithmetic(self) -> bool:
        r"""Whether the harness computes the answer's arithmetic (:mod:`engine.slots.inline_arithmetic`).

        A math expert's, any whose task's result a program computes (a finance answer's
        ``\frac{25000}{1.47746} \approx 17039.13``, numeric_heldout2), and any part of a task whose figures are
        computed (multipart_set3_first: a server-room memo's ``14 \times 350 \times 720 = 70,560``).
        """
        return self.job.expert in ARITHMETIC_EXPERTS or self.calculation is not None or self.job.figures_task

    def _report_cuts(self, prompt: Prompt) -> None:
        """What had to be cut for the prompt to fit, each cut once in the ledger."""
        for cut in prompt.cuts:
            if cut not in self.reported_cuts:
                self.reported_cuts.add(cut)
                self.ledger.append(
                    LedgerEntry(agent="harness", action="prompt_cut", slot_id=self.job.spec.id, outputs_summary=cut)
                )

    def _request(
        self, prompt: Prompt, plan: NextDraw, owner: ExpertBackend, attempt: int, watch: LoopWatch
    ) -> GenerationRequest:
        """The request of one draw: a grammar for the contract's prompt, a loop watch on every token."""
        job, settings, contract = self.job, self.settings, self.contract
        grammar_on = settings.use_grammar and owner.supports_grammar() and plan.prompt != "plain"
        return GenerationRequest(
            messages=prompt.messages,
            shared_prefix=prompt.shared,
            max_tokens=prompt.max_tokens,
            temperature=plan.temperature,
            grammar=contract.grammar(first_title=self.first_title) if grammar_on else None,
            seed=attempt,
            # prose loops less under llama.cpp's repeat penalty; code repeats its own tokens by nature
            repeat_penalty=1.0 if contract.code_first else settings.repeat_penalty,
            slot_id=job.spec.id,
            slot_title=job.spec.title,
            attempt=attempt,
            cancel=job.cancel,
            halt=watch.halt,
            on_token=watch.feed,
        )

    def _generate(
        self, owner: ExpertBackend, request: GenerationRequest, plan: NextDraw, model: str, attempt: int
    ) -> Generation:
        """The backend's answer, streamed to the node's listeners; any failure but a stop is :class:`_DrawFailed`."""
        job = self.job
        meta = {
            "slot_id": job.spec.id,
            "slot_title": job.spec.title,
            "expert": job.expert,
            "model": model,
            "attempt": attempt,
            "candidate": f"c{attempt}",
            "origin": plan.origin,
            "prompt": plan.prompt,
        }
        try:
            return generate_streamed(owner, request, job.stream, meta)
        except GenerationStopped:
            raise
        except BackendError as exc:
            raise _DrawFailed(exc.message) from exc
        except CoeError as exc:
            raise _DrawFailed(str(exc)) from exc
        except Exception as exc:  # a backend's own error type is unknown: this draw failed
            raise _DrawFailed(f"{type(exc).__name__}: {exc}") from exc

    def _parse(self, gen: Generation, plain: bool, attempt: int, max_tokens: int) -> SlotResult:
        """The answer as a slot result (a plain one is one part by design, a plan's too)."""
        job, contract = self.job, self.contract
        if plain:
            result = plain_result(
                gen.text, contract, job.spec.title, slot_id=job.spec.id, expert=job.expert, attempts=attempt
            )
        else:
            result = parse_output(
                gen.text,
                slot_id=job.spec.id,
                expert=job.expert,
                attempts=attempt,
                min_items=contract.min_items,
                max_items=contract.max_items,
            )
        if gen.finish_reason == "length" and not result.compliant:
            cut = f"the answer was cut off at the {max_tokens}-token limit; keep every section short"
            result = result.model_copy(update={"problems": [cut, *result.problems]})
        return result

    def _check(
        self,
        result: SlotResult,
        gen: Generation,
        watch: LoopWatch,
        feedback: tuple[str, ...] = (),
        *,
        bounded: bool = False,
    ) -> tuple[list[CheckResult], dict[str, float]]:
        """The answer's checks and measured signals (an answer stopped for looping is degenerate).

        ``feedback``: what the draw's prompt told it about earlier answers (its wording must not come back);
        ``bounded``: it was written under the contract's grammar.
        """
        context = CheckContext(
            self.job.task,
            self.contract,
            self.references,
            truncated=gen.finish_reason == "length",
            limits=self.limits,
            persona=self.job.persona,
            modules=self.modules,
            module=module_name(self.job.spec.id),
            asked=self.job.spec.description,
            part_of_plan=bool(self.job.others),
            feedback=feedback,
            bounded=bounded,
        )
        checks, signals = check_answer(result, context)
        if gen.finish_reason == "halted" and watch.counting is not None:
            # cut where it began to count (_draw): what is left is checked as it is; a candidate that did not
            # count ranks above it
            detail = f"stopped counting on and cut there: {watch.reason}"
            checks.append(CheckResult(name="code.counting", passed=False, severity="soft", detail=detail))
        elif gen.finish_reason == "halted":  # degenerate, whatever is left of the loop in the parsed text
            loop = CheckResult(name="prose.repetition", passed=False, detail=f"stopped while looping: {watch.reason}")
            checks = [c for c in checks if c.name != loop.name] + [loop]
        if self.calculation is not None and self.calculation.values:
            checks.append(result_check(result.body_text(), self.calculation))
        elif self.calculation is not None and asks_a_value(self.job.task):  # no program's value to hold it to
            checks.append(concludes_check(result.body_text()))
        return checks, signals


def _draw_entry(
    job: SlotJob, record: CandidateRecord, prompt: Prompt, gen: Generation, result: SlotResult, seconds: float
) -> LedgerEntry:
    """The ledger's line for one candidate: how it was asked for, what came back, how it scored."""
    failed = [c for c in record.checks if c.severity == "hard" and not c.passed]
    halted = gen.finish_reason == "halted"
    origin = record.origin
    return LedgerEntry(
        agent=job.expert if origin != "escalated" else record.model,
        action="generate" if record.seed == 1 else f"generate_{origin}",
        slot_id=job.spec.id,
        inputs_summary=(
            f"{job.spec.title}; {record.id} ({origin}, {record.prompt} prompt, t={record.temperature:g}); "
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


# --- choose, tidy, record ----------------------------------------------------------------------------------------


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


def _quality(slot: _Slot, chosen: _Draw, judged: bool) -> SlotQuality:
    """The slot's confidence vector: every candidate, its checks, and the choice."""
    calculated = sum(c.completion_tokens for c in (slot.calculation, *slot.recalculations) if c is not None)
    checks = chosen.checks
    if slot.verdict is not None:  # the vote decides math.result: an answer a second program confirms passes
        checks = [c for c in checks if c.name != "math.result"] + [slot.verdict.check]
    return SlotQuality(
        deliverable=slot.contract.deliverable,
        language=slot.contract.language,
        checks=checks,
        signals=chosen.signals,
        candidates=[d.record.model_copy(update={"chosen": d is chosen}) for d in slot.draws],
        chosen=chosen.record.id,
        judged=judged,
        tokens_generated=sum(d.gen.completion_tokens for d in slot.draws) + calculated,
        tokens_kept=chosen.gen.completion_tokens,
    )


def _tidy(result: SlotResult, slot: _Slot, chosen: _Draw) -> SlotResult:
    """The kept answer cut of what it should not hold, in this order; nothing is reworded, each cut is ledgered."""
    job, ledger = slot.job, slot.ledger
    if _loops(chosen):  # every candidate looped: the person gets the kept one's words once, with its caveat
        result = without_loops(result, job.task, ledger)
    if slot.contract.code_first:  # the note's unfinished end is a soft failure, never retried: it goes
        result = without_unfinished_end(result, ledger)
    result = without_written_sources(result, ledger)  # before the resolver writes the real ones
    result = without_unprinted_output(result, job.task, slot.limits, ledger)  # a section left empty goes next
    result = without_repeated_sections(result, job.task, slot.references, ledger, job.others, job.spec.title)
    if slot.verdict is not None:  # last: the working is the harness's, not cut as the answer's own
        result = with_working(result, slot.verdict, ledger, money=is_money(job.task), size=asks_a_size(job.task))
    return result


def _record_choice(slot: _Slot, chosen: _Draw, judged: bool, restated: bool = False) -> None:
    """The choice goes to the ledger whenever there was one (``restated``: the programs' vote made it)."""
    if len(slot.draws) < 2:
        return
    slot.ledger.append(
        LedgerEntry(
            agent="harness",
            action="select",
            slot_id=slot.job.spec.id,
            inputs_summary=", ".join(f"{d.record.id} {d.record.score:g}" for d in slot.draws),
            outputs_summary=(
                f"kept {chosen.record.id} ({chosen.record.origin}) verbatim"
                + (" after a judge broke a tie" if judged and not restated else "")
                + (
                    ": it states the result two programs printed, which the best-scored candidate does not"
                    if restated
                    else ""
                )
            ),
        )
    )


def _caveats(result: SlotResult, quality: SlotQuality, slot: _Slot, chosen: _Draw) -> list[Notice]:
    """Warnings for a kept answer without the required structure, or one that fails its checks.

    Also for one whose task asks for a value that no program computed: its numbers are unchecked.
    """
    notices: list[Notice] = []
    slot_id, drawn = slot.job.spec.id, len(slot.draws)
    if not result.compliant:
        message = (
            f"accepted without the required structure after {drawn} attempts "
            f"({'; '.join(result.problems)}); best-effort parse used"
        )
        notices.append(Notice(level="warning", source="outline_enforcer", slot_id=slot_id, message=message))
    failed = [c for c in quality.failed_checks if c.name != "contract.structure"]
    if failed:
        listed = "; ".join(f"{c.name}: {c.detail}" if c.detail else c.name for c in failed[:3])
        message = f"kept answer ({chosen.record.id} of {drawn}) fails its checks: {listed}"
        notices.append(Notice(level="warning", source="checks", slot_id=slot_id, message=message))
    calc = slot.calculation
    if calc is not None and not calc.values and asks_a_value(slot.job.task):  # the task asked for a value
        # nh-dose-volume (numeric_heldout_rest): no program gave a value, and 2.2 mL (right: 5.5) went out unmarked
        message = (
            f"the result was not computed ({calc.note[:160]}): the answer's numbers are the model's own, unchecked"
        )
        notices.append(Notice(level="warning", source="calculate", slot_id=slot_id, message=message))
    return notices


def _resolver(job: SlotJob, settings: Settings, emit: ProgressSink) -> AssistResolver:
    """The assist resolver of the run's settings and mode (a lookup searches the person's facts first)."""
    return AssistResolver(
        settings,
        job.mode,
        emit=emit,
        cancel=job.cancel,
        facts=job.facts,
        lessons=job.lessons,
        figures=job.task_figures,
    )


def _done(
    slot: _Slot, resolution: Resolution, notices: list[Notice], started: datetime, emit: ProgressSink
) -> SlotOutcome:
    """The slot's outcome: the kept answer with its assists resolved, the ledger and the notices of its run."""
    slot.ledger.extend(resolution.ledger)
    notices.extend(resolution.notices)
    result, drawn = resolution.result, len(slot.draws)
    emit({"event": "slot_done", "slot": slot.job.spec.id, "attempts": drawn, "compliant": result.compliant})
    return SlotOutcome(
        slot.job.spec.id,
        slot.job.expert,
        result,
        None,
        drawn,
        started,
        utcnow(),
        slot.ledger,
        notices,
        resolution.records,
    )


def _stopped(slot: _Slot, exc: GenerationStopped, started: datetime, emit: ProgressSink) -> SlotOutcome:
    """The model pool stopped the slot: nothing of it is kept, and it is queued again."""
    slot_id, attempt = slot.job.spec.id, len(slot.draws) + 1
    if exc.reason == "evicted":
        emit({"event": "slot_evicted", "slot": slot_id, "attempt": attempt, "error": str(exc)})
    slot.ledger.append(LedgerEntry(agent="harness", action=exc.reason, slot_id=slot_id, outputs_summary=str(exc)[:500]))
    return SlotOutcome(
        slot_id, slot.job.expert, None, str(exc), attempt, started, utcnow(), slot.ledger, [], requeue=exc.reason
    )


def _failed(
    job: SlotJob, error: str, attempt: int, started: datetime, ledger: list[LedgerEntry], emit: ProgressSink
) -> SlotOutcome:
    emit({"event": "slot_failed", "slot": job.spec.id, "attempt": attempt, "error": error})
    ledger.append(
        LedgerEntry(agent=job.expert, action="generate_failed", slot_id=job.spec.id, outputs_summary=error[:500])
    )
    return SlotOutcome(job.spec.id, job.expert, None, error, attempt, started, utcnow(), ledger, [])
