"""Assist placeholders in expert output, and the record of how each one was resolved.

An expert that does not know something writes a placeholder instead of guessing (seed §13.7)::

    {{ASSIST:lookup:description}}            a fact a document could provide (optionally lookup:domain:...)
    {{ASSIST:expert:domain:description}}     a question for the expert of another domain
    {{ASSIST:user:description}}              something only the person who asked knows

The harness fills each one from a real source (a knowledge-base passage, a consulted expert) or leaves the
honest marker ``{{UNRESOLVED:type:domain:description - reason}}`` (``{{UNRESOLVED:type:description - reason}}``
when the placeholder named no domain). A placeholder is never filled with a guess: an
:class:`AssistRecord` that says *resolved* must name at least one source.

:func:`scan_assists` finds placeholders anywhere in a text (several per line, across line breaks, inside
lists and code blocks). Text that opens a placeholder but does not form one (not closed, a ``{{`` nested
inside, an unknown type, an expert placeholder without a domain, an empty or runaway description) is
reported as :class:`MalformedPlaceholder` and left untouched. The scanner never raises on a string.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

AssistKind = Literal["lookup", "expert", "user"]
ASSIST_KINDS: tuple[AssistKind, ...] = ("lookup", "expert", "user")

ASSIST_RE = re.compile(r"\{\{\s*ASSIST\s*:(?P<body>[^{}]*?)\}\}", re.IGNORECASE)
"""A candidate placeholder: ``{{ASSIST:`` ... ``}}`` with no brace inside (:func:`scan_assists` validates it)."""
UNRESOLVED_RE = re.compile(r"\{\{UNRESOLVED:[^{}]*?\}\}")

MAX_DESCRIPTION_CHARS = 300
"""A longer description is taken for a runaway (a placeholder left open and closed much later)."""

_OPEN = re.compile(r"\{\{\s*ASSIST\b", re.IGNORECASE)
_DOMAIN = re.compile(r"^[A-Za-z][A-Za-z_\-]{1,40}$")
_SPACES = re.compile(r"\s+")
_REASON_BAD = re.compile(r"[{}]")


@dataclass(frozen=True)
class Placeholder:
    """One well-formed ``{{ASSIST:...}}`` placeholder and where it sits in the text."""

    kind: AssistKind
    domain: str | None
    description: str
    """Whitespace-normalised (a placeholder broken over lines reads as one line)."""
    raw: str
    start: int
    end: int

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity for de-duplication: the same request written twice is resolved once."""
        return (self.kind, (self.domain or "").casefold(), self.description.casefold())


@dataclass(frozen=True)
class MalformedPlaceholder:
    """Text that opens a placeholder but is not one; it is left in the text as it is."""

    raw: str
    """The text from the opening braces to the closing ones, if any (at most 80 characters of it)."""
    start: int
    line: int
    """1-based line of the opening braces."""
    problem: str

    def warning(self) -> str:
        """One line for the run's warnings."""
        return f"malformed assist placeholder on line {self.line} ({self.problem}), left as written: {self.raw!r}"


@dataclass(frozen=True)
class AssistScan:
    """Everything :func:`scan_assists` found, in order of appearance."""

    placeholders: tuple[Placeholder, ...]
    malformed: tuple[MalformedPlaceholder, ...]


def scan_assists(text: str) -> AssistScan:
    """Find every assist placeholder in ``text`` and every malformed attempt at one."""
    found: list[Placeholder] = []
    bad: list[MalformedPlaceholder] = []
    pos = 0
    while True:
        opening = _OPEN.search(text, pos)
        if opening is None:
            break
        start = opening.start()
        close = text.find("}}", opening.end())
        nested = text.find("{{", opening.end())
        if close < 0:
            bad.append(_malformed(text, start, len(text), "never closed with '}}'"))
        elif 0 <= nested < close:
            bad.append(_malformed(text, start, nested, "another '{{' opens before it is closed"))
        else:
            raw = text[start : close + 2]
            parsed = _parse_body(text[opening.end() : close])
            if isinstance(parsed, str):
                bad.append(_malformed(text, start, close + 2, parsed))
            else:
                kind, domain, description = parsed
                found.append(Placeholder(kind, domain, description, raw, start, close + 2))
                pos = close + 2
                continue
        pos = opening.end()
    return AssistScan(tuple(found), tuple(bad))


