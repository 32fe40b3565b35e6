"""Frameworks: a task split into a DAG of slots, and the validation every framework passes before it runs.

The same validator serves framework files given with ``--framework``, the last-resort one-slot framework and
(later) templates and adapted plans, so a plan that reaches execution is always structurally sound.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from state.errors import FrameworkError
from state.io import MAX_TASK_CHARS
from state.yaml_text import safe_load

SLOT_ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$"
MAX_SLOTS = 64
"""The largest framework the harness runs."""
OUTLINE_REFERENCE = "@outline"
"""A ``reference_hints`` entry meaning: give the referencing slot only the outline of that slot."""

Deliverable = Literal["code", "prose", "plan", "table", "data"]
"""What a slot delivers, which decides its output contract and its checks:

- ``code``: one complete, importable module (Python, SQL, a shell script, a Dockerfile...) in one section, and at
  most a short usage note or a tests section that uses it;
- ``prose``: text for people (an explanation, a story, a contract, a README), sized to the work;
- ``plan``: an ordered plan, checklist or list of points;
- ``table``: a comparison or schedule as Markdown tables;
- ``data``: structured data (JSON, YAML, CSV) in one block.
"""
DELIVERABLES: tuple[Deliverable, ...] = ("code", "prose", "plan", "table", "data")


class SlotSpec(BaseModel):
    """The definition of one slot (what to do); its progress lives in ``Passport.slot_states``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=SLOT_ID_PATTERN)
    title: str = Field(min_length=1, max_length=200)
    description: str = Field(min_length=1, max_length=MAX_TASK_CHARS)
    expected_outputs: list[str] = Field(default_factory=list)
    expert: str | None = Field(default=None, description="Expert id or persona type asked for, if any.")
    deliverable: Deliverable | None = Field(
        default=None,
        description="What the slot delivers: code, prose, plan, table or data (None: decided when it is routed).",
    )
    language: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9_+#-]{1,20}$",
        description="For code and data: the language (python, sql, bash, yaml, json, ...).",
    )
    deps: list[str] = Field(default_factory=list)
    can_reference: list[str] = Field(default_factory=list)
    reference_hints: dict[str, list[str]] = Field(
        default_factory=dict,
        description=(
            "Per referenced slot id: section labels (e.g. '2.1' or a title) to include, or '@outline' for "
            "the outline only. A referenced slot without hints is included whole."
        ),
    )


