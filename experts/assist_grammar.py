"""The GBNF grammar that holds an expert consultation to its brief format: ``ANSWER: ...`` on one line, or UNKNOWN.

The answer line may carry ``{{ASSIST:...}}`` placeholders (any character but a newline is allowed), so a
consulted expert can still say what it does not know instead of guessing.
"""

from __future__ import annotations

__all__ = ["CONSULT_ANSWER_CHARS", "CONSULT_GRAMMAR"]

CONSULT_ANSWER_CHARS = 400
"""Longest answer line a consulted expert may write (about two sentences)."""

CONSULT_GRAMMAR = f"""\
root ::= answer | unknown
answer ::= "ANSWER: " [^ \\n] [^\\n]{{0,{CONSULT_ANSWER_CHARS - 1}}}
unknown ::= "UNKNOWN"
"""
