"""The work of one slot: a prompt that fits -> candidates -> checks -> the best kept verbatim -> assists.

Runs in a scheduler worker thread. It reports everything through its return value (a :class:`SlotOutcome`):
the node that collects it turns that into Passport updates, so nothing here touches graph state.

1. **The contract fits the deliverable** (:mod:`engine.contracts`): the slot's deliverable (code, prose, plan,
   table, data) decides the outline's size, what its sections hold, the grammar and the answer budget.
2. **The prompt always fits** the model's context: referenced slots are cut to the budget (the whole result,
   then its outline only, then left out), the answer budget shrinks to what is left, and as a last resort the
   task text is shortened; what was cut is in the ledger. A prompt never fails a slot for its length.
3. **The first answer** is drawn at the expert's temperature (0: greedy) and checked (:mod:`engine.checks`). A
   plan's slot starts its answer with its own title (the grammar writes it), so it answers its part instead of
   retitling and copying a referenced one.
   Every answer is watched as it is written: one that loops is stopped there (:mod:`engine.loops`) and counts as
   degenerate, as it would have at the end of its token budget.
4. **Two prompts.** A slot that is the whole task also draws *plain* candidates: the task alone, as the person
   wrote it (no persona, no contract, no grammar: the prompt the bare model would get), put in the contract's
   shape with its words kept (a code slot keeps its code block; prose, a plan or a table is the one section).
   For code the kinds alternate, each greedy once, then sampled; for prose, plans and tables a plain answer is
   drawn only once a contract answer loops (the contract's prompt alone carries the uncertainty protocol, and a
   plain answer invents what it does not know), then the kinds alternate. A task that hands over one function to
   complete draws the plain candidate first: measured on HumanEval, the bare prompt's greedy answer is the better
   first try, and the contract's prompt is then a second, different greedy try instead of a sample
   (``docs/decisions.md``).
5. **More candidates only when needed.** An answer that breaks the output contract gets fresh-prompt retries
   (``max_outline_retries``): the original prompt plus what was wrong, never the failed answer itself, at a
   higher temperature. A compliant answer that fails a hard check (code that does not run or fails the task's
   examples, degenerate text) gets samples up to ``best_of`` candidates in all (three times as many, in three
   times the time, where the task's own examples run: :data:`RUNNABLE_EXAMPLES_DRAWS`). Drawing stops as soon as a
   candidate passes every hard check, or once the slot has spent ``candidate_time_factor`` times its first
   answer's time. Still failing, one last candidate may come from a bigger model (``escalate``).
6. **Selection, never synthesis** (:mod:`engine.selection`): the best-scoring candidate is kept verbatim; a tie
   among prose candidates may be broken by a judge prompt. When every candidate looped, the kept one's repeated
   sentences are removed (nothing reworded; :func:`engine.loops.cut_loops`) and its caveat stays. A section of
   the kept answer that says what an earlier one says, repeats the task or copies a referenced slot is removed
   and the rest renumbered (``cut_sections``). Every candidate, its checks and the choice are in the result's
   :class:`~state.quality.SlotQuality` and the ledger.
7. Assists are resolved in the kept answer (:mod:`engine.assist`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from engine import prompts
from engine.arithmetic import compute
from engine.assist import AssistResolver
from engine.checks import (
    CheckContext,
    check_answer,
    code_blocks,
    copies_task,
    cut_unfinished_end,
    duplicates_check,
    ending_check,
    extract_examples,
    repeated_sections,
    repetition_check,
)
from engine.contracts import Contract, contract_for
from engine.injection import quote_as_data
from engine.loops import LoopWatch, cut_loops
from engine.memory import FactMemory
from engine.sandbox import SandboxLimits
from engine.selection import best, judge, score
from engine.streaming import Listeners, generate_streamed
from experts.catalog import ExpertScope
from experts.models import ChatMessage, ExpertBackend, Generation, GenerationRequest
from experts.routing.lessons import Lesson
from state.assist import AssistRecord
from state.enums import Mode
from state.errors import BackendError, CoeError, GenerationStopped
from state.framework import OUTLINE_REFERENCE, SlotSpec
from state.outline import parse_output, retry_feedback
from state.passport import LedgerEntry, Notice, utcnow
from state.quality import CandidateRecord, CheckResult, SlotQuality
from state.result import SlotResult, render_section
from state.settings import Settings

__all__ = [
    "ProgressSink",
    "Prompt",
    "SlotJob",
    "SlotOutcome",
    "build_messages",
    "fit_prompt",
    "generation_settings",
    "plain_prompt",
    "run_slot",
    "wrap_plain",
]

ProgressSink = Callable[[dict[str, object]], None]

SAMPLE_TEMPERATURES = (0.3, 0.5, 0.7)
"""Temperatures of the extra candidates, in turn (never below the expert's own)."""
RUNNABLE_EXAMPLES_DRAWS = 3
"""A code slot whose task gives examples that run may draw this many times ``best_of`` candidates, in this many times
the time: its check is a real reward (HumanEval/10's fifth candidate was the first to pass; at twice, /54 and /98
were stopped by the time limit at their sixth and failed, at three times they passed; docs/decisions.md)."""
MIN_ANSWER_TOKENS = 256
"""The answer budget is never cut below this to make a prompt fit."""
CONTEXT_MARGIN_TOKENS = 64
"""Tokens kept free besides prompt and answer (the chat template's own tokens)."""
CHARS_PER_TOKEN = 3.0
"""A conservative estimate: the bundled models' tokenizers average 3.5-4.5 characters a token on English and
code, so estimating 3 over-counts and a prompt that fits by the estimate fits in fact."""
ARITHMETIC_EXPERTS = ("math_reasoning",)
"""Experts whose answers have their arithmetic computed by the harness (:mod:`engine.arithmetic`)."""
JUDGED = ("prose", "plan", "table")
"""Deliverables whose checks are weak enough that a judge may break a tie between passing candidates."""
_LANGUAGE_TAGS = {"python": ("python", "py", "python3"), "sql": ("sql", "postgresql", "postgres", "mysql", "sqlite")}
"""Fence tags that mean a contract's language (an untagged block counts too)."""
_DEFINED = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)


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
    contract: Contract | None = None
    """The output contract (None: the one of the slot's deliverable, :func:`engine.contracts.contract_for`)."""
    n_ctx: int = 4096
    """The model's context length: prompt and answer together must fit."""
    escalation: tuple[str, ExpertBackend] | None = None
    """A bigger model than the expert's own (name, backend), for one last candidate when the others fail."""
    model: str = "base model"
    """The model the expert runs on, for the candidates' records."""
    cancel: threading.Event | None = None
    """Set when the run is cancelled (``runs.cancel`` on the server): every generation of the slot stops."""
    stream: Listeners | None = None
    """Where each candidate's tokens go as they are written (None: nowhere)."""
    facts: FactMemory | None = None
    """The person's remembered facts, which lookup assists search before the knowledge base (None: none)."""
    lessons: tuple[Lesson, ...] = ()
    """The person's kept routing lessons (``coe feedback --route-to``): experts consulted by an assist are routed
    with them, as the slots were."""
    earlier_task: str = ""
    """The task of the turn ``memory`` comes from (a follow-up's plain prompt replays that exchange)."""
    others: tuple[str, ...] = ()
    """The titles of the plan's other slots: a section of this slot's answer titled as one of them is cut (a
    diagnosis slot given the whole task wrote "2. Propose indexes", "3. Rewrite the query" ..., the plan's next
    slots, word for word)."""
    memory: Mapping[str, tuple[str, SlotResult]] = field(default_factory=dict)
    """The thread's previous turn (a follow-up run): reference id -> (title, result), shown to every slot like a
    referenced slot (read-only data; cut to its outline, then left out, like any reference that does not fit)."""

    @property
    def slot_contract(self) -> Contract:
        """The contract this slot's answers are held to."""
        return self.contract if self.contract is not None else contract_for(self.spec, self.expert)

    @property
    def whole_task(self) -> bool:
        """The slot is the whole task (a one-slot run): its prompt is the task as the person wrote it."""
        return self.spec.description.strip() == self.task.strip()


