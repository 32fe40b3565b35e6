"""Parse an expert's Markdown answer into outline and numbered sections, and say how it broke the contract.

The contract is ``## Outline`` with numbered items, then a ``## k. Title`` section per item (``### k.j`` for
sub-items). Small models deviate from it in every way, so :func:`parse_output` is tolerant (other outline markers,
``1)`` numbering, bold or unnumbered headings, a missing outline, CRLF; never a heading inside a code fence),
never raises on a string, and records what it tolerated in ``SlotResult.problems``, which :func:`retry_feedback`
turns into a retry prompt.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass, field

from state.result import OutlineItem, Section, SlotResult

MIN_OUTLINE_ITEMS = 3
"""Fewest top-level outline items the contract allows."""

MAX_OUTLINE_ITEMS = 7
"""Most top-level outline items the contract allows."""

MAX_PROBLEMS = 20
"""Problems listed on a result; the rest are summarised in one last entry."""

_TITLE_CHARS = 60
_LABEL = r"(\d{1,3}(?:\.\d{1,3}){0,5})"
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_HR = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_HEAD_LABEL = re.compile(
    r"^(?:\*\*|__)?(?:section[ \t]+)?" + _LABEL + r"([.):])?(?:\*\*|__)?(?=[ \t]|$)(.*)$", re.IGNORECASE
)
_ITEM = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*|__)?" + _LABEL + r"([.):])?(?:\*\*|__)?(?=[ \t]|$)(.*)$")
_BULLET = re.compile(r"^ ?[-*+][ \t]+(\S.*)$")
_BOLD_LEAD = re.compile(r"^\*\*([^*]+)\*\*[ \t]*(?:[:\-\u2013\u2014]|\.[ \t])")
_NON_WORD = re.compile(r"[\W_]+")


@dataclass
class _Marker:
    """Where the outline marker sits: lines ``start`` to ``end`` (exclusive)."""

    start: int
    end: int
    text: str
    is_heading: bool


@dataclass
class _Head:
    """A line that opens a section."""

    line: int
    label: str
    title: str
    source: str
    kind: str  # "numbered" (## 1. Title), "bold" (**1. Title**) or "matched" (## Title, found in the outline)


@dataclass
class _Open:
    """A section being read."""

    head: _Head
    body: list[str] = field(default_factory=list)


@dataclass
class _Outline:
    """The outline as read, with what went wrong reading it."""

    items: list[tuple[str, str]] = field(default_factory=list)
    region: tuple[int, int] = (0, 0)
    duplicates: dict[str, int] = field(default_factory=dict)
    bullets: bool = False
    as_headings: bool = False


class _Doc:
    """The text split into lines, with fenced code, ATX headings and rules located once."""

    def __init__(self, text: str) -> None:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if text.startswith("\ufeff"):
            text = text[1:]
        self.lines = text.split("\n")
        self.wrapper = _unwrap(self.lines)
        self.code, self.unclosed_fence = _code_mask(self.lines)
        self.atx: dict[int, tuple[int, str]] = {}
        self.rules: set[int] = set()
        for i, line in enumerate(self.lines):
            if self.code[i]:
                continue
            heading = _atx(line)
            if heading is not None:
                self.atx[i] = heading
            elif _HR.match(line):
                self.rules.add(i)

    def boundary(self, start: int) -> int:
        """The first heading or horizontal rule at or after ``start`` (the number of lines if none)."""
        for i in range(start, len(self.lines)):
            if i in self.atx or i in self.rules:
                return i
        return len(self.lines)


def parse_output(
    text: str,
    slot_id: str,
    expert: str,
    attempts: int = 1,
    *,
    min_items: int = MIN_OUTLINE_ITEMS,
    max_items: int = MAX_OUTLINE_ITEMS,
) -> SlotResult:
    """Parse an expert's answer into outline and sections and judge it against the output contract.

    Never raises on a string. When the text breaks the contract, ``compliant`` is False, ``problems`` says
    how, and the outline and sections are a best-effort parse: without an outline, the outline is derived from
    the numbered sections; without numbered sections (or section headings matching the outline), ``sections``
    is empty and :meth:`SlotResult.body_text` falls back to the raw text.

    Args:
        text: The expert's raw answer.
        slot_id: The slot the answer is for.
        expert: The expert that wrote it.
        attempts: How many attempts produced it (1 for the first answer); values below 1 count as 1.
        min_items: Fewest top-level outline items the slot's contract allows.
        max_items: Most top-level outline items the slot's contract allows.

    Returns:
        The parsed result; ``raw`` holds ``text`` unchanged.
    """
    doc = _Doc(text)
    problems: list[str] = []
    if not text.strip():
        problems.append("output is empty")
    if doc.wrapper is not None:
        problems.append(f"the answer is wrapped in a code block ({_quote(doc.wrapper)}); write plain Markdown")
    if doc.unclosed_fence is not None:
        problems.append(
            f"the code block opened on line {doc.unclosed_fence + 1} is never closed, so everything after it "
            "is read as code"
        )

    first_numbered = min((i for i, (_, t) in doc.atx.items() if _HEAD_LABEL.match(t)), default=len(doc.lines))
    marker = _find_marker(doc, first_numbered)
    outline = _read_outline(doc, marker)
    heads = _find_heads(doc, outline)
    sections, section_problems = _build_sections(doc, heads, outline)

    items = _dedupe(outline.items)
    derived = not items and bool(sections)
    if derived:
        items = [(s.label, s.title) for s in sections]
    items = [(label, _unlabelled(_unnumbered(title, label))[0]) for label, title in items]
    titles = dict(items)
    for s in sections:
        s.title, said = _unlabelled(_unnumbered(s.title, s.label))
        if said:  # the sentence the heading held opens the body, joined where the line broke mid-sentence
            s.body = f"{said}{' ' if s.body[:1].islower() else chr(10)}{s.body}" if s.body else said
        if not s.title and titles.get(s.label):
            s.title = titles[s.label]

    if text.strip():
        problems += _marker_problems(marker, outline, sections, heads)
        problems += _outline_problems(items, outline, min_items, max_items)
        if not sections:
            problems.append("no numbered section headings found (expected '## 1. Title', '### 1.1 Title')")
        problems += section_problems
        problems += _match_problems(items, sections, heads, derived)
    if len(problems) > MAX_PROBLEMS:
        rest = len(problems) - MAX_PROBLEMS
        problems = problems[:MAX_PROBLEMS] + [f"... and {rest} more problem{'s' if rest > 1 else ''}"]

    return SlotResult(
        slot_id=slot_id,
        expert=expert,
        raw=text,
        outline=[OutlineItem(label=label, title=title, level=_level(label)) for label, title in items],
        sections=sections,
        compliant=not problems,
        problems=problems,
        attempts=max(1, attempts),
    )


def retry_feedback(result: SlotResult) -> str:
    """The feedback for a retry prompt: what was wrong with ``result`` (the harness restates the contract).

    Args:
        result: A parsed answer, normally a non-compliant one.

    Returns:
        Plain text for the retry prompt: the problems as a list (when there are any) and the outline the
        expert gave (when one was found).
    """
    parts: list[str] = []
    if result.problems:
        listed = "\n".join(f"- {p}" for p in result.problems)
        parts.append(f"Your previous answer did not follow the required output structure:\n{listed}")
    if result.outline:
        parts.append(
            "Your outline was (keep it if it is right, fix it if a problem above concerns it):\n"
            + result.outline_text()
        )
    return "\n\n".join(parts)


# --- reading ------------------------------------------------------------------------------------------------


def _unwrap(lines: list[str]) -> str | None:
    """Blank a fence wrapped around the whole answer (```` ```markdown ````); return its opening line, else None.

    A fence counts as a wrapper when its info string is ``markdown``/``md``, or when it is bare, its first line
    is an outline marker and the answer ends with its closing fence. Lines are blanked, not removed, so line
    numbers in problems stay right.
    """
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) < 2:
        return None
    first = _FENCE.match(lines[filled[0]])
    if first is None:
        return None
    fence, info = first.group(1), first.group(2).strip().lower()
    last = _FENCE.match(lines[filled[-1]])
    closed = bool(last and last.group(1)[0] == fence[0] and len(last.group(1)) >= len(fence))
    closed = closed and last is not None and not last.group(2).strip() and len(filled) > 2
    if info not in ("markdown", "md") and (info or not closed or _key(lines[filled[1]]) != "outline"):
        return None
    opening = lines[filled[0]].strip()
    lines[filled[0]] = ""
    if closed:
        lines[filled[-1]] = ""
    return opening


def _code_mask(lines: list[str]) -> tuple[list[bool], int | None]:
    """Mark the lines inside fenced code blocks (fence lines included) and find an unclosed fence."""
    mask = [False] * len(lines)
    fence_char, fence_len, opened_at = "", 0, None
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if opened_at is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence_char, fence_len, opened_at = m.group(1)[0], len(m.group(1)), i
                mask[i] = True
            continue
        mask[i] = True
        if m and m.group(1)[0] == fence_char and len(m.group(1)) >= fence_len and not m.group(2).strip():
            opened_at = None
    return mask, opened_at


def _atx(line: str) -> tuple[int, str] | None:
    """``(hashes, text)`` of an ATX heading line, closing ``#`` sequence removed; None for other lines."""
    m = _ATX.match(line)
    if m is None:
        return None
    return len(m.group(1)), _strip_closing(m.group(2) or "")


def _strip_closing(text: str) -> str:
    text = text.strip()
    while text.endswith("#"):
        bare = text.rstrip("#")
        if bare and bare[-1] not in " \t":
            break
        text = bare.strip()
    return text


def _find_marker(doc: _Doc, first_numbered: int) -> _Marker | None:
    """The outline marker: a heading ``Outline`` anywhere, or a plain/bold/setext one before the sections."""
    lines = doc.lines
    for i, line in enumerate(lines):
        if doc.code[i]:
            continue
        if i in doc.atx:
            heading = doc.atx[i][1]
            key = _key(heading)
            if not _HEAD_LABEL.match(heading) and (key == "outline" or key.startswith("outline ")):
                return _Marker(i, i + 1, line.strip(), is_heading=True)
            continue
        if i >= first_numbered or _key(line) != "outline":
            continue
        nxt = i + 1
        if nxt < len(lines) and not doc.code[nxt] and _SETEXT.match(lines[nxt]):
            return _Marker(i, i + 2, line.strip(), is_heading=True)
        return _Marker(i, i + 1, line.strip(), is_heading=False)
    return None


def _read_outline(doc: _Doc, marker: _Marker | None) -> _Outline:
    """Read the numbered list after the marker (or, without one, before the first heading)."""
    start = marker.end if marker else 0
    end = doc.boundary(start)
    out = _Outline(region=(marker.start if marker else 0, end))
    seen: set[str] = set()
    for i in range(start, end):
        if doc.code[i]:
            continue
        m = _ITEM.match(doc.lines[i])
        if m and (m.group(2) or "." in m.group(1)):
            label, title = m.group(1), _clean_title(m.group(3))
            if label in seen:
                if _bold_head(doc.lines[i]):  # "**1. Title**" again: the sections start here
                    out.region = (out.region[0], i)
                    break
                out.duplicates[label] = out.duplicates.get(label, 1) + 1
            seen.add(label)
            out.items.append((label, title))
    if marker is None:
        if len(out.items) < 2:
            return _Outline(region=(0, 0))
        return out
    if out.items:
        return out
    bullets = [
        _clean_title(m.group(1)) for i in range(start, end) if not doc.code[i] and (m := _BULLET.match(doc.lines[i]))
    ]
    if bullets:
        out.items = [(str(n), title) for n, title in enumerate(bullets, 1)]
        out.bullets = True
        return out
    return _outline_from_headings(doc, marker, out)


def _outline_from_headings(doc: _Doc, marker: _Marker, out: _Outline) -> _Outline:
    """An outline written as numbered headings right after the marker, repeated later as the sections."""
    run: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i in sorted(k for k in doc.atx if k >= marker.end):
        m = _HEAD_LABEL.match(doc.atx[i][1])
        if m is None:
            continue
        label = m.group(1)
        if label in seen:
            out.items, out.region, out.as_headings = run, (marker.start, i), True
            break
        seen.add(label)
        run.append((label, _clean_title(m.group(3))))
    return out


def _find_heads(doc: _Doc, outline: _Outline) -> dict[int, _Head]:
    """The lines that open sections: numbered headings (else bold numbered lines), outline-named headings."""
    lo, hi = outline.region
    heads: dict[int, _Head] = {}
    for i, (_, text) in doc.atx.items():
        if not lo <= i < hi and (m := _HEAD_LABEL.match(text)):
            heads[i] = _Head(i, m.group(1), _clean_title(m.group(3)), doc.lines[i].strip(), "numbered")
    if not heads:
        for i, line in enumerate(doc.lines):
            if doc.code[i] or lo <= i < hi or i in doc.atx:
                continue
            m = _bold_head(line)
            if m:
                heads[i] = _Head(i, m.group(1), _clean_title(m.group(3)), line.strip(), "bold")
    numbered = {h.label for h in heads.values()}
    open_items = [(label, title) for label, title in _dedupe(outline.items) if label not in numbered]
    for i in sorted(doc.atx):
        if i in heads or lo <= i < hi or not open_items:
            continue
        title = _clean_title(doc.atx[i][1])
        for n, (label, item_title) in enumerate(open_items):
            if _titles_match(title, item_title):
                heads[i] = _Head(i, label, title, doc.lines[i].strip(), "matched")
                del open_items[n]
                break
    return heads


def _build_sections(doc: _Doc, heads: dict[int, _Head], outline: _Outline) -> tuple[list[Section], list[str]]:
    """Cut the text at the section heads; a head repeating a number stays text of the section it is in."""
    lo, hi = outline.region
    problems: list[str] = []
    done: list[_Open] = []
    current: _Open | None = None
    seen: set[str] = set()
    i = 0
    while i < len(doc.lines):
        if lo <= i < hi:
            current = None
            i = hi
            continue
        head = heads.get(i)
        if head is not None and head.label in seen:
            where = f"kept it as text of section {current.head.label}" if current else "ignored it"
            problems.append(f"heading {_quote(head.source)} repeats section number {head.label}; {where}")
            head = None
        if head is not None:
            seen.add(head.label)
            current = _Open(head)
            done.append(current)
        elif current is not None:
            current.body.append(doc.lines[i])
        i += 1
    sections = [
        Section(label=o.head.label, title=o.head.title, level=_level(o.head.label), body=_body(o.body)) for o in done
    ]
    return sections, problems


def _bold_head(line: str) -> re.Match[str] | None:
    """The label match of a line that is a bold numbered title alone (``**1. Title**``), else None."""
    inner = line.strip().removesuffix(":")
    if len(inner) > 4 and inner.startswith("**") and inner.endswith("**") and "**" not in inner[2:-2]:
        return _HEAD_LABEL.match(inner[2:-2].strip())
    return None


def _body(lines: list[str]) -> str:
    """Section text without blank lines or horizontal rules at its ends."""
    start, end = 0, len(lines)
    while start < end and (not lines[start].strip() or _HR.match(lines[start])):
        start += 1
    while end > start and (not lines[end - 1].strip() or _HR.match(lines[end - 1])):
        end -= 1
    return "\n".join(lines[start:end]).strip()


# --- judging ------------------------------------------------------------------------------------------------


def _marker_problems(
    marker: _Marker | None, outline: _Outline, sections: list[Section], heads: dict[int, _Head]
) -> list[str]:
    problems: list[str] = []
    if marker is None:
        found = " (found a numbered list without it)" if outline.items else ""
        problems.append(f"missing '## Outline' heading{found}")
        return problems
    if not marker.is_heading:
        problems.append(f"the outline starts with {_quote(marker.text)}, not with a '## Outline' heading")
    if sections and min(heads) < marker.start:
        problems.append("the '## Outline' must come before the sections")
    if outline.as_headings:
        problems.append("the outline is written as headings; write it as a numbered list (1., 1.1, 2., ...)")
    elif outline.bullets:
        problems.append("the outline items are bullets; number them 1., 2., 3. (sub-items 1.1, 1.2)")
    elif not outline.items:
        problems.append("the '## Outline' heading is not followed by a numbered list (1., 1.1, 2., ...)")
    return problems


def _outline_problems(items: list[tuple[str, str]], outline: _Outline, min_items: int, max_items: int) -> list[str]:
    problems: list[str] = []
    if not items:
        return problems
    top = [label for label, _ in items if "." not in label]
    if not min_items <= len(top) <= max_items:
        allowed = f"{min_items}-{max_items}" if min_items != max_items else str(min_items)
        problems.append(f"outline has {len(top)} top-level item{'' if len(top) == 1 else 's'}; {allowed} required")
    expected = [str(n) for n in range(1, len(top) + 1)]
    if top and top != expected:
        problems.append(f"outline top-level items are numbered {_join(top)}; number them {_join(expected)} in order")
    for label, count in outline.duplicates.items():
        problems.append(f"outline item {label} appears {count} times; each number must be used once")
    labels = {label for label, _ in items}
    for label, title in items:
        parent = label.rpartition(".")[0]
        if parent and parent not in labels:
            problems.append(f"outline item {label} {_quote(title)} has no parent item {parent}")
        if not title:
            problems.append(f"outline item {label} has no title")
    return problems


def _match_problems(
    items: list[tuple[str, str]], sections: list[Section], heads: dict[int, _Head], derived: bool
) -> list[str]:
    problems: list[str] = []
    by_label: dict[str, _Head] = {}
    for line in sorted(heads):
        by_label.setdefault(heads[line].label, heads[line])
    bold = [h for h in heads.values() if h.kind == "bold"]
    if bold:
        first = min(bold, key=lambda h: h.line)
        problems.append(
            f"section headings are bold text ({_quote(first.source)}); write them as Markdown headings "
            f"('## {first.label}. {first.title}')"
        )
    for s in sections:
        head = by_label.get(s.label)
        if head is not None and head.kind == "matched":
            problems.append(f"section heading {_quote(head.source)} has no number; write '## {s.label}. {s.title}'")
        elif head is not None and not head.title:
            problems.append(f"section {s.label} heading has no title")
    previous: tuple[int, ...] = ()
    for s in sections:
        key = tuple(int(part) for part in s.label.split("."))
        if key < previous:
            before = ".".join(map(str, previous))
            problems.append(f"section {s.label} comes after section {before}; keep the outline order")
            break
        previous = key
    labels = {s.label for s in sections}
    for s in sections:
        if not s.body and not any(other.startswith(s.label + ".") for other in labels):
            problems.append(f"section {s.label} {_quote(s.title)} is empty")
    if derived:
        return problems
    titles = dict(items)
    for s in sections:
        if s.label not in titles:
            problems.append(f"section {s.label} {_quote(s.title)} is not in the outline")
        elif s.title and not _titles_match(s.title, titles[s.label]):
            problems.append(
                f"section {s.label} {_quote(s.title)} does not match outline item {s.label} {_quote(titles[s.label])}"
            )
    for label, title in items:
        if label not in labels:
            problems.append(f"outline item {label} {_quote(title)} has no section")
    return problems


# --- helpers ------------------------------------------------------------------------------------------------


def _clean_title(raw: str) -> str:
    """A heading or item title without emphasis, separators, a trailing colon or a closing ``#`` sequence."""
    text = raw.strip()
    lead = _BOLD_LEAD.match(text)
    if lead:
        text = lead.group(1)
    text = text.replace("**", "").strip()
    while len(text) >= 2 and text[0] == text[-1] == "*":
        text = text[1:-1].strip()
    previous = None
    while previous != text:
        previous = text
        text = _strip_closing(text.lstrip("-\u2013\u2014: \t").rstrip(": \t"))
    return text


def _unnumbered(title: str, label: str) -> str:
    r"""``title`` without its own label written again at its start: section 1's ``1: Introduction`` is ``Introduction``.

    A landlord email on the 0.5B read "1. 1: Introduction"; a story's "1. 1\. The Train Journey".
    """
    bare = re.sub(rf"^{re.escape(label)}\s*\\?[.:)]\s+(?=\S)", "", title)
    return bare or title


_LABEL_THEN_SENTENCE = re.compile(
    r"^(Usage|Example|Examples|Note|Notes|Explanation|How it works|Summary)\s*:\s+(\S+(?:\s+\S+){5,})$", re.I
)


def _unlabelled(title: str) -> tuple[str, str]:
    """A title that is a label and then a sentence, as its label and its sentence; else ``(title, "")``.

    A SQL answer on the 1.5B (2026-12-07) wrote its note into the heading, "2. Usage: This query finds employees
    who have a salary greater than the salary of a", and went on under it with "manager. The result ...".
    """
    m = _LABEL_THEN_SENTENCE.match(title)
    return (m.group(1), m.group(2)) if m else (title, "")


def _key(text: str) -> str:
    """A title reduced for comparison: Unicode-normalised, case-folded, punctuation and emphasis dropped."""
    return _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _titles_match(a: str, b: str) -> bool:
    """Whether two titles name the same thing, ignoring case, punctuation, emphasis and small differences."""
    ka, kb = _key(a)[:200], _key(b)[:200]
    if not ka or not kb:
        return ka == kb
    if ka == kb:
        return True
    short, long = sorted((ka, kb), key=len)
    if f" {short} " in f" {long} ":
        return True
    return difflib.SequenceMatcher(None, ka, kb, autojunk=False).ratio() >= 0.8


def _dedupe(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for label, title in items:
        if label not in seen:
            seen.add(label)
            out.append((label, title))
    return out


def _level(label: str) -> int:
    return label.count(".") + 1


def _quote(text: str) -> str:
    short = text if len(text) <= _TITLE_CHARS else text[: _TITLE_CHARS - 1] + "\u2026"
    return "'" + short.replace("\n", " ") + "'"


def _join(labels: list[str]) -> str:
    shown = labels if len(labels) <= 8 else labels[:8] + ["..."]
    return ", ".join(shown)
