"""What the checks read besides the answer."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.slots.contracts import Contract
from engine.slots.sandbox import SandboxLimits


@dataclass(frozen=True)
class CheckContext:
    """What the checks need besides the answer: the task, the contract, what the slot may read, the limits."""

    task: str
    contract: Contract
    references: tuple[str, ...] = ()
    """The texts of the slots this one references (an answer must not just copy them)."""
    truncated: bool = False
    """The generation stopped at its token limit."""
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    persona: str = ""
    """The expert's persona (the system prompt's first part): its lines must not come back as the answer."""
