"""Which model an expert (or the planner) runs on: the one place that decides it.

Routing records each slot's binding before any slot runs, execution runs the slot on it, an assist consults
an expert on it, and template adaptation asks the planner model on it. All four ask :func:`resolve_binding`:

* a faux expert (a persona) runs on the base model;
* a true expert with its own endpoint runs on that server (the binding's model is the endpoint's reference,
  :class:`experts.backends.endpoint.Endpoint`);
* a true expert runs on its own model when true experts are on and its model can be loaded; when the model
  is unavailable, its scope's ``fallback`` decides: ``base`` runs it as a persona over the base model (the
  binding says why, for a warning and the ledger), ``error`` makes the binding an error the caller raises;
* the planner runs on ``Settings.planner_model`` when it can be loaded, else on the base model (with why);
* a slot whose answers keep failing their checks may draw one last candidate from a bigger installed model
  (:func:`escalation_binding`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from experts.backends.endpoint import Endpoint
from experts.catalog.scopes import Catalog, ExpertScope
from experts.models.bundled import BUNDLED_MODELS, DEFAULT_MODEL
from experts.pool.pooled import model_unavailable
from state.settings import Settings

__all__ = ["Binding", "BindingKind", "escalation_binding", "prepare_models", "resolve_binding"]

logger = logging.getLogger(__name__)

BindingKind = Literal["faux", "true", "faux-fallback"]


@dataclass(frozen=True)
class Binding:
    """The model a role runs on (None: the base model), how it came to be, and why a fallback was taken."""

    model: str | None
    kind: BindingKind
    """faux (the base model by design), true (its own model) or faux-fallback (its own model is unavailable)."""
    problem: str | None = None
    """Why the role's own model is not used (faux-fallback, or an error when ``fatal``)."""
    fatal: bool = False
    """The scope says a missing model is an error (``fallback: error``): the caller fails instead of running."""

    @property
    def label(self) -> str:
        """``base model (faux)``, ``qwen2.5-coder-1.5b (true)``: for the ledger."""
        return f"{'base model' if self.model is None else self.model} ({self.kind})"


def resolve_binding(settings: Settings, expert: ExpertScope | None = None, *, model: str | None = None) -> Binding:
    """The binding of ``expert``, or, without one, of a role that asks for ``model`` (the planner).

    Args:
        settings: The run's settings (backend, true experts on or off).
        expert: The expert's scope document; its model binding and fallback policy decide.
        model: Without ``expert``: the model the role wants (a bundled name or GGUF path; None or "" for the
            base model). A role's missing model always falls back to the base model.
    """
    if expert is not None:
        own = expert.model
        if not expert.is_true_expert or (own.model is None and own.endpoint is None) or not settings.true_experts:
            return Binding(None, "faux")
        if own.endpoint is not None:  # its own server: reached over HTTP whatever the run's backend
            endpoint = Endpoint(own.endpoint.url, own.endpoint.model or own.model, own.endpoint.api_key_env)
            return Binding(endpoint.ref(), "true")
        assert own.model is not None
        wanted, fatal = own.model, own.fallback == "error"
    elif model:
        wanted, fatal = model, False
    else:
        return Binding(None, "faux")
    problem = model_unavailable(settings, wanted)
    if problem is None:
        return Binding(wanted, "true")
    return Binding(None, "faux-fallback", problem, fatal)


def escalation_binding(settings: Settings, catalog: Catalog, current: str | None) -> Binding | None:
    """The biggest installed model bigger than ``current`` (None: the base model), for a failing slot's last try.

    Candidates are the true experts' models of the catalog; a model counts as installed as
    :func:`resolve_binding` decides. None when escalation or true experts are off, or nothing bigger is installed.
    """
    if not settings.escalate or not settings.true_experts:
        return None
    here = _size(current if current is not None else settings.model_path)
    found: tuple[int, str] | None = None
    for name in _local_models(catalog):
        if name == current or model_unavailable(settings, name) is not None:
            continue
        size = _size(name)
        if size > here and (found is None or size > found[0]):
            found = (size, name)
    return Binding(found[1], "true") if found is not None else None


_prepared: set[str] = set()
"""Models whose files this process has verified (or is verifying) ahead of routing ("" is the base model)."""
_prepared_lock = threading.Lock()


def prepare_models(settings: Settings, catalog: Catalog) -> threading.Thread | None:
    """Verify, in a background thread, the model files the catalog's bindings name, so routing finds them ready.

    On a new install the first command assembles the 1.5B from its packages and hashes the 0.5B (2-5 s here);
    routing resolves each binding (:func:`resolve_binding`) and would do that work on the run's critical path,
    while one core sits idle under the single-threaded scope and planning. Started when a run begins, the
    verification overlaps them; routing then waits on the same lock (``experts.models.bundled``) and finds the
    file recorded. Later runs find every file recorded at once (a stat each). Nothing is loaded (loading the model
    most experts run on here as well cost more than it saved: ``docs/decisions/models.md``) and nothing is
    raised: a model that cannot be verified is reported where routing resolves it.

    The thread is not a daemon: an interpreter exiting mid-assembly waits for it (seconds) rather than leave a
    partial copy of a 1 GB file in the model cache.

    Returns:
        The started thread, or None when there is nothing to verify (not the llama backend, or every file already
        verified or being verified by this process).
    """
    if settings.backend != "llama":
        return None
    base = (settings.model_path or "").strip()  # "": the default bundled model
    wanted = [(settings.planner_model or "").strip() or base]
    if settings.true_experts:
        wanted += _local_models(catalog)
    wanted.append(base)  # last: most experts and the planner run on another model when one is installed
    with _prepared_lock:
        names = [m for m in dict.fromkeys(wanted) if m not in _prepared]
        if not names:
            return None
        _prepared.update(names)
    thread = threading.Thread(target=_prepare, args=(settings, names), name="coe-prepare-models")
    thread.start()
    return thread


def _prepare(settings: Settings, names: list[str]) -> None:
    for name in names:
        problem = model_unavailable(settings, name)
        if problem is not None:
            logger.info("model %s not prepared ahead of routing: %s", name or "(base)", problem)


def _local_models(catalog: Catalog) -> list[str]:
    """The models the catalog's true experts load here (bundled names or GGUF paths, not endpoints), once each."""
    local = (s.model.model for s in catalog if s.is_true_expert and s.model.model and s.model.endpoint is None)
    return [name for name in dict.fromkeys(local) if name is not None]


def _size(model: str | None) -> int:
    """The size of a model's file in bytes (bundled models by their registry; 0 when unknown)."""
    name = model or DEFAULT_MODEL
    if name in BUNDLED_MODELS:
        return BUNDLED_MODELS[name].size
    try:
        return Path(name).expanduser().stat().st_size
    except OSError:
        return 0
