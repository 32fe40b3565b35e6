"""The structured result of one slot: the expert's text parsed into outline and numbered sections."""

from __future__ import annotations

import difflib
import re
import unicodedata

from pydantic import BaseModel, ConfigDict, Field

from state.quality import SlotQuality


class OutlineItem(BaseModel):
    """One numbered outline entry, e.g. label ``"2.1"``, title ``"Token storage"``."""

    model_config = ConfigDict(extra="forbid")

    label: str
    title: str
    level: int = Field(ge=1)


class Section(BaseModel):
    """One numbered section of the body (``## 2. Title`` / ``### 2.1 Title``) and its text."""

    model_config = ConfigDict(extra="forbid")

    label: str
    title: str
    level: int = Field(ge=1)
    body: str = ""


class SlotResult(BaseModel):
    """An expert's output for one slot, kept whole and parsed.

    ``compliant`` is True when the text followed the output contract; otherwise ``problems`` says why and the
    outline/sections are a best-effort parse.
    """

    model_config = ConfigDict(extra="forbid")

    slot_id: str
    expert: str
    raw: str
    outline: list[OutlineItem] = Field(default_factory=list)
    sections: list[Section] = Field(default_factory=list)
    compliant: bool = False
    problems: list[str] = Field(default_factory=list)
    attempts: int = Field(default=1, ge=1)
    quality: SlotQuality | None = None
    """How the answer was checked and chosen (None: from before checks existed)."""

    def section(self, label: str) -> Section | None:
        """Find a section by number (``"2.1"``), exact title or fuzzy title; None if nothing is close."""
        wanted = label.strip().rstrip(".")
        for s in self.sections:
            if s.label == wanted:
                return s
        norm = _norm(wanted)
        if not norm:
            return None
        for s in self.sections:
            if _norm(s.title) == norm or _norm(f"{s.label} {s.title}") == norm:
                return s
        words = set(norm.split())
        for s in self.sections:
            title_words = set(_norm(s.title).split())
            if title_words and (title_words <= words or words <= title_words):
                return s
        titles = {_norm(s.title): s for s in self.sections}
        close = difflib.get_close_matches(norm, list(titles), n=1, cutoff=0.6)
        if close:
            return titles[close[0]]
        return None

    def has_subsections(self, label: str) -> bool:
        """Whether section ``label`` has sub-sections (``2.1`` under ``2``)."""
        return any(s.label.startswith(label + ".") for s in self.sections)

    def section_text(self, label: str) -> str | None:
        """Markdown of one section including its sub-sections (None if not found)."""
        found = self.section(label)
        if found is None:
            return None
        parts: list[str] = []
        prefix = found.label + "."
        for s in self.sections:
            if s.label == found.label or s.label.startswith(prefix):
                parts.append(render_section(s))
        return "\n\n".join(parts)

    def outline_text(self) -> str:
        """The outline only, as a numbered Markdown list: a lightweight reference for other slots."""
        if not self.outline:
            return "\n".join(f"{s.label}. {s.title}" for s in self.sections)
        return "\n".join(f"{'   ' * (i.level - 1)}{i.label}. {i.title}" for i in self.outline)

    def body_text(self) -> str:
        """The numbered sections (without the outline); the raw text when nothing could be parsed."""
        if not self.sections:
            return self.raw.strip()
        return "\n\n".join(render_section(s) for s in self.sections)

    def untitled_text(self) -> str:
        """The sections' text without their titles (a part's titles copy what it was asked); else the raw text."""
        return "\n\n".join(s.body for s in self.sections) if self.sections else self.raw


def render_section(section: Section, base_level: int = 2) -> str:
    """Render a section as Markdown with its heading at ``base_level + level - 1`` hashes."""
    hashes = "#" * min(6, base_level + section.level - 1)
    label = f"{section.label}." if section.level == 1 else section.label
    head = f"{hashes} {label} {section.title}".rstrip()
    body = section.body.strip()
    return f"{head}\n\n{body}" if body else head


def _norm(text: str) -> str:
    """Case-folded, Unicode-normalised text with punctuation and emphasis reduced to single spaces."""
    return re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()