def generation_settings(scope: ExpertScope, settings: Settings) -> tuple[int, float]:
    """(max_tokens, temperature) for an expert: a value the user set explicitly wins over the expert's default."""
    max_tokens = settings.max_tokens
    if "max_tokens" not in settings.explicit and scope.generation.max_tokens is not None:
        max_tokens = scope.generation.max_tokens
    temperature = settings.temperature
    if "temperature" not in settings.explicit and scope.generation.temperature is not None:
        temperature = scope.generation.temperature
    return max_tokens, temperature


# --- the prompt ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """The messages of one draw, the answer budget that fits beside them, and what had to be cut."""

    messages: tuple[ChatMessage, ...]
    max_tokens: int
    cuts: tuple[str, ...] = ()


def build_messages(job: SlotJob, settings: Settings, feedback: str | None = None) -> tuple[ChatMessage, ...]:
    """The system and user messages for a slot (``feedback``: what was wrong with an earlier answer)."""
    return fit_prompt(job, settings, feedback).messages


def fit_prompt(job: SlotJob, settings: Settings, feedback: str | None = None) -> Prompt:
    """The slot's prompt, cut until it and the answer budget fit the model's context.

    References are cut first (whole results to outlines, largest first; then outlines left out), then the answer
    budget (not below :data:`MIN_ANSWER_TOKENS`), and as a last resort the task text.
    """
    contract = job.slot_contract
    views = _reference_views(job, settings.reference_max_chars)
    cuts: list[str] = []
    task = job.task
    answer = job.max_tokens
    while True:
        messages = _messages(job, contract, views, task, feedback)
        prompt_tokens = _estimate(messages)
        room = job.n_ctx - prompt_tokens - CONTEXT_MARGIN_TOKENS
        if answer <= room:
            return Prompt(messages, answer, tuple(cuts))
        whole = [v for v in views if v.view != "outline only" and not v.omitted and v.outline]
        shown = [v for v in views if not v.omitted]
        if whole:
            biggest = max(whole, key=lambda v: len(v.content))
            biggest.view, biggest.content = "outline only", biggest.outline
            cuts.append(f"reference {biggest.title!r} cut to its outline")
        elif shown:
            biggest = max(shown, key=lambda v: len(v.content))
            biggest.omitted = True
            cuts.append(f"reference {biggest.title!r} left out")
        elif answer > MIN_ANSWER_TOKENS and room >= MIN_ANSWER_TOKENS:
            cuts.append(f"answer budget cut from {answer} to {room} tokens")
            answer = room
        elif answer > MIN_ANSWER_TOKENS:
            cuts.append(f"answer budget cut from {answer} to {MIN_ANSWER_TOKENS} tokens")
            answer = MIN_ANSWER_TOKENS
        else:
            keep = max(200, int(len(task) - (prompt_tokens + answer + CONTEXT_MARGIN_TOKENS - job.n_ctx) * 3.5))
            if keep >= len(task):
                return Prompt(messages, answer, tuple(cuts))  # nothing left to cut: the backend will say so
            cuts.append(f"task text cut from {len(task)} to {keep} characters")
            task = task[:keep].rstrip() + " [...]"


