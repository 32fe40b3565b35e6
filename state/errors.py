"""Typed exceptions.

Two families, kept apart on purpose (STYLE.md rule 8):

* :class:`UserError` and its children: the person configured or called something wrong. The message names the
  argument, file or field, and the allowed values. The CLI prints it without a traceback and exits with 2; the
  LangGraph server sends it to the API client as it is (a ``ValueError``).
* :class:`RunFailure`: the run itself failed in a node. The message names the node and slot.

A backend's failure (:class:`BackendError`) names the model and the slot that asked, never a node: a backend
does not know which node called it. The node that catches it reports it under its own name.
"""

from __future__ import annotations


class CoeError(Exception):
    """Base class of every error raised on purpose by College of Experts."""


class UserError(CoeError, ValueError):
    """Something the caller gave us is wrong; the message says what and how to fix it.

    A ``ValueError`` too: the LangGraph server passes the message of a ``ValueError`` raised in a run to the
    client (other exceptions become "An internal error occurred"), so an API client reads the same line the CLI
    prints. Never raise one inside a pydantic validator: pydantic would wrap it into a ``ValidationError``.
    """


class InputError(UserError):
    """The run input (task, mode, options) is invalid."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class ConfigError(UserError):
    """A configuration file or setting is invalid."""

    def __init__(self, source: str, message: str, field: str | None = None) -> None:
        self.source = source
        self.field = field
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {message}")


class FrameworkError(UserError):
    """A framework (file, template or adapted plan) failed validation."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source = source
        self.errors = errors
        listing = "\n".join(f"  - {e}" for e in errors)
        super().__init__(f"invalid framework {source}:\n{listing}")


class ModelUnavailableError(UserError):
    """The configured model cannot be loaded (missing package, file or bad checksum)."""


class RunFailure(CoeError):
    """The run failed while executing a node or a slot."""

    def __init__(self, node: str, message: str, slot_id: str | None = None) -> None:
        self.node = node
        self.slot_id = slot_id
        where = f"node {node}" + (f", slot {slot_id}" if slot_id else "")
        super().__init__(f"{where}: {message}")


class BackendError(CoeError):
    """An expert backend failed to generate; ``slot_id`` is the slot that asked (None: not a slot).

    The text names the slot (``slot s1: ...``); ``message`` is the backend's own words, which the node that
    reports the failure puts under its own name.
    """

    def __init__(self, message: str, *, slot_id: str | None = None) -> None:
        self.message = message
        self.slot_id = slot_id
        super().__init__(f"slot {slot_id}: {message}" if slot_id else message)


class GenerationStopped(BackendError):
    """The model pool stopped a generation before it finished.

    ``reason`` is ``evicted`` (memory pressure: the slot is run again from scratch once memory frees) or
    ``cancelled`` (the process is stopping, e.g. Ctrl+C: the run is resumed from its checkpoint).
    """

    def __init__(self, message: str, reason: str, *, slot_id: str | None = None) -> None:
        self.reason = reason
        super().__init__(message, slot_id=slot_id)


class MemoryBudgetError(UserError):
    """A model can never fit the configured memory budget; the message says how to raise it."""
