"""Template retrieval and adaptation on the real default model: whatever the model writes, what runs is valid."""

from __future__ import annotations

import pytest

from engine.planning.adaptation import adapt
from experts.backends.llama import LlamaBackend
from experts.catalog import load_catalog
from experts.embedding import get_embedder
from experts.pool.pooled import get_backend
from experts.routing.templates import load_or_build
from state.context import resolve_settings
from state.framework import validation_errors
from state.paths import config_dir
from state.template import load_library

pytestmark = pytest.mark.model


def test_default_model_adapts_a_retrieved_template_to_a_valid_framework() -> None:
    catalog = load_catalog()
    library = load_library([config_dir() / "framework_templates"], catalog.ids).templates
    task = "Write a migration plan from MySQL 5.7 to PostgreSQL 16 for our billing database"
    hit = load_or_build(library, get_embedder()).search(task, 3)
    assert hit[0].template_id in {"legacy_modernisation_migration", "database_migration_plan"}
    backend = get_backend(resolve_settings({"backend": "llama"}, env={}))
    assert isinstance(backend.backend, LlamaBackend) and backend.supports_grammar()
    template = library[hit[0].template_id]
    fw, record = adapt(template, hit[0].similarity, task, backend, list(catalog.ids))
    assert validation_errors(fw) == []
    assert record.seed_id == template.id and 1 <= len(record.attempts) <= 3
    if record.fallback == "none":
        # the grammar made the answer parse, and the plan was applied to this template
        last = record.attempts[-1]
        assert last.plan is not None and last.errors == []
        assert fw.source == f"template:{template.id} (adapted)"
        assert all(op.slot in {s.id for s in template.slots} for op in record.operations if op.slot)
    else:
        assert record.fallback == "seed" and fw.source == f"template:{template.id}"
