"""How good a slot's answer is: the checks it passed, the candidates it was chosen from, and the caveat it carries.

Every slot answer is checked for what it delivers (:data:`state.framework.Deliverable`): code is parsed and run
in a sandbox against the task's examples and the expert's own tests, SQL is parsed, prose is screened for
degenerate repetition, stubs and copies. When the first answer fails a check, more candidates are drawn and
the best is kept verbatim (selection, never synthesis). :class:`SlotQuality` is the record of all of it, kept
with the result in the Passport and shown in the ledger; a slot whose kept answer still fails a hard check is
delivered with its :attr:`SlotQuality.caveat` in the document.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from state.framework import Deliverable

__all__ = ["PACKAGES_CHECK", "CandidateRecord", "CheckResult", "SlotQuality"]

Severity = Literal["hard", "soft"]
"""A hard check failing means the answer is wrong or unusable as delivered (code that does not run, a
degenerate text); a soft one means it could be better (lint, hedges)."""


_BRACES = re.compile(r"\{\{\s*(.*?)\s*\}\}")


def unbraced(text: str) -> str:
    """``text`` with every ``{{...}}`` shown without its braces.

    A caveat or a warning that quotes a placeholder ("it copies the protocol's example placeholder
    ('{{ASSIST:user:the detail}}')") must not put one in the document, whose placeholders are all resolved or listed.
    """
    return _BRACES.sub(r"\1", text)


TESTS_CHECK = "python.tests"
"""The soft check that runs the answer's own tests against its code: a small model's tests are often wrong where its
code is right, so it ranks candidates and rejects none, and the caveat says when the tests delivered fail."""
PACKAGES_CHECK = "python.packages"
"""The soft check that says which packages the code imports that the sandbox does not have (what could not be
checked): it fails nothing, and the caveat names them."""


class CheckResult(BaseModel):
    """One automated check of one answer."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """``<kind>.<check>``, e.g. ``python.parses``, ``python.examples``, ``prose.repetition``."""
    passed: bool
    severity: Severity = "hard"
    detail: str = ""
    """What failed (the first error, the repeated sentence), or what was checked."""
    score: float = Field(default=1.0, ge=0.0, le=1.0)
    """The share that passed, for checks of several parts (examples: 3 of 4 -> 0.75)."""


class CandidateRecord(BaseModel):
    """One answer drawn for a slot, how it was drawn and how it scored."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """``c1``, ``c2``, ... in the order drawn."""
    origin: Literal["first", "retry", "sample", "escalated"]
    """first: the greedy answer; retry: a fresh prompt carrying what was wrong; sample: another draw at a higher
    temperature; escalated: drawn by a bigger model than the expert's own."""
    prompt: Literal["contract", "plain"] = "contract"
    """contract: the expert's prompt (persona, output contract, grammar); plain: the task alone, as the person wrote
    it, the code block of the answer put in the contract's shape by the harness (code slots of one-slot runs)."""
    model: str = "base"
    temperature: float = 0.0
    seed: int = 0
    compliant: bool = False
    """It followed the output contract."""
    problems: list[str] = Field(default_factory=list)
    """How it broke the contract (the retry feedback names these)."""
    checks: list[CheckResult] = Field(default_factory=list)
    score: float = 0.0
    """The selection score (higher is better): hard checks passed first, then the share of examples passed,
    then soft checks; see ``engine.slots.selection``."""
    completion_tokens: int = 0
    seconds: float = 0.0
    chosen: bool = False


class SlotQuality(BaseModel):
    """The confidence vector of a slot: what it delivers, how its kept answer was checked and chosen."""

    model_config = ConfigDict(extra="forbid")

    deliverable: Deliverable
    language: str | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    """The checks of the kept answer."""
    signals: dict[str, float] = Field(default_factory=dict)
    """Measured, not judged: hedges, words, distinct-sentence ratio, references copied."""
    candidates: list[CandidateRecord] = Field(default_factory=list)
    chosen: str | None = None
    """The id of the kept candidate."""
    judged: bool = False
    """A judge prompt broke a tie between candidates with the same check score."""
    tokens_generated: int = 0
    tokens_kept: int = 0

    @property
    def passed(self) -> bool:
        """Every hard check of the kept answer passed."""
        return all(c.passed for c in self.checks if c.severity == "hard")

    @property
    def failed_checks(self) -> list[CheckResult]:
        """The hard checks the kept answer failed."""
        return [c for c in self.checks if c.severity == "hard" and not c.passed]

    @property
    def caveat(self) -> str | None:
        """One line for the document when the kept answer fails a hard check or could not be fully checked.

        Not fully checked: the sandbox lacks a package the code imports (:data:`PACKAGES_CHECK`). Its tests fail: the
        tests it delivers fail against its code (:data:`TESTS_CHECK`; multipart_set3_first's car park fee: "assert
        parking_fee(31) == 2.50", where its code returned 0, delivered with no word). None when the answer passes
        and was checked.
        """
        failed = self.failed_checks
        lacking = [c.detail for c in self.checks if c.name == PACKAGES_CHECK and c.detail]
        tests = [
            c.detail
            for c in self.checks
            if c.name == TESTS_CHECK and c.severity == "soft" and not c.passed and "not installed" not in c.detail
        ]
        if not failed and not lacking and not tests:
            return None
        listed = "; ".join(f"{c.name}: {c.detail}" if c.detail else c.name for c in failed[:3])
        said = [f"This part did not pass its checks ({listed}); review it before use."] if failed else []
        said += [f"Its tests fail against its code ({tests[0]}): the code or the tests are wrong."] if tests else []
        said += [f"Not fully checked ({lacking[0]})."] if lacking else []
        # a placeholder a detail quotes ("it repeats the prompt's own text ('{{ASSIST:user:the detail}}')") is
        # shown without its braces: the document's placeholders are all resolved or listed, and this is neither
        return unbraced(" ".join(said))
