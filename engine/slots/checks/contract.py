"""The contract checks, for every deliverable.

The answer follows the output structure and was not cut off (nor left inside code); no section is a stub, a
duplicate or a copy of the task's title, and no code is written twice; it does not ask the person for what the task
gave, leak the prompt (its delimiters, its feedback's wording, the persona's lines, the protocol's example
placeholders) or copy the slots it references instead of doing its own part.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass

import engine.prompts as prompts
from engine.prompts import EXAMPLE_DESCRIPTIONS
from engine.slots.checks.check_context import CheckContext
from engine.slots.checks.prose import ending_check
from engine.slots.checks.text import (
    FENCE_BLOCK,
    PYTHON_TAGS,
    WORD,
    code_blocks,
    norm,
    open_code_span,
    similar,
    split_sentences,
    text_lines,
    without_closed_code,
)
from state.python_ast import parse_module
from state.quality import CheckResult, Severity
from state.result import SlotResult

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
    'write the line "## outline"',
    'under it write "1. "',
)
"""The harness' own delimiters and its retry feedback's wording, which must never come back in an answer
(quoting the instructions' wording is harmless and common; copying a delimiter means a reference or a
candidate was pasted in, and the feedback's sentences in an answer are the prompt talking, not the expert: seen
on the review set, "The outline was (keep it if it is right, fix it if a problem above concerns it):"; and the
output structure's own instructions, 'Write the line "## Outline". Under it write "1. " ...', in a YAML block
of a completion part, 2026-12-07)."""
_RUNS_OUT = ("was never closed", "unterminated", "unexpected EOF", "expected an indented block")
"""Python's words for code that stops before it is complete."""
PROMPT_LINES = tuple(
    line.strip().lower()
    for template in (
        prompts.SLOT_PROMPT,
        prompts.TASK_PROMPT,
        prompts.EXPECTED_OUTPUTS_BLOCK,
        prompts.CONSTRAINTS_BLOCK,
        prompts.REFERENCES_BLOCK,
    )
    for line in template.splitlines()
    if "{" not in line and len(line.split()) >= 4
)
"""The slot prompt's own lines ("The overall task (for context only; answer only your part):", "Your answer must
include:"): a real consulting agreement's "Assembled contract" part was its prompt, word for word, and passed."""
_CHECK_NAME = re.compile(
    r"\b(?:contract\.(?:answers|complete|duplicates|ends|leaks|own_work|placeholders|structure|stubs|titles)"
    r"|prose\.repetition|python\.(?:complete|defines|examples|lint|own_doctests|parses|printed|runs|tests|tests_given"
    r"|tests_use_module|tests_agree))\b"
)
"""The checks' own names, which the retry feedback quotes: in an answer they are the feedback talking (a real
checklist wrote "a prioritized order for each item: contract.duplicates, contract.placeholders, and
prose.repetition")."""
FEEDBACK_ECHO_WORDS = 6
"""A run of the feedback's words this long in the answer is the feedback talking ("the fact that is missing or
leave"); shorter runs ("the answer was cut off") are said in passing."""
_FEEDBACK_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|\([^()\n]*\)|\{\{.*?\}\}")
"""What a feedback quotes of the answer or the task (titles, text, the placeholder copied): not its own wording."""
_QUOTE_LEFT_OUT = "zquotedz"
_FEEDBACK_OUTLINE = re.compile(r"(?m)^\s*\d+(?:\.\d+)*[.)]?\s.*$")
"""The outline a retry's feedback gives back to keep ("1. Pytest tests for the Python function ..."): the
answer's own titles, not the feedback's wording (a real tests part failed five draws for keeping it)."""
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
    r"\{\{\s*ASSIST\s*:[^{}]*?:\s*(?:" + "|".join(map(re.escape, sorted(EXAMPLE_DESCRIPTIONS))) + r")\s*\}\}"
    r"|\[\[\s*ASSIST\s*:[^\[\]\n]*\]\]",
    re.I,
)
"""The uncertainty protocol's own example placeholders (whatever domain a copy names): they ask for nothing. And
a placeholder in double square brackets, which no resolver reads: a landlord email on the 0.5B ended on four
lines such as ``[[ASSIST:lookup:the fact]]``, every check passing (2026-12-07)."""
WRITTEN_SOURCE = re.compile(r"[ \t]*(?:\[source:[^\]\n]*\]|\{\{\s*UNRESOLVED\s*:[^{}]*\}\})", re.I)
"""A source tag or an unresolved marker: the harness writes them when it resolves assists, after the checks. In a
candidate they are the model's own, a citation nobody made (a real security plan on the 1.5B cited
``[source: consulted expert uuid_generator]``, an expert that does not exist)."""
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


