"""Stopping an answer that loops while it is written, instead of letting it run to its token budget.

A small model that starts repeating itself usually goes on until ``max_tokens``: on the review set a README
task spent 984 s on four slots of looping text that the repetition check (:func:`engine.slots.checks.repetition_check`)
then failed. :class:`LoopWatch` reads the answer as it is written (``GenerationRequest.on_token``) and sets the
request's ``halt`` once the text loops beyond doubt: a sentence four times, a line four times in a row, an
eight-word phrase six times, or a paragraph twice. Each is as strict as the repetition check's (three, three,
four and twice) or stricter, so a halted answer is one the check fails anyway: halting changes what a loop costs,
never which candidate is kept. Code is read for one thing only, a block that counts on (:func:`counting_loop`:
"Test case 9", "Test case 10", ... to the token limit); repeated lines are normal in code. Such an answer is cut
after the run's first lines and its block closed (:func:`cut_counting`), and is checked as cut.

When every candidate of a slot looped, the kept one is still degenerate; :func:`cut_loops` then removes its
repeats before it is delivered: every sentence of five words or more said before, and a last fragment that only
begins one said before (where the loop was stopped); in a table, a row said before and a last row stopped before
its end. Nothing is added or reworded, code blocks and headings are left alone, and the slot keeps its failed
check and its caveat: the person reads the answer once, not six times.
"""

from __future__ import annotations

import os
import re
import threading

from engine.slots.checks import repetition_found, sentence_key, without_code

__all__ = ["LoopWatch", "counting_loop", "cut_counting", "cut_loops"]

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
        self.counting: str | None = None
        """The first line of the counting run a code block was stopped in (:func:`counting_loop`), if it was."""
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
        whole = "".join(self._pieces)
        counting = counting_loop(whole)
        if counting is not None:
            self.counting = counting[1]
            self.reason = f"a code block counts on from {counting[1][:80]!r}"
            self.halt.set()
            return
        text = without_code(whole)
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


COUNT_RUN = 8
"""Lines of one shape in a row whose numbers step on by the same amount each line: a code block counting, not code."""
GROW_RUN = 6
"""Lines in a row each of which writes the one before it again with one more item: a code block growing a list."""
COUNT_KEEP = 3
"""The lines of a counting run kept when the answer is cut there (the first few are the model's own cases)."""
_DIGITS = re.compile(r"\d+")
_FENCE = re.compile(r"^\s*(?:```|~~~)")


def counting_loop(text: str) -> tuple[int, str] | None:
    """Where a code block of ``text`` counts on, and the run's first line; None when no block does.

    The offset is just after the run's first :data:`COUNT_KEEP` lines.

    multipart_set5_rules4, mp5-merge-ranges: all three candidates of the tests part wrote ``assert
    merge_ranges([(1, 5), (5, 8)]) == [(1, 8)], "Test case 9 failed"`` and so on to "Test case 26" and the token
    limit (617 s for the task); in an earlier run they grew one list an item a line, ``[(1, 1), (2, 2), (3, 3)]``
    to nine items. Neither repeats a line, so the repetition checks saw nothing until the answer was cut off.
    Counting: :data:`COUNT_RUN` lines of one shape (digits aside) whose numbers change by the same amounts from
    each line to the next. Growing: :data:`GROW_RUN` lines each longer than the one before by about the same
    length, each starting with most of the one before.
    """
    offset = 0
    in_code = False
    run: list[tuple[str, int]] = []  # the run's lines and the offset after each
    step: object = None
    for line in text.splitlines(keepends=True):
        offset += len(line)
        if _FENCE.match(line):
            in_code, run, step = not in_code, [], None
            continue
        if not in_code or not line.strip():
            continue
        current = line.strip()
        found = _step(run[-1][0], current) if run else None
        if run and found is not None and (step is None or _same_step(step, found)):
            step = found
            run.append((current, offset))
        else:
            run, step = [(current, offset)], None
        wanted = COUNT_RUN if isinstance(step, tuple) else GROW_RUN
        if step is not None and len(run) >= wanted:
            return run[COUNT_KEEP - 1][1], run[0][0]
    return None


def _step(before: str, line: str) -> tuple[int, ...] | float | None:
    """How ``line`` steps on from ``before``: the change of each number (same shape), or the length it grew by."""
    if _DIGITS.sub("N", before) == _DIGITS.sub("N", line):
        change = tuple(int(b) - int(a) for a, b in zip(_DIGITS.findall(before), _DIGITS.findall(line), strict=True))
        return change if any(change) else None
    grown = len(line) - len(before)
    shared = len(os.path.commonprefix([before, line]))
    return float(grown) if grown > 0 and shared >= 0.6 * len(before) else None


def _same_step(step: object, found: object) -> bool:
    if isinstance(step, tuple) and isinstance(found, tuple):
        return step == found
    if isinstance(step, float) and isinstance(found, float):
        return max(step, found) <= 2 * min(step, found)
    return False


def cut_counting(text: str) -> tuple[str, str] | None:
    """``text`` cut after the first lines of its counting run and its code block closed, and the run's first line.

    None when it does not count on. What is kept is the model's own text up to there; the block is closed so that
    what it wrote before the loop reads, and runs, as code.
    """
    found = counting_loop(text)
    if found is None:
        return None
    at, first = found
    return text[:at].rstrip("\n") + "\n```\n", first
