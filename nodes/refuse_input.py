"""Node ``refuse_input``: raise the input error the guard recorded.

The guard cannot raise a refused input itself: a node that raises writes nothing, and the refused value would
stay on the thread. It records the refusal (and resets the field) instead, and this node raises it, so the
caller gets the :class:`~state.errors.InputError` naming the field, and the thread stays usable.
"""

from __future__ import annotations

from typing import Any

from state.errors import InputError
from state.passport import Passport


def refuse_input(state: Passport) -> dict[str, Any]:
    """Raise the recorded refusal (its field and message)."""
    if state.refused is None:
        raise RuntimeError("refuse_input runs only after the guard refused the input")
    raise InputError(state.refused.field, state.refused.message)
