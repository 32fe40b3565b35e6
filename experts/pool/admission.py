"""Admission of a slot to an expert: the circuit breaker it answers to, its server's health, the generalist.

A slot runs on its routed expert while that expert's breaker (its server's, for an expert with its own server)
lets it; when the breaker is open, it runs on the generalist instead, and that is recorded. The node asks
:func:`admit` before it dispatches a slot; the slot's worker tells the breaker how the run went
(:meth:`Admitted.report`, inside :meth:`Admitted.guard`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from experts.backends import Endpoint
from experts.pool.breaker import BreakerPolicy, breakers
from experts.pool.health import health_checks
from state.passport import LedgerEntry
from state.settings import Settings

__all__ = ["Admitted", "admit", "breaker_key"]

logger = logging.getLogger(__name__)


def breaker_key(expert: str, model: str | None) -> str:
    """The circuit breaker a slot of ``expert`` on ``model`` answers to: its server's when it has its own, else its own.

    Every expert on one server shares that server's breaker (``endpoint <url>``): a dead server is one fault,
    and the fallback, the generalist on the base model, runs elsewhere.
    """
    endpoint = Endpoint.parse(model)
    return f"endpoint {endpoint.url}" if endpoint is not None else expert


@dataclass(frozen=True)
class Admitted:
    """Where a slot runs, the breaker its outcome goes to, and what its admission found."""

    expert: str
    """The expert that runs the slot: the routed one, or the generalist when the routed one's breaker is open."""
    key: str
    """The breaker the slot's outcome is reported to (:func:`breaker_key`)."""
    trial: bool
    """The slot is its breaker's half-open trial."""
    policy: BreakerPolicy
    ledger: tuple[LedgerEntry, ...] = ()
    """The health check and the fallback the admission recorded, in order, for the run's ledger."""
    warning: str | None = None
    """Why the slot does not run where it was routed, or runs although its breaker is open (for the notices)."""

    def report(self, *, answered: bool, error: str | None, requeued: bool) -> None:
        """Tell the breaker how the slot's run went.

        A backend failure (no answer) counts against the expert; an answer, compliant or not, is a success; a slot
        stopped for memory and queued again is not the expert's fault and counts as neither.
        """
        if requeued:
            return
        if not answered:
            if breakers.record_failure(self.key, self.policy, error or "", trial=self.trial):
                logger.warning("%s: circuit breaker opened after: %s", self.key, error)
        else:
            breakers.record_success(self.key, trial=self.trial)

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Around a slot's run: a harness error (an exception) says nothing about the expert, a trial is just freed."""
        try:
            yield
        except BaseException:
            if self.trial:
                breakers.release_trial(self.key)
            raise


def admit(
    slot_id: str,
    expert: str,
    model: str | None,
    settings: Settings,
    policy: BreakerPolicy,
    generalist: str,
    generalist_model: Callable[[], str | None],
) -> Admitted:
    """Ask the slot's circuit breaker; when it is open, the slot goes to the ``generalist`` (recorded).

    A slot on an expert's own server checks the server's health first when a check is due. The routing decision
    stays the router's choice; the admission names the expert that really runs the slot. The generalist runs even
    when its own breaker is open (there is nothing to fall back to), also recorded. ``generalist_model`` is asked
    only when the slot falls back.
    """
    key = breaker_key(expert, model)
    checked = _check_health(slot_id, key, model, settings, policy)
    ledger = (checked,) if checked is not None else ()
    admission = breakers.admit(key, policy)
    if admission.allowed:
        return Admitted(expert, key, admission.trial, policy, ledger)
    whose = f"{expert}'s server ({key.removeprefix('endpoint ')})" if key != expert else expert
    detail = f"{whose}'s circuit breaker is {admission.state} ({admission.failures} failures in {policy.window_s:g} s)"
    if expert != generalist:
        general_key = breaker_key(generalist, generalist_model())
        general = breakers.admit(general_key, policy)
        message = f"{detail}; the slot runs on {generalist}"
        if not general.allowed:
            message += f" although its breaker is {general.state} too ({general.failures} failures)"
        action, runs, key, trial = "breaker_fallback", generalist, general_key, general.trial
    else:
        message = f"{detail}; it runs anyway: there is no other expert to fall back to"
        action, runs, trial = "breaker_ignored", expert, admission.trial
    logger.warning("slot %s: %s", slot_id, message)
    fallback = LedgerEntry(
        agent="harness", action=action, slot_id=slot_id, inputs_summary=expert, outputs_summary=message[:500]
    )
    return Admitted(runs, key, trial, policy, (*ledger, fallback), message)


def _check_health(
    slot_id: str, key: str, model: str | None, settings: Settings, policy: BreakerPolicy
) -> LedgerEntry | None:
    """Check an expert's own server when a check is due; the result opens or closes its breaker.

    A check that finds the server down, or that closes a breaker, is returned for the ledger (``health_check``).
    """
    endpoint = Endpoint.parse(model)
    if endpoint is None:
        return None
    health = health_checks.check(endpoint, settings.endpoint_health_s)
    if health is None or not health.fresh:
        return None
    before, after = breakers.record_health(key, policy, up=health.up, detail=health.detail)
    if health.up and before == after:
        return None
    summary = f"{endpoint.label} is {'up' if health.up else 'down'} ({health.detail}); breaker {before} -> {after}"
    if not health.up:
        logger.warning("slot %s: %s", slot_id, summary)
    return LedgerEntry(
        agent="harness", action="health_check", slot_id=slot_id, inputs_summary=key, outputs_summary=summary[:500]
    )
