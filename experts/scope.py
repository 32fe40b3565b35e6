"""Trivial-task detection: a greeting, a definition, a unit conversion needs no experts and no plan.

A task is trivial when it is short (at most :data:`MAX_WORDS` words) and closer to the trivial-request
prototypes of ``config/trivial_prototypes.yaml`` than to any template of the library by at least
:data:`MARGIN` (cosine similarity, same embedder as routing and retrieval). Both numbers come from the
calibration in ``bench/bench_scope.py``; the decision records the similarities it was made on.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import yaml

from experts.catalog import config_dir
from experts.embedding import Embedder, Vectors, check_vectors
from experts.template_index import TemplateIndex
from state.errors import ConfigError
from state.scope import ScopeDecision

__all__ = ["MARGIN", "MAX_WORDS", "classify", "prototypes_path"]

MAX_WORDS = 10
MARGIN = -0.05

_cache: dict[tuple[str, str], Vectors] = {}
_lock = threading.Lock()


def prototypes_path() -> Path:
    """The prototype file (``config/trivial_prototypes.yaml``)."""
    return config_dir() / "trivial_prototypes.yaml"


def _prototype_vectors(embedder: Embedder, path: Path) -> Vectors:
    key = (str(path), embedder.model_id)
    with _lock:
        cached = _cache.get(key)
        if cached is None:
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                raise ConfigError(str(path), f"cannot read the trivial-request prototypes: {exc}") from exc
            lines = data.get("prototypes") if isinstance(data, dict) else None
            if not isinstance(lines, list) or not lines or not all(isinstance(x, str) and x.strip() for x in lines):
                raise ConfigError(str(path), "must have a non-empty list of strings", field="prototypes")
            cached = check_vectors(embedder.encode([str(x) for x in lines]), embedder.dim, f"{path} prototypes")
            _cache[key] = cached
        return cached


def classify(
    task: str,
    embedder: Embedder,
    templates: TemplateIndex | None,
    *,
    max_words: int = MAX_WORDS,
    margin: float = MARGIN,
    path: Path | None = None,
) -> ScopeDecision:
    """Decide whether ``task`` is trivial; the decision says on which similarities."""
    words = len(task.split())
    vector = embedder.encode([task])
    trivial = float(np.max(_prototype_vectors(embedder, path or prototypes_path()) @ vector[0]))
    template = templates.search_vectors(vector, 1)[0][0].similarity if templates is not None else 0.0
    if words > max_words:
        kind, reason = "task", f"{words} words: longer than a trivial request ({max_words})"
    elif trivial >= template + margin:
        kind, reason = "trivial", f"closer to a trivial request ({trivial:.3f}) than to any template ({template:.3f})"
    else:
        kind, reason = "task", f"a template fits at least as well ({template:.3f}) as a trivial request ({trivial:.3f})"
    return ScopeDecision(
        kind=kind,
        words=words,
        trivial_similarity=round(trivial, 4),
        template_similarity=template,
        reason=reason,
    )