class Framework(BaseModel):
    """A titled DAG of slots."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=100)
    title: str = Field(min_length=1, max_length=300)
    source: str = "inline"
    slots: list[SlotSpec] = Field(min_length=1, max_length=MAX_SLOTS)

    def slot(self, slot_id: str) -> SlotSpec:
        """Return the slot with this id (KeyError if absent)."""
        for s in self.slots:
            if s.id == slot_id:
                return s
        raise KeyError(slot_id)


def slot_text(spec: SlotSpec) -> str:
    """What a slot is about, as the router and the plan checks embed it: title, description, expected outputs.

    A title the description says in one of its sentences ("Blameless postmortem" in "Write a blameless postmortem
    with action items. Context: ...") is read as that sentence: the instruction leads, what the task said around
    it follows once. Read at the weight of the instruction, the context of two outage-notice slots ("our payment
    service was down") sent them to the legal expert. Words are not read twice in a row, and a deliverable that
    repeats the title is left out.
    """
    title = spec.title.strip().rstrip(".")
    description = spec.description.strip()
    head = _sentence_saying(title, description) or title
    parts = [head]
    if description.rstrip(".") != head:
        parts.append(description)
    outputs = [o for o in spec.expected_outputs if o.strip().rstrip(".") not in (title, head)]
    if outputs:
        parts.append("Deliver: " + "; ".join(outputs))
    return ". ".join(p for p in parts if p)


def _sentence_saying(words: str, text: str) -> str | None:
    """The first sentence of ``text`` that holds ``words`` (whole words, any case), without its full stop."""
    if not words:
        return None
    said = re.compile(r"\b" + re.escape(words) + r"\b", re.I)
    return next((s.rstrip(".") for s in re.split(r"(?<=[.!?])\s+", text) if said.search(s)), None)


def fallback_framework(task: str, *, source: str = "fallback:single_slot") -> Framework:
    """One slot that answers the whole task: the last resort, and the plan of a single-expert task."""
    return Framework(
        id="single_slot",
        title=title_from_task(task),
        source=source,
        slots=[
            SlotSpec(
                id="answer",
                title="Answer",
                description=task,
                expected_outputs=["A complete answer to the task"],
            )
        ],
    )


def title_from_task(task: str) -> str:
    """A document title from the task: its first line, shortened to 80 characters at a word's end."""
    first = " ".join(task.strip().splitlines()[0].split()) if task.strip() else "Task"
    if len(first) <= 80:
        return first
    cut = first[:77]
    if first[77] == " ":  # the cut falls between words
        words = cut
    elif " " in cut[20:]:
        words = cut.rsplit(" ", 1)[0]
    else:  # one long word: cut it
        words = cut[:77]
    return words.rstrip(" ,;:-") + "..."


def validation_errors(fw: Framework) -> list[str]:
    """Return every structural error of a framework (empty list: valid). Each message names the slot/field."""
    errors: list[str] = []
    ids = [s.id for s in fw.slots]
    seen: set[str] = set()
    for sid in ids:
        if sid in seen:
            errors.append(f"slots: duplicate slot id {sid!r}")
        seen.add(sid)
    known = set(ids)
    for s in fw.slots:
        for d in s.deps:
            if d not in known:
                errors.append(f"slots[{s.id}].deps: unknown slot {d!r} (known: {', '.join(sorted(known))})")
            elif d == s.id:
                errors.append(f"slots[{s.id}].deps: a slot cannot depend on itself")
        for r in s.can_reference:
            if r not in known:
                errors.append(f"slots[{s.id}].can_reference: unknown slot {r!r}")
        for h in s.reference_hints:
            if h not in s.can_reference:
                errors.append(f"slots[{s.id}].reference_hints: {h!r} is not listed in can_reference")
    cycle = find_cycle(fw)
    if cycle:
        errors.append("slots: dependency cycle " + " -> ".join(cycle))
        return errors
    if errors:
        return errors
    for s in fw.slots:
        anc = ancestors(fw, s.id)
        for r in s.can_reference:
            if r not in anc:
                errors.append(
                    f"slots[{s.id}].can_reference: {r!r} is not an ancestor of {s.id!r} "
                    "(a slot may only read results that are guaranteed to exist before it starts)"
                )
    return errors


def validate_framework(fw: Framework) -> Framework:
    """Raise :class:`FrameworkError` listing every problem, or return the framework unchanged."""
    errors = validation_errors(fw)
    if errors:
        raise FrameworkError(fw.source, errors)
    return fw


def find_cycle(fw: Framework) -> list[str] | None:
    """Return one dependency cycle as a closed path of slot ids, or None if the DAG is acyclic."""
    deps = {s.id: [d for d in s.deps if d != s.id] for s in fw.slots}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for d in deps.get(node, []):
            if d not in deps:
                continue
            if state.get(d) == 1:
                return [*stack[stack.index(d) :], d]
            if state.get(d) is None:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for sid in deps:
        if state.get(sid) is None:
            found = visit(sid)
            if found:
                return list(reversed(found))
    return None


def ancestors(fw: Framework, slot_id: str) -> set[str]:
    """All slots that must be done before ``slot_id`` can start (transitive deps)."""
    deps = {s.id: s.deps for s in fw.slots}
    out: set[str] = set()
    todo = list(deps.get(slot_id, []))
    while todo:
        d = todo.pop()
        if d not in out:
            out.add(d)
            todo.extend(deps.get(d, []))
    return out


def descendants(fw: Framework, slot_ids: Iterable[str]) -> set[str]:
    """All slots that (transitively) depend on any of ``slot_ids``."""
    frontier = set(slot_ids)
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for s in fw.slots:
            if s.id not in out and frontier.intersection(s.deps):
                out.add(s.id)
                frontier.add(s.id)
                changed = True
    return out


def topological_order(fw: Framework) -> list[str]:
    """Slot ids in dependency order; ties keep the framework's own order (stable Kahn)."""
    remaining = {s.id: set(s.deps) for s in fw.slots}
    order: list[str] = []
    while remaining:
        ready = [s.id for s in fw.slots if s.id in remaining and not remaining[s.id]]
        if not ready:
            raise FrameworkError(fw.source, ["slots: dependency cycle (no slot is ready)"])
        for sid in ready:
            order.append(sid)
            del remaining[sid]
        for pending in remaining.values():
            pending.difference_update(ready)
    return order


def critical_path(fw: Framework, durations: dict[str, float]) -> float:
    """Length of the longest dependency chain, given each slot's duration."""
    finish: dict[str, float] = {}
    for sid in topological_order(fw):
        spec = fw.slot(sid)
        start = max((finish[d] for d in spec.deps), default=0.0)
        finish[sid] = start + durations.get(sid, 0.0)
    return max(finish.values(), default=0.0)


def parse_framework(data: Any, source: str) -> Framework:
    """Build and validate a framework from parsed YAML/JSON data; errors name the source and field."""
    if not isinstance(data, dict):
        raise FrameworkError(
            source, [f"top level: expected a mapping with id, title and slots, got {type(data).__name__}"]
        )
    payload = dict(data)
    payload.setdefault("source", source)
    if "id" not in payload and "title" in payload:
        payload["id"] = re.sub(r"[^a-z0-9]+", "_", str(payload["title"]).lower()).strip("_")[:100] or "framework"
    try:
        fw = Framework.model_validate(payload)
    except ValidationError as exc:
        raise FrameworkError(source, [_format_pydantic_error(e, payload) for e in exc.errors()]) from None
    return validate_framework(fw)


def load_framework_file(path: str) -> Framework:
    """Read a YAML (or JSON) framework file and validate it."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = safe_load(fh.read())
    except FileNotFoundError:
        raise FrameworkError(path, ["file not found"]) from None
    except OSError as exc:
        raise FrameworkError(path, [f"cannot read file: {exc.strerror}"]) from None
    except UnicodeDecodeError as exc:
        raise FrameworkError(path, [f"not a UTF-8 text file (byte {exc.start}); a framework is YAML or JSON"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise FrameworkError(path, [f"{where}YAML syntax error: {problem}"]) from None
    return parse_framework(data, source=path)


def _format_pydantic_error(err: Any, payload: dict[str, Any]) -> str:
    loc = list(err.get("loc", ()))
    parts: list[str] = []
    slots = payload.get("slots")
    i = 0
    while i < len(loc):
        key = loc[i]
        if key == "slots" and i + 1 < len(loc) and isinstance(loc[i + 1], int):
            idx = loc[i + 1]
            label = str(idx)
            if isinstance(slots, list) and idx < len(slots) and isinstance(slots[idx], dict):
                label = str(slots[idx].get("id", idx))
            parts.append(f"slots[{label}]")
            i += 2
            continue
        parts.append(str(key))
        i += 1
    field = ".".join(parts) or "top level"
    return f"{field}: {err.get('msg', 'invalid value')}"
