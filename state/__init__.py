"""The Passport (graph state), its parts, and the input/output/context schemas."""

from state.context import RunContext, resolve_settings
from state.enums import Mode, RunStatus, SlotStatus
from state.errors import (
    BackendError,
    CoeError,
    ConfigError,
    FrameworkError,
    InputError,
    ModelUnavailableError,
    RunFailure,
    UserError,
)
from state.framework import Framework, SlotSpec
from state.io import RunInput, RunOptions, RunOutput, RunSummary, SlotSummary
from state.passport import (
    GuardedPassport,
    LedgerEntry,
    Mission,
    Notice,
    Passport,
    PlannedPassport,
    RoutingDecision,
    RunInfo,
    SlotState,
)
from state.result import OutlineItem, Section, SlotResult
from state.settings import Settings

__all__ = [
    "BackendError",
    "CoeError",
    "ConfigError",
    "Framework",
    "FrameworkError",
    "GuardedPassport",
    "InputError",
    "LedgerEntry",
    "Mission",
    "Mode",
    "ModelUnavailableError",
    "Notice",
    "OutlineItem",
    "Passport",
    "PlannedPassport",
    "RoutingDecision",
    "RunContext",
    "RunFailure",
    "RunInfo",
    "RunInput",
    "RunOptions",
    "RunOutput",
    "RunStatus",
    "RunSummary",
    "Section",
    "Settings",
    "SlotResult",
    "SlotSpec",
    "SlotState",
    "SlotStatus",
    "SlotSummary",
    "UserError",
    "resolve_settings",
]
