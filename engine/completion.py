"""Read a finished document against its task: the gaps the completion round answers. No model is asked.

``nodes.complete`` calls :func:`read_gaps` once the parts are written and agree as far as ``check_parts`` could
make them. What counts as a gap (docs/answers.md, "The completion round"):

* **form**: an aspect of the task that makes something of a form a reader can check (an OpenAPI document, SQL,
  tests, a Dockerfile, a shell script, YAML, Python code: :data:`FORMS`), where no part holds a block of that form
  (an OpenAPI document must load as one: :func:`engine.slots.checks.code.openapi_document`).
  The aspect is covered by a slot's words when the plan is made; this reads what the parts wrote. A part is added
  for it.
* **piece**: an aspect that names a piece of prose a reader looks for by its name or its shape (an FAQ, a table, a
  sign's wording, an email: :data:`PIECES`), where no part is titled for it and no part's prose holds a heading or
  label that names it, or its shape (a table's rows, a question and its answer, a letter's greeting). A part is
  added for it. A code task planned as one part asks for them beside the code ("pytest tests ... and the wording
  for the tariff sign at the entrance"), and the one part wrote the code alone.
* **failed**: in a document of several parts, a part that failed (no answer) or whose kept answer failed its checks
  (its caveat). It is written again with the failed checks as feedback. A one-part answer is not: its own draws
  already had that feedback.
* **restates**: in a document of several parts, a part most of whose wording (:data:`RESTATE_SHARE` of its word
  triples) is an earlier part's. It is written again, told to refer to that part instead.
* **expert_work**: an expert assist that asked for work rather than a fact (``experts.routing.aspects.asks_for_work``);
  the slot left it unresolved (``state.completion.WORK_REASON``). A part is added for it, routed to the expert
  the work needs.

:func:`round_seconds` estimates what acting on gaps costs, from the run's own part times.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from engine.agreement import Part
from engine.slots.checks.code import OPENAPI_ASKED, openapi_document
from engine.slots.checks.text import PYTHON_TAGS, SHELL_TAGS, SQL_TAGS, code_blocks, norm, prose_unfenced, without_code
from experts.routing.aspects import MAKING_VERBS, Aspect, deliverable_noun, task_aspects
from state.assist import AssistRecord
from state.completion import WORK_REASON, CompletionGap

__all__ = ["FORMS", "PIECES", "Form", "asked_forms", "asked_piece", "read_gaps", "round_seconds"]

RESTATE_SHARE = 0.6
"""A part this much of whose word triples an earlier part already has only restates it."""
RESTATE_MIN_WORDS = 40
"""A part shorter than this is not judged a restatement (a short note may quote a line of another)."""
DEFAULT_PART_SECONDS = 90.0
"""A part's time when the run has no finished part to measure (a resumed run's parts ran in another process)."""

FORM_VERBS = MAKING_VERBS | frozenset(
    "implement develop code refactor rewrite fix optimise optimize configure containerise containerize automate "
    "test deliver".split()
) - frozenset("outline sketch summarise summarize list propose give".split())
"""Verbs whose aspect makes the thing itself: "write the OpenAPI documentation" asks for a spec, where "explain
why this SQL query is slow" or "outline the tests" asks for prose about it."""


@dataclass(frozen=True)
class Form:
    """A form of deliverable an aspect can ask for, and how a part's answer shows it has one."""

    name: str
    """As the document names it: "an OpenAPI document"."""
    asked: re.Pattern[str]
    """Words of an aspect that ask for it."""
    languages: frozenset[str]
    """Fence tags of a block that may hold it."""
    holds: Callable[[str], object] | None
    """A test of such a block: truthy when it is one (a pattern's ``search``; None: any block of those tags)."""
    instruction: str
    """Added to the description of a part written for it."""

    def held_by(self, text: str) -> bool:
        """Whether ``text`` (a part's answer) holds a block of this form."""
        return any(
            language in self.languages and (self.holds is None or bool(self.holds(code)))
            for language, code in code_blocks(text)
        )


OPENAPI_FORM = Form(
    "an OpenAPI document",
    OPENAPI_ASKED,
    frozenset({"yaml", "yml", "json"}),
    openapi_document,
    "Deliver it as one OpenAPI 3 document in a ```yaml block (openapi, info, paths, components).",
)
_COORDINATES = re.compile(r"\s+and\s+|,\s*", re.I)
"""Where the aspect pass joined the coordinates of one deliverable ("... from total spend and the matching ...")."""

