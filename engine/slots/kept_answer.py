"""Edits of a slot's kept answer, none of which rewords it.

Each cuts what the person should not read twice (or at all: an output nobody printed), or computes what the
model only wrote out:

* :func:`without_loops`: when every candidate looped, the kept one's repeated sentences go
  (:func:`engine.slots.loop_watch.cut_loops`).
* :func:`without_unfinished_end`: a code answer's note that breaks off is cut back to its last full sentence.
* :func:`without_repeated_sections`: a section that repeats an earlier one, the task or a referenced slot, or that
  is another slot's part, goes, and the rest are numbered again; so does a code block that repeats earlier code.
* :func:`without_unprinted_output`: an output block after Python that the program, run, does not print goes, and a
  ``print(...)  # Output: X`` comment says what the program prints.
* :func:`imported`: a standard module a candidate's Python uses and never imports is imported (the one edit that
  adds a line of code), as each candidate is drawn (before its checks).
* :func:`computed`: a candidate's arithmetic is computed (:mod:`engine.slots.inline_arithmetic`), in a math
  slot and any whose result a program computes, as each candidate is drawn (before its checks).
* :func:`without_written_sources`: a source tag or unresolved marker the model wrote itself goes (only the
  harness cites a source, when it resolves an assist after this).

Each edit adds a ledger entry naming what changed, and the kept checks it affects are read again, so the caveat
speaks of the text delivered; the candidates' own records keep what each candidate was.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.slots.checks import (
    code_blocks,
    cut_unfinished_end,
    duplicates_check,
    ending_check,
    repeated_sections,
    repetition_check,
)
from engine.slots.checks.code import module_code, unimported_modules
from engine.slots.checks.contract import WRITTEN_SOURCE, RepeatedCode, repeated_code, sources_check
from engine.slots.checks.printed import numbers_only_from, unprinted_outputs, wrong_print_comments
from engine.slots.checks.text import PYTHON_TAGS
from engine.slots.inline_arithmetic import compute, compute_all
from engine.slots.loop_watch import cut_loops
from engine.slots.sandbox import SandboxLimits
from state.passport import LedgerEntry
from state.quality import CheckResult
from state.result import OutlineItem, Section, SlotResult, render_section

__all__ = [
    "computed",
    "imported",
    "without_loops",
    "without_repeated_sections",
    "without_unfinished_end",
    "without_unprinted_output",
    "without_written_sources",
]


def without_loops(result: SlotResult, task: str, ledger: list[LedgerEntry]) -> SlotResult:
    """The result without the sentences it repeats (:func:`engine.slots.loop_watch.cut_loops`), and a ledger entry."""
    raw, removed = cut_loops(result.raw)
    if not removed:
        return result
    seen: set[str] = set()
    sections = [s.model_copy(update={"body": cut_loops(s.body, seen)[0]}) for s in result.sections]
    cut = result.model_copy(update={"raw": raw, "sections": sections})
    left = repetition_check(cut.body_text(), task)
    said = f"it looped while written: {removed} repeated sentence(s) were cut, nothing reworded"
    looped = CheckResult(
        name="prose.repetition", passed=False, detail=f"{said}; {left.detail}" if not left.passed else said
    )
    # the caveat speaks of the text delivered, not of the loop that was cut out of it
    # (sections alike only by the sentences cut no longer repeat each other)
    again: dict[str, Callable[[CheckResult], CheckResult]] = {
        looped.name: lambda _: looped,
        "contract.ends": lambda c: ending_check(raw, c.severity),
        "contract.duplicates": lambda _: duplicates_check(cut, task, module=_module(cut)),
    }
    cut = _rechecked(cut, again)
    summary = f"the kept answer looped: {removed} repeated sentence(s) removed, nothing reworded"
    _record(ledger, result, "cut_repeats", summary)
    return cut


def without_unfinished_end(result: SlotResult, ledger: list[LedgerEntry]) -> SlotResult:
    """The result without the unfinished end of its last line of text (:func:`engine.slots.checks.cut_unfinished_end`).

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
    summary = f"the answer's last line broke off: {gone[:200]!r} removed, nothing reworded"
    _record(ledger, result, "cut_unfinished_end", summary)
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


