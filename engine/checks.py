"""Automated checks of a slot's answer, by what it delivers (the seed's "automated rewards").

Every answer gets the contract checks: it follows the output structure, it was not cut off, no section is a
stub, a duplicate or a copy of the task's title, it does not leak the prompt (its delimiters, its example
placeholders) and it does not copy the slots it references instead of doing its own part. Then, by deliverable:

* **code** in Python: it parses; no function is a stub; it defines the functions the task names; it imports
  (runs) in the sandbox; the task's examples (``>>>`` doctests, ``f(x) == y`` lines) pass. Soft: the doctests in
  its own docstrings and its own tests (a tests section, which must not redefine the module's functions) pass,
  and ``ruff`` finds no error (pyflakes rules). A small model's own tests are often wrong where its code is
  right, so they rank candidates but never reject one. SQL parses with sqlglot in the task's dialect; YAML
  and JSON load; a shell script passes ``bash -n``; a Dockerfile starts with ``FROM``.
* **data**: the block parses as its language.
* The text beside code or data (the usage note) must not repeat itself either.
* **prose** and **plan**: no degenerate repetition (a sentence three times, a line repeated in a run, a phrase
  looping); hedges are counted as a signal.
* **table**: it holds a Markdown table.

Generated code only ever runs in :mod:`engine.sandbox`. A hard check failing means the answer is wrong or unusable
as delivered; a soft one that it could be better. :func:`check_answer` returns the checks and the measured
signals; :mod:`engine.selection` turns them into a score.
"""

from __future__ import annotations

import ast
import csv
import difflib
import io
import json
import re
import shutil
import subprocess
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import yaml

from engine.contracts import Contract
from engine.prompts import EXAMPLE_DESCRIPTIONS
from engine.sandbox import SandboxLimits, run_python
from state.quality import CheckResult, Severity
from state.result import SlotResult

__all__ = [
    "CheckContext",
    "Examples",
    "check_answer",
    "code_blocks",
    "copies_task",
    "cut_unfinished_end",
    "extract_examples",
    "module_code",
    "repetition_check",
    "repetition_found",
    "sentence_key",
    "signals_of",
    "without_code",
]

