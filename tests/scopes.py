"""A copy of the shipped catalog with some experts made personas over the base model.

Every shipped expert has a model of its own since 2026-12-07 (docs/models.md); a test of what runs on the base
model beside a true expert points ``COE_EXPERT_SCOPES`` at such a copy, as a user's catalog may.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

SHIPPED = Path(__file__).resolve().parents[1] / "config" / "expert_scopes"


def scopes_with_models(directory: Path, models: dict[str, dict[str, Any]]) -> Path:
    """The shipped catalog copied to ``directory/scopes``, each expert of ``models`` given that ``model`` block."""
    target = directory / "scopes"
    shutil.copytree(SHIPPED, target)
    for expert, model in models.items():
        path = target / f"{expert}.yaml"
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        doc["model"] = model
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return target


def persona_scopes(directory: Path, *experts: str) -> Path:
    """The shipped catalog copied to ``directory/scopes``, with ``experts`` bound ``faux``; its path."""
    return scopes_with_models(directory, {expert: {"binding": "faux"} for expert in experts})