_TESTS_HELD = re.compile(r"(?m)^\s*(?:async\s+)?def test_|\bunittest\b|\bTestCase\b")
"""A block that holds tests: a test function a runner collects, or a unittest case. A bare ``assert`` is not: the
ranges module of multipart_set5_first ended on one ``assert`` in its ``__main__`` example, which counted as the
"pytest tests for both" the task asked for, and none were written."""

FORMS: tuple[Form, ...] = (
    OPENAPI_FORM,
    Form(
        "tests",
        re.compile(r"\b(?:unit tests?|pytest|test suite|test cases|tests? (?:for|at|of|with|covering|that))\b", re.I),
        PYTHON_TAGS,
        _TESTS_HELD.search,
        "Deliver the tests as runnable Python in a ```python block: pytest test functions (def test_...).",
    ),
    Form(
        "SQL",
        re.compile(
            r"\bsql\b|\b(?:query|queries|schema|ddl)\b.*\b(?:tables?|database|columns?)\b"
            r"|\b(?:tables?|database)\b.*\b(?:query|queries|schema)\b",
            re.I,
        ),
        SQL_TAGS,
        None,
        "Deliver the SQL in a ```sql block.",
    ),
    Form(
        "a Dockerfile",
        re.compile(r"\bdockerfile\b", re.I),
        frozenset({"dockerfile", "docker", ""}),
        re.compile(r"(?mi)^\s*FROM\s+\S+").search,
        "Deliver the Dockerfile in a ```dockerfile block.",
    ),
    Form(
        "a shell script",
        re.compile(r"\b(?:bash|shell) script\b", re.I),
        SHELL_TAGS,
        None,
        "Deliver the script in a ```bash block.",
    ),
    Form(
        "a YAML file",
        re.compile(
            r"\byaml\b|\bkubernetes manifests?\b|\bcompose file\b|\bgithub actions workflow\b"
            r"|\bprometheus\b(?:\s+[\w-]+){0,2}?\s+rules\b",
            re.I,
        ),
        frozenset({"yaml", "yml"}),
        None,
        "Deliver the file in a ```yaml block.",
    ),
    Form(
        "Python code",
        re.compile(
            r"\bpython\b|\b(?:sqlalchemy|django|flask|fastapi|pydantic)\b(?:\s+[\w-]+){0,2}?\s+"
            r"(?:models?|apps?|endpoints?|views?|schemas?|class(?:es)?|routes?)\b",
            re.I,
        ),
        PYTHON_TAGS,
        None,
        "Deliver the code in a ```python block.",
    ),
)
"""The forms an aspect can ask for (:func:`asked_forms`)."""


def asked_forms(aspect: Aspect) -> tuple[Form, ...]:
    """The forms ``aspect`` asks its part to deliver (none: prose will do, or its verb does not make the thing).

    The first form it names counts (an OpenAPI document before any; then by where the words stand: "a GitHub
    Actions workflow in YAML that runs pytest" asks for YAML, not for tests: judged by the forms' order, it was sent
    a tests part that echoed the prompt and wrote the workflow again, cut off, 2026-12-07), and another named in a
    coordinate of its own: "the SQL migration ... and the matching change to our SQLAlchemy Customer model" asks for
    SQL and for Python (a real document gave the SQL only, and the round judged the first form alone), where "a
    Dockerfile for a Python 3.12 Flask app" asks for a Dockerfile. An OpenAPI document is not also judged as YAML
    (it may be JSON).
    """
    if aspect.verb.lower() not in FORM_VERBS:
        return ()
    named = [(m.start(), at, form) for at, form in enumerate(FORMS) if (m := form.asked.search(aspect.text))]
    forms = [form for _, _, form in sorted(named, key=lambda n: (n[2] is not OPENAPI_FORM, n[0], n[1]))]
    if not forms:
        return ()
    coordinates = _COORDINATES.split(aspect.text)
    others = [c for c in coordinates if not forms[0].asked.search(c)]
    second = [f for f in forms[1:] if any(f.asked.search(c) for c in others)]
    return tuple(f for f in [forms[0], *second] if not (f.name == "a YAML file" and forms[0] is OPENAPI_FORM))


