"""Checks of the text itself: repetition, an ending that breaks off, a table, an answer that speaks as an AI."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from engine.slots.checks.text import (
    WORD,
    Line,
    norm,
    open_code_span,
    split_sentences,
    text_lines,
    without_closed_code,
    without_code,
)
from state.quality import CheckResult, Severity
from state.result import SlotResult


@dataclass(frozen=True)
class _End:
    """How a text breaks off: what, the words it stops on, and the stretch a cut may shorten."""

    kind: Literal["sentence", "span", "block"]
    """Mid-sentence (or announcing what never came), inside an inline code span, or inside a fenced block."""
    words: str
    start: int
    """Where the stretch that may be cut back to its last full sentence begins (the line it starts in)."""
    stop: int
    """Where the unfinished part begins: no sentence end after it is kept."""


_WHY = {
    "sentence": "the answer stops mid-sentence",
    "span": "the answer stops inside an inline code span it opened",
    "block": "the answer ends inside a code block it never closed",
}
_SENTENCE_END = re.compile(r"[.!?](?=\s)")
_LABEL_ITEM = re.compile(r"^(?:\d+[.)]|[-*+])\s+\*\*[^*]+\*\*:?$")
"""A list item that is only a bold label ("3. **Band 3: £37,501 to £150,000**"): its content comes under it."""


def ending_check(raw: str, severity: Severity = "hard") -> CheckResult:
    """``contract.ends`` of a text alone: it is not left inside code, and its last line of prose ends a sentence."""
    end = _unfinished(raw)
    return CheckResult(
        name="contract.ends",
        severity=severity,
        passed=end is None,
        detail=f"{_WHY[end.kind]} ({end.words!r})" if end else "",
    )


def _unfinished(raw: str) -> _End | None:
    """How the answer breaks off (None: it ends properly).

    A text left inside a fenced block or an inline code span (the last paragraph opens one with a backtick and
    stops before any sentence end: "If they are equal, the function `") breaks off, whatever its last character.
    Code blocks, tables, list items and headings may end without punctuation; a line of prose may not, except a
    letter's closing ("Best regards,", the last line of mp3-catering-quote's email) and the signature under it (a
    name of a few words). A last
    line of any kind that ends with a colon announces what never came ("... with the following data:").
    """
    lines, open_fence = text_lines(raw)
    filled = [line for line in lines if line.text.strip()]
    if open_fence is not None:
        return _End("block", filled[-1].text.strip()[-40:], open_fence, open_fence)
    if not filled or filled[-1].code:
        return None
    line = filled[-1]
    last = line.text.strip()
    span = open_code_span(raw)
    if span is not None and not re.search(r"[.!?][\"')\]*_]*$", last):
        opened_in = next(x for x in reversed(lines) if x.start <= span)
        return _End("span", raw[opened_in.start :].strip()[-40:], opened_in.start, span)
    end = _End("sentence", last[-40:], line.start, len(raw))
    if last.endswith(":"):
        return end
    if _LABEL_ITEM.match(last) and _items_had_bodies(filled[:-1]):
        return end  # "3. **Band 3: £37,501 to £150,000**" after two bands with their rates: the list stopped
    if last.startswith(("|", "#", "-", "*", "+", ">")) or re.match(r"^\d+[.)]\s", last):
        return None
    if _ENDS_ON_SPAN.search(last):
        return end  # "..., and the `running_total`": a sentence stopped on a name, not a line that is one command
    if re.search(r"[.!?:;)\]\"'`*_}>\u2026\u201d\u2019]$", last) or last.endswith("}}"):
        return None
    if _CLOSING.match(last):
        return None  # a letter that ends on its closing ("Best regards,"): the name is the sender's to put
    before = filled[-2].text.strip() if len(filled) > 1 and not filled[-2].code else ""
    if before.endswith(",") and len(before.split()) <= 4 and len(last.split()) <= 5:
        return None  # a signature under its closing
    return end


_ENDS_ON_SPAN = re.compile(r"\b(?:the|a|an|each|every|its|their|this|that|these|those|your|our)\s+`[^`]+`$", re.I)
"""A line of prose that ends on a determiner and an inline code span, no sentence end after it: the noun it
names never came. Every last line of a section that ends on a code span in the 682 saved documents (seven) was a
note cut off at its token limit, each on such a determiner (the review set's SQL usage notes: "... an `amount`
column, and a `created_at`", "... and the `running_total`"), none of them a bare reply's; "Run it with
`python main.py`" is a finished line."""

_CLOSING = re.compile(
    r"^(?:(?:best|kind|kindest|warm|warmest|with|many)\s+)?(?:regards|wishes|sincerely|thanks|thank you|cheers|"
    r"best|all the best|respectfully|yours(?:\s+(?:sincerely|faithfully|truly))?)\s*,$",
    re.I,
)
"""A letter's closing on its own line ("Best regards,", "Yours sincerely,", "Thanks,")."""


def _items_had_bodies(lines: list[Line]) -> bool:
    """Whether a list item of ``lines`` that is only a bold label has lines of its own under it (indented)."""
    return any(
        _LABEL_ITEM.match(line.text.strip()) and after.text[:1].isspace() and after.text.strip()
        for line, after in zip(lines, lines[1:], strict=False)
    )


def cut_unfinished_end(text: str) -> tuple[str, str | None]:
    """``text`` without its unfinished end, and what went (None: nothing went).

    A last line that announces what never came ("... reverse. Explanation:") or breaks off mid-sentence is cut back
    to its last full sentence, or goes when it has none; an inline code span left open goes with the sentence it
    opens in. Nothing is reworded, and nothing inside a code block is touched: a text that ends in an unclosed
    block is left as it is.
    """
    end = _unfinished(text)
    if end is None or end.kind == "block":
        return text, None
    ends = [m.end() for m in _SENTENCE_END.finditer(text, end.start, end.stop)]
    cut = ends[-1] if ends else end.start
    return text[:cut].rstrip() + "\n", text[cut:].strip()


def repetition_check(text: str, task: str = "") -> CheckResult:
    """Degenerate repetition: a sentence three times or more, a run of repeated lines, a phrase looping.

    A phrase of ``task`` itself is not a loop: a worked answer names what it computes at each step ("the
    probability of getting at least one six" four times, from the question's own words).
    """
    found = repetition_found(text, task=task)
    if found is None:
        sentences = [norm(s) for s in split_sentences(text) if len(s.split()) >= 5]
        distinct = len(set(sentences)) / len(sentences) if sentences else 1.0
        if len(sentences) >= 8 and distinct < 0.75:
            found = f"only {distinct:.0%} of its sentences are distinct"
    return CheckResult(name="prose.repetition", passed=found is None, detail=found or "")


def repeated_line(lines: Iterable[str], times: int) -> str | None:
    """The first line of more than ten characters that comes ``times`` times in a row (blank lines aside), or None."""
    run, previous = 0, None
    for line in (ln.strip() for ln in lines if ln.strip()):
        run = run + 1 if line == previous and len(line) > 10 else 1
        previous = line
        if run >= times:
            return line
    return None


def repetition_found(
    text: str, *, sentence_times: int = 3, line_run: int = 3, phrase_times: int = 4, task: str = ""
) -> str | None:
    """What repeats in ``text``, or None.

    A sentence of five words or more ``sentence_times`` times, a line of more than ten characters ``line_run``
    times in a row, an eight-word phrase ``phrase_times`` times (not one ``task`` contains), or a paragraph of two
    sentences and twenty words or more written twice (review_whole_dec07, cw-train-scene: a story's two last
    paragraphs written again word for word, every check passed; over the 793 saved documents it finds 22, each a
    loop, 21 of them bare or reference replies).
    """
    sentences = [norm(s) for s in split_sentences(text) if len(s.split()) >= 5]
    repeated = [(s, n) for s, n in Counter(sentences).most_common(1) if n >= sentence_times]
    if repeated:
        return f"a sentence is repeated {repeated[0][1]} times ({repeated[0][0][:60]!r})"
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith(("|", "```", "#"))]
    if (line := repeated_line(lines, line_run)) is not None:
        return f"a line repeats in a run ({line[:60]!r})"
    words = [w.lower() for w in WORD.findall(without_closed_code(text))]
    grams = Counter(tuple(words[i : i + 8]) for i in range(max(0, len(words) - 7)))
    asked = [w.lower() for w in WORD.findall(task)]
    given = {tuple(asked[i : i + 8]) for i in range(max(0, len(asked) - 7))}
    looping = [g for g, n in grams.items() if n >= phrase_times and g not in given]
    if looping:
        return f"a phrase loops ({' '.join(looping[0])!r} {phrase_times} times)"
    paragraphs = Counter(
        norm(p)
        for p in re.split(r"\n\s*\n", without_closed_code(text))
        if len(p.split()) >= 20 and len(split_sentences(p)) >= 2
    )
    again = [p for p, n in paragraphs.items() if n >= 2]
    if again:
        return f"a paragraph is written twice ({again[0][:60]!r})"
    return None


