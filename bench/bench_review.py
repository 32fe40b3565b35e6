"""The review set: ``coe run`` against the bare model it runs on, judged as a reader would, by written rubrics.

``bench/data/review_set.yaml`` holds 48 tasks, four per expert, prose and code, each with a rubric of what a
correct answer must contain (an item is met when its regular expression is found in the document) and, for
Python tasks, tests. For each task:

* **harness**: the compiled graph in process with default settings, as ``coe run`` runs it; the document it
  delivers, and its code (:func:`engine.artifacts.code_artifacts`).
* **bare**: the model the harness routed the task's first slot to, given the task sentence alone, greedy,
  900 tokens, on the same pooled model instance; its reply, and its first Python code block.
* **reference** (issue 39): the best model installed (:data:`bench.versus.REFERENCE_MODEL`), asked the task alone
  at its makers' repetition penalty (:data:`bench.versus.REFERENCE_PENALTY`), whatever the harness routed to.

The two sides and the loop around them are :mod:`bench.versus`, shared with :mod:`bench.bench_humaneval`.

The three documents are judged the same way:

* **degenerate**: the project's repetition check (:func:`engine.slots.checks.repetition_check`: a sentence three times
  or more, a line repeated in a run, a phrase looping, under 75% distinct sentences) finds repetition in what the
  model wrote (:func:`answer_text`: the harness's title, caveats and closing lists left out);
* **stub sections**: a heading whose section has fewer than three words and no code, or placeholder text
  (TODO, "[insert ...]", "to be added");
* **duplicated sections**: two sections with the same text (over 40 characters);
* **truncated code**: an unclosed code fence, or a Python block that does not parse;
* **rubric**: the share of rubric items met by what the model wrote (the same :func:`answer_text`: a caveat that
  names the value a program computed does not meet an item);
* **tests**: the task's asserts run after the delivered code, in the project's sandbox (:mod:`engine.slots.sandbox`);
* **flagged** (the harness's document): it warns its reader, by a caveat or a computed value it calls not
  confirmed. A harness document that misses a rubric item unflagged is a *confident miss*: on a set of quantity
  questions (one item, the value), a wrong number stated without a warning.

Reported: each rate per side, rubric coverage per side and by expert (against the reference too), tests passed,
median seconds, and the harness's tokens generated and thrown away per kept token.

Every answer is written to ``<results>/<name>_documents/<id>.{harness,bare,reference}.md``, to be read.

Run: ``python -m bench.bench_review`` (hours on 2 cores: multi-slot plans); ``--limit N``, ``--ids a,b`` or
``--per-expert K`` for a subset; ``--set PATH`` another set of the same form (``bench/data/numeric_set.yaml``:
word problems with one numeric answer); ``--quick``: three tasks on the fake backend (a test of the bench).
The results are written after every task; ``--resume FILE`` continues a stopped run from its results file (the
tasks it holds are not run again; run it on the same commit), and the summary counts both parts.
"""

from __future__ import annotations

import ast
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common import RESULTS_DIR, md_table
from bench.versus import (
    QUICK_LABEL,
    REFERENCE_MODEL,
    REFERENCE_PENALTY,
    Benchmark,
    Sides,
    compare,
    delivered_modules,
    thrown_away_per_kept,
    versus_parser,
)
from engine.slots.checks import STUB, code_blocks, repetition_check
from engine.slots.checks.text import PYTHON_TAGS
from engine.slots.sandbox import SandboxLimits, run_python

DATA = Path(__file__).resolve().parent / "data" / "review_set.yaml"
_HEADING = re.compile(r"^#{1,6}[ \t]+.*$", re.M)
_WORD = re.compile(r"[\w']+")


@dataclass
class Judged:
    """One document, judged."""

    degenerate: bool = False
    degenerate_detail: str = ""
    stub_sections: int = 0
    duplicated_sections: int = 0
    truncated_code: bool = False
    rubric_met: list[bool] = field(default_factory=list)
    tests_passed: bool | None = None
    flagged: bool = False
    """(Harness) the document warns its reader: a caveat, or a computed value it calls not confirmed."""
    seconds: float = 0.0
    chars: int = 0

    @property
    def confident_miss(self) -> bool:
        """It misses a rubric item without a warning (for a bare reply, any miss)."""
        return not all(self.rubric_met) and not self.flagged

    @property
    def coverage(self) -> float:
        return sum(self.rubric_met) / len(self.rubric_met) if self.rubric_met else 1.0