_LETTER = re.compile(r"(?mi)^[ \t>*]*(?:dear|hi|hello|subject\s*:|to\s*:|re\s*:)\b")
PIECES: Mapping[str, tuple[tuple[str, ...], re.Pattern[str] | None]] = {
    "faq": (
        ("faq", "frequently asked", "questions", "q&a"),
        re.compile(r"(?mi)^[ \t>*#\d.)-]*(?:\*\*)?(?:q\s*[:.]|question\s*\d*\s*:)|^[ \t]*(?:#{1,6}|\*\*|\d+\.).*\?"),
    ),
    "table": (("table",), re.compile(r"(?m)^[ \t]*\|.*\|[ \t]*\n[ \t]*\|?[ \t]*:?-{3,}")),
    "wording": (("wording", "sign", "notice", "text"), re.compile(r"(?m)^[ \t]*>")),
    "notice": (("notice", "sign", "wording"), re.compile(r"(?m)^[ \t]*>")),
    "email": (("email", "e-mail", "message"), _LETTER),
    "letter": (("letter",), _LETTER),
    "memo": (("memo", "memorandum"), _LETTER),
    "note": (("note",), _LETTER),
    "invitation": (("invitation", "invite"), _LETTER),
    "announcement": (("announcement",), _LETTER),
    "readme": (("readme",), None),
    "changelog": (("changelog", "change log", "release notes"), None),
    "glossary": (("glossary",), None),
    "checklist": (("checklist",), re.compile(r"(?m)^[ \t]*[-*][ \t]+\[[ xX]\]")),
    "leaflet": (("leaflet",), None),
    "handout": (("handout",), None),
    "worksheet": (("worksheet",), None),
    "quiz": (("quiz",), None),
    "runbook": (("runbook",), None),
}
"""The pieces of prose the round looks for (:func:`asked_piece`): each deliverable noun with the words a heading or
label for it holds, and the shape its text has where it has no heading (or None)."""
_LABELS = re.compile(r"(?m)^[ \t]*(?:#{1,6}[ \t]+.*|\*\*[^*\n]+\*\*.*|__[^_\n]+__.*|[A-Z][\w '&/-]{0,50}:[ \t]*$)")
"""A heading, a bold lead or a label line ("Sign wording:"): where a reader looks for a piece by its name."""


def asked_piece(aspect: Aspect) -> str | None:
    """The piece of :data:`PIECES` that ``aspect`` asks for (its deliverable noun), or None.

    Only an aspect that makes something (its verb one of :data:`MAKING_VERBS` or "deliver"), and asks for no form
    (a form is judged by its blocks).
    """
    verb = aspect.verb.lower().split()[0] if aspect.verb.strip() else ""
    if verb not in MAKING_VERBS | {"deliver", "put"} or asked_forms(aspect):
        return None
    noun = deliverable_noun(aspect)
    return noun if noun in PIECES else None


def _holds_piece(noun: str, part: Part) -> bool:
    """Whether ``part`` holds the piece ``noun``: titled for it, a heading or label naming it, or its shape."""
    names, shape = PIECES[noun]
    if any(name in part.title.lower() for name in names):
        return True
    prose = without_code(prose_unfenced(part.result.raw))
    labels = " ".join(m.group(0) for m in _LABELS.finditer(prose)).lower()
    if any(re.search(rf"\b{re.escape(name)}", labels) for name in names):
        return True
    return shape is not None and shape.search(prose) is not None


def read_gaps(
    task: str,
    parts: Sequence[Part],
    *,
    failed: Mapping[str, tuple[str, str]] | None = None,
    assists: Mapping[str, Sequence[AssistRecord]] | None = None,
    several: bool = True,
) -> list[CompletionGap]:
    """Every gap of the document, in the order the round acts on them (parts added first).

    Args:
        task: The person's task.
        parts: The finished parts (done, with a kept answer), in the plan's order.
        failed: The parts that failed: slot id -> (its title and description, its error).
        assists: Each part's assist records.
        several: Whether the plan has several parts (a failed or restating part is a gap only then).
    """
    failed = failed or {}
    retried = list(failed.values())
    if several:  # a part whose checks failed is written again: the form it was for is not added a second time
        retried += [(p.title, "") for p in parts if p.result.quality is not None and not p.result.quality.passed]
    gaps = _form_gaps(task, parts, retried) + _piece_gaps(task, parts, retried)
    gaps += _work_gaps(assists or {})
    if several:
        gaps += _failed_gaps(parts, failed) + _restating_gaps(parts)
    return gaps


