"""Fitting a plan to its task: every slot serves the task, every deliverable the task names has a slot.

:func:`fit_plan` runs on every plan built from the template library, before and after the planner edits it: a
slot under :data:`RELEVANCE_LINE` to the closest named deliverable is removed, and a deliverable no slot covers at
:data:`COVERAGE_LINE` gets a slot of its own (:func:`aspect_slot`). A task no template fits is planned from its
deliverables alone (:func:`aspect_framework`). The lines, and why: docs/decisions/planning.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from engine.planning.adaptation import adapt
from experts.backends import ExpertBackend
from experts.embedding.encoder import Embedder
from experts.routing.aspects import Aspect, aspect_title, deliverable_noun, named_functions, task_aspects
from state.adaptation import AdaptationRecord, PlanFit
from state.framework import (
    Framework,
    SlotSpec,
    ancestors,
    fallback_framework,
    slot_text,
    title_from_task,
    validate_framework,
)
from state.io import MAX_TASK_CHARS
from state.template import Template, TemplateSlot

__all__ = [
    "COVERAGE_LINE",
    "OWN_PIECE_NOUNS",
    "RELEVANCE_LINE",
    "STRONG_FIT_LINE",
    "TEMPLATE_FIT_LINE",
    "TRUSTED_RELEVANCE_LINE",
    "aspect_framework",
    "aspect_slot",
    "assess",
    "fit_plan",
    "fit_slots",
    "fit_template",
    "plan_from_aspects",
    "plan_from_template",
    "prune_slots",
    "relevance_line_for",
    "work_phase",
]

RELEVANCE_LINE = 0.40
"""A slot less similar than this to every aspect (to the task, when it names one) serves nothing it asked for."""
COVERAGE_LINE = 0.45
"""An aspect at least this similar to some slot is covered by it."""
TEMPLATE_FIT_LINE = 0.40
"""A best template under this similarity does not fit the task: the plan is built from the aspects."""
STRONG_FIT_LINE = 0.75
"""A template at least this similar to the task was written for it: its slots are trusted more (set by hand)."""
TRUSTED_RELEVANCE_LINE = 0.20
"""The relevance line for the slots of a template that fits strongly: only the clearly unrelated leave."""
OWN_PIECE_NOUNS = frozenset(
    """
    announcement checklist dockerfile email emails exercise exercises faq function glossary handout invitation
    letter memo notice poem policy problems query queries questions quiz readme runbook script song speech story
    """.split()
)
"""Deliverables that are a piece of their own, never a part of a bigger one that a template splits into sections
(unlike a plan, a report or a guide): an aspect naming one is covered only by a slot that names it too."""

PHASES: tuple[frozenset[str], ...] = (
    frozenset(
        "analyse analyze assess audit check diagnose evaluate find identify investigate measure profile research "
        "review troubleshoot".split()
    ),
    frozenset("choose decide define design estimate model outline plan propose sketch specify structure".split()),
    frozenset(),  # building: every verb not named elsewhere
    frozenset("benchmark test validate verify".split()),
    frozenset("document explain present report summarise summarize describe publish".split()),
)
"""The order of work: find out, design, build, check, explain."""
BUILD_PHASE = 2

S = TypeVar("S", bound=SlotSpec)
_SPEC = set(SlotSpec.model_fields)


def work_phase(verb: str) -> int:
    """Where an aspect's verb falls in the order of work (0 find out ... 4 explain)."""
    for index, verbs in enumerate(PHASES):
        if verb.lower() in verbs:
            return index
    return BUILD_PHASE


def aspect_slot(aspect: Aspect, number: int, taken: set[str], defines: str = "") -> SlotSpec:
    """A slot for one aspect of the task (its expert is left to the router); ``taken`` gets its id.

    ``defines``: a sentence on the functions the part must define (:func:`_functions_to_define`), after the
    instruction, where the context's clip cannot take it.
    """
    words = re.findall(r"[a-z0-9]+", aspect.text.lower())[:5]
    base = "_".join(words)[:48].strip("_") or "part"
    slot_id = base if base[0].isalpha() else f"part_{base}"
    if slot_id in taken:
        slot_id = f"{slot_id}_{number}"
    taken.add(slot_id)
    text = aspect.text.strip().rstrip(".:").rstrip()
    instruction = text[0].upper() + text[1:]
    title = aspect_title(aspect)[:200]
    context = f" Context: {aspect.context.rstrip('.')}." if aspect.context else ""
    return SlotSpec(
        id=slot_id,
        title=title,
        description=f"{instruction}.{defines}{context}"[:MAX_TASK_CHARS],
        expected_outputs=[title],
    )


