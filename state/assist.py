"""Assist placeholders in expert output: ``{{ASSIST:type:...}}`` requests and ``{{UNRESOLVED:...}}`` markers.

This module only finds placeholders and turns the ones nobody resolved into honest UNRESOLVED markers; it
never fills a placeholder with a guess.
"""

from __future__ import annotations

import re

ASSIST_RE = re.compile(r"\{\{ASSIST:(lookup|expert|user):([^{}]*?)\}\}", re.IGNORECASE)
UNRESOLVED_RE = re.compile(r"\{\{UNRESOLVED:[^{}]*?\}\}")


def mark_unresolved(text: str, reason: str) -> str:
    """Replace every ASSIST placeholder by ``{{UNRESOLVED:type:description - reason}}``."""

    def repl(m: re.Match[str]) -> str:
        body = m.group(2).strip()
        return f"{{{{UNRESOLVED:{m.group(1).lower()}:{body} - {reason}}}}}"

    return ASSIST_RE.sub(repl, text)


def unresolved_markers(text: str) -> list[str]:
    """Every UNRESOLVED marker in the text, in order of appearance."""
    return UNRESOLVED_RE.findall(text)