_AI = r"(?:ai|artificial intelligence)(?: language model| model| assistant)?|(?:large )?language model"
SPEAKS_AS_AI = re.compile(
    rf"\bas an? (?:{_AI})(?=,| i\b)|\bi(?: am|'m) an? (?:{_AI})(?=[,.;:!]| and\b| developed\b| trained\b| created\b)",
    re.I,
)
"""The model speaking of itself, not a topic: "As an AI language model, I", "I am an AI and"; "as an AI research
lab" or "I am an AI researcher" do not match."""


def speaks_as_ai_check(text: str) -> CheckResult:
    """``prose.speaks_as_ai``: the answer talks about itself as an AI model ("As an AI language model, I ...").

    A document the person asked for (an email, a guide) never does; the review set's email to a landlord did,
    in place of the request it was meant to make.
    """
    found = SPEAKS_AS_AI.search(text)
    return CheckResult(
        name="prose.speaks_as_ai",
        passed=found is None,
        detail=f"the answer speaks as an AI model ({found.group(0)!r}) instead of doing the work" if found else "",
    )


ABOUT_ITSELF = re.compile(
    r"^(?:this|the)\s+(?:[\w'-]+\s+){0,2}?(?:paragraph|section|answer|response|outline|document|text|note|part|"
    r"explanation|summary|guide|email|letter|message)\s+(?:also\s+)?(?:is designed|is intended|is meant|aims|includes|"
    r"provides|describes|outlines|explains|will|contains|covers|has been|is written|should|offers|gives)\b",
    re.I,
)
"""A sentence about the text it stands in ("This paragraph is designed to be clear and concise", "The appointment
letter should clearly state ..."), not the text itself."""