def aspect_framework(task: str, aspects: Sequence[Aspect], title: str) -> Framework:
    """The plan of a task no template fits: one slot per aspect, ordered by the order of work.

    A slot depends on the slots of the nearest earlier phase present and may reference every earlier slot.
    """
    taken: set[str] = set()
    defines = _functions_to_define(task, aspects)
    slots = [aspect_slot(a, n, taken, defines.get(n - 1, "")) for n, a in enumerate(aspects, 1)]
    phases = [work_phase(a.verb) for a in aspects]
    out: list[SlotSpec] = []
    for index, spec in enumerate(slots):
        earlier = [p for p in phases[:index] if p < phases[index]]
        nearest = max(earlier) if earlier else None
        deps = [slots[i].id for i in range(index) if phases[i] == nearest]
        refs = [slots[i].id for i in range(index) if phases[i] < phases[index]]
        out.append(spec.model_copy(update={"deps": deps, "can_reference": refs}))
    return Framework(id="aspects", title=title, source="aspects", slots=out)


_IMPLEMENTS = re.compile(r"\.py\b|\b(?:code|module|function|functions|class|script|library|package)\b", re.I)
_NOT_IMPLEMENTING = frozenset("test tests readme paragraph note faq table docs documentation guide".split())


def _functions_to_define(task: str, aspects: Sequence[Aspect]) -> dict[int, str]:
    """The sentence naming the task's functions, for the one aspect that writes the code (by its index).

    mp5-feature-flags: "a tiny Python module that reads it" was the code's part; the task named ``load_flags(path)``
    and ``is_enabled(flags, name, user_id)`` in a later sentence, which the part's clipped context lost, and its
    check asked for no function: the part wrote a class with methods of other parameters. The functions the task's
    words name with their parameters that no aspect names go to the one part that writes code and is not its tests
    or documentation; none when no part, or more than one, does.
    """
    signatures = named_functions(task)
    unnamed = [sig for name, sig in signatures.items() if not any(re.search(rf"\b{name}\b", a.text) for a in aspects)]
    makers = [
        at
        for at, a in enumerate(aspects)
        if _IMPLEMENTS.search(a.text) and (deliverable_noun(a) or "").lower() not in _NOT_IMPLEMENTING
    ]
    if not unnamed or len(makers) != 1:
        return {}
    listed = ", ".join(unnamed[:-1]) + (" and " if len(unnamed) > 1 else "") + unnamed[-1]
    return {makers[0]: f" It defines {listed}, as the task names {'them' if len(unnamed) > 1 else 'it'}."}


def prune_slots(slots: Sequence[S], drop: set[str]) -> list[S]:
    """``slots`` without ``drop``: dependents take over a removed slot's dependencies, stale references go."""
    by_id = {s.id: s for s in slots}

    def inherited(slot_id: str, seen: set[str]) -> list[str]:
        out: list[str] = []
        for dep in by_id[slot_id].deps if slot_id in by_id else []:
            if dep in drop and dep not in seen:
                seen.add(dep)
                out += inherited(dep, seen)
            elif dep not in drop and dep not in out:
                out.append(dep)
        return out

    kept = [s.model_copy(update={"deps": inherited(s.id, set())}) for s in slots if s.id not in drop]
    probe = Framework(
        id="probe", title="probe", slots=[SlotSpec.model_validate(s.model_dump(include=_SPEC)) for s in kept]
    )
    out = []
    for spec in kept:
        above = ancestors(probe, spec.id)
        refs = [r for r in spec.can_reference if r in above]
        hints = {k: v for k, v in spec.reference_hints.items() if k in refs}
        out.append(spec.model_copy(update={"can_reference": refs, "reference_hints": hints}))
    return out


