"""Which draw of a slot comes next: rules over the earlier draws, data in and a decision out.

A slot draws a first answer, then more only while none passes its hard checks and a budget is left: retries
with feedback for answers that break the output contract, samples for compliant ones that fail a check, all
within a time bound against the first answer; at the end, one candidate may come from a bigger model. A slot
that is the whole task also draws *plain* candidates (the task alone, the prompt the bare model gets). The
policy decides; :mod:`engine.slots.run` draws, checks and times. Nothing here calls a backend or reads a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["RUNNABLE_EXAMPLES_DRAWS", "SAMPLE_TEMPERATURES", "DrawPolicy", "Drawn", "NextDraw", "Origin", "PromptKind"]

PromptKind = Literal["plain", "contract"]
Origin = Literal["first", "retry", "sample", "escalated"]

SAMPLE_TEMPERATURES = (0.3, 0.5, 0.7)
"""Temperatures of the extra candidates, in turn (never below the expert's own)."""
RUNNABLE_EXAMPLES_DRAWS = 3
"""A code slot whose task gives examples that run may draw this many times ``best_of`` candidates, in this many times
the time: its check is a real reward (HumanEval/10's fifth candidate was the first to pass; at twice, /54 and /98
were stopped by the time limit at their sixth and failed, at three times they passed; docs/decisions.md)."""


@dataclass(frozen=True)
class Drawn:
    """What the policy reads of an earlier draw."""

    prompt: PromptKind
    origin: Origin
    score: float
    compliant: bool
    """It follows the output contract (else its next draw is a retry, not a sample)."""
    passes: bool
    """It passes every hard check: drawing stops."""
    loops: bool = False
    """Its text is degenerate (the repetition check failed)."""
    seconds: float = 0.0
    """How long it took to draw (the first draw's sets the time bound)."""


@dataclass(frozen=True)
class NextDraw:
    """The next draw: its prompt, why it is drawn, at what temperature, and whose problems its prompt names."""

    prompt: PromptKind
    origin: Origin
    temperature: float
    feedback_from: int | None = None
    """The index of the earlier draw whose problems the prompt names (None: no feedback)."""

    @property
    def model(self) -> Literal["own", "escalation"]:
        """The expert's own model, or the bigger one escalation draws from."""
        return "escalation" if self.origin == "escalated" else "own"


@dataclass(frozen=True, kw_only=True)
class DrawPolicy:
    """A slot's budgets and prompt rules; :meth:`next` says which draw comes next."""

    temperature: float
    """The expert's temperature: a contract prompt's first draw, and the floor of every sample."""
    two_prompts: bool
    """The slot is the whole task: plain candidates are drawn beside the contract's."""
    plain_first: bool
    """(Two prompts) the task hands over one function: the plain prompt is drawn first (measured on HumanEval)."""
    alternate: bool
    """(Two prompts) code and data: the kinds alternate from the first draw. Else (prose, plans, tables) a plain
    answer is drawn only once a contract answer loops (only the contract's prompt carries the uncertainty
    protocol), then the kinds alternate."""
    best_of: int
    """Candidates in all for a compliant answer that fails a hard check."""
    outline_retries: int
    """Fresh-prompt retries for answers that break the output contract."""
    runnable_examples: bool
    """The task's examples run against the code: :data:`RUNNABLE_EXAMPLES_DRAWS` times the samples and the time."""
    time_factor: float
    """Drawing stops once the candidates took this many times the first answer's seconds (at least one second)."""
    escalation: bool
    """A bigger model may draw one last candidate when the best one still fails."""

    def next(self, earlier: Sequence[Drawn], spent_s: float = 0.0) -> NextDraw | None:
        """The next draw after ``earlier`` (None: stop), ``spent_s`` seconds after the first draw started."""
        if not earlier:
            prompt = self._prompt(earlier)
            return NextDraw(prompt, "first", self._temperature(prompt, earlier))
        if earlier[-1].origin == "escalated":
            return None
        lead = max(range(len(earlier)), key=lambda i: earlier[i].score)  # the earliest of the best
        leader = earlier[lead]
        if self._goes_on(earlier, leader, spent_s):
            prompt = self._prompt(earlier)
            origin: Origin = "sample" if leader.compliant else "retry"
            feedback = None if prompt == "plain" else lead  # the plain prompt is the task alone
            return NextDraw(prompt, origin, self._temperature(prompt, earlier), feedback)
        if self.escalation and leader.compliant and not leader.passes:
            return NextDraw("contract", "escalated", 0.0, lead)
        return None

    @property
    def samples(self) -> int:
        """Samples after the first answer: ``best_of - 1``, more where the task's examples run."""
        extra = self.best_of * (RUNNABLE_EXAMPLES_DRAWS - 1) if self._runs_examples else 0
        return self.best_of - 1 + extra

    def time_limit(self, first_seconds: float) -> float:
        """Seconds the candidates may take, after the first answer took ``first_seconds``."""
        factor = self.time_factor * (RUNNABLE_EXAMPLES_DRAWS if self._runs_examples else 1)
        return factor * max(first_seconds, 1.0)

    @property
    def _runs_examples(self) -> bool:
        return self.best_of > 1 and self.runnable_examples

    def _goes_on(self, earlier: Sequence[Drawn], leader: Drawn, spent_s: float) -> bool:
        """Whether the loop of retries and samples draws once more (no candidate passes; budget and time left)."""
        if any(d.passes for d in earlier):
            return False
        if leader.compliant and self.samples - sum(d.origin == "sample" for d in earlier) <= 0:
            return False
        if not leader.compliant and self.outline_retries - sum(d.origin == "retry" for d in earlier) <= 0:
            return False
        return not (len(earlier) > 1 and spent_s > self.time_limit(earlier[0].seconds))

    def _prompt(self, earlier: Sequence[Drawn]) -> PromptKind:
        """The next draw's prompt kind."""
        if not self.two_prompts:
            return "contract"
        if self.alternate:
            plain = (len(earlier) % 2 == 0) == self.plain_first
        else:
            looped = next((i for i, d in enumerate(earlier) if d.prompt == "contract" and d.loops), None)
            plain = looped is not None and (len(earlier) - looped) % 2 == 1
        return "plain" if plain else "contract"

    def _temperature(self, prompt: PromptKind, earlier: Sequence[Drawn]) -> float:
        """A prompt's first draw at its opening temperature, later ones sampled (never below the expert's).

        The plain prompt opens greedy: its first answer is the bare model's own.
        """
        if not any(d.prompt == prompt for d in earlier):
            return 0.0 if prompt == "plain" else self.temperature
        sampled = len(earlier) - 2 if self.two_prompts else len(earlier) - 1
        return max(self.temperature, SAMPLE_TEMPERATURES[sampled % len(SAMPLE_TEMPERATURES)])
