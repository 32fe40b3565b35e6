"""Human in the loop: the typed payload of every interrupt, and the answers each kind accepts.

Any client (the CLI, the HTTP API, Studio) renders an :class:`InterruptPayload` and resumes the run with one
answer. An answer that does not fit is refused with an :class:`AnswerError` naming what was wrong; the node
then asks again with that message in ``error``, so a bad answer changes nothing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from state.errors import UserError

InterruptKind = Literal["clarify", "approve_plan", "assist_user"]


class EscalationCategory(StrEnum):
    """Why the harness asks (the escalation categories of the design's source)."""

    DECISION = "decision"
    """Several valid paths: the person chooses."""
    HELP = "help"
    """Guidance or knowledge only the person has."""
    BLOCKED = "blocked"
    FAILED = "failed"
    EMERGENCY = "emergency"
    GATE_TIMEOUT = "gate_timeout"
    LIFECYCLE = "lifecycle"


class EscalationSeverity(StrEnum):
    """How urgent the question is."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"


class Question(BaseModel):
    """One question; ``allowed`` empty means a free-text answer."""

    id: str
    text: str
    allowed: list[str] = Field(default_factory=list)
    default: str | None = None
    """What an autonomous run chose (the recorded default)."""


class PlanSlotView(BaseModel):
    """One slot of a plan as the person sees it."""

    id: str
    title: str
    description: str
    expert: str | None
    deps: list[str] = Field(default_factory=list)


class InterruptPayload(BaseModel):
    """What an interrupt carries: enough for any client to render it and build a valid answer."""

    kind: InterruptKind
    category: EscalationCategory
    severity: EscalationSeverity
    node: str
    questions: list[Question]
    allowed: list[str] = Field(default_factory=list)
    """The answers accepted for the whole interrupt (approve_plan: approve, reject, edit)."""
    plan: list[PlanSlotView] | None = None
    framework: dict[str, Any] | None = None
    """The plan as a framework (the schema of a --framework file): the starting point of an edit."""
    error: str | None = None
    """Why the previous answer was refused (the question is asked again)."""
    answer_format: str = ""
    """How to answer, in one line."""


class AnswerError(UserError):
    """An answer that does not fit the interrupt it was given to."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PlanAnswer(BaseModel):
    """A parsed answer to an approve_plan interrupt."""

    action: Literal["approve", "reject", "edit"]
    reason: str = ""
    framework: dict[str, Any] | None = None


PLAN_ANSWER_FORMAT = (
    '"approve", "reject", {"action": "reject", "reason": "..."} or '
    '{"action": "edit", "framework": {...the framework with your changes...}}'
)


def parse_plan_answer(value: object) -> PlanAnswer:
    """Parse an approve_plan answer (a string or a mapping); raise :class:`AnswerError` when it does not fit."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("approve", "reject"):
            return PlanAnswer(action="approve" if word == "approve" else "reject")
        if word == "edit":
            raise AnswerError('an "edit" answer must carry the edited plan: {"action": "edit", "framework": {...}}')
        raise AnswerError(f"unknown answer {value!r}; allowed: approve, reject, edit")
    if not isinstance(value, dict):
        raise AnswerError(f"the answer must be a string or a mapping, not {type(value).__name__}")
    action = value.get("action")
    if action not in ("approve", "reject", "edit"):
        raise AnswerError(f"answer field action: {action!r} is not one of approve, reject, edit")
    extra = sorted(set(value) - {"action", "reason", "framework"})
    if extra:
        raise AnswerError(f"unknown answer field(s) {', '.join(extra)}; allowed: action, reason, framework")
    reason = value.get("reason", "")
    if not isinstance(reason, str):
        raise AnswerError("answer field reason: must be a string")
    framework = value.get("framework")
    if action == "edit" and not isinstance(framework, dict):
        raise AnswerError("answer field framework: an edit needs the edited plan as a mapping")
    if action != "edit" and framework is not None:
        raise AnswerError(f"answer field framework: only an edit carries a plan, not {action!r}")
    return PlanAnswer(action=action, reason=reason, framework=framework)


def parse_clarify_answer(value: object, questions: list[Question]) -> dict[str, str]:
    """Parse a clarify answer: a mapping question id -> answer, or one string when there is one question."""
    if isinstance(value, str) and len(questions) == 1:
        value = {questions[0].id: value}
    if not isinstance(value, dict):
        ids = ", ".join(q.id for q in questions)
        raise AnswerError(f"the answer must map each question id ({ids}) to an answer")
    answers: dict[str, str] = {}
    unknown = sorted(set(value) - {q.id for q in questions})
    if unknown:
        raise AnswerError(f"unknown question id(s) {', '.join(map(str, unknown))}")
    for q in questions:
        raw = value.get(q.id)
        if raw is None:
            raise AnswerError(f"question {q.id}: no answer")
        text = str(raw).strip()
        if q.allowed and text not in q.allowed:
            raise AnswerError(f"question {q.id}: {text!r} is not one of {', '.join(q.allowed)}")
        if not text:
            raise AnswerError(f"question {q.id}: the answer is empty")
        answers[q.id] = text
    return answers


class Approval(BaseModel):
    """How the person answered the plan (recorded in the Passport)."""

    action: Literal["approve", "reject", "edit"]
    reason: str = ""
    rounds: int = 1
    """How many answers it took (refused answers included)."""
