"""A slot's prompt, from what it may contain (:class:`~engine.slots.job.SlotJob`), cut to fit the model's context.

Two prompts: the *contract's* (:func:`fit_prompt`: the expert's persona, the output contract and the uncertainty
protocol in the system message; the task, the slot's part, its constraints and the referenced slots' text in the
user message) and the *plain* one (:func:`plain_prompt`: the task alone, as the person wrote it, the prompt the bare
model gets), whose answer :func:`wrap_plain` puts in the contract's shape with its words kept.

The prompt always fits: referenced slots are cut to the budget (the whole result, then its outline only, then left
out), the answer budget shrinks to what is left, and as a last resort the task text is shortened; what was cut is
returned with the prompt, for the ledger. A prompt never fails a slot for its length.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import engine.prompts as prompts
from engine.assists.injection import quote_as_data
from engine.slots.checks.text import FENCE_BLOCK, PYTHON_TAGS, SQL_TAGS, code_blocks, without_closed_code
from engine.slots.contracts import Contract
from engine.slots.job import SlotJob
from experts.backends import ChatMessage
from state.framework import OUTLINE_REFERENCE
from state.outline import parse_output
from state.result import OutlineItem, Section, SlotResult
from state.settings import Settings

__all__ = ["Prompt", "build_messages", "fit_prompt", "plain_prompt", "plain_result", "wrap_plain"]

MIN_ANSWER_TOKENS = 256
"""The answer budget is never cut below this to make a prompt fit."""
CONTEXT_MARGIN_TOKENS = 64
"""Tokens kept free besides prompt and answer (the chat template's own tokens)."""
CHARS_PER_TOKEN = 3.0
"""A conservative estimate: the bundled models' tokenizers average 3.5-4.5 characters a token on English and
code, so estimating 3 over-counts and a prompt that fits by the estimate fits in fact."""


_LANGUAGE_TAGS = {"python": PYTHON_TAGS, "sql": SQL_TAGS}
"""Fence tags that mean a contract's language (an untagged block counts too)."""
_DEFINED = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)


@dataclass(frozen=True)
class Prompt:
    """The messages of one draw, the answer budget that fits beside them, and what had to be cut."""

    messages: tuple[ChatMessage, ...]
    max_tokens: int
    cuts: tuple[str, ...] = ()
    shared: str | None = None
    """The start of the system message that does not depend on the task (None: all of it)."""


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
            return Prompt(messages, answer, tuple(cuts), shared_head(job, contract, messages[0].content))
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
    system = _messages_system(job, contract)
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


def shared_head(job: SlotJob, contract: Contract, system: str) -> str | None:
    """The lines of ``system`` that do not depend on the task (None: all of them do not).

    Where a contract names the task's function: the lines before the first that names it (the persona, the
    contract's heading). Found by writing the contract again for another function name and keeping the whole
    lines both share, so a change of wording in the contract moves it with no edit here.
    """
    if contract.function is None:
        return None
    other = _messages_system(job, replace(contract, function=contract.function + "_"))
    common = os.path.commonprefix([system, other])
    head = common[: common.rfind("\n") + 1]
    return head or None


def _messages_system(job: SlotJob, contract: Contract) -> str:
    return prompts.SYSTEM_PROMPT.format(
        persona=job.persona,
        output_contract=_contract_text(contract),
        uncertainty_protocol=_protocol(contract),
    )


def _protocol(contract: Contract) -> str:
    """What the expert is told to do with what it does not know: code, creative writing, or everything else."""
    if contract.code_first:
        return prompts.UNCERTAINTY_PROTOCOL_CODE
    if contract.fiction:
        return prompts.UNCERTAINTY_PROTOCOL_FICTION
    return prompts.UNCERTAINTY_PROTOCOL


def _contract_text(contract: Contract) -> str:
    if contract.deliverable == "code":
        if contract.function is not None:
            return prompts.CONTRACT_FUNCTION.format(language=contract.language or "text", function=contract.function)
        if contract.explained:
            return prompts.CONTRACT_CODE_EXPLAINED.format(language=contract.language or "text")
        return prompts.CONTRACT_CODE.format(language=contract.language or "text")
    if contract.deliverable == "data":
        alone = prompts.CONTRACT_DATA_ALONE if contract.max_items == 1 else prompts.CONTRACT_DATA
        return alone.format(language=contract.language or "json")
    if contract.deliverable == "plan":
        return prompts.CONTRACT_PLAN.format(min_items=contract.min_items, max_items=contract.max_items)
    if contract.deliverable == "table":
        return prompts.CONTRACT_TABLE
    if contract.message:
        return prompts.CONTRACT_MESSAGE
    return prompts.CONTRACT_PROSE.format(max_items=contract.max_items)