def _parse_body(body: str) -> tuple[AssistKind, str | None, str] | str:
    """``(kind, domain, description)`` of the text between ``{{ASSIST`` and ``}}``, or what is wrong with it."""
    if "{" in body or "}" in body:
        return "a stray brace inside"
    stripped = body.strip()
    if not stripped.startswith(":"):
        return "'ASSIST' must be followed by ':type:'"
    parts = stripped[1:].split(":")
    kind = parts[0].strip().lower()
    if kind not in ASSIST_KINDS:
        return f"unknown type {parts[0].strip()!r}; allowed: {', '.join(ASSIST_KINDS)}"
    rest = [p.strip() for p in parts[1:]]
    domain: str | None = None
    if kind == "expert":
        if len(rest) < 2 or not rest[0]:
            return "an expert placeholder needs a domain and a description: {{ASSIST:expert:domain:description}}"
        domain, description = rest[0], ":".join(parts[2:])
    elif len(rest) >= 2 and _DOMAIN.match(rest[0]) and ":".join(parts[2:]).strip():
        domain, description = rest[0], ":".join(parts[2:])
    else:
        description = ":".join(parts[1:])
    description = _SPACES.sub(" ", description).strip()
    if domain is not None:
        domain = _SPACES.sub(" ", domain).strip()
    if not description:
        return "empty description"
    if len(description) > MAX_DESCRIPTION_CHARS:
        return f"description of {len(description)} characters (at most {MAX_DESCRIPTION_CHARS})"
    return kind, domain, description


def _malformed(text: str, start: int, end: int, problem: str) -> MalformedPlaceholder:
    snippet = text[start : min(end, start + 80)]
    return MalformedPlaceholder(snippet, start, text.count("\n", 0, start) + 1, problem)


def replace_assists(text: str, replacement: Callable[[Placeholder], str | None]) -> str:
    """Replace every well-formed placeholder by ``replacement(placeholder)``; None keeps it as written."""
    out: list[str] = []
    pos = 0
    for ph in scan_assists(text).placeholders:
        new = replacement(ph)
        if new is None:
            continue
        out.append(text[pos : ph.start])
        out.append(new)
        pos = ph.end
    out.append(text[pos:])
    return "".join(out)


def unresolved_marker(kind: str, domain: str | None, description: str, reason: str) -> str:
    """``{{UNRESOLVED:type:domain:description - reason}}`` (without ``domain:`` when there is none)."""
    reason = _SPACES.sub(" ", _REASON_BAD.sub("", reason)).strip()
    description = _SPACES.sub(" ", _REASON_BAD.sub("", description)).strip()
    head = f"{kind}:{domain}:" if domain else f"{kind}:"
    return f"{{{{UNRESOLVED:{head}{description} - {reason}}}}}"


def mark_unresolved(text: str, reason: str) -> str:
    """Replace every well-formed placeholder by its UNRESOLVED marker with the same reason."""
    return replace_assists(text, lambda ph: unresolved_marker(ph.kind, ph.domain, ph.description, reason))


def unresolved_markers(text: str) -> list[str]:
    """Every UNRESOLVED marker in the text, in order of appearance."""
    return UNRESOLVED_RE.findall(text)


# --- records kept in the Passport ---------------------------------------------------------------------------


