"""Text helpers the checks share: fenced code blocks, sentences, texts compared with case and punctuation ignored."""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass

_OPEN_FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.M)
FENCE_BLOCK = re.compile(r"^[ \t]*(```|~~~)[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
PROSE_FENCES = frozenset({"text", "plaintext", "txt", "markdown", "md"})
"""Fence languages that hold prose: a prose answer wrapped in one is read as prose by the repetition check (a real
policy slot looped inside a ```plaintext block, which the check, skipping code, never read). A code answer's
fences are left alone: a program's printed output repeats by nature."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
WORD = re.compile(r"[\w']+")
_FENCE_OPEN = re.compile(r"[ \t]*(```|~~~)")
_TICKS = re.compile(r"`+")


PYTHON_TAGS = frozenset({"python", "py", "python3"})
"""The fence tags of a Python block."""
SQL_TAGS = frozenset({"sql", "postgresql", "postgres", "mysql", "sqlite"})
"""The fence tags of a SQL block."""
SHELL_TAGS = frozenset({"bash", "sh", "shell", "zsh"})
"""The fence tags of a shell script."""


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced code block of a text as ``(language, code)``, in order."""
    return [(m.group(2).lower(), m.group(3)) for m in FENCE_BLOCK.finditer(text)]


def without_closed_code(text: str) -> str:
    """``text`` without its closed fenced code blocks (a kept answer's; an unclosed block stays)."""
    return FENCE_BLOCK.sub(" ", text)


def without_code(text: str) -> str:
    """``text`` without its fenced code blocks, an unclosed one at the end included (an answer being written)."""
    closed = FENCE_BLOCK.sub(" ", text)
    opened = _OPEN_FENCE.search(closed)
    return closed[: opened.start()] if opened else closed


def prose_unfenced(text: str) -> str:
    """``text`` with its prose fences (:data:`PROSE_FENCES`) opened: their words read as the prose they are."""
    return FENCE_BLOCK.sub(lambda m: m.group(3) if m.group(2).lower() in PROSE_FENCES else m.group(0), text)


def split_sentences(text: str) -> list[str]:
    """The sentences and lines of the prose of ``text`` (its code blocks left out)."""
    return [s.strip() for s in _SENTENCE.split(without_closed_code(text)) if s.strip()]


def norm(text: str) -> str:
    """``text`` case-folded, its punctuation and spacing made single spaces (what comparisons read)."""
    return re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()


def sentence_key(text: str) -> str:
    """A sentence as the repetition check compares it: case, punctuation and spacing ignored."""
    return norm(text)


def similar(a: str, b: str, threshold: float) -> bool:
    """Whether two normalised texts are alike to ``threshold`` (difflib's ratio, on their first 2,000 characters)."""
    if not a or not b:
        return False
    if a == b:
        return True
    matcher = difflib.SequenceMatcher(None, a[:2000], b[:2000], autojunk=False)
    return matcher.quick_ratio() >= threshold and matcher.ratio() >= threshold


@dataclass(frozen=True)
class Line:
    """One line of a text: where it starts, its text (without the newline), and whether it is code."""

    start: int
    text: str
    code: bool
    """Inside a fenced block, or one of its fences."""


def text_lines(text: str) -> tuple[list[Line], int | None]:
    """The lines of ``text``, and where the fence that is never closed starts (None: every fence is closed).

    Fences are read as :data:`FENCE_BLOCK` reads them: a block opens with a line starting with three backticks or
    tildes and closes at the next line holding only the same fence.
    """
    lines: list[Line] = []
    fence: str | None = None
    opened = 0
    start = 0
    for raw in text.splitlines(keepends=True):
        line = raw.rstrip("\r\n")
        if fence is not None:
            lines.append(Line(start, line, True))
            if line.strip() == fence:
                fence = None
        elif (match := _FENCE_OPEN.match(line)) is not None:
            fence, opened = match.group(1), start
            lines.append(Line(start, line, True))
        else:
            lines.append(Line(start, line, False))
        start += len(raw)
    return lines, opened if fence is not None else None


def open_code_span(text: str) -> int | None:
    """Where the inline code span left open by the last paragraph of ``text`` begins (None: none is open).

    The last paragraph is the run of prose lines (outside fenced blocks) that ends the text; a text that ends with a
    code block has none. A span opens with a run of backticks and closes at the next run of the same length
    (CommonMark's rule), so an odd backtick that nothing closes is an open span: the model stopped inside
    "the function `".
    """
    lines, _ = text_lines(text)
    filled = [line for line in lines if line.text.strip()]
    if not filled or filled[-1].code:
        return None
    last = len(lines) - 1 - next(i for i, line in enumerate(reversed(lines)) if line.text.strip())
    first = last
    while first > 0 and lines[first - 1].text.strip() and not lines[first - 1].code:
        first -= 1
    begin = lines[first].start
    paragraph = text[begin : lines[last].start + len(lines[last].text)]
    runs = list(_TICKS.finditer(paragraph))
    i = 0
    while i < len(runs):
        closer = next((j for j in range(i + 1, len(runs)) if len(runs[j].group(0)) == len(runs[i].group(0))), None)
        if closer is None:
            return begin + runs[i].start()
        i = closer + 1
    return None