@dataclass
class Row:
    """One task, both ways."""

    id: str
    expert: str
    kind: str
    routed_expert: str = ""
    model: str = ""
    slots: int = 0
    status: str = ""
    candidates: int = 0
    tokens_generated: int = 0
    tokens_kept: int = 0
    harness: Judged = field(default_factory=Judged)
    bare: Judged = field(default_factory=Judged)
    reference: Judged | None = None
    """The reference's answer (None in a results file written before it was asked)."""


def load_tasks(path: Path = DATA) -> list[dict[str, Any]]:
    """The tasks of a review set (default: the review set)."""
    items: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))["items"]
    return items


def sections(document: str) -> list[tuple[int, str, bool]]:
    """Each heading's ``(level, text under it, a deeper heading follows)`` in a Markdown document."""
    text = _fenced_safe(document)
    heads = list(_HEADING.finditer(text))
    out = []
    for n, head in enumerate(heads):
        end = heads[n + 1].start() if n + 1 < len(heads) else len(text)
        level = len(head.group(0)) - len(head.group(0).lstrip("#"))
        nxt = heads[n + 1].group(0) if n + 1 < len(heads) else ""
        deeper = bool(nxt) and len(nxt) - len(nxt.lstrip("#")) > level
        out.append((level, text[head.end() : end].strip(), deeper))
    return out


def _fenced_safe(document: str) -> str:
    # a "#" line inside a code block (a comment) is not a heading
    return re.sub(r"```.*?```", lambda m: m.group(0).replace("\n#", "\n\u2063#"), document, flags=re.S)


_FLAGS = ("> **Caveat:**", "(not confirmed)")
"""How a harness document warns its reader (a slot's caveat; a computed value no vote confirmed)."""
_APPENDIX = re.compile(r"^## (Unresolved|Assist sources|Warnings)\s*$", re.M)


_CAVEAT = re.compile(r"^> \*\*Caveat:\*\*.*?(?=\n\s*\n|\Z)", re.M | re.S)


def answer_text(document: str, harness: bool = True) -> str:
    """What the model wrote: a harness document without the harness's own lines, which the bare reply lacks.

    The title (the task, cut to 80 characters), the caveats (they quote the failed check, and a calculation's
    caveat names the value the program computed) and the closing Unresolved / Assist sources / Warnings lists
    (they quote markers and checks again) are left out, so a phrase of the task or of a caveat is neither counted
    as the answer looping nor as a rubric item the answer meets. A bare reply (``harness=False``) is kept whole.
    """
    if not harness:
        return document
    lines = document.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    text = _CAVEAT.sub("", "\n".join(lines))
    appendix = _APPENDIX.search(text)
    return text[: appendix.start()] if appendix else text


def judge(document: str, code: str, item: dict[str, Any], seconds: float, harness: bool = True) -> Judged:
    """Judge one document (and the code it delivers) against the task's rubric and tests.

    Repetition and the rubric read what the model wrote (:func:`answer_text`); sections and code the whole.
    """
    out = Judged(seconds=round(seconds, 1), chars=len(document))
    written = answer_text(document, harness)
    prose = re.sub(r"```.*?```", " ", written, flags=re.S)
    repetition = repetition_check(prose, str(item.get("task", "")))
    out.degenerate, out.degenerate_detail = not repetition.passed, repetition.detail
    parts = sections(document)
    for _, body, deeper in parts:
        words = len(_WORD.findall(re.sub(r"```.*?```", " ", body, flags=re.S)))
        if (not body and deeper) or body.startswith(">"):  # a heading over sub-sections; a caveat's quote
            continue
        if ("```" not in body and words < 3) or STUB.search(body):
            out.stub_sections += 1
    bodies = [body for _, body, _ in parts]
    normalised = [" ".join(b.lower().split()) for b in bodies if len(b) > 40]
    out.duplicated_sections = len(normalised) - len(set(normalised))
    fences = len(re.findall(r"^\s*```", document, re.M))
    python = [c for lang, c in code_blocks(document) if lang in PYTHON_TAGS]
    out.truncated_code = fences % 2 == 1 or not all(_parses(c) for c in python)
    out.rubric_met = [rubric_met(r, written) for r in item["rubric"]]
    if item.get("tests"):
        out.tests_passed = passes(code, item["tests"])
    out.flagged = harness and any(flag in document for flag in _FLAGS)
    return out


def rubric_met(item: dict[str, Any], written: str) -> bool:
    """A rubric item is met when its pattern is found in what the model wrote, or, ``absent: true`` (a wrong claim
    a right answer must not make, ``bench/data/facts_heldout.yaml``), when it is not."""
    found = bool(re.search(item["pattern"], written, re.I | re.M))
    return not found if item.get("absent") else found


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def passes(code: str, tests: str) -> bool:
    """The task's tests pass when run after ``code``, in the sandbox."""
    if not code.strip():
        return False
    files = {"solution.py": code, "check.py": "from solution import *  # noqa: F403\n" + tests}
    return run_python(files, "check.py", limits=SandboxLimits(timeout_s=10)).ok


