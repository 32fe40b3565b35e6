"""What the nodes drive: the slot pipeline, its scheduler, assists, planning.

Nothing here imports LangGraph: the nodes (:mod:`nodes`) read the Passport, call into this package, and turn
what it returns into partial updates; LangGraph's ``interrupt`` is handed in where the person is asked.
"""

from engine.assists.asking import ask
from engine.assists.resolver import AssistResolver, Resolution
from engine.planning.adaptation import adapt, adaptation_messages
from engine.scheduler import Finished, SlotScheduler, release, scheduler_for
from engine.slots.job import SlotJob
from engine.slots.prompt import build_messages
from engine.slots.run import SlotOutcome, generation_settings, run_slot

__all__ = [
    "AssistResolver",
    "Finished",
    "Resolution",
    "SlotJob",
    "SlotOutcome",
    "SlotScheduler",
    "adapt",
    "adaptation_messages",
    "ask",
    "build_messages",
    "generation_settings",
    "release",
    "run_slot",
    "scheduler_for",
]
