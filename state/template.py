"""Framework templates: reusable slot DAGs for kinds of tasks, and their two-tier validation.

A template is a framework plus what retrieval and adaptation need: a ``pattern`` (the shape of work, e.g.
"code + docs"), a ``description`` of the tasks it fits, ``adaptable`` ranges (how many slots an adaptation may
have, which subtypes of task it covers) and, per slot, an optional ``parallel_hint``. Templates live in YAML
files under ``config/framework_templates/`` (one family per file: ``family: ...`` and ``templates: [...]``).

Validation has two tiers:

* **errors** block a template: missing or malformed fields, duplicate slot or template ids, an expert id that
  is not in the catalog, a dependency cycle (named), unknown deps or references, references to non-ancestors,
  a slot count outside the template's own adaptable range;
* **warnings** are reported but do not block: titles that say nothing ("Part 1", "Section", "TODO"), ids that
  are not snake_case, thin descriptions, and a structure that is all-parallel or a single chain.

The structural checks are :func:`state.framework.validation_errors`, the same that every ``--framework`` file
and adapted plan passes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from state.framework import MAX_SLOTS, Framework, SlotSpec, validation_errors
from state.yaml_text import safe_load

__all__ = [
    "Adaptable",
    "Issue",
    "LibraryReport",
    "Template",
    "TemplateSlot",
    "load_library",
    "template_issues",
]

SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
VAGUE_TITLE = re.compile(
    r"^(part|section|slot|step|stage|phase|item|task|todo|tbd|misc|other|stuff|output|content|text)"
    r"(\s*[-#:]?\s*\d+)?$",
    re.I,
)
MIN_DESCRIPTION_WORDS = 8


class TemplateSlot(SlotSpec):
    """A template's slot: a slot spec with the expert it needs and a hint for parallel execution."""

    parallel_hint: bool | None = Field(
        default=None, description="True when the slot can run beside its siblings; informative for adaptation."
    )
    pin: str | None = Field(
        default=None,
        max_length=300,
        description="Why this slot must keep its expert; without it the slot is routed like any other.",
    )

    def spec_fields(self) -> dict[str, Any]:
        """The slot's fields as a runnable slot: hints dropped, and the expert too unless the slot pins it.

        The router then checks what the slot says after adaptation instead of trusting the template's choice.
        """
        return self.model_dump(exclude={"parallel_hint", "pin"}) | ({} if self.pin else {"expert": None})


class Adaptable(BaseModel):
    """How far an adaptation may move away from the template."""

    model_config = ConfigDict(extra="forbid")

    slot_count: tuple[int, int] = Field(description="Smallest and largest slot count an adaptation may have.")
    subtypes: list[str] = Field(default_factory=list, description="Kinds of task this template covers.")

    @model_validator(mode="after")
    def _ordered(self) -> Adaptable:
        low, high = self.slot_count
        if not 1 <= low <= high <= MAX_SLOTS:
            raise ValueError(f"slot_count must be [min, max] with 1 <= min <= max <= {MAX_SLOTS}")
        return self