HEDGES = re.compile(
    r"\b(i am not sure|i'm not sure|not certain|i think|i believe|might be|may be|could be|probably|possibly|"
    r"it depends|as an ai|i cannot|i can't|consult (a|an|your) (professional|lawyer|doctor|expert))\b",
    re.I,
)
LEAKS = (
    "--- end of",
    "(whole) ---",
    "(outline only) ---",
    "<reference part=",
    "</reference>",
    "<candidate id=",
    "keep it if it is right",
    "if a problem above concerns it",
    "an earlier answer to this was rejected",
    "does not have these problems",
)
"""The harness' own delimiters and its retry feedback's wording, which must never come back in an answer
(quoting the instructions' wording is harmless and common; copying a delimiter means a reference or a
candidate was pasted in, and the feedback's sentences in an answer are the prompt talking, not the expert: seen
on the review set, "The outline was (keep it if it is right, fix it if a problem above concerns it):")."""
_CHECK_NAME = re.compile(
    r"\b(?:contract\.(?:answers|complete|duplicates|ends|leaks|own_work|placeholders|structure|stubs|titles)"
    r"|prose\.repetition|python\.(?:complete|defines|examples|lint|own_doctests|parses|runs|tests|tests_given"
    r"|tests_use_module))\b"
)
"""The checks' own names, which the retry feedback quotes: in an answer they are the feedback talking (a real
checklist wrote "a prioritized order for each item: contract.duplicates, contract.placeholders, and
prose.repetition")."""
PERSONA_LINE_WORDS = 6
"""A persona line this long repeated word for word is a copy ("You are a security architect." is five words and
may be said in passing)."""
COPIED_SECTION_SHARE = 0.8
"""A section whose sentences are this much word for word a referenced slot's says nothing the document does not
already say (a real password-policy run's checklist began with a copy of the policy's controls)."""
_INSTRUCTION_TITLE = re.compile(r"#|^\W*outline\W*$|code block holding|every import", re.I)
"""A title that copies the output structure's instructions ("`## Outline`", "`## 1. ` code block holding the
complete code") instead of naming the part."""
_EXAMPLE_PLACEHOLDER = re.compile(
    r"\{\{\s*ASSIST\s*:[^{}]*?:\s*(?:" + "|".join(map(re.escape, sorted(EXAMPLE_DESCRIPTIONS))) + r")\s*\}\}", re.I
)
"""The uncertainty protocol's own example placeholders (whatever domain a copy names): they ask for nothing."""
ASKS_BACK = re.compile(
    r"\b(?:(?:please|could you|can you|would you|kindly)\s+(?:please\s+)?(?:provide|share|give|tell|specify|"
    r"clarify|send|describe)|i (?:would )?need (?:more|some|additional) (?:information|details|context)|"
    r"(?:provide|share) (?:me )?(?:with )?(?:more |some |the )?(?:details|information|context))\b",
    re.I,
)
"""An answer that asks the person for what the task already gave, instead of doing it ("Please provide me with
the details of the endpoint you would like to analyze")."""
ASKS_BACK_WORDS = 60
"""Only a short answer counts as asking back: a long one that ends with "tell me if you need more" did the work."""
STUB = re.compile(
    r"(\bTODO\b|\bTBD\b|lorem ipsum|\[insert\b|<insert\b|to be (added|completed|written|determined)\b|"
    r"^\s*\.\.\.\s*$|your code here|implementation goes here|fill in)",
    re.I | re.M,
)
MIN_SECTION_WORDS = {"prose": 8, "plan": 4, "table": 0, "code": 0, "data": 0}
_OPEN_FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.M)
_FENCE_BLOCK = re.compile(r"^[ \t]*(```|~~~)[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
PROSE_FENCES = frozenset({"text", "plaintext", "txt", "markdown", "md"})
"""Fence languages that hold prose: a prose answer wrapped in one is read as prose by the repetition check (a real
policy slot looped inside a ```plaintext block, which the check, skipping code, never read). A code answer's
fences are left alone: a program's printed output repeats by nature."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[\w']+")
_DIALECTS = (
    ("postgres", re.compile(r"\b(postgres|postgresql|psql)\b", re.I)),
    ("mysql", re.compile(r"\b(mysql|mariadb)\b", re.I)),
    ("sqlite", re.compile(r"\bsqlite\b", re.I)),
    ("tsql", re.compile(r"\b(sql server|t-sql|tsql|mssql)\b", re.I)),
    ("oracle", re.compile(r"\boracle\b", re.I)),
    ("bigquery", re.compile(r"\bbigquery\b", re.I)),
    ("snowflake", re.compile(r"\bsnowflake\b", re.I)),
)


@dataclass(frozen=True)
class CheckContext:
    """What the checks need besides the answer: the task, the contract, what the slot may read, the limits."""

    task: str
    contract: Contract
    references: tuple[str, ...] = ()
    """The texts of the slots this one references (an answer must not just copy them)."""
    truncated: bool = False
    """The generation stopped at its token limit."""
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    persona: str = ""
    """The expert's persona (the system prompt's first part): its lines must not come back as the answer."""


@dataclass(frozen=True)
class Examples:
    """Examples given by the task: doctests (``>>>``) and ``call == value`` lines, and the functions it names."""

    doctests: tuple[str, ...] = ()
    """Each a doctest text: ``>>> expr`` and the expected output lines."""
    asserts: tuple[tuple[str, str], ...] = ()
    """``(call, value)`` pairs: the call must equal the value."""
    functions: tuple[str, ...] = ()
    """Function names the task defines or asks for (``def name(``)."""

    @property
    def count(self) -> int:
        """How many examples there are."""
        return len(self.doctests) + len(self.asserts)


def check_answer(result: SlotResult, ctx: CheckContext) -> tuple[list[CheckResult], dict[str, float]]:
    """Every check of one answer, and its measured signals."""
    checks = _contract_checks(result, ctx)
    kind = ctx.contract.deliverable
    if kind in ("code", "data"):
        checks += _code_checks(result, ctx)
    elif kind == "table":
        checks.append(_table_check(result))
    if kind in ("prose", "plan", "table"):
        checks.append(repetition_check(_prose_unfenced(result.body_text())))
    else:  # the note beside the code is read too: a looping note is as degenerate as looping prose
        checks.append(repetition_check(_without_code(result.body_text())))
    return checks, signals_of(result, ctx)


# --- the contract, for every deliverable --------------------------------------------------------------------


def _contract_checks(result: SlotResult, ctx: CheckContext) -> list[CheckResult]:
    # For code, the deliverable is the module: a note after it that was cut short is a blemish, not a failure
    # (a module that was itself cut off fails to parse, or has no closed code block, which are hard checks).
    ending: Severity = "soft" if ctx.contract.code_first else "hard"
    checks = [
        CheckResult(
            name="contract.structure",
            passed=result.compliant,
            detail="" if result.compliant else "; ".join(result.problems[:3]),
        ),
        CheckResult(
            name="contract.complete",
            severity=ending,
            passed=not ctx.truncated,
            detail="the answer was cut off at its token limit" if ctx.truncated else "",
        ),
    ]
    checks.append(ending_check(result.raw, ending))
    copied = [i.title for i in result.outline if copies_task(i.title, ctx.task)]
    instructions = [i.title for i in result.outline if _INSTRUCTION_TITLE.search(i.title)]
    checks.append(
        CheckResult(
            name="contract.titles",
            passed=not copied and not instructions,
            detail=f"an outline item repeats the task as its title ({copied[0]!r})"
            if copied
            else f"an outline item's title is the output structure's own wording ({instructions[0]!r})"
            if instructions
            else "",
        )
    )
    body = _without_code(result.body_text())
    asks = ASKS_BACK.search(body) if len(_WORD.findall(body)) < ASKS_BACK_WORDS else None
    checks.append(
        CheckResult(
            name="contract.answers",
            passed=asks is None,
            detail=f"it asks the person for details instead of answering ({asks.group(0)!r}); answer with what the "
            "task gives, and write {{ASSIST:user:...}} for what only the person knows"
            if asks
            else "",
        )
    )
    minimum = MIN_SECTION_WORDS[ctx.contract.deliverable]
    stubs: list[str] = []
    for s in result.sections:
        text = _without_code(s.body)
        if not s.body.strip() and result.has_subsections(s.label):
            continue
        if not s.body.strip() or (minimum and not _FENCE_BLOCK.search(s.body) and len(_WORD.findall(text)) < minimum):
            stubs.append(f"section {s.label} {s.title!r} is empty or only {len(_WORD.findall(text))} words")
        elif STUB.search(s.body):
            stubs.append(f"section {s.label} {s.title!r} holds placeholder text ({STUB.search(s.body).group(0)!r})")  # type: ignore[union-attr]
    checks.append(CheckResult(name="contract.stubs", passed=not stubs, detail="; ".join(stubs[:2])))
    checks.append(duplicates_check(result, ctx.task))
    lowered = result.raw.lower()
    leaked = [leak for leak in LEAKS if leak in lowered] + _persona_lines(result.raw, ctx.persona)
    leaked += _CHECK_NAME.findall(_without_code(result.raw))
    checks.append(
        CheckResult(
            name="contract.leaks",
            passed=not leaked,
            detail=f"the answer repeats the prompt's own text ({leaked[0]!r})" if leaked else "",
        )
    )
    example = _EXAMPLE_PLACEHOLDER.search(result.raw)
    checks.append(
        CheckResult(
            name="contract.placeholders",
            passed=example is None,
            detail=f"the answer copies the protocol's example placeholder ({example.group(0)!r}); name the fact "
            "that is missing, or leave the placeholder out"
            if example
            else "",
        )
    )
    copied_share = _copied_share(result.body_text(), ctx.references)
    checks.append(
        CheckResult(
            name="contract.own_work",
            passed=copied_share < 0.5,
            detail=f"{copied_share:.0%} of its sentences are copied from the slots it references"
            if copied_share >= 0.5
            else "",
        )
    )
    return checks


def _persona_lines(text: str, persona: str) -> list[str]:
    """Lines of the ``persona`` (of :data:`PERSONA_LINE_WORDS` words or more) that ``text`` repeats word for word.

    A real password-policy answer titled two of its sections with the persona's "You MAY" lines ("Review designs
    and code snippets for vulnerabilities and propose mitigations"): the prompt talking, not the expert.
    """
    said = f" {_norm(text)} "
    lines = (_norm(line.lstrip("-* ")) for line in persona.splitlines())
    return [line for line in lines if len(line.split()) >= PERSONA_LINE_WORDS and f" {line} " in said]


def copies_task(title: str, task: str) -> bool:
    """Whether an outline item's ``title`` repeats the task's first line (``contract.titles`` fails it)."""
    first = _norm(task.strip().splitlines()[0] if task.strip() else "")
    return bool(first) and _similar(_norm(title), first, 0.8)


def repeated_sections(
    result: SlotResult, task: str, references: tuple[str, ...] = (), others: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    """Each section that repeats an earlier one, the task or a referenced slot, or is another slot's part.

    ``(label, why)``, in order. A copy of a referenced slot is a section most of whose sentences are in it word for word
    (:data:`COPIED_SECTION_SHARE`). Another slot's part is a top-level section titled as one of ``others`` (the
    titles of the plan's other slots): that slot writes it.
    """
    found: list[tuple[str, str]] = []
    theirs = {_norm(t): t for t in others if _norm(t)}
    for section in result.sections:
        if section.level == 1 and (title := theirs.get(_norm(section.title))) is not None:
            found.append((section.label, f"section {section.label} is the part {title!r} of another slot"))
    taken = {label for label, _ in found}
    bodies = [(s, _norm(s.body)) for s in result.sections if len(s.body) > 40 and s.label not in taken]
    pool = _sentence_pool(references)
    for i, (a, na) in enumerate(bodies):
        if _similar(na, _norm(task), 0.9):
            found.append((a.label, f"section {a.label} repeats the task"))
            continue
        earlier = next((b for b, nb in bodies[:i] if _similar(nb, na, 0.85)), None)
        if earlier is not None:
            found.append((a.label, f"sections {earlier.label} and {a.label} say the same"))
            continue
        mine = _long_sentences(a.body) if pool else []
        if len(mine) >= 2 and sum(1 for s in mine if s in pool) >= COPIED_SECTION_SHARE * len(mine):
            found.append((a.label, f"section {a.label} copies a slot it references"))
    return found


def duplicates_check(result: SlotResult, task: str) -> CheckResult:
    """``contract.duplicates``: no two sections say the same, and none repeats the task."""
    found = [why for _, why in repeated_sections(result, task)]
    return CheckResult(name="contract.duplicates", passed=not found, detail="; ".join(found[:2]))


def ending_check(raw: str, severity: Severity = "hard") -> CheckResult:
    """``contract.ends`` of a text alone: its last line of prose ends a sentence."""
    unfinished = _unfinished(raw)
    return CheckResult(
        name="contract.ends",
        severity=severity,
        passed=unfinished is None,
        detail=f"the answer stops mid-sentence ({unfinished!r})" if unfinished else "",
    )


def _unfinished(raw: str) -> str | None:
    """The end of the answer's last line of text when it stops mid-sentence (None: it ends properly).

    Code blocks, tables, list items and headings may end without punctuation; a line of prose may not. A last
    line of any kind that ends with a colon announces what never came ("... with the following data:").
    """
    lines = [ln.rstrip() for ln in _FENCE_BLOCK.sub("```", raw).splitlines() if ln.strip()]
    if not lines:
        return None
    last = lines[-1].strip()
    if last.endswith(":") and not last.startswith("```"):
        return last[-40:]
    if last.startswith(("```", "|", "#", "-", "*", "+", ">")) or re.match(r"^\d+[.)]\s", last):
        return None
    if re.search(r"[.!?:;)\]\"'`*_}>\u2026\u201d\u2019]$", last) or last.endswith("}}"):
        return None
    return last[-40:]


def cut_unfinished_end(text: str) -> tuple[str, str | None]:
    """``text`` without the unfinished end of its last line of prose, and what went (None: nothing went).

    A last line that announces what never came ("... reverse. Explanation:") or breaks off mid-sentence is cut back
    to its last full sentence, or goes when it has none. Nothing is reworded, and nothing inside a code block is
    touched: a text whose last line is in an unclosed block is left as it is.
    """
    if _unfinished(text) is None:
        return text, None
    lines = text.rstrip().split("\n")
    last = len(lines) - 1
    fences = sum(1 for line in lines[:last] if line.lstrip().startswith(("```", "~~~")))
    if fences % 2 or lines[last].lstrip().startswith(("```", "~~~")):
        return text, None
    line = lines[last]
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)", line)]
    kept = line[: ends[-1]] if ends else ""
    out = [*lines[:last], kept] if kept.strip() else lines[:last]
    return "\n".join(out).rstrip() + "\n", line[len(kept) :].strip()


def _long_sentences(text: str) -> list[str]:
    """The sentences of ``text`` of six words or more, normalised (what a copy is counted in)."""
    return [_norm(s) for s in _sentences(text) if len(s.split()) >= 6]


def _sentence_pool(references: tuple[str, ...]) -> set[str]:
    """The referenced slots' long sentences (what a copy is looked up in)."""
    return {s for ref in references for s in _long_sentences(ref)}


def _copied_share(text: str, references: tuple[str, ...]) -> float:
    """The share of the answer's sentences (of 6+ words) that appear word for word in a referenced slot."""
    if not references:
        return 0.0
    pool = _sentence_pool(references)
    mine = _long_sentences(text)
    if len(mine) < 3:
        return 0.0
    return sum(1 for s in mine if s in pool) / len(mine)


# --- prose ------------------------------------------------------------------------------------------------------


def repetition_check(text: str) -> CheckResult:
    """Degenerate repetition: a sentence three times or more, a run of repeated lines, a phrase looping."""
    found = repetition_found(text)
    if found is None:
        sentences = [_norm(s) for s in _sentences(text) if len(s.split()) >= 5]
        distinct = len(set(sentences)) / len(sentences) if sentences else 1.0
        if len(sentences) >= 8 and distinct < 0.75:
            found = f"only {distinct:.0%} of its sentences are distinct"
    return CheckResult(name="prose.repetition", passed=found is None, detail=found or "")


def repetition_found(text: str, *, sentence_times: int = 3, line_run: int = 3, phrase_times: int = 4) -> str | None:
    """What repeats in ``text``, or None.

    A sentence of five words or more ``sentence_times`` times, a line of more than ten characters ``line_run``
    times in a row, or an eight-word phrase ``phrase_times`` times.
    """
    sentences = [_norm(s) for s in _sentences(text) if len(s.split()) >= 5]
    repeated = [(s, n) for s, n in Counter(sentences).most_common(1) if n >= sentence_times]
    if repeated:
        return f"a sentence is repeated {repeated[0][1]} times ({repeated[0][0][:60]!r})"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("|", "```", "#"))]
    run = 1
    for previous, line in zip(lines, lines[1:], strict=False):
        run = run + 1 if line == previous and len(line) > 10 else 1
        if run >= line_run:
            return f"a line repeats in a run ({line[:60]!r})"
    words = [w.lower() for w in _WORD.findall(_without_code(text))]
    grams = Counter(tuple(words[i : i + 8]) for i in range(max(0, len(words) - 7)))
    looping = [g for g, n in grams.items() if n >= phrase_times]
    if looping:
        return f"a phrase loops ({' '.join(looping[0])!r} {phrase_times} times)"
    return None


