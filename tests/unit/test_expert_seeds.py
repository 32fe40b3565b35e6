"""The shipped experts' vectors: a new install's first run reads them instead of embedding every scope line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from experts.catalog.scopes import Catalog, load_shipped
from experts.embedding import get_embedder
from experts.embedding.encoder import BertSentenceEncoder, Embedder
from experts.embedding.static import StaticEmbedder
from experts.routing.index import SEED_DIR, ExpertVectorCache, load_or_build_index, write_expert_seeds
from tests.conftest import KeywordEmbedder


def _shipped() -> tuple[Catalog, BertSentenceEncoder]:
    encoder = get_embedder("onnx")
    assert isinstance(encoder, BertSentenceEncoder)
    return load_shipped(), encoder


def _refuse(texts: list[str]) -> Any:
    raise AssertionError(f"embedded {len(texts)} scope lines")


@pytest.mark.parametrize("static", [False, True], ids=["encoder", "static table"])
def test_every_shipped_expert_has_its_vectors(static: bool) -> None:
    """Regenerate with ``write_expert_seeds(load_shipped(), get_embedder("onnx"))`` after editing a scope's lines,
    and with ``StaticEmbedder(get_embedder("onnx"))`` for the router's first stage."""
    catalog, encoder = _shipped()
    embedder: Embedder = StaticEmbedder(encoder) if static else encoder
    cache = ExpertVectorCache(None)
    paths = [cache.seed_path(embedder, cache.key(embedder, s.capabilities, s.exclusions)) for s in catalog]
    stale = [s.id for s, p in zip(catalog, paths, strict=True) if p is None or not p.is_file()]
    assert not stale, f"no shipped vectors for {stale}: run write_expert_seeds"
    assert len(list(SEED_DIR.glob(f"expert-{embedder.backend}-*.npy"))) == len(catalog)  # old seeds removed
    fresh = embedder.encode([line for s in catalog for line in s.capabilities + s.exclusions])
    shipped = np.concatenate([np.load(p) for p in paths if p is not None])
    np.testing.assert_allclose(shipped, fresh, atol=1e-5)  # another CPU rounds the last bits differently


def test_a_first_run_reads_the_seeds_and_embeds_no_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    catalog, encoder = _shipped()
    with monkeypatch.context() as patch:
        patch.setattr(encoder, "encode", _refuse)
        index = load_or_build_index(catalog, encoder, tmp_path / "seeded")
    assert index.built and index.embedded_experts == 0 and index.expert_ids == catalog.ids
    embedded = load_or_build_index(catalog, encoder, tmp_path / "embedded", probe=index.probe)
    np.testing.assert_allclose(index.capability.vectors, embedded.capability.vectors, atol=1e-5)
    np.testing.assert_allclose(index.exclusion.vectors, embedded.exclusion.vectors, atol=1e-5)
    with monkeypatch.context() as patch:
        patch.setattr(ExpertVectorCache, "seed_path", lambda *_: None)
        again = load_or_build_index(catalog, encoder, tmp_path / "seeded")
    assert not again.built  # the index it wrote is read next time


def test_the_routers_first_stage_reads_its_seeds_on_a_first_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    catalog, encoder = _shipped()
    static = StaticEmbedder(encoder, cache=tmp_path / "models")  # a new model cache: rows made on demand
    with monkeypatch.context() as patch:
        patch.setattr(static, "encode", _refuse)
        index = load_or_build_index(catalog, static, tmp_path / "seeded", part="static")
    assert index.built and index.embedded_experts == 0


def test_an_edited_expert_alone_is_embedded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    catalog, encoder = _shipped()
    first = catalog.ids[0]
    edited = catalog.experts[first].model_copy(update={"capability_scope": "Plan the seating of a wedding reception"})
    changed = replace(catalog, experts={**catalog.experts, first: edited})
    calls: list[int] = []
    real = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda texts: calls.append(len(texts)) or real(texts))
    index = load_or_build_index(changed, encoder, tmp_path / "index")
    assert calls == [1 + len(edited.exclusions)] and index.embedded_experts == 1


def test_no_seed_ships_for_another_encoder(tmp_path: Path) -> None:
    keyword = KeywordEmbedder()
    cache = ExpertVectorCache(None)
    assert cache.seed_path(keyword, "0" * 64) is None
    with pytest.raises(ValueError, match="no expert vectors ship"):
        write_expert_seeds(load_shipped(), keyword, tmp_path)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())