def without_repeated_sections(
    result: SlotResult,
    task: str,
    references: tuple[str, ...],
    ledger: list[LedgerEntry],
    others: tuple[str, ...] = (),
    own: str = "",
) -> SlotResult:
    """The result without its sections that repeat something, are another slot's part, or are empty.

    Repeated: an earlier section, the task or a referenced slot (whose text is in the document already). Another
    slot's part: a section titled as one of ``others`` (that slot writes it; ``own`` is this slot's title). Then a
    code block that repeats code written earlier in the answer goes, or only the definitions it repeats
    (:func:`repeated_code`), and a section left empty by that goes too. Nothing is reworded: such a section goes
    with its sub-sections, the rest keep their order and are numbered again, and a ledger entry names what went. A
    result whose every section would go is kept as it is (its caveat says why).
    """
    module = _module(result)
    repeated = repeated_sections(result, task, references, others, own)
    gone = {label for label, _ in repeated}

    def under(label: str, labels: set[str]) -> bool:
        return any(label == g or label.startswith(g + ".") for g in labels)

    kept = [s for s in result.sections if not under(s.label, gone)]
    code = repeated_code(result.model_copy(update={"sections": kept}), module=module)
    repeated += [(c.label, c.why) for c in code]
    kept = [_without_blocks(s, [c for c in code if c.label == s.label]) for s in kept]
    empty = {
        s.label  # e.g. every sentence of it was a repeat, cut with the loop, or its one block repeated another
        for s in kept
        if not s.body.strip() and not any(o.label.startswith(s.label + ".") for o in kept)
    }
    repeated += [
        (label, f"section {label} is empty") for label in sorted(empty) if not any(c.label == label for c in code)
    ]
    if not repeated:
        return result
    gone |= empty
    kept = [s for s in kept if not under(s.label, empty)]
    if not kept:
        return result
    tops: dict[str, str] = {}
    for section in kept:
        tops.setdefault(section.label.split(".")[0], str(len(tops) + 1))

    def renumbered(label: str) -> str:
        top, *rest = label.split(".")
        return ".".join([tops.get(top, top), *rest])

    sections = [s.model_copy(update={"label": renumbered(s.label)}) for s in kept]
    outline = [o.model_copy(update={"label": renumbered(o.label)}) for o in result.outline if not under(o.label, gone)]
    cleaned = result.model_copy(update={"raw": _rendered(outline, sections), "sections": sections, "outline": outline})
    cleaned = _rechecked(cleaned, {"contract.duplicates": lambda _: duplicates_check(cleaned, task, module=module)})
    _record(ledger, result, "cut_sections", "; ".join(why for _, why in repeated)[:400] + ": removed, nothing reworded")
    return cleaned


def _without_blocks(section: Section, blocks: list[RepeatedCode]) -> Section:
    """``section`` with each of its repeated code ``blocks`` replaced by what stays of it (nothing, or its calls)."""
    body = section.body
    for block in sorted(blocks, key=lambda b: b.start, reverse=True):
        before, after = body[: block.start].rstrip(), body[block.end :].lstrip("\n")
        body = "\n\n".join(part for part in (before, block.kept.strip("\n"), after) if part.strip())
    return section.model_copy(update={"body": body})


def _module(result: SlotResult) -> bool:
    """Whether the kept answer delivers one module (code or data, as its quality records): see :func:`repeated_code`."""
    return result.quality is not None and result.quality.deliverable in ("code", "data")


def without_unprinted_output(
    result: SlotResult, task: str, limits: SandboxLimits, ledger: list[LedgerEntry]
) -> SlotResult:
    """The result without the output blocks no program printed (:func:`unprinted_outputs`), each ledgered.

    A block that follows Python and shows what the program would print is kept only when the program, run in the
    sandbox, prints it; the label that announced a block goes with it. When a number the answer states came only
    from such a block (not from the task, its code or what a program printed), the kept checks get a failing
    ``python.printed`` check, so the document's caveat says so: the mortgage answer's boxed $2,500.
    """
    bodies = [s.body for s in result.sections] if result.sections else [result.raw]
    wrong = wrong_print_comments(bodies, limits)
    for comment in wrong:  # "print(tax(30000))  # Output: 300.0" where it prints 5000.0: what it prints
        bodies[comment.body] = bodies[comment.body].replace(comment.line, comment.fixed, 1)
        _record(
            ledger,
            result,
            "fix_output_comment",
            f"a comment said {comment.line.split('#', 1)[0].strip()[:80]} prints {comment.claimed[:40]!r}; "
            f"it prints {comment.printed[:40]!r}",
        )
    gone = unprinted_outputs(bodies, limits)
    if not gone and not wrong:
        return result
    if not gone:
        return _with_bodies(result, bodies)
    for index in sorted({u.body for u in gone}):
        mine = sorted((u for u in gone if u.body == index), key=lambda u: u.start, reverse=True)
        for cut in mine:
            before, after = bodies[index][: cut.start].rstrip(), bodies[index][cut.end :].lstrip("\n")
            bodies[index] = "\n\n".join(part for part in (before, after) if part.strip())
    cleaned = _with_bodies(result, bodies)
    cleaned = _rechecked(cleaned, {"contract.ends": lambda c: ending_check(cleaned.raw, c.severity)})
    for u in gone:
        _record(
            ledger, result, "cut_output", f"removed an output block no program printed ({u.why}): {u.shown[:160]!r}"
        )
    code = "\n".join(code for _, code in code_blocks(cleaned.body_text()))
    stated = numbers_only_from(cleaned.body_text(), gone, f"{task}\n{code}")
    if stated and cleaned.quality is not None:
        detail = (
            f"the answer states {', '.join(stated)}, which only an output block no program printed "
            f"showed (removed: {gone[0].why})"
        )
        check = CheckResult(name="python.printed", passed=False, detail=detail[:400])
        checks = [*cleaned.quality.checks, check]
        cleaned = cleaned.model_copy(update={"quality": cleaned.quality.model_copy(update={"checks": checks})})
    return cleaned


