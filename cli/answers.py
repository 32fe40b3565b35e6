"""Answering a run's pending interrupts from the command line: in the terminal, or from --answer / a file.

A pending interrupt carries an :class:`~state.hitl.InterruptPayload`. With one pending interrupt the answer is
sent as it is; with several (parallel slots) it is a mapping from interrupt id to answer, so they are answered
together with one resume. Answers are checked here against what each interrupt allows before anything is
sent, and the graph checks them again (an API client may send anything).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from langgraph.types import Interrupt

from state.errors import ConfigError
from state.hitl import AnswerError, InterruptPayload, parse_clarify_answer, parse_plan_answer
from state.yaml_text import safe_load

_INTERRUPT_ID = re.compile(r"^[0-9a-f]{32}$")
"""How LangGraph names an interrupt (what an answers file maps from)."""


def payload_of(intr: Interrupt) -> InterruptPayload:
    """The typed payload of a pending interrupt."""
    return InterruptPayload.model_validate(intr.value)


def check_answer(payload: InterruptPayload, value: object) -> None:
    """Raise :class:`AnswerError` when ``value`` does not fit the interrupt (the graph would refuse it)."""
    if payload.kind == "approve_plan":
        parse_plan_answer(value)
    else:
        parse_clarify_answer(value, payload.questions)


def _value(text: str) -> object:
    """An answer given as text: JSON when it parses as JSON (a mapping, a quoted string), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def resume_value(interrupts: Sequence[Interrupt], answer: str | None, answers_file: Path | None) -> object:
    """The resume value for ``coe resume --answer / --answers-file``, checked against the pending interrupts.

    Raises:
        ConfigError: no interrupt is pending, an interrupt id is unknown or missing, or an answer does not fit.
    """
    if answer is not None and answers_file is not None:
        raise ConfigError("--answer", "and --answers-file were both given: give one of them")
    if not interrupts:
        raise ConfigError("--answer", "the run is not waiting for an answer")
    if answers_file is not None:
        try:
            data = safe_load(answers_file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(str(answers_file), f"cannot read the answers: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                str(answers_file), f"is not a UTF-8 text file (byte {exc.start}); give a YAML or JSON file of answers"
            ) from None
        except yaml.YAMLError as exc:
            raise ConfigError(str(answers_file), f"is not valid YAML or JSON: {exc}") from None
        by_id = {i.id: i for i in interrupts}
        named = [str(k) for k in data] if isinstance(data, dict) else []
        unknown = sorted(k for k in named if _INTERRUPT_ID.match(k) and k not in by_id)
        if unknown:  # a map by interrupt id that names ids this run does not have (an old file, another run's)
            raise ConfigError(
                str(answers_file),
                f"names interrupt ids this run does not have: {', '.join(unknown)}; pending: {', '.join(by_id)}",
            )
        if isinstance(data, dict) and data and set(data) <= set(by_id):
            for intr_id, value in data.items():
                _checked(payload_of(by_id[intr_id]), value, f"{answers_file}: {intr_id}")
            return dict(data)  # by interrupt id: those named are answered, the others stay pending
        if len(interrupts) > 1:
            known = ", ".join(by_id)
            raise ConfigError(str(answers_file), f"must map pending interrupt ids ({known}) to their answers")
        _checked(payload_of(interrupts[0]), data, str(answers_file))
        return data
    if answer is None:
        raise ConfigError("--answer", "give the answer with --answer TEXT or --answers-file FILE")
    if len(interrupts) > 1:
        ids = ", ".join(i.id for i in interrupts)
        raise ConfigError(
            "--answer", f"{len(interrupts)} questions are pending ({ids}); answer them with --answers-file"
        )
    value = _value(answer)
    _checked(payload_of(interrupts[0]), value, "--answer")
    return value


def _checked(payload: InterruptPayload, value: object, where: str) -> None:
    try:
        check_answer(payload, value)
    except AnswerError as exc:
        raise ConfigError(where, exc.message) from None


def render(intr: Interrupt) -> str:
    """A pending interrupt as text for the terminal."""
    p = payload_of(intr)
    lines = [f"[{p.kind}] from {p.node} ({p.category.value}, {p.severity.value}); interrupt id {intr.id}"]
    if p.error:
        lines.append(f"  your previous answer was refused: {p.error}")
    if p.plan is not None:
        lines.append("  plan:")
        for s in p.plan:
            after = f" after {', '.join(s.deps)}" if s.deps else ""
            lines.append(f"    {s.id:<20} {s.expert or '-':<20} {s.title}{after}")
    for q in p.questions:
        allowed = f" [{' / '.join(q.allowed)}]" if q.allowed else ""
        named = f"{q.id}: " if len(p.questions) > 1 else ""
        lines.append(f"  {named}{q.text}{allowed}")
    lines.append(f"  answer: {p.answer_format}")
    return "\n".join(lines)


def ask_in_terminal(interrupts: Sequence[Interrupt]) -> object:
    """Ask each pending interrupt on the terminal; return the resume value (a map id -> answer when several)."""
    answers: dict[str, Any] = {}
    for intr in interrupts:
        print(render(intr), file=sys.stderr)
        answers[intr.id] = _ask_one(intr)
    return answers if len(interrupts) > 1 else answers[interrupts[0].id]


def _ask_one(intr: Interrupt) -> object:
    p = payload_of(intr)
    while True:
        value: object
        if p.kind == "clarify" and len(p.questions) > 1:  # one line per question, in turn
            value = {q.id: input(f"  {q.id} > ").strip() for q in p.questions}
        else:
            text = input("> ").strip()
            value = _edit_plan(p) if p.kind == "approve_plan" and text == "edit" else _value(text)
        try:
            check_answer(p, value)
        except AnswerError as exc:
            print(f"  not accepted: {exc.message}", file=sys.stderr)
            continue
        return value


def _edit_plan(p: InterruptPayload) -> object:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="coe-plan-", delete=False) as fh:
        yaml.safe_dump(p.framework, fh, sort_keys=False, allow_unicode=True)
        path = fh.name
    input(f"  the plan is in {path}: edit it, save, then press Enter ")
    try:
        framework = safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        return {"action": "edit", "framework": f"unreadable: {exc}"}
    return {"action": "edit", "framework": framework}