def assess(
    slots: Sequence[SlotSpec],
    task: str,
    embedder: Embedder,
    *,
    aspects: Sequence[Aspect] | None = None,
    relevance_line: float | None = None,
    coverage_line: float | None = None,
) -> PlanFit:
    """Score every slot's relevance and every aspect's coverage; name the slots to remove and the aspects to add.

    Coverage counts only the slots that stay. The most relevant slot always stays. The lines default to
    :data:`RELEVANCE_LINE` and :data:`COVERAGE_LINE`.
    """
    relevance_line = RELEVANCE_LINE if relevance_line is None else relevance_line
    coverage_line = COVERAGE_LINE if coverage_line is None else coverage_line
    found = list(aspects) if aspects is not None else task_aspects(task)
    n = len(found)
    vectors = embedder.encode(
        [task, *[a.text for a in found], *[slot_text(s) for s in slots], *[s.title for s in slots]]
    )
    goal, aspect_vecs = vectors[:1], vectors[1 : 1 + n]
    text_vecs, title_vecs = vectors[1 + n : 1 + n + len(slots)], vectors[1 + n + len(slots) :]
    # A task that names several deliverables is served by a slot close to one of them; the task as a whole is
    # too broad a target (a budget slot is near enough to a launch plan that never asked for a budget).
    targets = aspect_vecs if n >= 2 else np.vstack([goal, aspect_vecs])
    # A slot is compared by its whole text and by its title alone: a short deliverable ("describe how it is
    # treated") is nearer a short title ("Treatment and self-care") than a paragraph about it.
    pair = np.maximum(text_vecs @ targets.T, title_vecs @ targets.T)
    relevance = np.max(pair, axis=1)
    best = int(np.argmax(relevance))
    stays = [i for i in range(len(slots)) if relevance[i] >= relevance_line or i == best]
    by_aspect = np.maximum(aspect_vecs @ text_vecs[stays].T, aspect_vecs @ title_vecs[stays].T)
    pieces = [noun if (noun := deliverable_noun(a)) in OWN_PIECE_NOUNS else None for a in found]
    by_aspect = by_aspect * _naming(pieces, [slots[i] for i in stays])
    coverage = np.max(by_aspect, axis=1) if found else np.zeros(0)
    titles = {slots[i].title.strip().rstrip(".").lower() for i in stays}
    titled = [{a.text.lower(), aspect_title(a).lower()} & titles for a in found]
    coverage = np.array([1.0 if t else c for t, c in zip(titled, coverage, strict=True)])
    # A slot that names the piece covers it once it is near enough to stay for it ("Prioritised compliance
    # checklist" is the checklist IT audits with, at 0.44)
    lines = [min(coverage_line, relevance_line) if piece else coverage_line for piece in pieces]
    return PlanFit(
        aspects=[a.text for a in found],
        verbs=[a.verb for a in found],
        relevance={s.id: round(float(r), 4) for s, r in zip(slots, relevance, strict=True)},
        removed=[s.id for i, s in enumerate(slots) if i not in stays],
        coverage={a.text: round(float(c), 4) for a, c in zip(found, coverage, strict=True)},
        missing=[a.text for a, c, line in zip(found, coverage, lines, strict=True) if c < line],
    )


def _naming(pieces: Sequence[str | None], slots: Sequence[SlotSpec]) -> np.ndarray:
    """1 where a slot may cover an aspect, 0 where the aspect names a piece of its own that the slot does not name.

    ``pieces``: each aspect's own-piece noun, None for an aspect that names none.
    """
    texts = [slot_text(s).lower() for s in slots]
    allowed = np.ones((len(pieces), len(slots)))
    for row, noun in enumerate(pieces):
        if noun is not None:
            stem = noun[:-1] if noun.endswith(("s", "y")) else noun  # policy/policies, exercises/exercise
            named = re.compile(r"\b" + re.escape(stem) + r"(?:y|ies|s|es|zes)?\b")  # quiz/quizzes
            allowed[row] = [1.0 if named.search(text) else 0.0 for text in texts]
    return allowed


def fit_slots(slots: Sequence[S], fit: PlanFit, make: type[S], aspects: Sequence[Aspect]) -> tuple[list[S], PlanFit]:
    """``slots`` without the removed ones and with a slot per missing aspect (built as ``make``).

    ``aspects`` are the ones ``fit`` was assessed on.
    """
    kept = prune_slots(slots, set(fit.removed))
    taken = {s.id for s in kept}
    sinks = [s.id for s in kept if not any(s.id in o.deps for o in kept)]
    orphaned = {s.id for s in slots if set(s.deps) & set(fit.removed)}
    added: list[S] = []
    by_text = {a.text: a for a in aspects}
    for number, text in enumerate(fit.missing, 1):
        aspect = by_text[text]
        spec = aspect_slot(aspect, number, taken)
        if work_phase(aspect.verb) > BUILD_PHASE:  # checking or explaining comes after the work it is about
            spec = spec.model_copy(update={"deps": sinks, "can_reference": [s.id for s in kept]})
        added.append(make.model_validate(spec.model_dump()))
    kept = [_after_designs(s, added, by_text, fit) if s.id in orphaned else s for s in kept]
    removed = [SlotSpec.model_validate(s.model_dump(include=_SPEC)) for s in slots if s.id in set(fit.removed)]
    return kept + added, fit.model_copy(update={"added": [s.id for s in added], "removed_slots": removed})


def _after_designs(slot: S, added: Sequence[S], by_text: dict[str, Aspect], fit: PlanFit) -> S:
    """A slot whose dependency was removed waits for (and may read) the added slots that find out or design.

    The removed slot was the template's version of that earlier work; the slot added for the task's own
    find-out or design aspect takes its place before the work that used it (a schema before its queries).
    """
    earlier = [
        spec.id
        for spec, text in zip(added, fit.missing, strict=True)
        if work_phase(by_text[text].verb) < BUILD_PHASE and spec.id not in slot.deps
    ]
    if not earlier:
        return slot
    refs = slot.can_reference + [i for i in earlier if i not in slot.can_reference]
    return slot.model_copy(update={"deps": [*slot.deps, *earlier], "can_reference": refs})


