"""Node ``ask_user``: put a slot's ``{{ASSIST:user:...}}`` questions to the person (interactive mode).

In interactive mode a slot whose answer asks the person something is recorded as ``awaiting_user``: its
result is kept, its dependents wait. The router after ``execute_slots`` sends one ``ask_user`` task per such
slot (``Send``), so parallel slots wait at the same time, each with its own interrupt: a client answers them
together (a map from interrupt id to answer) or one at a time.

The answer replaces the slot's UNRESOLVED markers with the person's words, recorded with the source "user";
``skip`` leaves a question unresolved. The slot is then done and its dependents see the answered text.
Everything before ``interrupt()`` only reads the task's input, so the node restarts safely on resume.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from engine.assists.asking import ask
from state.assist import AssistRecord, AssistSource, unresolved_marker
from state.enums import SlotStatus
from state.hitl import (
    EscalationCategory,
    EscalationSeverity,
    InterruptPayload,
    Question,
    parse_clarify_answer,
)
from state.passport import AskUser, LedgerEntry, utcnow
from state.result import SlotResult

NODE = "ask_user"
SKIP = "skip"


def questions_for(task: AskUser) -> list[Question]:
    """One free-text question per user assist still waiting for the person."""
    return [
        Question(id=r.id, text=f"[{task.title}] {r.description}")
        for r in task.records
        if r.awaiting_user and r.status == "unresolved"
    ]


def ask_user(state: AskUser) -> dict[str, Any]:
    """Ask the slot's user questions; fill the answers in; mark the slot done."""
    task = state
    questions = questions_for(task)
    payload = InterruptPayload(
        kind="assist_user",
        category=EscalationCategory.HELP,
        severity=EscalationSeverity.MEDIUM,
        node=NODE,
        questions=questions,
        answer_format=(
            "the answer as text (one question), or a map from question id to answer; "
            f'"{SKIP}" leaves a question unanswered'
        ),
    )
    answers, _ = ask(payload, lambda value: parse_clarify_answer(value, questions), interrupt)
    result, records = _fill(task, answers)
    done = task.state.model_copy(update={"status": SlotStatus.DONE, "finished_at": utcnow()})
    answered = [q for q in questions if answers[q.id] != SKIP]
    entry = LedgerEntry(
        agent="person",
        action="assist_user",
        slot_id=task.slot_id,
        inputs_summary=f"{len(questions)} question(s)",
        outputs_summary=f"{len(answered)} answered, {len(questions) - len(answered)} skipped",
    )
    return {
        "results": {task.slot_id: result},
        "assists": {task.slot_id: records},
        "slot_states": {task.slot_id: done},
        "ledger": [entry],
        "updated_at": utcnow(),
    }


def _fill(task: AskUser, answers: dict[str, str]) -> tuple[SlotResult, list[AssistRecord]]:
    replacement: dict[str, str] = {}
    records: list[AssistRecord] = []
    for r in task.records:
        answer = answers.get(r.id)
        if answer is None or r.marker is None:  # not asked: only unresolved records (which carry a marker) are
            records.append(r)
        elif answer == SKIP:
            reason = "the person did not answer"
            marker = unresolved_marker(r.kind, r.domain, r.description, reason)
            replacement[r.marker] = marker
            records.append(r.model_copy(update={"awaiting_user": False, "reason": reason, "marker": marker}))
        else:
            replacement[r.marker] = answer
            records.append(
                AssistRecord.model_validate(
                    {
                        **r.model_dump(),
                        "status": "resolved",
                        "value": answer,
                        "marker": None,
                        "reason": None,
                        "awaiting_user": False,
                        "sources": [AssistSource(kind="user", excerpt=answer)],
                        "trail": [*r.trail, "answered by the person"],
                    }
                )
            )

    def fill(text: str) -> str:
        for marker, value in replacement.items():
            text = text.replace(marker, value)
        return text

    res = task.result
    result = res.model_copy(
        update={
            "raw": fill(res.raw),
            "sections": [s.model_copy(update={"title": fill(s.title), "body": fill(s.body)}) for s in res.sections],
            "outline": [i.model_copy(update={"title": fill(i.title)}) for i in res.outline],
        }
    )
    return result, records