def _form_gaps(task: str, parts: Sequence[Part], failed: Iterable[tuple[str, str]]) -> list[CompletionGap]:
    """An aspect whose form no part has (a failed part that would have written it is retried instead)."""
    gaps = []
    retried = [text for text, _ in failed]
    for aspect, form in ((a, f) for a in task_aspects(task) for f in asked_forms(a)):
        if any(form.held_by(p.result.raw) for p in parts):
            continue
        if any(form.asked.search(text) for text in retried):
            continue
        gaps.append(
            CompletionGap(
                kind="form",
                aspect=aspect.text,
                detail=f"the task asks to {aspect.text}, and no part delivers {form.name}",
                feedback=form.instruction,
            )
        )
    return gaps


def _piece_gaps(task: str, parts: Sequence[Part], failed: Iterable[tuple[str, str]]) -> list[CompletionGap]:
    """An aspect whose piece no part holds (a failed part titled for it is retried instead)."""
    gaps: list[CompletionGap] = []
    retried = " ".join(text.split("\n", 1)[0] for text, _ in failed).lower()
    aspects = task_aspects(task)
    if len(aspects) < 2:
        return gaps  # the task asks for the piece alone: the answer is it ("Give me a checklist for ...")
    for aspect in aspects:
        noun = asked_piece(aspect)
        if noun is None or not parts or any(_holds_piece(noun, p) for p in parts):
            continue
        if any(name in retried for name in PIECES[noun][0]):
            continue
        gaps.append(
            CompletionGap(
                kind="piece",
                aspect=aspect.text,
                detail=f"the task asks to {aspect.text}, and no part holds the {noun}",
                feedback=f"Deliver the {noun} itself, under a heading that names it; the other parts are written.",
            )
        )
    return gaps


def _work_gaps(assists: Mapping[str, Sequence[AssistRecord]]) -> list[CompletionGap]:
    return [
        CompletionGap(
            kind="expert_work",
            slot_id=sid,
            aspect=record.description,
            detail=f"part {sid} asked for work outside its expert's scope: {record.description}",
            domain=record.domain,
            assist_id=record.id,
        )
        for sid, records in assists.items()
        for record in records
        if record.kind == "expert" and record.status == "unresolved" and record.reason == WORK_REASON
    ]


def _failed_gaps(parts: Sequence[Part], failed: Mapping[str, tuple[str, str]]) -> list[CompletionGap]:
    gaps = [
        CompletionGap(
            kind="failed", slot_id=sid, aspect=what.split("\n", 1)[0], detail=f"part {sid} failed: {error}"[:300]
        )
        for sid, (what, error) in failed.items()
    ]
    for part in parts:
        quality = part.result.quality
        if quality is None or quality.passed:
            continue
        checks = "; ".join(f"{c.name}: {c.detail}" if c.detail else c.name for c in quality.failed_checks[:3])
        gaps.append(
            CompletionGap(
                kind="failed",
                slot_id=part.slot_id,
                aspect=part.title,
                detail=f"part {part.slot_id} failed its checks ({checks})"[:300],
                feedback=f"An earlier answer to this part failed these checks: {checks}. Write it so that they pass."[
                    :600
                ],
            )
        )
    return gaps


def _restating_gaps(parts: Sequence[Part]) -> list[CompletionGap]:
    gaps = []
    seen: list[tuple[Part, set[tuple[str, ...]]]] = []
    for part in parts:
        words = norm(part.result.body_text()).split()
        mine = _triples(words)
        if len(words) >= RESTATE_MIN_WORDS and seen:
            other, share = max(((o, len(mine & g) / len(mine)) for o, g in seen), key=lambda pair: pair[1])
            if share >= RESTATE_SHARE:
                gaps.append(
                    CompletionGap(
                        kind="restates",
                        slot_id=part.slot_id,
                        aspect=part.title,
                        detail=f"part {part.slot_id} repeats part {other.slot_id} ({share:.0%} of its wording)",
                        feedback=(
                            f'An earlier answer to this part repeated the part "{other.title}" ({share:.0%} of its '
                            "wording). Write only what this part's title asks for; where it needs what that part "
                            "says, refer to it by its title instead of repeating it."
                        ),
                    )
                )
        seen.append((part, mine))
    return gaps


def _triples(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def round_seconds(part_seconds: Sequence[float], actions: int) -> float:
    """The round's time: its actions one after another, each as long as the run's median part.

    One after another, not in waves of ``max_parallel``: a loaded model serves one generation at a time (one lock
    per llama.cpp context), and the round's parts mostly go to the models the run already used.
    """
    if actions <= 0:
        return 0.0
    return actions * (median(part_seconds) if part_seconds else DEFAULT_PART_SECONDS)