@dataclass
class _View:
    title: str
    view: str
    content: str
    outline: str
    omitted: bool = False


def _reference_views(job: SlotJob, max_chars: int) -> list[_View]:
    views: list[_View] = []
    for ref_id in [*job.memory, *job.spec.can_reference]:  # the earlier turn's results first, whole
        if ref_id in job.memory:
            (title, result), hints = job.memory[ref_id], []
        elif ref_id in job.references:
            title, result = job.references[ref_id]
            hints = job.spec.reference_hints.get(ref_id, [])
        else:
            continue
        outline = result.outline_text()
        if OUTLINE_REFERENCE in hints:
            view, content = "outline only", outline
        elif hints:
            found = [(h, result.section_text(h)) for h in hints]
            view = "sections " + ", ".join(hints)
            content = "\n\n".join(text if text is not None else f"(section {h!r} not found)" for h, text in found)
        else:
            view, content = "whole", result.body_text()
        views.append(_View(title, view, _cut(content, max_chars), outline))
    return views


def _cut(text: str, max_chars: int) -> str:
    """``text`` within ``max_chars``, marked where it was cut."""
    return text if len(text) <= max_chars else text[: max_chars - 20].rstrip() + "\n[... truncated]"


def _messages(
    job: SlotJob, contract: Contract, views: list[_View], task: str, feedback: str | None
) -> tuple[ChatMessage, ...]:
    system = prompts.SYSTEM_PROMPT.format(
        persona=job.persona,
        output_contract=_contract_text(contract),
        uncertainty_protocol=(
            prompts.UNCERTAINTY_PROTOCOL_CODE if contract.code_first else prompts.UNCERTAINTY_PROTOCOL
        ),
    )
    expected = (
        prompts.EXPECTED_OUTPUTS_BLOCK.format(items="\n".join(f"- {o}" for o in job.spec.expected_outputs))
        if job.spec.expected_outputs and not job.whole_task
        else ""
    )
    constraints = (
        prompts.CONSTRAINTS_BLOCK.format(items="\n".join(f"- {c}" for c in job.constraints)) if job.constraints else ""
    )
    shown = [v for v in views if not v.omitted]
    references = (
        prompts.REFERENCES_BLOCK.format(
            items="\n".join(
                prompts.REFERENCE_ITEM.format(title=v.title, view=v.view, content=quote_as_data(v.content))
                for v in shown
            )
        )
        if shown
        else ""
    )
    extra = prompts.FEEDBACK_BLOCK.format(problems=feedback) if feedback else ""
    if job.whole_task:
        user = prompts.TASK_PROMPT.format(
            task=task, expected_outputs=expected, constraints=constraints, references=references, feedback=extra
        )
    else:
        user = prompts.SLOT_PROMPT.format(
            task=task,
            title=job.spec.title,
            description=job.spec.description,
            expected_outputs=expected,
            constraints=constraints,
            references=references,
            feedback=extra,
        )
    return (ChatMessage("system", system), ChatMessage("user", user))


