"""The planner model's backend, for the nodes that ask it (``scope``'s second reading, ``adapt_template``).

``Settings.planner_model`` is resolved like any role's model (:func:`experts.catalog.resolve_binding`): when it is
not installed the base model stands in and :attr:`PlannerModel.problem` says why, so each node decides what the
stand-in is good for (templates are still adapted by it, with a warning; the scope is not read again by it,
since the base model's reading was measured no better than the deterministic pass alone).
"""

from __future__ import annotations

from dataclasses import dataclass

from experts.backends import ExpertBackend
from experts.catalog import resolve_binding
from experts.pool import get_backend
from state.settings import Settings

__all__ = ["PlannerModel", "planner_model"]


@dataclass(frozen=True)
class PlannerModel:
    """The backend that plans, the model it runs, and why the planner model itself is not it (None: it is)."""

    backend: ExpertBackend
    name: str
    problem: str | None


def planner_model(settings: Settings) -> PlannerModel:
    """The planner model when it is available, else the base model with the reason."""
    binding = resolve_binding(settings, model=settings.planner_model)
    return PlannerModel(get_backend(settings, binding.model), binding.model or "the base model", binding.problem)
