"""What the checks read besides the answer."""

from __future__ import annotations

from collections.abc import Mapping
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
    modules: Mapping[str, str] = field(default_factory=dict)
    """The run's Python modules this answer may import, by the name each is delivered under (a referenced code
    slot's module: :func:`engine.slots.checks.code.python_modules`): written beside it in the sandbox."""
    module: str | None = None
    """This slot's own module name as the run delivers it (its tests may import it by that name)."""
    asked: str = ""
    """What the slot itself was asked for (its description): a part asked for an OpenAPI document must give one."""
    part_of_plan: bool = False
    """The slot is one part of a plan of several: what it must deliver is what it was ``asked``, not all the task
    asks (its implementation part need not hold the tests another part writes)."""
    feedback: tuple[str, ...] = ()
    """What the harness told this draw about earlier answers (retry feedback, a completion round's feedback): its
    wording must not come back as the answer's content."""
    bounded: bool = False
    """The answer was written under the contract's grammar, which ends a section at its most lines: a section that
    fills them was cut there (``contract.bound``). A plain draw has no such bound."""
