"""The planner model's reading of a task's deliverables: a second signal on a plan's scope (issue 40, item 1).

:func:`experts.routing.classify` decides a task's scope without a model: the deliverables the aspect pass names,
then the similarities. Both read words, and a single deliverable described at length (its input, its context,
its audience, a list of what it must hold) reads as several: on a planning set written by someone who had not
read the rules, the pass kept 15 of 28 single-deliverable tasks one slot. A plan for one deliverable costs
minutes and gives parts that contradict each other; one expert's answer to a task that deserved a plan still
answers it. So the second reading is asked only when the first says *multi*: the planner model lists the
deliverables under a grammar (:func:`experts.backends.grammar.deliverables_grammar`), and when it lists one,
the two readings disagree and the narrower one is taken (:func:`second_reading`), the default
``unclear_scope_narrower`` that interactive mode asks about. Within :data:`DELIVERABLES_SECONDS`; a listing that
fails or runs out of time leaves the first reading as it was. Measured in ``docs/decisions/planning.md``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import engine.prompts as prompts
from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from experts.backends.grammar import deliverables_grammar
from state.scope_decision import ScopeDecision

__all__ = ["DELIVERABLES_SECONDS", "Listing", "list_deliverables", "second_reading"]

DELIVERABLES_SECONDS = 12.0
"""The listing's time bound: about three times what the 1.5B takes on 2 cores for a short task."""
MAX_DELIVERABLES = 4
MAX_TOKENS = 160
"""Four names of 80 characters at most, in JSON: about 110 tokens."""
SLOT_ID = "list_deliverables"


@dataclass(frozen=True)
class Listing:
    """What the planner model listed (``problem``: why there is no listing; the first reading then stands)."""

    deliverables: tuple[str, ...] = ()
    seconds: float = 0.0
    problem: str | None = None


def list_deliverables(task: str, backend: ExpertBackend, *, time_limit: float = DELIVERABLES_SECONDS) -> Listing:
    """Ask ``backend`` (the planner model) for the deliverables of ``task``, greedy, within ``time_limit`` seconds."""
    messages = (
        ChatMessage("system", prompts.DELIVERABLES_SYSTEM),
        ChatMessage("user", prompts.DELIVERABLES_PROMPT.format(task=task)),
    )
    request = GenerationRequest(
        messages=messages,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        grammar=deliverables_grammar(MAX_DELIVERABLES) if backend.supports_grammar() else None,
        slot_id=SLOT_ID,
        slot_title="List the deliverables",
        time_limit=time_limit,
    )
    t0 = time.perf_counter()
    try:
        gen = backend.generate(request)
    except Exception as exc:  # a backend's own error type is unknown: the first reading stands
        return Listing(seconds=_since(t0), problem=f"{type(exc).__name__}: {exc}")
    if gen.finish_reason in ("time", "length"):
        why = f"out of time ({time_limit:g} s)" if gen.finish_reason == "time" else f"cut at {MAX_TOKENS} tokens"
        return Listing(seconds=_since(t0), problem=f"the listing was {why}")
    names = parse_listing(gen.text)
    if not names:
        return Listing(seconds=_since(t0), problem=f"no list of deliverables in the answer: {gen.text[:120]!r}")
    return Listing(names, _since(t0))


def parse_listing(text: str) -> tuple[str, ...]:
    """The distinct deliverable names of a ``{"deliverables": [...]}`` answer (empty when it is not one)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return ()
    items = data.get("deliverables") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return ()
    names: dict[str, str] = {}
    for item in items:
        if isinstance(item, str) and item.strip():
            names.setdefault(" ".join(item.lower().split()), item.strip())
    return tuple(names.values())


def second_reading(decision: ScopeDecision, listing: Listing) -> ScopeDecision:
    """The scope after the listing: a *multi* whose listing names one deliverable becomes the narrower *single*.

    Any other decision, or a listing with a problem or several deliverables, is returned with the listing recorded.
    """
    listed = list(listing.deliverables)
    if decision.kind != "multi" or len(listed) != 1:
        return decision.model_copy(update={"listed": listed})
    reason = (
        f"unclear scope: the planner model lists one deliverable ({listed[0]!r}) where the task's words read as a "
        f"plan ({decision.reason}): the narrower reading, one expert"
    )
    return decision.model_copy(
        update={"kind": "single", "rule": "unclear_scope_narrower", "reason": reason, "listed": listed}
    )


def _since(t0: float) -> float:
    return round(time.perf_counter() - t0, 3)
