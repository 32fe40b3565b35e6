"""Text helpers the checks share: fenced code blocks, sentences, texts compared with case and punctuation ignored."""

from __future__ import annotations

import difflib
import re
import unicodedata

_OPEN_FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.M)
FENCE_BLOCK = re.compile(r"^[ \t]*(```|~~~)[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
PROSE_FENCES = frozenset({"text", "plaintext", "txt", "markdown", "md"})
"""Fence languages that hold prose: a prose answer wrapped in one is read as prose by the repetition check (a real
policy slot looped inside a ```plaintext block, which the check, skipping code, never read). A code answer's
fences are left alone: a program's printed output repeats by nature."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
WORD = re.compile(r"[\w']+")


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
