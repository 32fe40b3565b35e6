"""The slot pipeline: one slot's prompt, its candidates, their checks, the choice and the kept answer."""

from engine.slots.job import SlotJob
from engine.slots.prompt import build_messages
from engine.slots.run import SlotOutcome, generation_settings, run_slot

__all__ = ["SlotJob", "SlotOutcome", "build_messages", "generation_settings", "run_slot"]