def _contract_text(contract: Contract) -> str:
    if contract.deliverable == "code":
        if contract.function is not None:
            return prompts.CONTRACT_FUNCTION.format(language=contract.language or "text", function=contract.function)
        return prompts.CONTRACT_CODE.format(language=contract.language or "text")
    if contract.deliverable == "data":
        return prompts.CONTRACT_DATA.format(language=contract.language or "json")
    if contract.deliverable == "plan":
        return prompts.CONTRACT_PLAN.format(min_items=contract.min_items, max_items=contract.max_items)
    if contract.deliverable == "table":
        return prompts.CONTRACT_TABLE
    return prompts.CONTRACT_PROSE.format(max_items=contract.max_items)


def _estimate(messages: tuple[ChatMessage, ...]) -> int:
    return sum(int(len(m.content) / CHARS_PER_TOKEN) + 8 for m in messages) + 16


_HEADING = re.compile(r"^#{1,2}\s+", re.M)
_PLACEHOLDER = re.compile(r"\[([A-Z][A-Za-z0-9' /-]{1,58}[A-Za-z0-9])\](?![(\[:])")
"""A bracketed name of something to fill in, not a Markdown link or footnote: ``[Database Hostname]``."""


def plain_prompt(job: SlotJob, max_chars: int = 6000) -> Prompt:
    """The task alone, as the person wrote it: the prompt the bare model gets (no persona, contract or grammar).

    In a follow-up turn it is a conversation, as a chat with the bare model would be: the earlier task, the
    earlier answer (its slots' results, cut to ``max_chars``), then the task.
    """
    messages: tuple[ChatMessage, ...] = (ChatMessage("user", job.task),)
    if job.memory and job.earlier_task:
        earlier = _cut("\n\n".join(result.body_text() for _, result in job.memory.values()), max_chars)
        messages = (ChatMessage("user", job.earlier_task), ChatMessage("assistant", earlier), *messages)
    room = job.n_ctx - _estimate(messages) - CONTEXT_MARGIN_TOKENS
    answer = max(MIN_ANSWER_TOKENS, min(job.max_tokens, room))
    cuts = (f"answer budget cut from {job.max_tokens} to {answer} tokens",) if answer < job.max_tokens else ()
    return Prompt(messages, answer, cuts)


