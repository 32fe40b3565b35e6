"""Assist resolution for one slot's kept answer: lookup, expert consultation, user questions, cycle cuts.

Runs in the slot's worker before the slot is reported done, so its dependents see resolved text; it touches no
graph state (the outcome goes back to ``execute_slots``). Each well-formed placeholder is resolved once and
replaced everywhere it appears. A value is only ever text from a source (a document's sentence quoted verbatim, a
consulted expert's answer); anything else keeps its ``{{UNRESOLVED:...}}`` marker with the reason. The rules:
docs/answers.md; their calibration: docs/decisions/assists.md.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import engine.prompts as prompts
from engine.assists.injection import describe, find_instructions
from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from experts.backends.grammar import CONSULT_ANSWER_CHARS, CONSULT_GRAMMAR
from experts.catalog import Catalog, load_catalog, resolve_binding
from experts.knowledge import KnowledgeBase, load_kb
from experts.pool import get_backend
from experts.routing import ExpertRouter, RouterParams, get_router
from experts.routing.aspects import asks_for_work
from experts.routing.lesson_check import Lesson, router_with_lessons
from memory.store import FactMemory, fact_answers
from state.assist import (
    AssistRecord,
    AssistSource,
    Placeholder,
    replace_assists,
    scan_assists,
    unresolved_marker,
)
from state.completion import WORK_REASON
from state.enums import Mode
from state.errors import CoeError
from state.figures import Figure, computed_figure
from state.passport import LedgerEntry, Notice
from state.paths import kb_dir
from state.result import SlotResult
from state.settings import Settings

__all__ = [
    "CONSULT_MAX_TOKENS",
    "MAX_CONSULT_DEPTH",
    "NEEDS_USER",
    "AssistResolver",
    "Resolution",
    "asks_the_person",
    "echoes_question",
    "parse_consult_answer",
]

MAX_CONSULT_DEPTH = 2
"""A consulted expert may consult one more; a third level is cut as a cycle (seed §13.7)."""
CONSULT_MAX_TOKENS = 120
NEEDS_USER = "needs user input"
CIRCULAR = "circular reference"

ProgressSink = Callable[[dict[str, object]], None]

_COPIED = "\x00"
"""Where a copied example placeholder stood, until the text around it is tidied."""
_AFTER_COPIED = re.compile(r"\x00[ \t]*:?[ \t]*")

_GAP_BEFORE = re.compile(
    r"(?P<asked>[A-Za-z][^.!?;:,()\n]*?)\s+(?P<link>is|are|was|were|will be|at|by|on|to|from|named|called)\s*$",
    re.IGNORECASE,
)
"""A sentence that breaks off where the value goes: "The person on call for this week is", "... reached at"."""
_LABEL_BEFORE = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?P<asked>[A-Za-z][\w' /-]{0,60}?)\s*:\s*$")
"""A label the value follows: "Hostname:", "- The on-call engineer:"."""
_COPULAS = frozenset({"is", "are", "was", "were", "will be"})
_LEADING = re.compile(r"^(?:and|but|or|which|that|who|so|then|also|please)\s+", re.IGNORECASE)
ASKED_WORDS = 10
"""At most this many words of the sentence name what a copied example asks for (more is a whole sentence)."""

_ANSWER = re.compile(r"^\s*(?:\*\*)?ANSWER(?:\*\*)?\s*:\s*(?:\*\*)?\s*(?P<text>.*)", re.IGNORECASE | re.DOTALL)
_UNKNOWN = re.compile(r"^\s*\**UNKNOWN\b", re.IGNORECASE)
_HEDGE = re.compile(
    r"\b(?:i\s+(?:do\s+not|don't|am\s+not\s+sure|cannot|can't)\s+(?:know|say|be\s+sure|determine)|not\s+sure|"
    r"unknown|no\s+information|cannot\s+be\s+determined)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_ABOUT_ITS_FIELD = re.compile(r"\bexpertise\b|\boutside (?:my|the) (?:field|scope|area)\b", re.IGNORECASE)
"""A consulted answer about who should answer, not the answer ("This requires system design expertise, not
software architecture expertise.", filled into a disk-full checklist as a fact, review_general_on_1p5b)."""


_PERSONAL = re.compile(
    r"\b(?:you|your|yours|we|our|ours|us|my|mine|their|who|whom|whose|name|names|signatory|signature|date|dates|"
    r"day|time|times|deadline|when|where|location|address|venue|phone|e-?mail|contact|budget|price|cost|insert|"
    r"company|organi[sz]ation|team|client|customer|patient|person|people|staff|employee|landlord|tenant|"
    r"recipient|sender|preferred|preference|prefer|own|internal|local|current|existing|state|province|country|"
    r"jurisdiction)\b",
    re.IGNORECASE,
)
"""Words of a user request that point at the person or their own world (a name, a date, their systems)."""
_NAMED = re.compile(r"(?<=[a-z,;:] )(?!I\b)[A-Z][\w'&-]*")
"""A capitalised word inside a request: a name, most often the person's own shop, product or client
(review_whole_dec07, cw-slogan: "What is the main focus of Spoke & Chain?" was put to the writer itself, which
answered that the bicycle repair shop makes jewellery for women, and the answer stood as a section's title)."""


def named_examples(text: str) -> str:
    """``text`` with each copied example placeholder that a sentence leads up to asking for what it lacks.

    The model copies the protocol's example ("{{ASSIST:user:the detail}}") into running prose: "The person on call
    for this week is {{ASSIST:user:the detail}}." (a welcome note on the real 1.5B). Taken out, the sentence read
    "The person on call for this week is ." and nothing listed it; so the words the sentence gives before it, up
    to the verb or preposition the value follows ("is", "at", "by", ...), become its description ("{{ASSIST:user:
    the person on call for this week}}"), resolved and listed like any other: a ``user`` request (a ``lookup``
    where the copy was one; the copy's own kind and domain are the example's, "expert:domain:" on the real 1.5B).
    A copy with no such sentence before it (a heading, a line of its own) is left for
    :meth:`AssistResolver.resolve` to take out.
    """

    def named(ph: Placeholder) -> str | None:
        if ph.description.casefold() not in prompts.EXAMPLE_DESCRIPTIONS:
            return None
        line = text[: ph.start].rpartition("\n")[2].replace("*", "").replace("`", "")
        asked = _asked_before(line)
        if asked is None:
            return None
        # the copy's kind and domain are the example's ("expert:domain:" on the real 1.5B): a fact of the person's,
        # or of the knowledge base where it was a lookup
        return f"{{{{ASSIST:{'lookup' if ph.kind == 'lookup' else 'user'}:{asked}}}}}"

    return replace_assists(text, named)


def asks_the_person(description: str) -> bool:
    """Whether a ``user`` request asks for something of the person's own (:data:`_PERSONAL`).

    One that names nothing of theirs is a general question the expert put to the wrong party ("potassium-rich
    foods", "types of exercises" in a real patient leaflet); in a mode that cannot ask, the expert is consulted.
    """
    return bool(_PERSONAL.search(description) or _NAMED.search(description))


def _asked_before(line: str) -> str | None:
    """What a line that breaks off for a value asks for, by its words before the gap; None when it says nothing.

    "The person on call for this week is" asks for "the person on call for this week"; "Hostname:" for "hostname";
    "... and can be reached at" for 'what follows "can be reached at"'.
    """
    if re.fullmatch(r"\s*(?:dear|hi|hello|to)\s*", line, re.IGNORECASE):
        return "the recipient's name"
    if (label := _LABEL_BEFORE.match(line)) is not None and len(label.group("asked").split()) <= 6:
        return _lowered(label.group("asked").strip())
    gap = _GAP_BEFORE.search(line)
    if gap is None:
        return None
    words = _LEADING.sub("", gap.group("asked").strip()).split()
    link = gap.group("link").lower()
    if link in _COPULAS:
        return _lowered(" ".join(words[-ASKED_WORDS:])) if len(words) >= 2 else None
    return f'what follows "{" ".join([*words[-4:], link])}"' if words else None


def _lowered(words: str) -> str:
    """``words`` with its first letter lowered where the second is lower case ("The person", not "API key")."""
    return words[:1].lower() + words[1:] if words[1:2].islower() else words


def _with_named_examples(result: SlotResult) -> SlotResult:
    """``result`` with :func:`named_examples` applied to its raw text, sections and outline alike."""
    copied = (ph.description.casefold() in prompts.EXAMPLE_DESCRIPTIONS for ph in scan_assists(result.raw).placeholders)
    return _each_text(result, named_examples) if any(copied) else result


def _each_text(result: SlotResult, change: Callable[[str], str]) -> SlotResult:
    """``result`` with ``change`` applied to its raw text, its sections' titles and bodies and its outline's titles."""
    return result.model_copy(
        update={
            "raw": change(result.raw),
            "sections": [
                s.model_copy(update={"title": change(s.title), "body": change(s.body)}) for s in result.sections
            ],
            "outline": [i.model_copy(update={"title": change(i.title)}) for i in result.outline],
        }
    )


def parse_consult_answer(text: str) -> tuple[str | None, str]:
    """``(answer, problem)`` of a consulted expert's reply held to the brief format.

    The answer is the ``ANSWER:`` line (at most two sentences, :data:`CONSULT_ANSWER_CHARS` characters); None
    with the problem when the expert said it does not know, hedged, or did not use the format.
    """
    if _UNKNOWN.match(text):
        return None, "answered UNKNOWN"
    m = _ANSWER.match(text)
    if m is None:
        return None, "did not answer in the brief format"
    body = m.group("text").strip().split("\n\n", 1)[0]
    body = " ".join(body.split())
    sentences = [s for s in _SENTENCE.split(body) if s]
    body = " ".join(sentences[:2])
    if not body:
        return None, "gave an empty answer"
    if len(body) > CONSULT_ANSWER_CHARS:
        return None, f"gave an answer of {len(body)} characters (at most {CONSULT_ANSWER_CHARS})"
    if _HEDGE.search(_strip_placeholders(body)):
        return None, "said it was not sure"
    if _ABOUT_ITS_FIELD.search(body):
        return None, "answered about whose field it is, not the question"
    return body, ""


def echoes_question(answer: str, question: str) -> bool:
    """The answer only repeats the question's words: it names the fact without giving it.

    ``"Billing database person on call"`` for ``billing_database_person_on_call`` is such an answer.
    """
    words = {w for w in re.findall(r"[a-z0-9]+", answer.lower().replace("_", " ")) if len(w) > 2}
    asked = set(re.findall(r"[a-z0-9]+", question.lower().replace("_", " ")))
    return not words - asked - _FILLER


_FILLER = {"the", "and", "for", "this", "that", "our", "your", "are", "was", "with", "who", "what", "which"}


def _strip_placeholders(text: str) -> str:
    return replace_assists(text, lambda _ph: "")


@dataclass
class Resolution:
    """What resolving one slot's answer produced."""

    result: SlotResult
    records: list[AssistRecord]
    ledger: list[LedgerEntry]
    notices: list[Notice]


@dataclass
class _Outcome:
    """How one request ended (before it becomes an :class:`AssistRecord`)."""

    value: str | None = None
    reason: str | None = None
    sources: list[AssistSource] = field(default_factory=list)
    depth: int = 0
    chain: list[str] = field(default_factory=list)
    trail: list[str] = field(default_factory=list)
    awaiting_user: bool = False
    flagged: list[str] = field(default_factory=list)
    """Instruction-like text met on the way (a passage, a consult answer), never used: a warning each."""


@dataclass
class AssistResolver:
    """Resolves the placeholders of slot answers. Thread-safe for use by parallel slot workers.

    The knowledge base, router, catalog and consult backends are looked up lazily (a slot without
    placeholders costs nothing); tests and benchmarks pass their own.
    """

    settings: Settings
    mode: Mode = Mode.AUTONOMOUS
    kb: Callable[[], KnowledgeBase] | None = None
    router: Callable[[], ExpertRouter] | None = None
    catalog: Catalog | None = None
    backend_for: Callable[[str], ExpertBackend] | None = None
    """The backend a consulted expert runs on, by expert id (default: its own model when it is a true expert
    and the model is available, else the base model; as ``route_slots`` decides)."""
    emit: ProgressSink | None = None
    cancel: threading.Event | None = None
    """The run's cancel signal: a consultation in progress stops when it is set."""
    facts: FactMemory | None = None
    """The person's remembered facts (:mod:`memory.store`), searched before the knowledge base."""
    lessons: tuple[Lesson, ...] = ()
    """The person's kept routing lessons (``coe feedback --route-to``): consulted experts are routed with them."""
    figures: tuple[Figure, ...] = ()
    """The task's computed figures (:attr:`engine.slots.job.SlotJob.task_figures`), searched before memory."""

    def resolve(self, result: SlotResult, slot_title: str = "") -> Resolution:
        """Resolve every placeholder in ``result`` and return the result with values and markers in place."""
        result = _with_named_examples(result)
        scan = scan_assists(result.raw)
        notices = [
            Notice(level="warning", source="assist", slot_id=result.slot_id, message=m.warning())
            for m in scan.malformed
        ]
        ledger: list[LedgerEntry] = []
        records: list[AssistRecord] = []
        replacement: dict[tuple[str, str, str], str] = {}
        counts: dict[tuple[str, str, str], int] = {}
        # The protocol's own examples, copied ("{{ASSIST:user:the detail}}" as a heading): they ask for nothing,
        # so they are taken out, not resolved or listed as unresolved
        copied = [ph for ph in scan.placeholders if ph.description.casefold() in prompts.EXAMPLE_DESCRIPTIONS]
        for ph in copied:
            replacement[ph.key] = _COPIED
        if copied:
            ledger.append(
                LedgerEntry(
                    agent="assist",
                    action="assist_example_removed",
                    slot_id=result.slot_id,
                    inputs_summary="; ".join(sorted({ph.raw for ph in copied}))[:500],
                    outputs_summary=f"{len(copied)} copy(ies) of the protocol's example placeholders taken out",
                )
            )
        for ph in scan.placeholders:
            counts[ph.key] = counts.get(ph.key, 0) + 1
        for ph in scan.placeholders:
            if ph.key in replacement:
                continue
            record_id = f"{result.slot_id}.a{len(records) + 1}"
            t0 = time.perf_counter()
            outcome = self._resolve(ph, result.expert, record_id, ledger)
            record = _record(record_id, result, ph, outcome, counts[ph.key], time.perf_counter() - t0)
            records.append(record)
            notices += [
                Notice(level="warning", source="assist", slot_id=result.slot_id, message=f"{record_id}: {flag}")
                for flag in outcome.flagged
            ]
            replacement[ph.key] = record.value if record.value is not None else str(record.marker)
            ledger.append(_ledger_entry(record))
            if self.emit is not None:
                self.emit(
                    {
                        "event": "assist_done",
                        "slot": result.slot_id,
                        "assist": record.id,
                        "kind": record.kind,
                        "status": record.status,
                    }
                )
        if not replacement:
            return Resolution(result, [], ledger, notices)

        def fill(text: str) -> str:
            filled = replace_assists(text, lambda ph: replacement.get(ph.key))
            return _AFTER_COPIED.sub("", filled)  # with the colon that followed it ("1.1 {{...}}: The ...")

        return Resolution(_each_text(result, fill), records, ledger, notices)

    # --- the three kinds ----------------------------------------------------------------------------------------

    def _resolve(self, ph: Placeholder, asker: str, record_id: str, ledger: list[LedgerEntry]) -> _Outcome:
        if ph.kind == "lookup":
            return self._lookup(ph.description, _Outcome(chain=[asker]))
        if ph.kind == "user":
            interactive = self.mode == Mode.INTERACTIVE
            if not interactive and not asks_the_person(ph.description):
                return self._general(ph, asker, record_id, ledger)
            trail = (
                "interactive mode: kept for the person (the question is asked by the human-in-the-loop step)"
                if interactive
                else f"{self.mode.value} mode: the person is not asked"
            )
            return _Outcome(reason=NEEDS_USER, chain=[asker], trail=[trail], awaiting_user=interactive)
        if self.settings.completion_seconds > 0 and asks_for_work(ph.description):
            # a brief consult would be an inline guess at a query or a review: a part of its own writes it
            trail = "asks for work, not a fact: left for the completion round, which adds a part routed for it"
            return _Outcome(reason=WORK_REASON, chain=[asker], trail=[trail])
        return self._expert(ph, [asker], 1, record_id, ledger)

    def _general(self, ph: Placeholder, asker: str, record_id: str, ledger: list[LedgerEntry]) -> _Outcome:
        """A user request that names nothing of the person's, in a mode that cannot ask them: its expert answers.

        Its answer may still be UNKNOWN (the consult protocol says so for the person's own world): then the
        request stays unresolved, needing the person, as before.
        """
        out = _Outcome(chain=[asker], depth=1)
        out.trail.append(
            f"{self.mode.value} mode: the person is not asked, and the request names nothing of theirs "
            f"(a general question): {asker} is consulted"
        )
        answer, problem = self._screened(asker, asker, ph, record_id, 1, ledger, out)
        if answer is not None and scan_assists(answer).placeholders:
            answer, problem = None, "answered with a request of its own"
        if answer is None:
            out.trail.append(f"consulted {asker}: {problem}")
            out.reason = NEEDS_USER
            return out
        out.trail.append(f"consulted {asker}: {answer}")
        out.sources.append(AssistSource(kind="expert", expert=asker, excerpt=answer))
        out.value = f"{answer} [source: consulted expert {asker}]"
        return out

    def _lookup(self, query: str, outcome: _Outcome) -> _Outcome:
        """Fill from the task's figures, memory or the knowledge base, or leave ``outcome`` unresolved.

        The reason stays the one already set, if any.
        """
        if self._computed(query, outcome):
            return outcome
        if self.facts is not None and self._remembered(query, outcome):
            return outcome
        try:
            kb = self._kb()
            found = kb.best_quote(query)
        except CoeError as exc:
            outcome.trail.append(f"lookup: knowledge base unavailable ({exc})")
            outcome.reason = outcome.reason or f"knowledge base unavailable ({exc})"
            return outcome
        threshold = self.settings.lookup_threshold
        if found is None:
            outcome.trail.append("lookup: the knowledge base is empty (add documents with coe kb add)")
            outcome.reason = outcome.reason or "the knowledge base is empty"
            return outcome
        hit, quote = found
        where = hit.chunk.source.replace("\\", "/").rsplit("/", 1)[-1]
        if quote.score < threshold:
            outcome.trail.append(f"lookup: best sentence {quote.score:.3f} ({where}) is below threshold {threshold}")
            outcome.reason = outcome.reason or (
                f"no passage in the knowledge base is relevant enough (best {quote.score:.2f} < {threshold:.2f})"
            )
            return outcome
        source = kb.source_of(hit, quote)
        findings = find_instructions(hit.chunk.text)
        if findings:  # a document speaks to the model: an attack, not a fact (see engine.assists.injection)
            flag = f"the best passage ({source.cite()}) holds instruction-like text"
            outcome.trail.append(f"lookup: {flag}: {describe(findings)}; not quoted")
            outcome.flagged.append(f"{flag}: {describe(findings)}; not quoted")
            outcome.reason = outcome.reason or f"{flag} ({describe(findings, excerpts=False)}); not quoted"
            return outcome
        outcome.trail.append(f"lookup: {source.cite()} (threshold {threshold})")
        outcome.value = f'"{quote.text}" [source: {source.cite(short=True)}]'
        outcome.sources.append(source)
        outcome.reason = None
        return outcome

    def _computed(self, query: str, outcome: _Outcome) -> bool:
        """Fill from the task's computed figures when the request names one, by its value or all its words.

        multipart_set3_first's catering quote: "{{ASSIST:lookup:2762.50}}" for the food it had been given as a
        figure, left "{{UNRESOLVED:lookup:2762.50 - the knowledge base is empty}}" in the quote.
        """
        figure = computed_figure(query, self.figures)
        if figure is None:
            return False
        shown = f"{figure.value:,.2f}" if not float(figure.value).is_integer() else f"{figure.value:,.0f}"
        source = AssistSource(kind="program", excerpt=f"{figure.name}: {shown}")
        outcome.trail.append(f"computed figure: {figure.name} = {shown}")
        outcome.value = f"{shown} [source: {source.cite()}]"
        outcome.sources.append(source)
        outcome.reason = None
        return True

    def _remembered(self, query: str, outcome: _Outcome) -> bool:
        """Fill from the best remembered fact when it reaches the lookup line; say why not in the trail."""
        assert self.facts is not None
        try:
            found = self.facts.search(query, k=1)
        except Exception as exc:  # a store that cannot be read: the knowledge base is still tried
            outcome.trail.append(f"memory: unavailable ({type(exc).__name__}: {exc})")
            return False
        threshold = self.settings.memory_threshold
        if not found:
            outcome.trail.append("memory: no facts remembered")
            return False
        fact, score = found[0]
        if score < threshold:
            outcome.trail.append(f"memory: best fact {score:.3f} is below threshold {threshold}")
            return False
        if not self._fact_answers(query, fact.text, outcome):
            return False
        source = AssistSource(kind="memory", memory=fact.cite(), excerpt=fact.text, score=score)
        outcome.trail.append(f"memory: {source.cite()} (threshold {threshold})")
        outcome.value = f'"{fact.text}" [source: {fact.cite()}]'
        outcome.sources.append(source)
        outcome.reason = None
        return True

    def _fact_answers(self, query: str, fact: str, outcome: _Outcome) -> bool:
        """Whether the checking model reads ``fact`` as the answer (yes when no model can check: the line decides)."""
        binding = resolve_binding(self.settings, model=self.settings.memory_check_model)
        if not self.settings.memory_check_model or binding.kind != "true" or binding.model is None:
            why = binding.problem or "no check model set"
            outcome.trail.append(f"memory: the fact is not checked ({why})")
            return True
        try:
            answers = fact_answers(get_backend(self.settings, binding.model), query, fact)
        except CoeError as exc:  # the check failed, not the lookup: the line decides, as without a model
            outcome.trail.append(f"memory: the fact could not be checked ({exc})")
            return True
        if answers is False:
            outcome.trail.append(f"memory: {binding.model} reads the best fact as not answering the request")
            return False
        outcome.trail.append(
            f"memory: {binding.model} reads the best fact as the answer"
            if answers
            else "memory: the check gave no yes or no; the line decides"
        )
        return True

    def _expert(
        self, ph: Placeholder, chain: list[str], depth: int, record_id: str, ledger: list[LedgerEntry]
    ) -> _Outcome:
        """Consult the expert the router picks for ``ph``; ``chain`` holds the experts already involved."""
        out = _Outcome(chain=list(chain), depth=depth - 1)
        try:
            route = self._router().route(f"{ph.description} ({ph.domain})" if ph.domain else ph.description)
        except CoeError as exc:
            out.trail.append(f"routing failed: {exc}")
            return self._fall_back(ph, out, f"no expert could be chosen ({exc})")
        target = route.expert
        out.trail.append(f"routed '{ph.domain}: {ph.description}' to {target} ({route.score:.3f})")
        if target in chain:
            asker = chain[-1]
            out.trail.append(f"cycle cut: {asker} asked into the domain of {target}, already in the chain")
            return self._fall_back(ph, out, CIRCULAR)
        if depth > MAX_CONSULT_DEPTH:
            out.trail.append(f"cycle cut: consulting {target} would pass depth {MAX_CONSULT_DEPTH}")
            return self._fall_back(ph, out, CIRCULAR)
        out.chain.append(target)
        out.depth = depth
        answer, problem = self._screened(target, chain[-1], ph, record_id, depth, ledger, out)
        if answer is None:
            out.trail.append(f"consulted {target}: {problem}")
            return self._fall_back(ph, out, f"consulted expert {target} {problem}")
        out.trail.append(f"consulted {target}: {answer}")
        nested_values: dict[tuple[str, str, str], str] = {}
        for inner in scan_assists(answer).placeholders:
            if inner.key in nested_values:
                continue
            if inner.kind == "user":
                out.trail.append(f"{target}'s answer needs user input: {inner.description}")
                return self._fall_back(ph, out, f"consulted expert {target} needs user input ({inner.description})")
            if inner.kind == "lookup":
                sub = self._lookup(inner.description, _Outcome())
            else:
                sub = self._expert(inner, out.chain, depth + 1, record_id, ledger)
                out.depth = max(out.depth, sub.depth)
            out.trail.extend(f"  {t}" for t in sub.trail)
            out.flagged.extend(sub.flagged)
            if sub.value is None:
                reason = CIRCULAR if sub.reason == CIRCULAR else f"consulted expert {target}: {sub.reason}"
                return self._fall_back(ph, out, reason)
            nested_values[inner.key] = sub.value
            out.sources.extend(sub.sources)
        value = replace_assists(answer, lambda p: nested_values.get(p.key))
        out.sources.insert(0, AssistSource(kind="expert", expert=target, score=round(route.score, 4), excerpt=answer))
        out.value = f"{value} [source: consulted expert {target}]"
        return out

    def _fall_back(self, ph: Placeholder, out: _Outcome, reason: str) -> _Outcome:
        """The consultation gave nothing usable: try lookup; unresolved with ``reason`` when that fails too."""
        out.value, out.sources, out.reason = None, [], reason
        return self._lookup(ph.description, out)

    def _screened(
        self,
        target: str,
        asker: str,
        ph: Placeholder,
        record_id: str,
        depth: int,
        ledger: list[LedgerEntry],
        out: _Outcome,
    ) -> tuple[str | None, str]:
        """:meth:`_consult`, with an answer that speaks to the model refused and flagged in ``out``."""
        answer, problem = self._consult(target, asker, ph, record_id, depth, ledger)
        if answer is not None and (findings := find_instructions(answer)):
            out.flagged.append(f"consulted expert {target} answered with instruction-like text: {describe(findings)}")
            return None, f"answered with instruction-like text ({describe(findings, excerpts=False)})"
        return answer, problem

    def _consult(
        self, target: str, asker: str, ph: Placeholder, record_id: str, depth: int, ledger: list[LedgerEntry]
    ) -> tuple[str | None, str]:
        catalog = self._catalog()
        scope = catalog.get(target)
        messages = (
            ChatMessage(
                "system",
                prompts.CONSULT_SYSTEM.format(
                    persona=scope.persona, asker=asker, consult_protocol=prompts.CONSULT_PROTOCOL
                ),
            ),
            ChatMessage("user", prompts.CONSULT_PROMPT.format(domain=ph.domain or target, question=ph.description)),
        )
        t0 = time.perf_counter()
        try:
            backend = self._backend(target)
            gen = backend.generate(
                GenerationRequest(
                    messages=messages,
                    max_tokens=CONSULT_MAX_TOKENS,
                    temperature=0.0,
                    grammar=CONSULT_GRAMMAR if self.settings.use_grammar and backend.supports_grammar() else None,
                    slot_id=f"{record_id}@{target}",
                    slot_title=f"consult {target}: {ph.description}",
                    cancel=self.cancel,
                )
            )
        except CoeError as exc:
            return None, f"could not be consulted ({exc})"
        except Exception as exc:  # a backend's own error type is unknown: the consult failed, the slot goes on
            return None, f"could not be consulted ({type(exc).__name__}: {exc})"
        answer, problem = parse_consult_answer(gen.text)
        if answer is not None and echoes_question(answer, ph.description):
            answer, problem = None, "only repeated the question"
        ledger.append(
            LedgerEntry(
                agent=target,
                action="consult",
                slot_id=record_id.rsplit(".", 1)[0],
                inputs_summary=f"{record_id}, depth {depth}, asked by {asker}: {ph.description}"[:500],
                outputs_summary=(answer if answer is not None else f"{problem}: {gen.text.strip()[:200]}")[:500],
                duration_ms=int((time.perf_counter() - t0) * 1000),
                prompt_tokens=gen.prompt_tokens,
                completion_tokens=gen.completion_tokens,
            )
        )
        return answer, problem

    # --- collaborators, created on first use (a slot without placeholders loads nothing) -----------------------

    def _kb(self) -> KnowledgeBase:
        if self.kb is not None:
            return self.kb()
        return load_kb(kb_dir(self.settings.kb_path))

    def _router(self) -> ExpertRouter:
        if self.router is not None:
            router = self.router()
        else:
            router = get_router(RouterParams.from_settings(self.settings), self._catalog())
        return router_with_lessons(router, list(self.lessons))  # the router itself when there are none

    def _catalog(self) -> Catalog:
        if self.catalog is None:
            self.catalog = load_catalog()
        return self.catalog

    def _backend(self, expert: str) -> ExpertBackend:
        if self.backend_for is not None:
            return self.backend_for(expert)
        binding = resolve_binding(self.settings, self._catalog().get(expert))
        return get_backend(self.settings, binding.model)


def _record(
    record_id: str, result: SlotResult, ph: Placeholder, outcome: _Outcome, occurrences: int, seconds: float
) -> AssistRecord:
    resolved = outcome.value is not None and bool(outcome.sources)
    reason = None if resolved else (outcome.reason or "no source was found")
    return AssistRecord(
        id=record_id,
        slot_id=result.slot_id,
        asker=result.expert,
        kind=ph.kind,
        domain=ph.domain,
        description=ph.description,
        placeholder=ph.raw,
        status="resolved" if resolved else "unresolved",
        value=outcome.value if resolved else None,
        marker=None if resolved else unresolved_marker(ph.kind, ph.domain, ph.description, str(reason)),
        reason=reason,
        sources=outcome.sources if resolved else [],
        depth=outcome.depth,
        chain=outcome.chain or [result.expert],
        trail=outcome.trail,
        awaiting_user=outcome.awaiting_user,
        occurrences=occurrences,
        duration_ms=int(seconds * 1000),
    )


def _ledger_entry(record: AssistRecord) -> LedgerEntry:
    if record.status == "resolved":
        summary = "resolved from " + "; ".join(s.cite() for s in record.sources)
        scores = [s.score for s in record.sources if s.kind == "document" and s.score is not None]
        confidence = max(0.0, min(1.0, scores[0])) if scores else None
    else:
        summary, confidence = f"unresolved: {record.reason}", None
    return LedgerEntry(
        agent="assist",
        action=f"assist_{record.kind}",
        slot_id=record.slot_id,
        inputs_summary=f"{record.id}: {record.placeholder}"[:500],
        outputs_summary=summary[:500],
        duration_ms=record.duration_ms,
        confidence=confidence,
    )
