"""Stopping an answer that loops while it is written, instead of letting it run to its token budget.

A small model that starts repeating itself usually goes on until ``max_tokens``: on the review set a README
task spent 984 s on four slots of looping text that the repetition check (:func:`engine.slots.checks.repetition_check`)
then failed. :class:`LoopWatch` reads the answer as it is written (``GenerationRequest.on_token``) and sets the
request's ``halt`` once the text loops beyond doubt: a sentence four times, a line four times in a row, an
eight-word phrase six times, or a paragraph twice. Each is as strict as the repetition check's (three, three,
four and twice) or stricter, so a halted answer is one the check fails anyway: halting changes what a loop costs,
never which candidate is kept. Code is not read (closed or still open code blocks): repeated lines are normal in
code, and the check does not judge them either.

When every candidate of a slot looped, the kept one is still degenerate; :func:`cut_loops` then removes its
repeats before it is delivered: every sentence of five words or more said before, and a last fragment that only
begins one said before (where the loop was stopped); in a table, a row said before and a last row stopped before
its end. Nothing is added or reworded, code blocks and headings are left alone, and the slot keeps its failed
check and its caveat: the person reads the answer once, not six times.
"""

from __future__ import annotations

import re
import threading

from engine.slots.checks import repetition_found, sentence_key, without_code

__all__ = ["LoopWatch", "cut_loops"]

SENTENCE_TIMES = 4
LINE_RUN = 4
PHRASE_TIMES = 6


class LoopWatch:
    """Watches one answer as it is written; :attr:`halt` is set, with :attr:`reason`, once it loops.

    Pass :meth:`feed` as the request's ``on_token`` (or call it from it) and :attr:`halt` as its ``halt``.
    """

    EVERY_CHARS = 160
    """The text is read again after this many new characters (a few tokens' worth): cheap, and soon enough."""

    def __init__(self) -> None:
        self.halt = threading.Event()
        self.reason: str | None = None
        self._pieces: list[str] = []
        self._size = 0
        self._read_at = 0

    def feed(self, piece: str) -> None:
        """One more piece of the answer (never raises: it runs on the generating thread)."""
        if self.halt.is_set():
            return
        self._pieces.append(piece)
        self._size += len(piece)
        if self._size - self._read_at < self.EVERY_CHARS:
            return
        self._read_at = self._size
        text = without_code("".join(self._pieces))
        found = repetition_found(text, sentence_times=SENTENCE_TIMES, line_run=LINE_RUN, phrase_times=PHRASE_TIMES)
        if found is not None:
            self.reason = found
            self.halt.set()


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_KEPT_LINE = re.compile(r"^\s*(?:#|\||```|~~~)")
_TABLE_ROW = re.compile(r"^\s*\|")
_SEPARATOR_ROW = re.compile(r"^\s*\|?\s*:?-{3,}")


def cut_loops(text: str, seen: set[str] | None = None) -> tuple[str, int]:
    """``text`` without the sentences it repeats, and how many were removed.

    ``seen`` carries the sentences of earlier text (a slot's earlier sections) and is updated.
    """
    seen = set() if seen is None else seen
    removed = 0
    out: list[str] = []
    in_code = False
    rows: set[str] = set()
    for line in text.split("\n"):
        if not in_code and _TABLE_ROW.match(line) and not _SEPARATOR_ROW.match(line):
            row = sentence_key(line)
            if row in rows:  # a table row said before
                removed += 1
                continue
            rows.add(row)
            out.append(line)
            continue
        if _KEPT_LINE.match(line) or in_code or not line.strip():
            if line.lstrip().startswith(("```", "~~~")):
                in_code = not in_code
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        kept: list[str] = []
        for sentence in _SENTENCE_END.split(line.strip()):
            key = sentence_key(sentence)
            if len(key.split()) >= 5 and key in seen:
                removed += 1
                continue
            if len(key.split()) >= 5:
                seen.add(key)
            kept.append(sentence)
        if kept:
            out.append(indent + " ".join(kept))
        elif out and not out[-1].strip():
            out.pop()  # the paragraph is gone: so is the blank line before it
    while out and not out[-1].strip():
        out.pop()
    if len(rows) > 1 and out and _TABLE_ROW.match(out[-1]) and not out[-1].rstrip().endswith("|"):
        out.pop()  # the loop's last lap: a row stopped before its end
        removed += 1
    if out and not _KEPT_LINE.match(out[-1]) and not in_code:
        last = _SENTENCE_END.split(out[-1].strip())[-1]
        key = sentence_key(last)
        if not re.search(r"[.!?:;]$", last) and key and any(s.startswith(key) and s != key for s in seen):
            removed += 1  # the loop's last lap, stopped mid-sentence
            rest = out[-1].strip()[: -len(last)].rstrip()
            if rest:
                out[-1] = out[-1][: len(out[-1]) - len(out[-1].lstrip())] + rest
            else:
                out.pop()
            while out and not out[-1].strip():
                out.pop()
    return "\n".join(out), removed