def _with_bodies(result: SlotResult, bodies: list[str]) -> SlotResult:
    """``result`` with its sections' bodies (or its whole text, when it has no sections) as given."""
    if result.sections:
        sections = [s.model_copy(update={"body": body}) for s, body in zip(result.sections, bodies, strict=True)]
        return result.model_copy(update={"raw": _rendered(result.outline, sections), "sections": sections})
    return result.model_copy(update={"raw": bodies[0].rstrip() + "\n"})


def without_written_sources(result: SlotResult, ledger: list[LedgerEntry]) -> SlotResult:
    """The result without the source tags and unresolved markers the model wrote itself, ledgered.

    A citation nobody made is worse than none: a kept answer that still holds one (every candidate did) loses it,
    and its ``contract.sources`` check is read again on the text delivered.
    """
    found = [m.group(0).strip() for m in WRITTEN_SOURCE.finditer(result.raw)]
    if not found:
        return result
    sections = [
        s.model_copy(update={"title": WRITTEN_SOURCE.sub("", s.title), "body": WRITTEN_SOURCE.sub("", s.body)})
        for s in result.sections
    ]
    raw = _rendered(result.outline, sections) if result.sections else WRITTEN_SOURCE.sub("", result.raw)
    cleaned = result.model_copy(update={"raw": raw, "sections": sections})
    cleaned = _rechecked(cleaned, {"contract.sources": lambda _: sources_check(cleaned.raw)})
    _record(ledger, result, "cut_sources", f"removed {len(found)} source tag(s) the model wrote: {found[0][:160]!r}")
    return cleaned


def _rendered(outline: list[OutlineItem], sections: list[Section]) -> str:
    """The raw text of an outline and its sections, as an edit of the kept answer writes it again."""
    items = "\n".join(f"{o.label}. {o.title}" if o.level == 1 else f"   {o.label} {o.title}" for o in outline)
    body = "\n\n".join(render_section(s) for s in sections) + "\n"
    return f"## Outline\n{items}\n\n{body}" if outline else body


def computed(result: SlotResult, ledger: list[LedgerEntry], candidate: str = "") -> SlotResult:
    """The result with its calculations computed, and a ledger entry naming each change (of ``candidate``)."""
    raw, changes = compute(result.raw)
    if not changes:
        return result
    bodies = compute_all([s.body for s in result.sections])[0]  # a wrong result restated in a later section too
    sections = [s.model_copy(update={"body": body}) for s, body in zip(result.sections, bodies, strict=True)]
    _record(ledger, result, "compute", (f"{candidate}: " if candidate else "") + "; ".join(changes)[:500])
    return result.model_copy(update={"raw": raw, "sections": sections})


def imported(result: SlotResult, ledger: list[LedgerEntry], candidate: str = "") -> SlotResult:
    """The result with the standard modules its Python module uses and never imports imported, and a ledger entry.

    The one edit that adds to code, and only an ``import`` line of the standard library the code already calls:
    the feature-flags module called ``zlib.crc32`` with no ``import zlib`` in every candidate of two runs, and went
    out under ``python.unimported``'s caveat. The line goes after the imports that open the module's block.
    """
    module, _ = module_code(result)
    missing = unimported_modules(module) if module else []
    if not module or not missing:
        return result
    first = next((code for language, code in code_blocks(result.raw) if language in PYTHON_TAGS), None)
    if first is None:
        return result
    lines = first.split("\n")
    at = 0
    for index, line in enumerate(lines):
        if line.startswith(("import ", "from ")):
            at = index + 1
        elif line.strip() and not line.startswith("#"):
            break
    added = "\n".join([*lines[:at], *(f"import {name}" for name in missing), *lines[at:]])
    raw = result.raw.replace(first, added, 1)
    sections = [s.model_copy(update={"body": s.body.replace(first, added, 1)}) for s in result.sections]
    said = f"imported {', '.join(missing)}: the code uses {' and '.join(missing)} and never imported it"
    _record(ledger, result, "import", (f"{candidate}: " if candidate else "") + said)
    return result.model_copy(update={"raw": raw, "sections": sections})


def _record(ledger: list[LedgerEntry], result: SlotResult, action: str, summary: str) -> None:
    """The ledger entry of one edit of ``result`` by the harness."""
    ledger.append(LedgerEntry(agent="harness", action=action, slot_id=result.slot_id, outputs_summary=summary))