def contract_checks(result: SlotResult, ctx: CheckContext) -> list[CheckResult]:
    """The checks every answer gets, whatever it delivers."""
    # For code, the deliverable is the module: a note after it that was cut short is a blemish, not a failure
    # (a module that was itself cut off fails to parse, or has no closed code block, which are hard checks).
    ending: Severity = "soft" if ctx.contract.code_first else "hard"
    return [
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
        _ends_check(result.raw, ending),
        _titles_check(result, ctx.task),
        _answers_check(result),
        _stubs_check(result, MIN_SECTION_WORDS[ctx.contract.deliverable]),
        duplicates_check(result, ctx.task, module=ctx.contract.code_first),
        _leaks_check(result, ctx.persona, echoed_feedback(result, ctx)),
        _placeholders_check(result),
        sources_check(result.raw),
        _own_work_check(result, ctx.references),
        *_bound_checks(result, ctx),
    ]


def _bound_checks(result: SlotResult, ctx: CheckContext) -> list[CheckResult]:
    """``contract.bound``: no section of a written answer fills the most lines a section may hold.

    The grammar ends a section at its contract's ``max_block_lines``, wherever the model was: multipart_set5_rules3's
    tip-out working stopped after "- Ana: 36 hours" (8 lines, the prose bound) and its staff message after
    "Hours worked: 20.5" (16, a message's), and every check passed. A section that ends there was cut, not
    finished (one that happened to end on its last line is told to say it in fewer). Code answers are bounded by
    their blocks, not here.
    """
    bound = ctx.contract.max_block_lines
    if not ctx.bounded or ctx.contract.code_first or bound <= 0:
        return []
    full = [
        s
        for s in result.sections
        if len([line for line in without_closed_code(s.body).splitlines() if line.strip()]) >= bound
    ]
    if not full:
        return []
    return [
        CheckResult(
            name="contract.bound",
            passed=False,
            detail=f"section {full[0].label} '{full[0].title[:60]}' reached the most lines a section may hold "
            f"({bound}) and was cut there: say it in fewer lines (a table, or shorter lines), or in more sections",
        )
    ]


def _ends_check(raw: str, severity: Severity) -> CheckResult:
    """``contract.ends``: the text ends properly (:func:`ending_check`), and no Python block of it breaks off.

    A broken-off block fails hard whatever the answer delivers: a reader who runs the usage script gets a syntax
    error, where a code answer's cut-off note after its module is a blemish.
    """
    ending = ending_check(raw, severity)
    cut = cut_python_block(raw) if ending.passed else None
    if cut is not None:
        return CheckResult(name="contract.ends", passed=False, detail=f"a Python block breaks off ({cut})")
    broken = broken_paragraph(raw) if ending.passed else None
    if broken is not None:
        return CheckResult(
            name="contract.ends",
            passed=False,
            detail=f"a paragraph breaks off inside an inline code span before a code block ({broken!r})",
        )
    return ending


def broken_paragraph(text: str) -> str | None:
    """The end of a paragraph that breaks off inside an inline code span where a code block follows, or None.

    multipart_set3_pieces2, mp3-bike-repair-sqlite: a script's usage note stopped on "... fetched using a SQL
    `EXE" and began the script again, mid-part, where the end-of-text check does not look. Over 749 saved
    documents this finds two, both cut off (the other: "The `calculate_occupy" in mp2-gym-bookings).
    """
    lines, _ = text_lines(text)
    paragraph: list[str] = []  # the last paragraph of prose, while only blank lines follow it
    gap = False
    for line in lines:
        if line.code:
            last = paragraph[-1].strip() if paragraph else ""
            if last and open_code_span("\n".join(paragraph)) is not None and not _FINISHED.search(last):
                return last[-40:]
            paragraph, gap = [], False
        elif not line.text.strip():
            gap = True
        else:
            paragraph = [line.text] if gap else [*paragraph, line.text]
            gap = False
    return None


