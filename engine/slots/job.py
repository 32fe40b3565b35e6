"""What one slot's run is given (:class:`SlotJob`): everything its prompts may contain, and the expert to draw from."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.slots.contracts import Contract, contract_for
from engine.slots.streaming import Listeners
from experts.backends import ExpertBackend
from experts.routing.lesson_check import Lesson
from memory.store import FactMemory
from state.enums import Mode
from state.figures import Figure
from state.framework import SlotSpec
from state.result import SlotResult

__all__ = ["SlotJob"]


@dataclass(frozen=True)
class SlotJob:
    """Everything a slot's prompt may contain (context sandboxing: nothing else of the Passport)."""

    spec: SlotSpec
    task: str
    constraints: tuple[str, ...]
    expert: str
    persona: str
    references: Mapping[str, tuple[str, SlotResult]]
    """Referenced slot id -> (its title, its result), only for ids in ``spec.can_reference``."""
    max_tokens: int
    temperature: float
    mode: Mode = Mode.AUTONOMOUS
    """The run's mode: decides whether user assists are kept for the person (interactive)."""
    contract: Contract | None = None
    """The output contract (None: the one of the slot's deliverable, :func:`engine.slots.contracts.contract_for`)."""
    n_ctx: int = 4096
    """The model's context length: prompt and answer together must fit."""
    escalation: tuple[str, ExpertBackend] | None = None
    """A bigger model than the expert's own (name, backend), for one last candidate when the others fail."""
    model: str = "base model"
    """The model the expert runs on, for the candidates' records."""
    cancel: threading.Event | None = None
    """Set when the run is cancelled (``runs.cancel`` on the server): every generation of the slot stops."""
    stream: Listeners | None = None
    """Where each candidate's tokens go as they are written (None: nowhere)."""
    facts: FactMemory | None = None
    """The person's remembered facts, which lookup assists search before the knowledge base (None: none)."""
    lessons: tuple[Lesson, ...] = ()
    """The person's kept routing lessons (``coe feedback --route-to``): experts consulted by an assist are routed
    with them, as the slots were."""
    earlier_task: str = ""
    """The task of the turn ``memory`` comes from (a follow-up's plain prompt replays that exchange)."""
    others: tuple[str, ...] = ()
    """The titles of the plan's other slots: a section of this slot's answer titled as one of them is cut (a
    diagnosis slot given the whole task wrote "2. Propose indexes", "3. Rewrite the query" ..., the plan's next
    slots, word for word)."""
    feedback: tuple[str, ...] = ()
    """What a completion round told this part about its earlier answer (also among ``constraints``): its wording
    is the harness's, never the answer's content (``contract.leaks``)."""
    task_figures: tuple[Figure, ...] = ()
    """The task's figures two programs confirmed (:mod:`engine.figures`): a lookup assist that asks for one of
    them is filled from them (the catering quote asked the empty knowledge base for the 2,762.50 it was given)."""
    figures_task: bool = False
    """The run computes the task's figures (:func:`engine.figures.wants_figures`): the slot's arithmetic is computed
    as a math slot's is (:mod:`engine.slots.inline_arithmetic`)."""
    beside: Mapping[str, SlotResult] = field(default_factory=dict)
    """The run's other finished slots, by id: their Python modules are written beside this slot's code in the
    sandbox, so its tests may import a part it does not reference (checks only: never in the prompt)."""
    memory: Mapping[str, tuple[str, SlotResult]] = field(default_factory=dict)
    """The thread's previous turn (a follow-up run): reference id -> (title, result), shown to every slot like a
    referenced slot (read-only data; cut to its outline, then left out, like any reference that does not fit)."""

    @property
    def slot_contract(self) -> Contract:
        """The contract this slot's answers are held to."""
        return self.contract if self.contract is not None else contract_for(self.spec, self.expert)

    @property
    def whole_task(self) -> bool:
        """The slot is the whole task (a one-slot run): its prompt is the task as the person wrote it."""
        return self.spec.description.strip() == self.task.strip()
