"""Node ``select_template``: choose the framework the run will execute.

Today the framework is either the one given in the run options (``--framework FILE``) or the documented
last-resort framework: a single slot that answers the whole task. Template retrieval extends this node.
"""

from __future__ import annotations

from typing import Any

from state.errors import RunFailure
from state.framework import fallback_framework, validate_framework
from state.passport import LedgerEntry, Passport, SlotState, utcnow


def select_template(state: Passport) -> dict[str, Any]:
    """Pick the framework (given or fallback), validate it, and initialise every slot's state."""
    if state.mission is None:
        raise RunFailure("select_template", "the mission must be set by guard first")
    given = state.framework  # validated by guard when the caller gave one; None otherwise
    fw = given if given is not None else validate_framework(fallback_framework(state.mission.task))
    reason = f"framework given by the caller ({fw.source})" if given is not None else "last-resort one-slot framework"
    return {
        "framework": fw,
        "slot_states": {s.id: SlotState() for s in fw.slots},
        "updated_at": utcnow(),
        "ledger": [
            LedgerEntry(
                agent="harness",
                action="select_framework",
                inputs_summary=reason,
                outputs_summary=f"{fw.id}: {len(fw.slots)} slots",
            )
        ],
    }