_FINISHED = re.compile(r"[.!?:][\"')\]*_`]*$")


def cut_python_block(text: str) -> str | None:
    """Why a Python block of ``text`` breaks off (its code never closes a bracket or a string), or None.

    multipart_set2_first, mp2-gym-bookings: the schema part's usage script stopped inside its query string, its
    fence closed after ``ORDER BY``, and every check passed (the part's module is its SQL). Only a block that runs
    out before it is complete counts; other syntax errors are the code's own checks' to find.
    """
    for language, code in code_blocks(text):
        if language not in PYTHON_TAGS or ">>> " in code:
            continue
        try:
            parse_module(code)
        except SyntaxError as exc:
            message = str(exc.msg)
            if any(words in message for words in _RUNS_OUT):
                return f"{message}, line {exc.lineno}"
        except ValueError:
            continue
    return None


def _titles_check(result: SlotResult, task: str) -> CheckResult:
    """No outline item is titled with the task, or with the output structure's own wording."""
    copied = [i.title for i in result.outline if copies_task(i.title, task)]
    instructions = [i.title for i in result.outline if _INSTRUCTION_TITLE.search(i.title)]
    return CheckResult(
        name="contract.titles",
        passed=not copied and not instructions,
        detail=f"an outline item repeats the task as its title ({copied[0]!r})"
        if copied
        else f"an outline item's title is the output structure's own wording ({instructions[0]!r})"
        if instructions
        else "",
    )


def _answers_check(result: SlotResult) -> CheckResult:
    """A short answer does not ask the person for what the task gave (:data:`ASKS_BACK`)."""
    body = without_closed_code(result.body_text())
    asks = ASKS_BACK.search(body) if len(WORD.findall(body)) < ASKS_BACK_WORDS else None
    return CheckResult(
        name="contract.answers",
        passed=asks is None,
        detail=f"it asks the person for details instead of answering ({asks.group(0)!r}); answer with what the "
        "task gives, and write {{ASSIST:user:...}} for what only the person knows"
        if asks
        else "",
    )


def _stubs_check(result: SlotResult, minimum: int) -> CheckResult:
    """No section is empty, shorter than ``minimum`` words (outside code), or placeholder text."""
    stubs: list[str] = []
    for s in result.sections:
        text = without_closed_code(s.body)
        if not s.body.strip() and result.has_subsections(s.label):
            continue
        if not s.body.strip() or (minimum and not FENCE_BLOCK.search(s.body) and len(WORD.findall(text)) < minimum):
            stubs.append(f"section {s.label} {s.title!r} is empty or only {len(WORD.findall(text))} words")
        elif STUB.search(s.body):
            stubs.append(f"section {s.label} {s.title!r} holds placeholder text ({STUB.search(s.body).group(0)!r})")  # type: ignore[union-attr]
        elif not result.has_subsections(s.label) and (announced := _announces(s.body)) is not None:
            stubs.append(f"section {s.label} {s.title!r} ends announcing what never comes ({announced!r})")
        elif (formula := _unclosed_formula(text)) is not None:
            stubs.append(f"section {s.label} {s.title!r} ends inside a formula it never closes ({formula!r})")
    return CheckResult(name="contract.stubs", passed=not stubs, detail="; ".join(stubs[:2]))


def _announces(body: str) -> str | None:
    """The last line of a section's text when it ends with a colon ("Given:") and nothing follows, else None.

    Seen in numeric_heldout_first: an NPV's section ended "Given:" and the next began elsewhere, and passed every
    check. A section that ends inside a formula is :func:`_unclosed_formula`'s.
    """
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    # "3. **Year 3:**" ends with its colon inside the bold; a closing fence ends what "Example:" announced
    return lines[-1] if lines and lines[-1].rstrip("*_ ").endswith(":") else None