def _table_check(result: SlotResult) -> CheckResult:
    lines = result.body_text().splitlines()
    separator = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$")
    found = any(separator.match(line) for line in lines)
    return CheckResult(
        name="table.present", passed=found, detail="" if found else "no Markdown table (a | header | row and a ---)"
    )


def signals_of(result: SlotResult, ctx: CheckContext) -> dict[str, float]:
    """Measured, not judged: words, sentences, the distinct-sentence ratio, hedges, copying of references."""
    text = result.body_text()
    sentences = [_norm(s) for s in _sentences(_without_code(text)) if len(s.split()) >= 3]
    return {
        "words": float(len(_WORD.findall(text))),
        "sentences": float(len(sentences)),
        "distinct_sentences": round(len(set(sentences)) / len(sentences), 3) if sentences else 1.0,
        "hedges": float(len(HEDGES.findall(_without_code(text)))),
        "copied_from_references": round(_copied_share(text, ctx.references), 3),
    }


# --- code -------------------------------------------------------------------------------------------------------


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced code block of a text as ``(language, code)``, in order."""
    return [(m.group(2).lower(), m.group(3)) for m in _FENCE_BLOCK.finditer(text)]


def module_code(result: SlotResult) -> tuple[str | None, str | None]:
    """The answer's module (section 1's code block, else the first block) and its tests (later blocks), if any."""
    sections = [s for s in result.sections if s.level == 1]
    blocks: list[str] = []
    first = code_blocks(sections[0].body) if sections else []
    if first:
        blocks.append(first[0][1])
    later = [code for s in sections[1:] for _, code in code_blocks(s.body)]
    if not blocks:
        everything = code_blocks(result.raw)
        if not everything:
            return None, None
        blocks.append(everything[0][1])
        later = [code for _, code in everything[1:]]
    tests = [code for code in later if re.search(r"^\s*(assert\b|def test_)", code, re.M)]
    return blocks[0], ("\n\n".join(tests) if tests else None)


ASKS_FOR_TESTS = re.compile(
    r"\b(?:write|add|include|create|generate|with)\b[^.\n]{0,40}\b(?:pytest|unit ?tests?|tests)\b"
    r"(?!\s+(?:whether|if|that)\b)",
    re.I,
)
"""A task that asks for tests ("now add pytest tests for it"); "a function that tests whether" does not."""


def _literal(text: str) -> bool:
    try:
        ast.literal_eval(text.strip())
    except (SyntaxError, ValueError):
        return False
    return True


def extract_examples(task: str) -> Examples:
    """The examples a task gives and the functions it defines.

    Examples are ``>>>`` doctests, ``call == value`` lines (and HumanEval's other arrows), and inputs stated
    with their output.
    """
    functions = tuple(dict.fromkeys(re.findall(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", task, re.M)))
    doctests: list[str] = []
    comparisons: list[tuple[str, str]] = []
    lines = task.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith(">>> "):
            source = [line]
            i += 1
            while i < len(lines) and lines[i].strip().startswith("... "):
                source.append(lines[i].strip())
                i += 1
            want: list[str] = []
            while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(">>>"):
                if lines[i].strip() in ('"""', "'''"):
                    break
                want.append(lines[i].strip())
                i += 1
            left, eq, right = source[0][4:].partition(" == ")
            if not want and len(source) == 1 and eq and _literal(right):
                # ">>> f(19) == 'xix'" with no output line states a fact; run as a doctest it would expect nothing
                # printed and fail on the True a correct function prints
                comparisons.append((left.strip(), right.strip()))
                continue
            doctests.append("\n".join(source + want) + "\n")
            continue
        i += 1
    asserts: list[tuple[str, str]] = list(comparisons)
    for line in lines:
        m = _ARROW.match(line)
        if m is None or ">>>" in line:
            continue
        call, value = m.group(1), _stated_value(m.group(2).rstrip(".,;"))
        if value is None or (functions and call.split("(", 1)[0] not in functions):
            continue
        try:
            ast.parse(call, mode="eval")
        except SyntaxError:
            continue
        asserts.append((call, value))
    if len(functions) == 1:  # "Input: a = 1 / Output: 2" does not name its function: only one can be meant
        asserts += _input_output_examples(lines, functions[0], _parameters(task, functions[0]))
    return Examples(tuple(doctests), tuple(asserts), functions)


_ARROW = re.compile(
    r"^\s*(?:[*•-]\s*|assert\s+|for\s+)?([A-Za-z_]\w*\(.*\))\s*(?:#\s*)?(?:==>|==|➞|=>|->|=|returns|should return)"
    r"\s*(.+?)\s*$"
)
"""A stated example: ``f(x) == 3``, ``f(x) ==> 3``, ``f(x) = 3``, ``f(x) # => 3``, ``f(x) -> 3``, ``f(x) ➞ 3``,
after a bullet, an ``assert`` or a ``for`` as HumanEval writes some."""
_FOR_INPUT = re.compile(r"^\s*for\s+(.+?),?\s+the\s+(?:output|result)\s+(?:should\s+be|is)\s+(.+?)\s*$", re.I)
"""``For lst = [1,2,3] the output should be 6``."""
_INPUT = re.compile(r"^\s*input\s*:\s*(.*?)\s*$", re.I)
_OUTPUT = re.compile(r"^\s*output\s*:\s*(.+?)\s*$", re.I)
_WORDS_FOR_LITERALS = {"true": "True", "false": "False", "none": "None", "null": "None"}
"""Values written in the words of other languages (``is_simple_power(3, 2) => false``)."""


def _input_output_examples(lines: list[str], function: str, parameters: list[str] | None) -> list[tuple[str, str]]:
    """``(call, value)`` of the examples stated as an input and an output.

    ``For arr = [1,2,3], k = 2 the output should be 6`` on one line, or ``Input: arr = [1,2,3], k = 2`` (or one
    ``name : value`` a line below it) then ``Output: 6``.
    """
    if parameters is None:
        return []
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        stated = _FOR_INPUT.match(lines[i])
        given = _INPUT.match(lines[i])
        i += 1
        if stated is not None:
            arguments, value = stated.group(1), stated.group(2)
        elif given is not None:
            inputs = [given.group(1)]
            while i < len(lines) and len(inputs) < 8 and _OUTPUT.match(lines[i]) is None:
                inputs.append(lines[i].strip())
                i += 1
            output = _OUTPUT.match(lines[i]) if i < len(lines) else None
            if output is None:
                continue
            i += 1
            arguments = ", ".join(re.sub(r"^(\w+)\s*:\s*", r"\1 = ", s) for s in inputs if s)
            value = output.group(1)
        else:
            continue
        call = _call(function, parameters, arguments)
        stated_value = _stated_value(value.rstrip(".,;"))
        if call is not None and stated_value is not None:
            found.append((call, stated_value))
    return found


def _call(function: str, parameters: list[str], arguments: str) -> str | None:
    """``function`` called with ``arguments`` (``a = 1, b = [2]`` or literals), or None if they do not fit it.

    Named arguments that are its parameters are passed by name; literals, or names of their own as many as its
    parameters (HumanEval/115 says ``bucket_capacity`` for ``capacity``), in the order given.
    """
    try:
        parsed = ast.parse(f"_({arguments})", mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(parsed, ast.Call) or (parsed.args and parsed.keywords):
        return None
    values = [*parsed.args, *(k.value for k in parsed.keywords)]
    if not values or not all(_literal(ast.unparse(v)) for v in values):
        return None
    names = [k.arg for k in parsed.keywords]
    if names and all(n in parameters for n in names):
        listed = ", ".join(f"{k.arg}={ast.unparse(k.value)}" for k in parsed.keywords)
    elif len(values) == len(parameters):
        listed = ", ".join(ast.unparse(v) for v in values)
    else:
        return None
    return f"{function}({listed})"


def _parameters(task: str, function: str) -> list[str] | None:
    """The parameter names of ``def function(...)`` in ``task``, or None if its signature does not parse."""
    m = re.search(rf"^\s*def\s+{re.escape(function)}\s*(\(.*?\))\s*(?:->[^:]*)?:", task, re.M | re.S)
    if m is None:
        return None
    try:
        tree = ast.parse(f"def _{m.group(1)}: pass")
    except SyntaxError:
        return None
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):  # the one statement parsed is that def; this narrows its type
        return None
    return [a.arg for a in [*definition.args.posonlyargs, *definition.args.args]]


def _stated_value(text: str) -> str | None:
    """The literal an example states, or None.

    ``'No' (the name must ...)`` states ``'No'``; ``19 - 5 - 6 = 8`` (a worked sum) states ``8``; ``24 # sum of
    21 + 3`` states ``24``; ``false`` states ``False``.
    """
    text = _WORDS_FOR_LITERALS.get(text.strip(), text)
    for value in (re.sub(r"\s+#.*$", "", text), text, re.sub(r"\s+\([^()]*\)$", "", text), text.rsplit(" = ", 1)[-1]):
        if _literal(value):
            return value.strip()
    return None


_PY_RUNNER = r"""
import contextlib, doctest, inspect, io, json, sys

def short(exc):
    return (type(exc).__name__ + ": " + str(exc))[:300]

spec = json.load(open("checks.json"))
out = {"import": None, "examples": [], "own_doctests": None, "tests": None}
try:
    with contextlib.redirect_stdout(io.StringIO()):
        import solution
except BaseException as exc:
    line = getattr(exc, "lineno", None)
    out["import"] = short(exc) + (" (line %s)" % line if line else "")
    print("COE-CHECKS " + json.dumps(out))
    sys.exit(0)
module_globals = dict(vars(solution))
flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

def run_doctest(text, name):
    test = doctest.DocTestParser().get_doctest(text, dict(module_globals), name, "task", 0)
    report = []
    runner = doctest.DocTestRunner(optionflags=flags)
    with contextlib.redirect_stdout(io.StringIO()):
        runner.run(test, out=report.append)
    lines = [ln for ln in "".join(report).splitlines() if ln.strip() and not ln.startswith("*****")]
    return runner.failures == 0, " | ".join(lines[-6:])[-300:]

for text in spec["doctests"]:
    try:
        ok, detail = run_doctest(text, "example")
    except BaseException as exc:
        ok, detail = False, short(exc)
    out["examples"].append({"ok": ok, "source": text.splitlines()[0][:120], "detail": detail if not ok else ""})
for call, value in spec["asserts"]:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            got = eval(call, dict(module_globals))
        ok = got == eval(value, {})
        detail = "" if ok else "%s returned %r, expected %s" % (call, got, value)
    except BaseException as exc:
        ok, detail = False, short(exc)
    out["examples"].append({"ok": ok, "source": call[:120], "detail": detail[:300]})
finder = doctest.DocTestFinder(exclude_empty=True)
own = [t for t in finder.find(solution, "solution", globs=dict(module_globals)) if t.examples]
if own:
    failed = 0
    details = []
    for test in own:
        runner = doctest.DocTestRunner(optionflags=flags)
        report = []
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                runner.run(test, out=report.append)
        except BaseException as exc:
            report.append(short(exc))
            failed += 1
        failed += runner.failures
        if runner.failures:
            details.append(" ".join(report)[-200:])
    total = sum(len(t.examples) for t in own)
    out["own_doctests"] = {"failed": failed, "total": total, "detail": " ".join(details)[:300]}
if spec["tests"]:
    namespace = dict(module_globals)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(spec["tests"], "tests.py", "exec"), namespace)
            for name, value in list(namespace.items()):
                if name.startswith("test_") and callable(value) and name not in module_globals:
                    try:
                        needs = [p for p in inspect.signature(value).parameters.values() if p.default is p.empty]
                    except (TypeError, ValueError):
                        needs = []
                    if not needs:  # a parametrised test needs pytest to fill its arguments; it is not run
                        value()
        out["tests"] = "ok"
    except BaseException as exc:
        out["tests"] = short(exc)
print("COE-CHECKS " + json.dumps(out))
"""


def _code_checks(result: SlotResult, ctx: CheckContext) -> list[CheckResult]:
    language = (ctx.contract.language or "").lower()
    code, tests = module_code(result)
    if code is None or not code.strip():
        return [CheckResult(name="code.present", passed=False, detail="no code block in the answer")]
    if language in ("python", "py", "python3"):
        return _python_checks(code, tests, ctx)
    if language == "sql":
        return [_sql_check(code, ctx.task)]
    if language in ("yaml", "yml"):
        return [_load_check("yaml.parses", lambda: list(yaml.safe_load_all(code)))]
    if language == "json":
        return [_load_check("json.parses", lambda: json.loads(code))]
    if language == "csv":
        return [_csv_check(code)]
    if language in ("bash", "sh", "shell"):
        return [_bash_check(code)]
    if language == "dockerfile":
        first = next((ln.strip() for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
        ok = first.upper().startswith(("FROM", "ARG"))
        return [CheckResult(name="dockerfile.from", passed=ok, detail="" if ok else f"starts with {first[:40]!r}")]
    return [CheckResult(name="code.checked", passed=True, severity="soft", detail=f"no checker for {language!r}")]


def _python_checks(code: str, tests: str | None, ctx: CheckContext) -> list[CheckResult]:
    checks: list[CheckResult] = []
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [CheckResult(name="python.parses", passed=False, detail=f"line {exc.lineno}: {exc.msg}")]
    checks.append(CheckResult(name="python.parses", passed=True))
    stubs = _stub_functions(tree)
    checks.append(
        CheckResult(
            name="python.complete",
            passed=not stubs and not STUB.search(code),
            detail=(f"function {stubs[0]} has no body" if stubs else "placeholder text in the code")
            if stubs or STUB.search(code)
            else "",
        )
    )
    examples = extract_examples(ctx.task)
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    missing = [f for f in examples.functions if f not in defined]
    if examples.functions:
        checks.append(
            CheckResult(
                name="python.defines",
                passed=not missing,
                detail=f"the task's function {missing[0]} is not defined" if missing else "",
            )
        )
    if tests is not None:
        redefined = _redefined(tests, defined)
        checks.append(
            CheckResult(
                name="python.tests_use_module",
                passed=not redefined,
                detail=f"the tests define {redefined[0]} again instead of using section 1's" if redefined else "",
            )
        )
    if ASKS_FOR_TESTS.search(ctx.task):
        given = tests is not None or bool(re.search(r"^\s*(?:def test_\w+|assert\b)", code, re.M))
        checks.append(
            CheckResult(
                name="python.tests_given",
                passed=given,
                detail="" if given else "the task asks for tests and the answer has none (write them: def test_...)",
            )
        )
    spec = {
        "doctests": list(examples.doctests),
        "asserts": [list(pair) for pair in examples.asserts],
        "tests": tests or "",
    }
    files = {"solution.py": code, "checks.json": json.dumps(spec), "run_checks.py": _PY_RUNNER}
    ran = run_python(files, "run_checks.py", limits=ctx.limits)
    report = _report(ran.stdout)
    if report is None:
        why = "timed out" if ran.timed_out else (ran.violations[0] if ran.violations else ran.stderr.strip()[-200:])
        checks.append(CheckResult(name="python.runs", passed=False, detail=f"the checks could not run: {why}"))
        return checks + [_lint_check(code)]
    checks.append(
        CheckResult(
            name="python.runs",
            passed=report["import"] is None and not ran.violations,
            detail=report["import"] or (f"refused: {ran.violations[0]}" if ran.violations else ""),
        )
    )
    results = report["examples"]
    if results:
        passed = sum(1 for r in results if r["ok"])
        first_bad = next((r for r in results if not r["ok"]), None)
        checks.append(
            CheckResult(
                name="python.examples",
                passed=passed == len(results),
                score=passed / len(results),
                detail=f"{passed} of {len(results)} examples pass"
                + (f"; {first_bad['source']}: {first_bad['detail']}" if first_bad else ""),
            )
        )
    own = report["own_doctests"]
    if own:
        checks.append(
            CheckResult(
                name="python.own_doctests",
                severity="soft",
                passed=own["failed"] == 0,
                score=max(0.0, 1 - own["failed"] / max(own["total"], 1)),
                detail="" if own["failed"] == 0 else f"{own['failed']} of {own['total']} fail: {own['detail']}",
            )
        )
    if tests is not None:
        checks.append(
            CheckResult(
                name="python.tests",
                severity="soft",
                passed=report["tests"] == "ok",
                detail="" if report["tests"] == "ok" else str(report["tests"]),
            )
        )
    checks.append(_lint_check(code))
    return checks


def _report(stdout: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        if line.startswith("COE-CHECKS "):
            try:
                data = json.loads(line[len("COE-CHECKS ") :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _stub_functions(tree: ast.Module) -> list[str]:
    """Functions whose body is only a docstring, ``pass``, ``...`` or ``raise NotImplementedError``."""
    stubs = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = list(node.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
            body = body[1:]
        trivial = all(
            isinstance(s, ast.Pass)
            or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is Ellipsis)
            or (isinstance(s, ast.Raise) and "NotImplementedError" in ast.unparse(s))
            for s in body
        )
        if trivial:
            stubs.append(node.name)
    return stubs


def _redefined(tests: str, defined: set[str]) -> list[str]:
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return []
    return [
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in defined
    ]


def _lint_check(code: str) -> CheckResult:
    """``ruff check`` with the pyflakes rules (undefined names, unused imports...); soft."""
    if shutil.which("ruff") is None and not _ruff_module():
        return CheckResult(name="python.lint", passed=True, severity="soft", detail="ruff is not installed")
    try:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "check",
                "--select",
                "F,E9",
                "--output-format",
                "json",
                "--no-cache",
                "--stdin-filename",
                "solution.py",
                "-",
            ],
            input=code,
            capture_output=True,
            text=True,
            timeout=20,
        )
        found = json.loads(out.stdout or "[]")
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return CheckResult(name="python.lint", passed=True, severity="soft", detail=f"ruff did not run: {exc}")
    if not found:
        return CheckResult(name="python.lint", passed=True, severity="soft")
    first = found[0]
    where = first.get("location", {}).get("row", "?")
    return CheckResult(
        name="python.lint",
        passed=False,
        severity="soft",
        detail=f"{len(found)} finding(s); line {where}: {first.get('code')} {first.get('message')}",
    )


def _ruff_module() -> bool:
    import importlib.util

    return importlib.util.find_spec("ruff") is not None


def _sql_check(code: str, task: str) -> CheckResult:
    try:
        import sqlglot
        from sqlglot.errors import ParseError
    except ImportError:
        return CheckResult(name="sql.parses", passed=True, severity="soft", detail="sqlglot is not installed")
    dialect = next((name for name, pattern in _DIALECTS if pattern.search(task)), None)
    try:
        statements = [s for s in sqlglot.parse(code, read=dialect) if s is not None]
    except (ParseError, ValueError) as exc:
        return CheckResult(name="sql.parses", passed=False, detail=f"{dialect or 'generic'} SQL: {_parse_error(exc)}")
    if not statements:
        return CheckResult(name="sql.parses", passed=False, detail="no SQL statement")
    return CheckResult(name="sql.parses", passed=True, detail=f"{len(statements)} statement(s), {dialect or 'generic'}")


def _parse_error(exc: Exception) -> str:
    """The parser's error in one line of plain text (sqlglot's message underlines with terminal codes)."""
    errors = getattr(exc, "errors", None)
    if errors:
        first = errors[0]
        near = f" (near {first['highlight']!r})" if first.get("highlight") else ""
        return f"{first.get('description')} at line {first.get('line')}, column {first.get('col')}{near}"[:200]
    return " ".join(_ANSI.sub("", str(exc)).split())[:200]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _load_check(name: str, load: object) -> CheckResult:
    try:
        load()  # type: ignore[operator]
    except Exception as exc:  # any parser error is the check's finding
        return CheckResult(name=name, passed=False, detail=str(exc)[:200])
    return CheckResult(name=name, passed=True)


def _csv_check(code: str) -> CheckResult:
    rows = [r for r in csv.reader(io.StringIO(code.strip())) if r]
    widths = {len(r) for r in rows}
    ok = len(rows) >= 2 and len(widths) == 1
    detail = "" if ok else f"{len(rows)} rows with {sorted(widths)} columns"
    return CheckResult(name="csv.parses", passed=ok, detail=detail)


def _bash_check(code: str) -> CheckResult:
    bash = shutil.which("bash")
    if bash is None:
        return CheckResult(name="bash.parses", passed=True, severity="soft", detail="bash is not installed")
    try:
        out = subprocess.run([bash, "-n"], input=code, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return CheckResult(name="bash.parses", passed=True, severity="soft", detail=f"bash -n did not run: {exc}")
    return CheckResult(name="bash.parses", passed=out.returncode == 0, detail=out.stderr.strip()[:200])


# --- text helpers ----------------------------------------------------------------------------------------------


def _without_code(text: str) -> str:
    return _FENCE_BLOCK.sub(" ", text)


def without_code(text: str) -> str:
    """``text`` without its fenced code blocks, an unclosed one at the end included (an answer being written)."""
    closed = _FENCE_BLOCK.sub(" ", text)
    opened = _OPEN_FENCE.search(closed)
    return closed[: opened.start()] if opened else closed


def _prose_unfenced(text: str) -> str:
    """``text`` with its prose fences (:data:`PROSE_FENCES`) opened: their words read as the prose they are."""
    return _FENCE_BLOCK.sub(lambda m: m.group(3) if m.group(2).lower() in PROSE_FENCES else m.group(0), text)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(_without_code(text)) if s.strip()]


def _norm(text: str) -> str:
    return re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()


def sentence_key(text: str) -> str:
    """A sentence as the repetition check compares it: case, punctuation and spacing ignored."""
    return _norm(text)


def _similar(a: str, b: str, threshold: float) -> bool:
    if not a or not b:
        return False
    if a == b:
        return True
    matcher = difflib.SequenceMatcher(None, a[:2000], b[:2000], autojunk=False)
    return matcher.quick_ratio() >= threshold and matcher.ratio() >= threshold