def about_itself_check(text: str) -> CheckResult:
    """``prose.about_itself``: the answer describes what it would say instead of saying it.

    Three such sentences, or half the answer's sentences: multipart_set3_first's checkout paragraph was three
    sentences about "the shipping-rates paragraph" ("This paragraph is designed to be clear and concise, with all
    necessary information included in its first sentence") and no rate; an added OpenAPI part said what "the
    OpenAPI document should include". One opening sentence ("This section provides an overview of ...") or two in
    a part with content (a contract's "This summary provides ...") are not enough.
    """
    sentences = [s for s in split_sentences(text) if len(s.split()) >= 4]
    about = [s for s in sentences if ABOUT_ITSELF.match(s)]
    found = len(about) >= 3 or (len(sentences) >= 2 and 2 * len(about) >= len(sentences))
    return CheckResult(
        name="prose.about_itself",
        passed=not found,
        detail=f"it describes itself ({about[0][:80]!r}) instead of being written: write the text itself"
        if found
        else "",
    )


_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _cells(line: str) -> int:
    """The cells of a Markdown table row (a pipe inside a code span or escaped is a cell's own)."""
    row = re.sub(r"`[^`]*`", "x", line.strip()).replace("\\|", "x")
    return len(row.removeprefix("|").removesuffix("|").split("|"))


