"""Long-term memory on LangGraph's Store: facts, after-action records of runs, routing lessons, feedback.

Below :mod:`engine` and above :mod:`experts`; like both, it does not import LangGraph (a Store is passed in).
"""

from memory.feedback import VERDICTS, FeedbackOutcome, give_feedback
from memory.routing_lessons import LessonRecord, RoutingLessons
from memory.store import EpisodeMemory, FactMemory, ItemStore

__all__ = [
    "VERDICTS",
    "EpisodeMemory",
    "FactMemory",
    "FeedbackOutcome",
    "ItemStore",
    "LessonRecord",
    "RoutingLessons",
    "give_feedback",
]