def _unclosed_formula(text: str) -> str | None:
    r"""The last line of a section's prose when a display formula (``\[``, ``$$``) opens and never closes, else None.

    Seen on the 1.5B (a download time, 2026-11-29): the answer's second section stopped at
    ``75 \text{ Mbps} = 75 \times 1,000,000 \text{ bps} = 75,000,000 \text{ bps}`` inside ``\[`` with no
    result, and passed every check; a break-even's section ended on ``\[`` itself (numeric_heldout_first).
    """
    if text.count("\\[") <= text.count("\\]") and text.count("$$") % 2 == 0:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][-80:] if lines else None


def _leaks_check(result: SlotResult, persona: str, echoed: list[str]) -> CheckResult:
    """The answer does not repeat the prompt's own text: delimiters, persona lines, check names, its feedback."""
    lowered = result.raw.lower()
    leaked = [leak for leak in (*LEAKS, *PROMPT_LINES) if leak in lowered]
    leaked += _persona_lines(result.raw, persona) + echoed
    leaked += _CHECK_NAME.findall(without_closed_code(result.raw))
    return CheckResult(
        name="contract.leaks",
        passed=not leaked,
        detail=f"the answer repeats the prompt's own text ({leaked[0]!r})" if leaked else "",
    )


def _placeholders_check(result: SlotResult) -> CheckResult:
    """The answer does not copy the uncertainty protocol's example placeholder as written."""
    example = _EXAMPLE_PLACEHOLDER.search(result.raw)
    return CheckResult(
        name="contract.placeholders",
        passed=example is None,
        detail=f"the answer copies the protocol's example placeholder ({example.group(0)!r}); name the fact "
        "that is missing, or leave the placeholder out"
        if example
        else "",
    )


def sources_check(text: str) -> CheckResult:
    """The answer writes no source tag or unresolved marker of its own (:data:`WRITTEN_SOURCE`)."""
    written = WRITTEN_SOURCE.search(text)
    return CheckResult(
        name="contract.sources",
        passed=written is None,
        detail=f"the answer writes a source or an unresolved marker itself ({written.group(0).strip()[:80]!r}); "
        "only the harness cites sources: write {{ASSIST:...}} where a fact needs one"
        if written
        else "",
    )


def _own_work_check(result: SlotResult, references: tuple[str, ...]) -> CheckResult:
    """At most half of the answer's sentences are copied from the slots it references, and not all its code."""
    share = copied_share(result.body_text(), references)
    if share >= 0.5:
        detail = f"{share:.0%} of its sentences are copied from the slots it references"
    elif copies_code(result.raw, references):
        detail = "its code is a referenced slot's, copied block for block: write this part's own code"
    else:
        detail = ""
    return CheckResult(name="contract.own_work", passed=not detail, detail=detail)


def copies_code(text: str, references: tuple[str, ...]) -> bool:
    """Whether every code block of ``text`` (of three lines or more; one at least) is a referenced slot's.

    A tests part added by a completion round wrote the RecipeScaler class again, block for block, and no test
    (multipart_new8): its sentences were too few for :func:`copied_share` to judge.
    """
    mine = [_code_key(code) for _, code in code_blocks(text) if len(_code_key(code).splitlines()) >= 3]
    theirs = {_code_key(code) for reference in references for _, code in code_blocks(reference)}
    return bool(mine) and all(block in theirs for block in mine)


def _code_key(code: str) -> str:
    """A code block as copies are compared: its non-blank lines, trailing spaces dropped."""
    return "\n".join(line.rstrip() for line in code.splitlines() if line.strip())


def _persona_lines(text: str, persona: str) -> list[str]:
    """Lines of the ``persona`` (of :data:`PERSONA_LINE_WORDS` words or more) that ``text`` repeats word for word.

    A real password-policy answer titled two of its sections with the persona's "You MAY" lines ("Review designs
    and code snippets for vulnerabilities and propose mitigations"): the prompt talking, not the expert.
    """
    said = f" {norm(text)} "
    lines = (norm(line.lstrip("-* ")) for line in persona.splitlines())
    return [line for line in lines if len(line.split()) >= PERSONA_LINE_WORDS and f" {line} " in said]