class Template(BaseModel):
    """A reusable framework for a kind of task."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=100)
    title: str = Field(min_length=1, max_length=300)
    pattern: str = Field(min_length=1, max_length=200)
    description: str = Field(min_length=1, max_length=4000)
    adaptable: Adaptable
    slots: list[TemplateSlot] = Field(min_length=1, max_length=MAX_SLOTS)
    family: str = ""
    source: str = ""

    def to_framework(self) -> Framework:
        """The template as a runnable framework, sourced as ``template:<id>``.

        Hints are dropped, and so is each slot's expert unless the slot pins it (``pin``): the router checks
        what the slot now says, after adaptation, instead of trusting the template's choice.
        """
        slots = [SlotSpec.model_validate(s.spec_fields()) for s in self.slots]
        return Framework(id=self.id, title=self.title, source=f"template:{self.id}", slots=slots)

    def retrieval_text(self) -> str:
        """What retrieval embeds: title, pattern, description, subtypes and slot titles."""
        parts = [self.title, self.pattern, self.description.strip()]
        if self.adaptable.subtypes:
            parts.append("For: " + ", ".join(self.adaptable.subtypes))
        parts.append("Parts: " + "; ".join(s.title for s in self.slots))
        return ". ".join(p.rstrip(".") for p in parts)


@dataclass(frozen=True)
class Issue:
    """One validation finding, located by file, template and field."""

    level: str
    """``error`` or ``warning``."""
    file: str
    template: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.template}" + (f": {self.field}" if self.field else "")
        return f"{self.level}: {where}: {self.message}"


@dataclass
class LibraryReport:
    """Every template found, and every issue, of a library or one file."""

    templates: dict[str, Template] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Issue]:
        """The blocking issues."""
        return [i for i in self.issues if i.level == "error"]

    @property
    def warnings(self) -> list[Issue]:
        """The non-blocking issues."""
        return [i for i in self.issues if i.level == "warning"]


def template_issues(template: Template, known_experts: Iterable[str], file: str = "") -> list[Issue]:
    """Both tiers of findings for one parsed template."""
    experts = set(known_experts)
    issues: list[Issue] = []

    def add(level: str, fld: str, message: str) -> None:
        issues.append(Issue(level, file, template.id, fld, message))

    for message in validation_errors(template.to_framework()):
        fld, _, rest = message.partition(": ")
        add("error", fld, rest)
    for slot in template.slots:
        if slot.expert is None:
            add("error", f"slots[{slot.id}].expert", "every template slot names the expert it needs")
        elif slot.expert not in experts:
            add(
                "error",
                f"slots[{slot.id}].expert",
                f"unknown expert {slot.expert!r}; known: {', '.join(sorted(experts))}",
            )
    low, high = template.adaptable.slot_count
    if not low <= len(template.slots) <= high:
        add(
            "error",
            "adaptable.slot_count",
            f"[{low}, {high}] does not include the template's {len(template.slots)} slots",
        )

    if not SNAKE_CASE.match(template.id):
        add("warning", "id", f"{template.id!r} is not snake_case")
    for slot in template.slots:
        if not SNAKE_CASE.match(slot.id):
            add("warning", f"slots[{slot.id}].id", f"{slot.id!r} is not snake_case")
    titles = [template.title] + [s.title for s in template.slots]
    for where, title in zip(["title"] + [f"slots[{s.id}].title" for s in template.slots], titles, strict=True):
        stripped = title.strip()
        if len(stripped) < 4 or VAGUE_TITLE.match(stripped):
            add("warning", where, f"{title!r} does not say what the part is about")
        elif stripped.isupper() and len(stripped) > 4:
            add("warning", where, f"{title!r} is all capitals")
    seen: dict[str, str] = {}
    for slot in template.slots:
        key = slot.title.strip().lower()
        if key in seen:
            add("warning", f"slots[{slot.id}].title", f"same title as slot {seen[key]!r}")
        seen.setdefault(key, slot.id)
    if len(template.description.split()) < MIN_DESCRIPTION_WORDS:
        add("warning", "description", f"under {MIN_DESCRIPTION_WORDS} words; retrieval matches tasks against it")
    for slot in template.slots:
        if not slot.expected_outputs:
            add("warning", f"slots[{slot.id}].expected_outputs", "empty; say what the slot delivers")
    n = len(template.slots)
    if n >= 3 and not any(s.deps for s in template.slots):
        add("warning", "slots", "all slots are independent; no part builds on another")
    chain = all(s.deps == [template.slots[i - 1].id] for i, s in enumerate(template.slots) if i > 0)
    if n >= 4 and chain and not template.slots[0].deps:
        add("warning", "slots", "the slots form a single chain; nothing can run in parallel")
    return issues


def _locate(error: Any) -> str:
    return ".".join(str(p) for p in error["loc"]) or "(template)"


def load_library(paths: Iterable[Path], known_experts: Iterable[str]) -> LibraryReport:
    """Load template files (or every ``*.yaml`` in directories) and validate them all.

    Nothing raises: every problem is an :class:`Issue` in the report, and only templates without errors are
    in ``report.templates``.
    """
    experts = set(known_experts)
    report = LibraryReport()
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.glob("*.y*ml") if p.is_file()))
        else:
            files.append(path)
    origin: dict[str, str] = {}
    for path in files:
        name = str(path)
        report.files.append(name)
        try:
            data = safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            report.issues.append(Issue("error", name, "(file)", "", f"cannot read: {exc.strerror or exc}"))
            continue
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f" at line {mark.line + 1}" if mark is not None else ""
            report.issues.append(Issue("error", name, "(file)", "", f"not valid YAML{line}"))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("templates"), list):
            report.issues.append(Issue("error", name, "(file)", "templates", "must be a list of templates"))
            continue
        family = str(data.get("family") or path.stem)
        for i, raw in enumerate(data["templates"]):
            label = str(raw.get("id")) if isinstance(raw, dict) and raw.get("id") else f"templates[{i}]"
            if not isinstance(raw, dict):
                report.issues.append(Issue("error", name, label, "", "must be a mapping"))
                continue
            try:
                template = Template.model_validate({**raw, "family": family, "source": name})
            except ValidationError as exc:
                for err in exc.errors():
                    report.issues.append(Issue("error", name, label, _locate(err), err["msg"]))
                continue
            found = template_issues(template, experts, name)
            if template.id in origin:
                found.append(
                    Issue("error", name, template.id, "id", f"duplicate template id (also in {origin[template.id]})")
                )
            origin.setdefault(template.id, name)
            report.issues.extend(found)
            if not any(i.level == "error" for i in found):
                report.templates[template.id] = template
    return report
