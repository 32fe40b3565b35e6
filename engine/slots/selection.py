"""Best-of-N: scoring candidates by their checks, keeping the best one verbatim, a judge only to break ties.

A candidate's score puts correctness first: passing every hard check outweighs anything else, then the weighted
share of hard checks passed (examples and the answer's own tests weigh most, since they run the code), then
soft checks. The best score wins; among candidates with the same top score, a judge prompt may pick (the model
sees the rubric and the candidates and answers with an id only, under a grammar that allows nothing else), or
else the earliest wins (the greedy answer first). Nothing is rewritten or merged: the kept answer is one of
the candidates, character for character.
"""

from __future__ import annotations

from collections.abc import Sequence

import engine.prompts as prompts
from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from state.quality import CandidateRecord, CheckResult

__all__ = ["JUDGE_MAX_CHARS", "best", "judge", "score"]

WEIGHTS = {
    "python.examples": 4.0,
    "python.tests": 2.0,
    "python.runs": 3.0,
    "python.parses": 3.0,
    "python.own_doctests": 1.5,
    "python.defines": 2.0,
    "contract.complete": 2.0,
    "prose.repetition": 2.0,
    "contract.own_work": 4.0,
    "contract.leaks": 4.0,
}
"""Weights of hard checks in the score (others weigh 1). A copy of a referenced slot adds nothing to the document
but the same text twice: an answer of its own that stops mid-sentence and copies an example placeholder ranks
above it (a DCF plan's "Compute the terminal value" kept a word-for-word copy of "Choose a discount rate"). An
answer that repeats the prompt's own text is the prompt talking, not the expert: a password-policy slot kept a
candidate that was its retry feedback, word for word, over one that only repeated a phrase."""
JUDGE_MAX_CHARS = 1800
"""Characters of each candidate shown to the judge (it picks; it never sees more than fits its context)."""


def score(checks: Sequence[CheckResult]) -> float:
    """The selection score of one candidate's checks (higher is better; 110 and more: every hard check passed)."""
    hard = [c for c in checks if c.severity == "hard"]
    soft = [c for c in checks if c.severity == "soft"]
    weight = sum(WEIGHTS.get(c.name, 1.0) for c in hard)
    value = sum(WEIGHTS.get(c.name, 1.0) * _value(c) for c in hard) / weight if weight else 1.0
    soft_value = sum(_value(c) for c in soft) / len(soft) if soft else 1.0
    return round(100.0 * all(c.passed for c in hard) + 10.0 * value + soft_value, 4)


def _value(check: CheckResult) -> float:
    """1 for a pass, 0 for a failure, the passed share for a check of several parts."""
    if check.passed:
        return 1.0
    return check.score if check.score < 1.0 else 0.0


def best(candidates: Sequence[CandidateRecord]) -> list[CandidateRecord]:
    """The candidates with the top score, earliest first (one unless there is a tie)."""
    if not candidates:
        return []
    top = max(c.score for c in candidates)
    return [c for c in candidates if c.score == top]


def judge(
    tied: Sequence[tuple[str, str]], rubric: str, backend: ExpertBackend, *, slot_id: str | None = None
) -> str | None:
    """Ask ``backend`` which of the ``tied`` ``(id, text)`` candidates fits ``rubric`` best; its id, or None.

    The answer is held by a grammar to one of the ids where the backend honours grammars, and checked against
    them everywhere. Any failure (a backend error, an answer that is not an id) returns None: the caller keeps
    the earliest candidate.
    """
    if len(tied) < 2:
        return None
    ids = [cid for cid, _ in tied]
    shown = "\n\n".join(
        prompts.JUDGE_CANDIDATE.format(
            id=cid, text=text[:JUDGE_MAX_CHARS] + (" [...]" if len(text) > JUDGE_MAX_CHARS else "")
        )
        for cid, text in tied
    )
    messages = (
        ChatMessage("system", prompts.JUDGE_SYSTEM),
        ChatMessage("user", prompts.JUDGE_PROMPT.format(rubric=rubric, candidates=shown, ids=", ".join(ids))),
    )
    grammar = "root ::= " + " | ".join(f'"{cid}"' for cid in ids) + "\n" if backend.supports_grammar() else None
    try:
        gen = backend.generate(
            GenerationRequest(
                messages=messages, max_tokens=8, temperature=0.0, grammar=grammar, slot_id=slot_id, slot_title="judge"
            )
        )
    except Exception:  # a judge that cannot answer breaks no tie; the earliest candidate is kept
        return None
    answer = gen.text.strip().split()[0] if gen.text.strip() else ""
    return answer if answer in ids else None