def first_python(text: str) -> str:
    """The first Python code block of a reply ('' when it has none)."""
    blocks = [c for lang, c in code_blocks(text) if lang in PYTHON_TAGS | {""}]
    return blocks[0] if blocks else ""


def one_task(docs: Path | None = None) -> Callable[[Sides, dict[str, Any]], Row]:
    """Both sides of one task, judged; both answers written to ``docs`` (when given) to be read."""

    def run_one(sides: Sides, item: dict[str, Any]) -> Row:
        row = Row(id=item["id"], expert=item["expert"], kind=item["kind"])
        run = sides.harness(item["task"])
        state = run.state
        row.status = state.status.value
        row.slots = len(state.framework.slots) if state.framework else 0
        decision = run.decision
        row.routed_expert = decision.expert if decision else "(direct answer)"
        row.model = run.model or "base"
        row.candidates, row.tokens_generated, row.tokens_kept = run.drawn()
        document = state.document or ""
        row.harness = judge(document, delivered_modules(state) or first_python(document), item, run.seconds)
        gen, seconds = sides.bare(run.model, item["task"])
        row.bare = judge(gen.text, first_python(gen.text), item, seconds, harness=False)
        ref, ref_seconds = sides.reference(item["task"])
        row.reference = judge(ref.text, first_python(ref.text), item, ref_seconds, harness=False)
        if docs is not None:  # every answer, to be read as the person who asked would
            docs.mkdir(parents=True, exist_ok=True)
            (docs / f"{item['id']}.harness.md").write_text(document, encoding="utf-8")
            (docs / f"{item['id']}.bare.md").write_text(gen.text, encoding="utf-8")
            (docs / f"{item['id']}.reference.md").write_text(ref.text, encoding="utf-8")
        return row

    return run_one


def _row(saved: dict[str, Any]) -> Row:
    """A row as its results file holds it."""
    reference = saved.get("reference")
    judged = {"harness": Judged(**saved["harness"]), "bare": Judged(**saved["bare"])}
    return Row(**(saved | judged | {"reference": Judged(**reference) if reference else None}))


def chosen(args: Any) -> list[dict[str, Any]]:
    items = load_tasks(args.set)
    if args.ids:
        wanted = set(args.ids.split(","))
        return [i for i in items if i["id"] in wanted]
    if args.quick:
        return items[:3]
    if args.per_expert:
        seen: dict[str, int] = {}
        picked = []
        for item in items:
            if seen.get(item["expert"], 0) < args.per_expert:
                seen[item["expert"]] = seen.get(item["expert"], 0) + 1
                picked.append(item)
        return picked
    return items[: args.limit] if args.limit else items


def progress(row: Row) -> str:
    """The line printed after each task."""
    sides = [("harness", row.harness), ("bare", row.bare), ("reference", row.reference)]
    said = [
        f"{name} rubric {j.coverage:.0%}{' DEGENERATE' if j.degenerate else ''} {j.seconds:.0f} s"
        for name, j in sides
        if j is not None
    ]
    return f"{row.id} ({row.routed_expert}, {row.slots} slots): " + "; ".join(said)


def main(argv: list[str] | None = None) -> int:
    parser = versus_parser(__doc__, "review", "comma-separated task ids")
    parser.add_argument("--per-expert", type=int, default=0, help="only the first K tasks of each expert")
    parser.add_argument("--set", type=Path, default=DATA, help="the set's YAML (default: the review set)")
    args = parser.parse_args(argv)
    bench = Benchmark(
        rows_key="rows",
        saved_row=_row,
        item_id=lambda item: str(item["id"]),
        row_id=lambda row: row.id,
        run_one=one_task((args.out or RESULTS_DIR) / f"{args.name}_documents"),
        progress=progress,
        summarise=summarise,
    )
    return compare(bench, chosen(args), args)


def _rates(judged: list[Judged]) -> dict[str, float]:
    n = len(judged) or 1
    tested = [j for j in judged if j.tests_passed is not None]
    return {
        "degenerate": round(sum(j.degenerate for j in judged) / n, 3),
        "with_stub_sections": round(sum(j.stub_sections > 0 for j in judged) / n, 3),
        "with_duplicated_sections": round(sum(j.duplicated_sections > 0 for j in judged) / n, 3),
        "truncated_code": round(sum(j.truncated_code for j in judged) / n, 3),
        "rubric_coverage": round(sum(j.coverage for j in judged) / n, 3),
        "tests_passed": round(sum(bool(j.tests_passed) for j in tested) / len(tested), 3) if tested else 0.0,
        "median_seconds": round(statistics.median(j.seconds for j in judged), 1) if judged else 0.0,
        "confident_misses": sum(j.confident_miss for j in judged),
    }


