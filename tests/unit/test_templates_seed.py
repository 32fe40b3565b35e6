"""The shipped template vectors: a new install's first run reads them instead of embedding the library."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from experts.catalog import load_catalog
from experts.embedding import get_embedder
from experts.embedding.encoder import BertSentenceEncoder
from experts.routing import templates as templates_module
from experts.routing.templates import content_hash, library_dir, load_or_build, seed_path
from state.template import Template, load_library
from tests.conftest import KeywordEmbedder


def _shipped() -> tuple[dict[str, Template], BertSentenceEncoder]:
    encoder = get_embedder("onnx")
    assert isinstance(encoder, BertSentenceEncoder)
    return load_library([library_dir()], tuple(load_catalog().ids)).templates, encoder


def test_the_shipped_seed_is_the_shipped_library_s_vectors() -> None:
    """Regenerate with ``templates_module.write_seed(*_shipped())`` after changing a shipped template."""
    templates, encoder = _shipped()
    path = seed_path(encoder, content_hash(templates, encoder))
    assert path is not None and path.is_file(), f"no shipped template vectors at {path}: run write_seed"
    assert len(list(path.parent.glob("templates-onnx-*.npy"))) == 1  # old seeds are removed, not shipped
    fresh = encoder.encode([templates[t].retrieval_text() for t in sorted(templates)])
    np.testing.assert_allclose(np.load(path), fresh, atol=1e-5)  # another CPU rounds the last bits differently


def test_a_first_run_reads_the_seed_and_embeds_no_template(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    templates, encoder = _shipped()

    def refuse(texts: list[str]) -> Any:
        raise AssertionError(f"embedded {len(texts)} templates")

    with monkeypatch.context() as patch:
        patch.setattr(encoder, "encode", refuse)
        index = load_or_build(templates, encoder, tmp_path / "index")
    assert index.built and index.directory == tmp_path / "index" and len(index.ids) == len(templates)
    task = "Write a REST API in Flask with its tests and a migration plan"
    monkeypatch.setattr(templates_module, "seed_path", lambda _embedder, _content: None)
    embedded = load_or_build(templates, encoder, tmp_path / "embedded")
    assert [h.template_id for h in index.search(task)] == [h.template_id for h in embedded.search(task)]
    monkeypatch.undo()
    again = load_or_build(templates, encoder, tmp_path / "index")
    assert not again.built  # and the cache it wrote is read next time


def test_a_changed_library_is_embedded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    templates, encoder = _shipped()
    first = sorted(templates)[0]
    changed = {**templates, first: templates[first].model_copy(update={"description": "Something else entirely."})}
    calls: list[int] = []
    real = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda texts: calls.append(len(texts)) or real(texts))
    index = load_or_build(changed, encoder, tmp_path / "index")
    assert calls == [len(changed)] and index.built


def test_no_seed_ships_for_another_encoder(tmp_path: Path) -> None:
    keyword = KeywordEmbedder()
    assert seed_path(keyword, "0" * 64) is None
    with pytest.raises(ValueError, match="no template vectors ship"):
        templates_module.write_seed({}, keyword)