class AssistSource(BaseModel):
    """Where a resolved value came from: a passage, a consulted expert, the person, a fact, the task's figures.

    ``program``: the task's figures, which programs computed before the parts were written.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["document", "expert", "user", "memory", "program"]
    file: str | None = None
    """The document's path (``document`` sources)."""
    page: int | None = Field(default=None, ge=1)
    section: str | None = None
    """The heading path of the passage (``Setup > Database``), when the document has headings."""
    line_start: int | None = Field(default=None, ge=1)
    line_end: int | None = Field(default=None, ge=1)
    score: float | None = None
    """Relevance: cosine similarity of the passage to the request (documents), routing score (experts)."""
    expert: str | None = None
    excerpt: str | None = None
    """The passage (documents), the answer (experts) or the fact (memory) the value was taken from."""
    memory: str | None = None
    """A remembered fact's citation: its id, who gave it and when (``memory`` sources)."""

    @model_validator(mode="after")
    def _check(self) -> AssistSource:
        if self.kind == "document" and not self.file:
            raise ValueError("a document source needs its file")
        if self.kind == "expert" and not self.expert:
            raise ValueError("an expert source needs the expert's id")
        if self.kind == "memory" and not self.memory:
            raise ValueError("a memory source needs the fact's citation")
        return self

    def location(self, short: bool = False) -> str:
        """Page, section and line range, as far as known (``page 2``, ``§Sessions, lines 10-14``).

        ``short`` names only the innermost heading of the section path.
        """
        parts: list[str] = []
        if self.page is not None:
            parts.append(f"page {self.page}")
        if self.section:
            parts.append(f"§{self.section.rsplit(' > ', 1)[-1] if short else self.section}")
        if self.line_start is not None:
            end = self.line_end if self.line_end is not None else self.line_start
            parts.append(f"line {self.line_start}" if end == self.line_start else f"lines {self.line_start}-{end}")
        return ", ".join(parts)

    def cite(self, short: bool = False) -> str:
        """The source in one phrase; ``short`` names a document by its file name and innermost heading only."""
        if self.kind == "document" and self.file is not None:
            name = self.file.replace("\\", "/").rsplit("/", 1)[-1] if short else self.file
            where = self.location(short)
            text = f"{name}, {where}" if where else name
        elif self.kind == "expert":
            text = f"consulted expert {self.expert}"
        elif self.kind == "memory":
            text = str(self.memory)
        elif self.kind == "program":
            text = "the task's computed figures"
        else:
            text = "the person who asked"
        return text + (f"; score {self.score:.2f}" if self.score is not None else "")


class AssistRecord(BaseModel):
    """One assist request of a slot and its outcome (the answer to "how did you know?")."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """``<slot id>.a<n>``, numbered in order of first appearance in the slot's answer."""
    slot_id: str
    asker: str
    """The expert whose answer holds the placeholder."""
    kind: AssistKind
    domain: str | None = None
    description: str
    placeholder: str
    """The placeholder as the expert wrote it."""
    status: Literal["resolved", "unresolved"]
    value: str | None = None
    """What replaced the placeholder (resolved only)."""
    marker: str | None = None
    """The UNRESOLVED marker left in the text (unresolved only)."""
    reason: str | None = None
    sources: list[AssistSource] = Field(default_factory=list)
    depth: int = Field(default=0, ge=0)
    """Consultation depth reached: 0 no consult, 1 the asker consulted an expert, 2 that expert consulted one."""
    chain: list[str] = Field(default_factory=list)
    """The experts involved, asker first."""
    trail: list[str] = Field(default_factory=list)
    """Each step taken, in order (routing, consults, lookups, cuts), for the ledger and ``coe show``."""
    awaiting_user: bool = False
    """A user question in interactive mode: the question to put to the person (the interrupt is issue 5's)."""
    occurrences: int = Field(default=1, ge=1)
    duration_ms: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> AssistRecord:
        if self.status == "resolved":
            if not self.sources or self.value is None or self.marker is not None:
                raise ValueError("a resolved assist needs a value and at least one source, and no marker")
        elif self.marker is None or self.reason is None or self.value is not None:
            raise ValueError("an unresolved assist needs its marker and reason, and no value")
        return self