def echoed_feedback(result: SlotResult, ctx: CheckContext) -> list[str]:
    """Runs of :data:`FEEDBACK_ECHO_WORDS` words of the feedback ``ctx`` gave this draw that the answer's prose repeats.

    The feedback's quotes are left out (a retry names the answer's own titles and text), and so is anything the task
    or the part's description says too. Seen on a changelog part written again after a completion round: "The
    changelog entry includes: ... - A name of the fact that is missing, or leave it out - A placeholder for the
    previous answer to this part", the round's feedback written as the entry's content, every check passing.
    """
    if not ctx.feedback:
        return []
    own = _shingles(norm(f"{ctx.task} {ctx.asked}").split())
    told: set[tuple[str, ...]] = set()
    for text in ctx.feedback:
        wording = _FEEDBACK_OUTLINE.sub(f" {_QUOTE_LEFT_OUT} ", _FEEDBACK_QUOTED.sub(f" {_QUOTE_LEFT_OUT} ", text))
        told |= _shingles(norm(wording).split()) - own
    words = norm(without_closed_code(result.raw)).split()
    found: list[str] = []
    last = -2
    for at in range(len(words) - FEEDBACK_ECHO_WORDS + 1):
        run = tuple(words[at : at + FEEDBACK_ECHO_WORDS])
        if run not in told:
            continue
        if at == last + 1:  # the same echo, one word longer
            found[-1] += f" {run[-1]}"
        else:
            found.append(" ".join(run))
        last = at
    return found


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    """Every run of :data:`FEEDBACK_ECHO_WORDS` words of ``words`` that no quote left out breaks."""
    runs = (tuple(words[at : at + FEEDBACK_ECHO_WORDS]) for at in range(len(words) - FEEDBACK_ECHO_WORDS + 1))
    return {run for run in runs if _QUOTE_LEFT_OUT not in run}


def copies_task(title: str, task: str) -> bool:
    """Whether an outline item's ``title`` repeats the task's first line (``contract.titles`` fails it)."""
    first = norm(task.strip().splitlines()[0] if task.strip() else "")
    return bool(first) and similar(norm(title), first, 0.8)


def repeated_sections(
    result: SlotResult,
    task: str,
    references: tuple[str, ...] = (),
    others: tuple[str, ...] = (),
    own: str = "",
) -> list[tuple[str, str]]:
    """Each section that repeats an earlier one, the task or a referenced slot, or is another slot's part.

    ``(label, why)``, in order. A copy of a referenced slot is a section most of whose sentences are in it word for word
    (:data:`COPIED_SECTION_SHARE`). Another slot's part is a top-level section titled as one of ``others`` (the
    titles of the plan's other slots): that slot writes it. Titled as one: the same words, or (after the first
    section) most of that title's words (:data:`OTHER_TITLE_SHARE`) and more of them than of ``own``, the slot's
    own title (multipart_set5_first: given the task's numbered list, each of a league's four parts wrote "2. 1
    query that returns the league table: team, played, ...", the query part's work, four different queries).
    """
    found: list[tuple[str, str]] = []
    theirs = {norm(t): t for t in others if norm(t)}
    for at, section in enumerate(result.sections):
        if section.level != 1:
            continue
        title = theirs.get(norm(section.title)) or (_titled_as(section.title, others, own) if at else None)
        if title is not None:
            found.append((section.label, f"section {section.label} is the part {title!r} of another slot"))
    taken = {label for label, _ in found}
    bodies = [(s, norm(s.body)) for s in result.sections if len(s.body) > 40 and s.label not in taken]
    pool = _sentence_pool(references)
    for i, (a, na) in enumerate(bodies):
        if similar(na, norm(task), 0.9):
            found.append((a.label, f"section {a.label} repeats the task"))
            continue
        earlier = next((b for b, nb in bodies[:i] if similar(nb, na, 0.85)), None)
        if earlier is not None:
            found.append((a.label, f"sections {earlier.label} and {a.label} say the same"))
            continue
        mine = _long_sentences(a.body) if pool else []
        if len(mine) >= 2 and sum(1 for s in mine if s in pool) >= COPIED_SECTION_SHARE * len(mine):
            found.append((a.label, f"section {a.label} copies a slot it references"))
    return found