def table_rows_check(text: str) -> CheckResult:
    """``table.rows``: every row of every Markdown table has as many cells as its header.

    review_whole_dec07, arch-comparison-table: the "Cost" row of a four-column table had three cells, so its
    gRPC column was empty and the row read as two products' costs; every check passed. Over the 37 tables of
    the saved documents, 5 had such a row (harness, bare and reference documents alike).
    """
    lines = without_code(text).splitlines()
    for i, line in enumerate(lines[:-1]):
        if not (line.strip().startswith("|") and _SEPARATOR.match(lines[i + 1])):
            continue
        width = _cells(line)
        for row in itertools.takewhile(lambda r: r.strip().startswith("|"), lines[i + 2 :]):
            if _cells(row) != width:
                return CheckResult(
                    name="table.rows",
                    passed=False,
                    detail=f"a row has {_cells(row)} cells where its header has {width} ({row.strip()[:60]!r}): "
                    "give every row one cell per column",
                )
    return CheckResult(name="table.rows", passed=True)


_DAYS_AND_MONTHS = re.compile(
    r"\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b|\b(?:January|February|March|April|June|July|August|September|"
    r"October|November|December)\b"
)
"""The days and months a message's task names ("May" is left out: a verb as often as a month)."""


def message_days_check(text: str, asked: str) -> CheckResult:
    """``message.days``: a message names every day and month its task names.

    2026-12-07, through ``coe run``: "a short message to my team saying the Friday release moves to Monday because
    the payment tests failed" came back (the generalist on the 0.5B) as a message that the release went out on
    Friday and that the payment issues were being fixed: Monday, the news, was nowhere, and every check passed.
    """
    said = text.lower()
    missing = [day for day in dict.fromkeys(_DAYS_AND_MONTHS.findall(asked)) if day.lower() not in said]
    return CheckResult(
        name="message.days",
        passed=not missing,
        detail=f"the message does not name {', '.join(missing)}, which the task names: say it" if missing else "",
    )


_COMMAND_EXAMPLES = re.compile(
    r"\b(?P<command>curl|wget|httpie|kubectl|docker|git|psql|sqlite3|pip|npm|ssh|rsync|systemctl|openssl)\s+"
    r"(?:usage\s+)?(?:examples?|commands?|calls?|requests?|invocations?|one-liners?)\b",
    re.I,
)


def command_examples_check(text: str, asked: str) -> CheckResult | None:
    """``examples.command``: a part asked for a command's examples ("a usage section with curl examples") shows them.

    multipart_set5_rules2, mp5-url-shortener: the usage section described one endpoint and its JSON body, with no
    curl line, and ended there; every check passed. None when the part asks for no such examples.
    """
    asked_for = [m.group("command").lower() for m in _COMMAND_EXAMPLES.finditer(asked)]
    if not asked_for:
        return None
    missing = [c for c in dict.fromkeys(asked_for) if not re.search(rf"(?<![\w-]){re.escape(c)}\s+\S", text, re.I)]
    return CheckResult(
        name="examples.command",
        passed=not missing,
        detail=f"the part is asked for {missing[0]} examples and runs {missing[0]} nowhere: write them, one command "
        "each, in a code block"
        if missing
        else "",
    )


def table_check(result: SlotResult) -> CheckResult:
    """``table.present``: the answer holds a Markdown table."""
    lines = result.body_text().splitlines()
    separator = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$")
    found = any(separator.match(line) for line in lines)
    return CheckResult(
        name="table.present", passed=found, detail="" if found else "no Markdown table (a | header | row and a ---)"
    )
