"""What the nodes drive: slot scheduling and work, assist resolution, template adaptation, asking the person.

Nothing here imports LangGraph: the nodes (:mod:`nodes`) read the Passport, call into this package, and turn
what it returns into partial updates; LangGraph's ``interrupt`` is handed in where the person is asked.
"""

from engine.adaptation import adapt, adaptation_messages
from engine.asking import ask
from engine.assist import AssistResolver, Resolution
from engine.scheduler import Finished, SlotScheduler, release, scheduler_for
from engine.slot_prompt import SlotJob, build_messages
from engine.slot_work import SlotOutcome, generation_settings, run_slot

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