OTHER_TITLE_SHARE = 0.75
"""The share of another slot's title words a section title must hold to be that slot's part."""
_TITLE_FILLER = frozenset(
    "a an the of for to in on and or with by from at as is are be that this these those it its one two three "
    "give write draft create make produce provide deliver add implement short brief".split()
)


_USAGE_TITLE = re.compile(r"^\W*(?:usage|examples?|example usage|how to use|notes?)\b", re.I)


def _title_words(title: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z0-9_]*", title.lower()) if w not in _TITLE_FILLER}


def _titled_as(title: str, others: tuple[str, ...], own: str) -> str | None:
    """The other slot's title that ``title`` names most of the words of, more than of ``own``'s; or None.

    A title of four words or more counts its own words too: a long slot title copied and cut at a title's length
    names only its first words ("Implementation in one file, shortener.py, using only the standard library (http"
    of a fifteen-word title: multipart_set5_rules2's endpoint table wrote the implementation again, cut off).
    """
    if _USAGE_TITLE.match(title):
        return None  # "Usage: Print open repair jobs ...": how to use this part's work, whatever it prints
    words = _title_words(title)
    mine = _title_words(own)
    own_share = len(words & mine) / len(mine) if mine else 0.0
    for other in others:
        theirs = _title_words(other)
        if len(theirs) < 2:
            continue
        share = len(words & theirs) / (min(len(theirs), len(words)) if len(words) >= 4 else len(theirs))
        if share >= OTHER_TITLE_SHARE and share > own_share:
            return other
    return None


def duplicates_check(result: SlotResult, task: str, *, module: bool = False) -> CheckResult:
    """``contract.duplicates``: no two sections say the same, none repeats the task, no code is written twice.

    ``module``: the answer delivers one module (code or data), so a function defined again under its name is a
    second version of it (:func:`repeated_code`).
    """
    found = [why for _, why in repeated_sections(result, task)]
    found += [r.why for r in repeated_code(result, module=module)]
    return CheckResult(name="contract.duplicates", passed=not found, detail="; ".join(found[:2]))


REPEATED_BLOCK_LINES = 3
"""A code block of this many lines or more, written again word for word, is a duplicate; a shorter one only when it
defines a function or class (a runbook may give the same one-line command at two steps)."""
_PYTHON = PYTHON_TAGS | {""}
ANNOUNCEMENT_WORDS = 12
"""A line this short that ends with a colon right before a block announces it, and goes when the block goes."""


@dataclass(frozen=True)
class RepeatedCode:
    """A code block of a section that repeats code written earlier in the answer, and what a cut leaves of it."""

    label: str
    """The section the block is in."""
    start: int
    end: int
    """Where the block (its fences included) is in the section's body."""
    kept: str
    """What stays in its place: nothing, or the block without the definitions it repeats (its other lines kept)."""
    why: str


