"""Node ``scope``: decide whether the task needs the planned path at all.

Only when the run chooses its framework from the template library (``use_templates``) and the caller gave
none: a trivial task (a greeting, a definition, a unit conversion) then goes to ``answer_directly``. In every
other case the decision is "task" and the run goes on to ``select_template`` (recorded as not classified).
"""

from __future__ import annotations

from typing import Any

from state.errors import RunFailure
from state.passport import LedgerEntry, Passport, utcnow
from state.scope import ScopeDecision

NODE = "scope"


def scope(state: Passport) -> dict[str, Any]:
    """Classify the task (trivial or not) when templates are in use; record the decision."""
    if state.mission is None or state.settings is None:
        raise RunFailure(NODE, "the mission and settings must be set by guard first")
    task = state.mission.task
    words = len(task.split())
    if state.framework is not None or not state.settings.use_templates:
        why = "a framework was given" if state.framework is not None else "template selection is off"
        decision = ScopeDecision(kind="task", words=words, reason=f"not classified: {why}")
        return {"scope": decision, "updated_at": utcnow()}
    from experts.catalog import load_catalog
    from experts.embedding import get_embedder
    from experts.scope import classify
    from experts.template_index import library

    _, index = library(load_catalog().ids, get_embedder())
    decision = classify(task, get_embedder(), index)
    return {
        "scope": decision,
        "updated_at": utcnow(),
        "ledger": [
            LedgerEntry(
                agent="router", action="scope", inputs_summary=f"{words} words", outputs_summary=decision.reason
            )
        ],
    }