def wrap_plain(text: str, contract: Contract, title: str = "Answer") -> str:
    """A plain answer in the contract's shape, its words kept.

    Code and data: the answer's code block, verbatim, as the one section; the block kept is the one that defines
    the function the task hands over (when it does), else the longest block in the contract's language (an
    untagged block counts). Everything else of the answer (the model's explanation, its usage examples) is left
    out: the contract of a code slot is the code. With no block, the text as is (it fails the contract).

    Prose, plans and tables: the whole answer as the one section ``title``, its own Markdown headings one level
    under the section's (``#``/``##`` become ``###``), so the document keeps one outline. A template placeholder
    the model left for what it does not know (``[Database Hostname]``, ``[Your Name]``) becomes a user assist
    (``{{ASSIST:user:Database Hostname}}``), so it is listed for the person like any other unknown.
    """
    if not contract.code_first:
        body = _PLACEHOLDER.sub(r"{{ASSIST:user:\1}}", _HEADING.sub("### ", text.strip()))
        return f"## Outline\n1. {title}\n\n## 1. {title}\n{body}\n" if body else text
    language = contract.language or "text"
    tags = {"", language, *_LANGUAGE_TAGS.get(language, ())}
    blocks = [code.rstrip() for tag, code in code_blocks(text) if tag in tags and code.strip()]
    if contract.function is not None:
        target = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(contract.function)}\s*\(", re.M)
        blocks = [b for b in blocks if target.search(b)] or blocks
    if not blocks:
        return text
    code = max(blocks, key=len)
    named = _DEFINED.search(code)
    title = contract.function or (named.group(1) if named else "Code")
    return f"## Outline\n1. {title}\n\n## 1. {title}\n```{language}\n{code}\n```\n"


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
        result = parse_output(
            wrap_plain(gen.text, contract, job.spec.title) if plain else gen.text,
            slot_id=slot_id,
            expert=job.expert,
            attempts=attempt,
            min_items=1 if plain else contract.min_items,  # a plain answer is one part by design, a plan's too
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

    try:
        first = draw("first", backend, own_model, job.temperature, None, plain=plain_turn())
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
            same_kind = sum(1 for d in draws if (d.record.prompt == "plain") == plain)
            if two_prompts and same_kind == 0:  # each prompt's first draw is greedy: a new prompt is diversity enough
                temperature = job.temperature
            else:
                sampled = len(draws) - 2 if two_prompts else len(draws) - 1
                temperature = max(job.temperature, SAMPLE_TEMPERATURES[sampled % len(SAMPLE_TEMPERATURES)])
            emit(_retry_event(slot_id, draws))
            draw(origin, backend, own_model, temperature, None if plain else _feedback(leader), plain=plain)
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
        tokens_generated=sum(d.gen.completion_tokens for d in draws),
        tokens_kept=chosen.gen.completion_tokens,
    )
    result = chosen.result.model_copy(update={"attempts": len(draws), "quality": quality})
    if _loops(chosen):  # every candidate looped: the person gets the kept one's words once, with its caveat
        result = _without_loops(result, job.task, ledger)
    if contract.code_first:  # the note's unfinished end is a soft failure, never retried: it goes
        result = _without_unfinished_end(result, ledger)
    result = _without_repeated_sections(result, job.task, references, ledger, job.others)
    if job.expert in ARITHMETIC_EXPERTS:
        result = _computed(result, ledger)
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


def _without_loops(result: SlotResult, task: str, ledger: list[LedgerEntry]) -> SlotResult:
    """The result without the sentences it repeats (:func:`engine.loops.cut_loops`), and a ledger entry."""
    raw, removed = cut_loops(result.raw)
    if not removed:
        return result
    seen: set[str] = set()
    sections = [s.model_copy(update={"body": cut_loops(s.body, seen)[0]}) for s in result.sections]
    cut = result.model_copy(update={"raw": raw, "sections": sections})
    left = repetition_check(cut.body_text())
    said = f"it looped while written: {removed} repeated sentence(s) were cut, nothing reworded"
    looped = CheckResult(
        name="prose.repetition", passed=False, detail=f"{said}; {left.detail}" if not left.passed else said
    )
    # the caveat speaks of the text delivered, not of the loop that was cut out of it
    # (sections alike only by the sentences cut no longer repeat each other)
    again: dict[str, Callable[[CheckResult], CheckResult]] = {
        looped.name: lambda _: looped,
        "contract.ends": lambda c: ending_check(raw, c.severity),
        "contract.duplicates": lambda _: duplicates_check(cut, task),
    }
    cut = _rechecked(cut, again)
    ledger.append(
        LedgerEntry(
            agent="harness",
            action="cut_repeats",
            slot_id=result.slot_id,
            outputs_summary=f"the kept answer looped: {removed} repeated sentence(s) removed, nothing reworded",
        )
    )
    return cut


def _without_unfinished_end(result: SlotResult, ledger: list[LedgerEntry]) -> SlotResult:
    """The result without the unfinished end of its last line of text (:func:`engine.checks.cut_unfinished_end`).

    A code answer's note may end "Explanation:" or break off mid-sentence at its grammar's line bound: a blemish
    the checks let pass (the code is the deliverable), which the person would read as the answer breaking off.
    """
    raw, gone = cut_unfinished_end(result.raw)
    if gone is None or not result.sections:
        return result
    *before, last = result.sections
    body, _ = cut_unfinished_end(last.body)
    cut = result.model_copy(
        update={"raw": raw, "sections": [*before, last.model_copy(update={"body": body.rstrip("\n")})]}
    )
    cut = _rechecked(cut, {"contract.ends": lambda c: ending_check(raw, c.severity)})
    ledger.append(
        LedgerEntry(
            agent="harness",
            action="cut_unfinished_end",
            slot_id=result.slot_id,
            outputs_summary=f"the answer's last line broke off: {gone[:200]!r} removed, nothing reworded",
        )
    )
    return cut


def _rechecked(result: SlotResult, again: dict[str, Callable[[CheckResult], CheckResult]]) -> SlotResult:
    """``result`` whose kept checks named in ``again`` are replaced by what each function makes of the old one.

    After an edit of the kept answer (a loop or a repeated section cut), the checks it changed speak of the text
    delivered; the candidates' own records keep what each candidate was.
    """
    if result.quality is None:
        return result
    checks = [again[c.name](c) if c.name in again else c for c in result.quality.checks]
    return result.model_copy(update={"quality": result.quality.model_copy(update={"checks": checks})})


def _without_repeated_sections(
    result: SlotResult,
    task: str,
    references: tuple[str, ...],
    ledger: list[LedgerEntry],
    others: tuple[str, ...] = (),
) -> SlotResult:
    """The result without its sections that repeat something, are another slot's part, or are empty.

    Repeated: an earlier section, the task or a referenced slot (whose text is in the document already). Another
    slot's part: a section titled as one of ``others`` (that slot writes it). Nothing is reworded: such a section
    goes with its sub-sections, the rest keep their order and are numbered again, and a ledger entry names what
    went. A result whose every section would go is kept as it is (its caveat says why).
    """
    repeated = repeated_sections(result, task, references, others) + [
        (s.label, f"section {s.label} is empty")  # e.g. every sentence of it was a repeat, cut with the loop
        for s in result.sections
        if not s.body.strip() and not result.has_subsections(s.label)
    ]
    if not repeated:
        return result
    gone = {label for label, _ in repeated}

    def cut(label: str) -> bool:
        return any(label == g or label.startswith(g + ".") for g in gone)

    kept = [s for s in result.sections if not cut(s.label)]
    if not kept:
        return result
    tops: dict[str, str] = {}
    for section in kept:
        tops.setdefault(section.label.split(".")[0], str(len(tops) + 1))

    def renumbered(label: str) -> str:
        top, *rest = label.split(".")
        return ".".join([tops.get(top, top), *rest])

    sections = [s.model_copy(update={"label": renumbered(s.label)}) for s in kept]
    outline = [o.model_copy(update={"label": renumbered(o.label)}) for o in result.outline if not cut(o.label)]
    items = "\n".join(f"{o.label}. {o.title}" if o.level == 1 else f"   {o.label} {o.title}" for o in outline)
    raw = f"## Outline\n{items}\n\n" + "\n\n".join(render_section(s) for s in sections) + "\n"
    cleaned = result.model_copy(update={"raw": raw, "sections": sections, "outline": outline})
    cleaned = _rechecked(cleaned, {"contract.duplicates": lambda _: duplicates_check(cleaned, task)})
    ledger.append(
        LedgerEntry(
            agent="harness",
            action="cut_sections",
            slot_id=result.slot_id,
            outputs_summary="; ".join(why for _, why in repeated)[:400] + ": removed, nothing reworded",
        )
    )
    return cleaned


def _computed(result: SlotResult, ledger: list[LedgerEntry]) -> SlotResult:
    """The result with its calculations computed, and a ledger entry naming each change."""
    raw, changes = compute(result.raw)
    if not changes:
        return result
    sections = [s.model_copy(update={"body": compute(s.body)[0]}) for s in result.sections]
    ledger.append(
        LedgerEntry(
            agent="harness",
            action="compute",
            slot_id=result.slot_id,
            outputs_summary="; ".join(changes)[:500],
        )
    )
    return result.model_copy(update={"raw": raw, "sections": sections})


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