def repeated_code(result: SlotResult, *, module: bool = False) -> list[RepeatedCode]:
    """Each code block that repeats code an earlier block of the answer holds, in order.

    Repeated: the same block again in a later section (its whitespace aside; :data:`REPEATED_BLOCK_LINES`; within
    one section, an example's input and output may read the same), a Python function defined again with the same
    body (names, comments and spacing aside: ``ast.unparse``), or, where the answer is one ``module``, a function or
    class defined again under the same name (the README demo wrote ``is_palindrome`` under "1. Usage" and again
    under "2. `is_palindrome` function"). Only definitions at a block's top level count, so methods of two classes
    never do. Such a block goes whole, with the short line announcing it, or keeps its other lines (a usage block
    that defines the function again before calling it keeps the calls).
    """
    found: list[RepeatedCode] = []
    blocks: dict[str, str] = {}
    names: dict[str, str] = {}
    bodies: dict[str, tuple[str, str]] = {}
    for section in result.sections:
        here = section.label
        for match in FENCE_BLOCK.finditer(section.body):
            language, code = match.group(2).lower(), match.group(3)
            key = " ".join(code.split())
            if blocks.get(key, here) != here and _counts(code, language):
                why = f"section {here} repeats a code block of section {blocks[key]}"
                found.append(RepeatedCode(here, _announced(section.body, match.start()), match.end(), "", why))
                continue
            blocks.setdefault(key, here)
            tree = _python_tree(code) if language in _PYTHON else None
            if tree is None:
                continue
            again: list[str] = []
            lines: set[int] = set()
            for node in tree.body:
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                shape = _shape(node)
                same = bodies.get(shape) if shape else None
                if same is not None and same[0] == node.name or same is None and module and node.name in names:
                    again.append(f"defines {node.name} again (section {names[node.name]} does)")
                elif same is not None:
                    again.append(f"defines {node.name}, the same function as {same[0]} of section {same[1]}")
                else:
                    names.setdefault(node.name, here)
                    if shape:
                        bodies.setdefault(shape, (node.name, here))
                    continue
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines.update(range(first, (node.end_lineno or node.lineno) + 1))
            if again:
                why = f"section {here} " + "; ".join(again)
                kept = _without_lines(code, lines)
                if kept is None:
                    found.append(RepeatedCode(here, _announced(section.body, match.start()), match.end(), "", why))
                else:
                    body = section.body
                    fenced = body[match.start() : match.start(3)] + kept + body[match.end(3) : match.end()]
                    found.append(RepeatedCode(here, match.start(), match.end(), fenced, why))
    return found


def _announced(body: str, at: int) -> int:
    """Where a block at ``at`` starts with the short line that announces it ("Here is the function:"), if any.

    The announcement goes with the block: left alone, it would announce nothing.
    """
    before = body[:at].rstrip()
    start = before.rfind("\n") + 1
    line = before[start:].strip()
    return start if line.endswith(":") and len(line.split()) <= ANNOUNCEMENT_WORDS and "```" not in line else at


def _counts(code: str, language: str) -> bool:
    """Whether a block written twice is a duplicate: long enough, or it defines something."""
    if sum(1 for line in code.splitlines() if line.strip()) >= REPEATED_BLOCK_LINES:
        return True
    tree = _python_tree(code) if language in _PYTHON else None
    return tree is not None and any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body
    )


def _python_tree(code: str) -> ast.Module | None:
    """The block parsed as Python, or None (another language, or broken code)."""
    try:
        return parse_module(code)
    except (SyntaxError, ValueError):
        return None


def _shape(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    """A function as :func:`ast.unparse` writes it under a neutral name ("" for a class or a stub's empty body)."""
    if isinstance(node, ast.ClassDef) or all(
        isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in node.body
    ):
        return ""
    neutral = copy.copy(node)
    neutral.name = "_"
    return ast.unparse(neutral)


def _without_lines(code: str, lines: set[int]) -> str | None:
    """``code`` without the given (1-based) lines, or None when no statement is left (only comments and blanks)."""
    kept = [line for n, line in enumerate(code.splitlines(), 1) if n not in lines]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip("\n")
    tree = _python_tree(text)
    if not text.strip() or (tree is not None and not tree.body):
        return None
    return text + "\n"


def _long_sentences(text: str) -> list[str]:
    """The sentences of ``text`` of six words or more, normalised (what a copy is counted in)."""
    return [norm(s) for s in split_sentences(text) if len(s.split()) >= 6]


def _sentence_pool(references: tuple[str, ...]) -> set[str]:
    """The referenced slots' long sentences (what a copy is looked up in)."""
    return {s for ref in references for s in _long_sentences(ref)}


def copied_share(text: str, references: tuple[str, ...]) -> float:
    """The share of the answer's sentences (of 6+ words) that appear word for word in a referenced slot."""
    if not references:
        return 0.0
    pool = _sentence_pool(references)
    mine = _long_sentences(text)
    if len(mine) < 3:
        return 0.0
    return sum(1 for s in mine if s in pool) / len(mine)