def _fitted(
    slots: Sequence[S],
    task: str,
    embedder: Embedder,
    make: type[S],
    aspects: Sequence[Aspect] | None,
    relevance_line: float | None,
) -> tuple[list[S], PlanFit]:
    found = list(aspects) if aspects is not None else task_aspects(task)
    fit = assess(slots, task, embedder, aspects=found, relevance_line=relevance_line)
    return fit_slots(slots, fit, make, found)


def relevance_line_for(similarity: float) -> float:
    """The relevance line for the slots of a template this similar to the task."""
    return TRUSTED_RELEVANCE_LINE if similarity >= STRONG_FIT_LINE else RELEVANCE_LINE


def fit_plan(
    framework: Framework,
    task: str,
    embedder: Embedder,
    *,
    aspects: Sequence[Aspect] | None = None,
    relevance_line: float | None = None,
) -> tuple[Framework, PlanFit]:
    """The plan with irrelevant slots removed and uncovered aspects added, and the record of both."""
    slots, fit = _fitted(framework.slots, task, embedder, SlotSpec, aspects, relevance_line)
    return framework.model_copy(update={"slots": slots}), fit


def fit_template(
    template: Template,
    task: str,
    embedder: Embedder,
    *,
    aspects: Sequence[Aspect] | None = None,
    relevance_line: float | None = None,
) -> tuple[Template, PlanFit]:
    """The template with irrelevant slots removed and uncovered aspects added, before the planner edits it.

    Its adaptable slot count is widened to the slots it now has and one more, so the planner may keep them all
    and still add one.
    """
    slots, fit = _fitted(template.slots, task, embedder, TemplateSlot, aspects, relevance_line)
    low, high = template.adaptable.slot_count
    count = (min(low, len(slots)), max(high, len(slots) + 1))
    adaptable = template.adaptable.model_copy(update={"slot_count": count})
    return template.model_copy(update={"slots": slots, "adaptable": adaptable}), fit


def plan_from_template(
    template: Template,
    similarity: float,
    task: str,
    planner: ExpertBackend,
    experts: list[str],
    embedder: Embedder,
    *,
    time_budget: float | None,
) -> tuple[Framework, AdaptationRecord]:
    """The plan of a task from its best template: fitted, edited by the planner within ``time_budget``, checked.

    The template is fitted first (:func:`fit_template`), so the planner edits only slots that serve the task;
    its result passes relevance and coverage again (:func:`fit_plan`). Time to the plan is recorded.
    """
    started = time.perf_counter()
    aspects = task_aspects(task)
    line = relevance_line_for(similarity)
    fitted, before = fit_template(template, task, embedder, aspects=aspects, relevance_line=line)
    own = len(template.slots) - len(before.removed)
    if own < len(before.added):  # the task's own deliverables outweigh what is left of the template
        why = (
            f"template {template.id} ({similarity:.3f}) kept {own} of its {len(template.slots)} slots and lacked "
            f"{len(before.added)} of the task's deliverables"
        )
        fw, record = plan_from_aspects(task, embedder, why, aspects=aspects)
        return fw, record.model_copy(update={"fit_before": before, "seconds": _since(started)})
    own_words = frozenset(before.added)  # the task's deliverables in its own words: the planner keeps them
    fw, record = adapt(fitted, similarity, task, planner, experts, time_budget=time_budget, as_written=own_words)
    fw, after = fit_plan(fw, task, embedder, aspects=aspects, relevance_line=line)
    validate_framework(fw)  # every framework that reaches execution is valid
    return fw, record.model_copy(update={"fit_before": before, "fit_after": after, "seconds": _since(started)})


def plan_from_aspects(
    task: str, embedder: Embedder, why: str, *, aspects: Sequence[Aspect] | None = None
) -> tuple[Framework, AdaptationRecord]:
    """The plan of a task no template fits: one slot per deliverable it names (one slot when it names one)."""
    started = time.perf_counter()
    aspects = list(aspects) if aspects is not None else task_aspects(task)
    if len(aspects) < 2:
        fw = validate_framework(fallback_framework(task, source="aspects:single"))
        reason = f"{why}; the task names one deliverable: one slot"
        return fw, AdaptationRecord(built_from="aspects", reason=reason, seconds=_since(started))
    fw = validate_framework(aspect_framework(task, aspects, title_from_task(task)))
    fit = assess(fw.slots, task, embedder, aspects=aspects)
    reason = f"{why}; one slot per deliverable the task names ({len(aspects)})"
    return fw, AdaptationRecord(built_from="aspects", reason=reason, fit_after=fit, seconds=_since(started))


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)
