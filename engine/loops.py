"""Stopping an answer that loops while it is written, instead of letting it run to its token budget.

A small model that starts repeating itself usually goes on until ``max_tokens``: on the review set a README
task spent 984 s on four slots of looping text that the repetition check (:func:`engine.checks.repetition_check`)
then failed. :class:`LoopWatch` reads the answer as it is written (``GenerationRequest.on_token``) and sets the
request's ``halt`` once the text loops beyond doubt: a sentence four times, a line four times in a row, or an
eight-word phrase six times. Each is stricter than the repetition check's (three, three and four), so a halted
answer is one the check fails anyway: halting changes what a loop costs, never which candidate is kept. Code is
not read (closed or still open code blocks): repeated lines are normal in code, and the check does not judge
them either.
"""

from __future__ import annotations

import threading

from engine.checks import repetition_found, without_code

__all__ = ["LoopWatch"]

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