def _estimate(messages: tuple[ChatMessage, ...]) -> int:
    return sum(int(len(m.content) / CHARS_PER_TOKEN) + 8 for m in messages) + 16


_HEADING = re.compile(r"^(#{1,6})[ \t]+", re.M)
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


def _outside_code(text: str, edit: Callable[[str], str]) -> str:
    """``text`` with ``edit`` applied to everything but its fenced code blocks."""
    parts, at = [], 0
    for m in FENCE_BLOCK.finditer(text):
        parts += [edit(text[at : m.start()]), m.group(0)]
        at = m.end()
    return "".join([*parts, edit(text[at:])])


def _prose_body(text: str) -> str:
    """A plain prose answer as the body of one part (:func:`wrap_plain`)."""
    text = text.strip()
    levels = [len(m.group(1)) for m in _HEADING.finditer(without_closed_code(text))]
    top = min(levels, default=3)

    def under_section(t: str) -> str:
        t = _HEADING.sub(lambda m: "#" * min(6, len(m.group(1)) - top + 3) + " ", t)
        return _PLACEHOLDER.sub(r"{{ASSIST:user:\1}}", t)

    return _outside_code(text, under_section)


EXPLANATION_TITLE = "Why it works"
"""The second section's title when a plain answer to a code task that asks for an explanation is wrapped."""
_FENCED = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
_ANNOUNCED = re.compile(r"[^.!?\n]*:[ \t]*\n*(?=\0)")
"""The clause that announced a code block taken out ("Here's how you can create the index:"): it goes with it."""


def _one_part(title: str, body: str) -> str:
    """An answer of one part, ``title``, in the contract's shape."""
    return _in_parts((title, body))


def _in_parts(*parts: tuple[str, str]) -> str:
    """An answer of numbered parts, each ``(title, body)``, in the contract's shape (outline, then sections)."""
    outline = "".join(f"{n}. {title}\n" for n, (title, _) in enumerate(parts, 1))
    sections = "\n".join(f"## {n}. {title}\n{body}\n" for n, (title, body) in enumerate(parts, 1))
    return f"## Outline\n{outline}\n{sections}"


def plain_result(text: str, contract: Contract, title: str, *, slot_id: str, expert: str, attempts: int) -> SlotResult:
    """A plain answer as a slot's result: :func:`wrap_plain`'s text, its one part known rather than parsed.

    Prose, plans and tables are one part by design; parsing them again would read the answer's own numbered
    headings ("## 2. Usage") as the contract's sections and reject a sound answer as out of its outline. Code
    and data, or an answer with nothing to wrap, are parsed as any answer is.
    """
    body = "" if contract.code_first else _prose_body(text)
    if not body:
        wrapped = wrap_plain(text, contract, title)
        least = contract.min_items if contract.explained else 1  # an explanation asked for is not optional
        return parse_output(wrapped, slot_id, expert, attempts, min_items=least, max_items=contract.max_items)
    return SlotResult(
        slot_id=slot_id,
        expert=expert,
        raw=_one_part(title, body),
        outline=[OutlineItem(label="1", title=title, level=1)],
        sections=[Section(label="1", title=title, level=1, body=body)],
        compliant=True,
        attempts=max(1, attempts),
    )


def wrap_plain(text: str, contract: Contract, title: str = "Answer") -> str:
    """A plain answer in the contract's shape, its words kept.

    Code and data: the answer's code block, verbatim, as the one section; the block kept is the one that defines
    the function the task hands over (when it does), else the longest block in the contract's language (an
    untagged block counts). Everything else of the answer (the model's explanation, its usage examples) is left
    out: the contract of a code slot is the code. A code task that asks to explain the code (``explained``) keeps
    the answer's words outside its code blocks as the second section, the explanation. With no block, the text
    as is (it fails the contract).

    Prose, plans and tables: the whole answer as the one section ``title``, its own Markdown headings under the
    section's, their hierarchy kept (the answer's top level becomes ``###``, the next ``####``: a title over its
    sections stays over them, not an empty section beside them), so the document keeps one outline. A template
    placeholder the model left for what it does not know (``[Database Hostname]``, ``[Your Name]``) becomes a user
    assist (``{{ASSIST:user:Database Hostname}}``), so it is listed for the person like any other unknown. Fenced code
    blocks in the answer are left as written (a ``# comment`` there is not a heading, ``[ITEMS]`` not a
    placeholder).
    """
    if not contract.code_first:
        body = _prose_body(text)
        return _one_part(title, body) if body else text
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
    if contract.explained:
        why = _prose_body(_ANNOUNCED.sub("", _FENCED.sub("\0", text)).replace("\0", ""))
        if why:
            return _in_parts((title, f"```{language}\n{code}\n```"), (EXPLANATION_TITLE, why))
    return _one_part(title, f"```{language}\n{code}\n```")