def summarise(rows: list[Row], args: Any) -> tuple[dict[str, Any], str]:
    harness = _rates([r.harness for r in rows])
    bare = _rates([r.bare for r in rows])
    asked = [r for r in rows if r.reference is not None]  # rows of an earlier file may lack it
    reference = _rates([r.reference for r in asked if r.reference is not None])
    harness_asked = _rates([r.harness for r in asked])
    thrown = thrown_away_per_kept(sum(r.tokens_generated for r in rows), sum(r.tokens_kept for r in rows))
    experts = sorted({r.expert for r in rows})
    by_expert = {e: _by_expert([r for r in rows if r.expert == e]) for e in experts}
    summary = {
        "tasks": len(rows),
        "tasks_with_reference": len(asked),
        "quick": args.quick,
        "resumed_from": str(args.resume) if args.resume else None,
        "harness": harness,
        "bare": bare,
        "reference": reference,
        "rubric_difference": round(harness["rubric_coverage"] - bare["rubric_coverage"], 3),
        "rubric_difference_to_reference": round(harness_asked["rubric_coverage"] - reference["rubric_coverage"], 3),
        "median_seconds_ratio_to_reference": (
            round(harness_asked["median_seconds"] / reference["median_seconds"], 2)
            if reference["median_seconds"]
            else None
        ),
        "tokens_thrown_away_per_kept_token": round(thrown, 3),
        "by_expert": by_expert,
    }
    label = QUICK_LABEL if args.quick else ""
    measures = [
        ("degenerate documents", "degenerate"),
        ("documents with stub sections", "with_stub_sections"),
        ("documents with duplicated sections", "with_duplicated_sections"),
        ("documents with truncated code", "truncated_code"),
        ("rubric coverage", "rubric_coverage"),
        ("Python tasks whose tests pass", "tests_passed"),
        ("median seconds per task", "median_seconds"),
        ("documents missing a rubric item without a warning", "confident_misses"),
    ]
    table = md_table(
        ["measure", "harness", "bare routed model", f"reference ({REFERENCE_MODEL}, penalty {REFERENCE_PENALTY})"],
        [[m, harness[k], bare[k], reference[k] if asked else "-"] for m, k in measures],
    )
    experts_table = md_table(
        ["expert", "harness rubric", "bare rubric", "reference rubric"],
        [[e, v["harness"], v["bare"], "-" if v["reference"] is None else v["reference"]] for e, v in by_expert.items()],
    )
    degenerate = [f"{r.id} ({r.harness.degenerate_detail})" for r in rows if r.harness.degenerate]
    misses = [r.id for r in rows if r.harness.confident_miss]
    ratio = summary["median_seconds_ratio_to_reference"] or "-"
    behind = [e for e, v in by_expert.items() if (ref := v["reference"]) is not None and (v["harness"] or 0) < ref]
    markdown = (
        f"Review set, {len(rows)} tasks{label}\n\n{table}\n\nRubric coverage, harness minus bare routed model: "
        f"**{summary['rubric_difference']:+.3f}**; harness minus reference ({len(asked)} tasks): "
        f"**{summary['rubric_difference_to_reference']:+.3f}** (goal > 0), median time "
        f"{ratio}x the reference's; experts behind the reference: "
        f"{', '.join(behind) if behind else 'none'}. Degenerate harness documents: "
        f"{len(degenerate)} (goal 0){': ' + '; '.join(degenerate) if degenerate else ''}. Harness documents that "
        f"miss a rubric item without a warning: {harness['confident_misses']}"
        f"{' (' + ', '.join(misses) + ')' if misses else ''}. Tokens generated and "
        f"thrown away per kept token: {thrown:.2f}.\n\n{experts_table}\n"
    )
    payload = {"summary": summary, "rows": [asdict(r) for r in rows], "args": vars(args) | {"out": str(args.out)}}
    return payload, markdown


def _by_expert(rows: list[Row]) -> dict[str, float | None]:
    """One expert's mean rubric coverage per side (reference: None when no row asked it)."""
    asked = [r.reference.coverage for r in rows if r.reference is not None]
    return {
        "harness": round(statistics.mean(r.harness.coverage for r in rows), 3),
        "bare": round(statistics.mean(r.bare.coverage for r in rows), 3),
        "reference": round(statistics.mean(asked), 3) if asked else None,
    }


if __name__ == "__main__":
    sys.exit(main())
