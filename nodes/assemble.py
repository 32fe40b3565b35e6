"""Node ``assemble``: build the final Markdown document from the slot results. No LLM writes here.

Layout: the framework title; one section per slot in dependency order with the expert's numbered sections
nested under it; a note in place of every slot that failed or was blocked; the task's computed figures with their
program (a multi-part task with numbers, ``engine.figures``); then what the completion round could not give the
document ("Still missing", ``nodes.complete``), every unresolved marker, the full source of every filled assist
(file and location or consulted expert, score) and the warnings;
optionally (``--ledger``) the ledger, rendered by :func:`render_ledger`. Last, the slots that fall in a candidate
expert version's shadow share are queued for it (:mod:`engine.shadow_offer`; answered later, in spare time).
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from engine.shadow_offer import offer_slots
from experts.embedding import get_embedder
from memory.store import Episode, EpisodeMemory, FactMemory
from state.assist import unresolved_markers
from state.context import RunContext
from state.enums import RunStatus, SlotStatus
from state.figures import TaskFigures
from state.framework import title_from_task, topological_order
from state.io import RunSummary, SlotSummary
from state.passport import LedgerEntry, PlannedPassport, SlotState, utcnow
from state.quality import unbraced
from state.result import SlotResult, render_section

logger = logging.getLogger(__name__)

FIGURES_TITLE = "Computed figures"
MISSING_TITLE = "Still missing"
COMPLETION_NODE = "complete"
"""The node whose notices say what is still missing (the section above the warnings says it once)."""
FIGURES_OUTPUT_LINES = 30
"""The figures program's output lines shown; a longer output (a table it printed anyway) is cut, with a count."""


