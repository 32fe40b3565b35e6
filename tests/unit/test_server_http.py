"""The server's resume check (server/http_app.py): a resume that answers nothing is refused with a message."""

from __future__ import annotations

import pytest

from server.http_app import resume_problem

WAITING = ["0123456789abcdef0123456789abcdef"]


@pytest.mark.parametrize(
    ("resume", "pending", "status", "words"),
    [
        ("approve", [], 409, "has no question waiting"),
        ({"0123456789abcdef0123456789abcdef": "x"}, [], 409, "nothing to resume"),
        (None, WAITING, 422, "command.resume is empty"),
        ({}, WAITING, 422, "command.resume is empty"),
        ({"ffffffffffffffffffffffffffffffff": "approve"}, WAITING, 422, "waiting: 0123456789abcdef"),
    ],
)
def test_a_resume_that_answers_nothing_is_refused(resume: object, pending: list[str], status: int, words: str) -> None:
    problem = resume_problem("t1", resume, pending)
    assert problem is not None and problem[0] == status and words in problem[1]


@pytest.mark.parametrize(
    "resume",
    ["approve", {"A.a1": "db.example.com"}, {"0123456789abcdef0123456789abcdef": "approve"}, {"action": "edit"}],
)
def test_an_answer_to_a_waiting_question_passes(resume: object) -> None:
    assert resume_problem("t1", resume, WAITING) is None