def assemble(state: PlannedPassport, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Assemble the document and the run summary; record the run in the person's episodic memory (a store)."""
    fw = state.framework
    order = topological_order(fw)
    states = {s.id: state.slot_states.get(s.id) or SlotState() for s in fw.slots}
    title = document_title(state)
    parts: list[str] = [f"# {title}"]
    unresolved: list[str] = []
    filled: list[str] = []
    for sid in order:
        spec = fw.slot(sid)
        st = states[sid]
        parts.append(f"## {spec.title}")
        result = state.results.get(sid)
        if st.status == SlotStatus.DONE and result is not None:
            if result.sections and _titled_as_slot(result.sections[0].title, spec.title):
                # the first section named as its slot, or as much of the name as a title holds: no second heading
                # ("## Query (a): everyone who reports ..." over "### 1. Query (a): everyone who reports ... with")
                parts.append(result.sections[0].body.strip())
                parts.extend(render_section(s, base_level=3) for s in result.sections[1:])
            elif result.sections:
                parts.extend(render_section(s, base_level=3) for s in result.sections)
            else:
                parts.append(result.raw.strip())
            caveat = result.quality.caveat if result.quality is not None else None
            if caveat:
                parts.append(f"> **Caveat:** {caveat}")
            unresolved.extend(dict.fromkeys(unresolved_markers(result.raw)))  # once per slot
            filled.extend(
                f'`{r.id}` {r.kind} "{r.description}": ' + "; ".join(src.cite() for src in r.sources)
                for r in state.assists.get(sid, [])
                if r.status == "resolved"
            )
        elif st.status == SlotStatus.BLOCKED:
            parts.append(f"> **Missing:** this part was not written because {', '.join(st.blocked_by)} failed.")
        elif st.status == SlotStatus.FAILED:
            parts.append(f"> **Missing:** this part failed: {st.error or 'unknown error'}")
        else:
            parts.append(f"> **Missing:** this part did not run (status: {st.status.value}).")
    if state.figures is not None:
        parts.append(f"## {FIGURES_TITLE}")
        parts.append(_figures_shown(state.figures))
    warnings = [(f"[{n.slot_id}] " if n.slot_id else "") + f"{n.level}: {n.message}" for n in state.notices]
    missing = state.completion.missing if state.completion is not None else []
    if missing:  # what the completion round could not give the document (its notices are not repeated below)
        parts.append(f"## {MISSING_TITLE}")
        parts.append("\n".join(f"- {unbraced(m)}" for m in missing))
    said = [w for n, w in zip(state.notices, warnings, strict=True) if not (n.source == COMPLETION_NODE and missing)]
    if unresolved:
        parts.append("## Unresolved")
        parts.append("\n".join(f"- `{m}`" for m in unresolved))
    if filled:
        parts.append("## Assist sources")
        parts.append("\n".join(f"- {f}" for f in filled))
    if said:
        parts.append("## Warnings")
        parts.append("\n".join(f"- {unbraced(w)}" for w in said))  # a quoted placeholder is no placeholder
    statuses = [st.status for st in states.values()]
    if all(s == SlotStatus.DONE for s in statuses):
        status = RunStatus.COMPLETED
    elif any(s == SlotStatus.DONE for s in statuses):
        status = RunStatus.PARTIAL
    else:
        status = RunStatus.FAILED
    summary = RunSummary(
        thread_id=state.run.thread_id,
        run_id=state.run.run_id,
        status=status,
        title=title,
        framework_source=fw.source,
        slots=[_slot_summary(s.id, s.title, states[s.id], state.results.get(s.id)) for s in fw.slots],
        warnings=warnings,
        unresolved=unresolved,
    )
    document = "\n\n".join(parts) + "\n"
    recorded = _record(runtime, state, status, states)
    queued = offer_slots(state)
    if queued:
        recorded += f"; queued for shadow runs: {', '.join(queued)}"
    return {
        "document": document,
        "summary": summary,
        "status": status,
        "updated_at": utcnow(),
        "ledger": [
            LedgerEntry(
                agent="harness",
                action="assemble",
                inputs_summary=f"{len(order)} slots",
                outputs_summary=f"{len(document)} chars, {len(unresolved)} unresolved, status {status.value}"
                + f"; {recorded}",
            )
        ],
    }


def _figures_shown(figures: TaskFigures) -> str:
    """The figures' section: the confirmed figures, else the unconfirmed ones, else that none was computed."""
    if figures.figures:
        return _figures_section(figures)
    if figures.unconfirmed:
        return _unconfirmed_section(figures)
    return _uncomputed_section(figures)


def _uncomputed_section(figures: TaskFigures) -> str:
    """The figures' section when no program gave a figure (it failed, printed none, or none could be written).

    multipart_set4_first, the new hire's pro-rata pay: the task's figures were wanted, the program gave none, and
    the document stated a first pay of 21,920 (1,937.53) with nothing to say that no program had checked it.
    """
    program = f" The program:\n\n```python\n{figures.program.strip()}\n```" if figures.program.strip() else ""
    return (
        f"No figure was computed: the program {figures.model} wrote for the task gave none ({figures.note}), so the "
        "parts were given none. The numbers in the parts above were not checked by a program: check every one "
        f"before relying on it.{program}"
    )


def _unconfirmed_section(figures: TaskFigures) -> str:
    """The figures' section when programs ran and none of their figures was confirmed: the reader is told.

    The parts were given no figure and state their own; without this a document whose programs disagreed (the
    bakery's 1,200 against 2,000 loaves) said nothing of it.
    """
    listed = ", ".join(f"{f.name} ({f.value:,.2f})" for f in figures.unconfirmed)
    return (
        f"No figure could be confirmed: the programs {figures.model} wrote for the task printed {listed}, and no two "
        "of them agreed on one (or only one printed it), so the parts were given none. Check every number in the "
        f"parts above before relying on it. The first program:\n\n```python\n{figures.program.strip()}\n```\n\n"
        f"Output:\n\n```text\n{_output_shown(figures)}\n```"
    )


def _output_shown(figures: TaskFigures) -> str:
    """The program's output, long output cut (said so)."""
    lines = figures.output.strip().splitlines()
    shown = "\n".join(lines[:FIGURES_OUTPUT_LINES])
    if len(lines) > FIGURES_OUTPUT_LINES:
        shown += f"\n... ({len(lines) - FIGURES_OUTPUT_LINES} more lines)"
    return shown


def _figures_section(figures: TaskFigures) -> str:
    """The task's computed figures, the program that printed them and its output (long output cut, said so)."""
    listed = "\n".join(f"- {f.name}: **{f.value:,.2f}**" for f in figures.figures)
    shown = _output_shown(figures)
    unconfirmed = (
        "\n\nNot given to the parts, because only one program printed them: "
        + ", ".join(f"{f.name} ({f.value:,.2f})" for f in figures.unconfirmed)
        + "."
        if figures.unconfirmed
        else ""
    )
    return (
        f"{listed}\n\nComputed before the parts were written by this Python program, which {figures.model} wrote "
        "for the task and the sandbox ran; another program it wrote, sampled apart, printed the same values, and "
        "every part was given them. Two programs by one model can share a mistake: read the program before relying "
        f"on a figure.\n\n```python\n{figures.program.strip()}\n```\n\nOutput:\n\n```text\n{shown}\n```" + unconfirmed
    )


def _record(
    runtime: Runtime[RunContext], state: PlannedPassport, status: RunStatus, states: dict[str, SlotState]
) -> str:
    """Record the run in episodic memory; what happened, for the ledger (a store that fails never fails the run)."""
    if runtime.store is None:
        return "no memory store: not recorded"
    try:
        EpisodeMemory(runtime.store, state.run.user, get_embedder).record(_episode(state, status, states))
        facts = FactMemory(runtime.store, state.run.user, get_embedder)
        answers = _committed_answers(state, states)
        for text, source in answers:
            facts.add(text, source=source, run_id=state.run.run_id)
    except Exception as exc:  # the store's own error types vary by backend
        logger.warning("the run was not recorded in memory: %s", exc)
        return f"not recorded in memory ({type(exc).__name__}: {exc})"[:200]
    return "recorded in episodic memory" + (f"; {len(answers)} answer(s) of the person remembered" if answers else "")


def _committed_answers(state: PlannedPassport, states: dict[str, SlotState]) -> list[tuple[str, str]]:
    """The person's answers to user assists in slots that are done and pass their checks, as facts to remember.

    Only committed results enter memory: an answer in a slot that failed or failed its checks does not.
    """
    out = []
    for spec in state.framework.slots:
        result = state.results.get(spec.id)
        if states[spec.id].status != SlotStatus.DONE or result is None:
            continue
        if result.quality is not None and not result.quality.passed:
            continue
        for record in state.assists.get(spec.id, []):
            if record.kind == "user" and record.status == "resolved" and record.value:
                out.append((f"{record.description}: {record.value}", f"answer to {spec.title}"[:60]))
    return out


def _episode(state: PlannedPassport, status: RunStatus, states: dict[str, SlotState]) -> Episode:
    """The after-action record of this run."""
    slots = []
    for spec in state.framework.slots:
        result = state.results.get(spec.id)
        quality = result.quality if result is not None and states[spec.id].status == SlotStatus.DONE else None
        slots.append(
            {
                "id": spec.id,
                "title": spec.title,
                "expert": states[spec.id].expert,
                "passed": quality.passed if quality is not None else None,
            }
        )
    return Episode(
        run_id=state.run.run_id,
        thread_id=state.run.thread_id,
        task=state.mission.task,
        status=status.value,
        template=state.template.id if state.template is not None else None,
        slots=slots,
        seconds=round((utcnow() - state.run.created_at).total_seconds(), 1),
        approval=state.approval.action if state.approval is not None else None,
        created_at=utcnow().isoformat(timespec="seconds"),
    )


def _slot_summary(slot_id: str, title: str, st: SlotState, result: SlotResult | None) -> SlotSummary:
    quality = result.quality if result is not None and st.status == SlotStatus.DONE else None
    return SlotSummary(
        id=slot_id,
        title=title,
        expert=st.expert,
        status=st.status,
        attempts=st.attempts,
        error=st.error,
        blocked_by=st.blocked_by,
        deliverable=quality.deliverable if quality is not None else None,
        checks_passed=quality.passed if quality is not None else None,
        failed_checks=[c.name for c in quality.failed_checks] if quality is not None else [],
        candidates=len(quality.candidates) if quality is not None else 0,
    )


def document_title(state: PlannedPassport) -> str:
    """The document's title: the person's own words, the task (the framework's title when they gave the framework).

    A template's title names a kind of task, not this one, so a run planned from the library is titled by its task.
    """
    return state.framework.title if state.adaptation is None else title_from_task(state.mission.task)


def _titled_as_slot(title: str, slot_title: str) -> bool:
    """Whether a section's ``title`` is its slot's title, or the start of it cut at a title's length.

    The start counts from 20 characters, the same words: multipart_set5_rules2 showed every long part title twice,
    the second cut mid-phrase.
    """
    own, slot = " ".join(title.lower().split()), " ".join(slot_title.lower().split())
    return own == slot or (len(own) >= 20 and slot.startswith(own.rstrip(".:,; ")))


def render_ledger(ledger: list[LedgerEntry]) -> str:
    """The ledger as a Markdown table (appended to the document with ``--ledger``)."""
    rows = [
        "## Ledger",
        "",
        "| time | agent | action | slot | ms | tokens in/out | outputs |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in ledger:
        out = e.outputs_summary.replace("|", "\\|").replace("\n", " ")[:120]
        rows.append(
            f"| {e.at:%H:%M:%S} | {e.agent} | {e.action} | {e.slot_id or ''} | {e.duration_ms} | "
            f"{e.prompt_tokens}/{e.completion_tokens} | {out} |"
        )
    return "\n".join(rows) + "\n"
