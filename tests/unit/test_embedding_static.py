"""The static token table distilled from the sentence encoder (the router's first stage)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import experts.embedding.static as static_module
from experts.embedding import BertSentenceEncoder, default_model_dir, get_embedder
from experts.embedding.static import TABLE_VERSION, StaticEmbedder, distil_table, static_weights
from state.errors import ConfigError


class CountingEncoder(BertSentenceEncoder):
    """The real tokenizer with a cheap encoder: a fixed random vector per middle token, plus a common part."""

    backend = "counting"

    def __init__(self, model_dir: Path, model_id: str = "counting-test:384d") -> None:
        super().__init__(model_dir)
        self.model_id = model_id
        self.rows = np.random.default_rng(7).standard_normal((self.vocab_size, self.dim)).astype(np.float32)
        self.calls = 0

    def _embed(self, tokens: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> np.ndarray:
        self.calls += 1
        pooled = self.rows[tokens].mean(axis=1) + 3.0  # the same [CLS]/[SEP] context in every row: a common part
        out: np.ndarray = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out


@pytest.fixture
def encoder() -> CountingEncoder:
    return CountingEncoder(default_model_dir())


def test_the_table_is_every_token_in_cls_sep_context_centred_and_weighted(
    encoder: CountingEncoder, tmp_path: Path
) -> None:
    raw = distil_table(encoder)
    cls_id, sep_id = encoder.special_ids()
    for token in (0, 1000, 2023, encoder.vocab_size - 1):
        alone = encoder.embed_ids(np.array([[cls_id, token, sep_id]]), np.ones((1, 3), dtype=np.int64))
        np.testing.assert_allclose(raw[token], alone[0], atol=1e-6)
    static = StaticEmbedder(encoder, cache=tmp_path)
    expected = (raw - raw.mean(axis=0)) * static_weights(encoder.vocab_size)[:, None]
    np.testing.assert_allclose(np.asarray(static._table), expected, atol=1e-6)
    assert abs(np.asarray(static._table).mean(axis=0)).max() < 1e-3  # the common part is gone


def test_a_text_is_the_normalised_sum_of_its_tokens_rows(encoder: CountingEncoder, tmp_path: Path) -> None:
    static = StaticEmbedder(encoder, cache=tmp_path)
    texts = ["Write a Python script that analyses medical records", "Draft a disclaimer", "x"]
    vectors = static.encode(texts)
    table = np.asarray(static._table)
    for text, vector in zip(texts, vectors, strict=True):
        (all_ids,) = encoder.token_ids([text])
        ids = [i for i in all_ids if i not in encoder.special_ids()]
        total = table[ids].sum(axis=0)
        np.testing.assert_allclose(vector, total / np.linalg.norm(total), atol=1e-5)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(static.encode(texts[:1]), vectors[:1])  # a batch changes no text's vector
    assert static.encode([]).shape == (0, 384)
    assert static.model_id == f"counting-test:384d:static-v{TABLE_VERSION}" and static.dim == 384


def test_the_table_is_cached_and_rebuilt_when_damaged_or_for_another_model(
    encoder: CountingEncoder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = StaticEmbedder(encoder, cache=tmp_path)
    built_calls = encoder.calls
    assert built_calls > 0 and first.path.parent == tmp_path and first.path.is_file()
    again = StaticEmbedder(encoder, cache=tmp_path)
    assert encoder.calls == built_calls  # read from the cache, not distilled again
    assert np.array_equal(again.encode(["a routing query"]), first.encode(["a routing query"]))

    np.save(first.path, np.zeros((3, 384), dtype=np.float32))  # wrong shape
    with caplog.at_level(logging.WARNING, logger="experts.embedding.static"):
        repaired = StaticEmbedder(encoder, cache=tmp_path)
    assert "has shape (3, 384)" in caplog.text and encoder.calls > built_calls
    assert np.array_equal(repaired.encode(["a routing query"]), first.encode(["a routing query"]))

    first.path.write_bytes(b"not a numpy file")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="experts.embedding.static"):
        StaticEmbedder(encoder, cache=tmp_path)
    assert "cannot be read" in caplog.text

    other = StaticEmbedder(CountingEncoder(default_model_dir(), model_id="another:384d"), cache=tmp_path)
    assert other.path != first.path and len(list(tmp_path.glob("static-table-*.npy"))) == 2


def test_an_unwritable_cache_leaves_the_table_in_memory(
    encoder: CountingEncoder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory should be")
    with caplog.at_level(logging.WARNING, logger="experts.embedding.static"):
        static = StaticEmbedder(encoder, cache=blocked / "cache")
    assert "cannot cache the static token table" in caplog.text
    assert static.encode(["still works"]).shape == (1, 384)


def test_the_real_static_vectors_keep_the_encoder_s_neighbourhoods() -> None:
    """The distilled table of the bundled model: related requests are closer than unrelated ones."""
    encoder = get_embedder("onnx")
    assert isinstance(encoder, BertSentenceEncoder)
    static = StaticEmbedder(encoder)
    python, sql, poem = static.encode(
        [
            "Write a Python function that parses a CSV file",
            "Write a Python script that reads rows from a CSV file",
            "Compose a short poem about autumn leaves",
        ]
    )
    assert float(python @ sql) > float(python @ poem) + 0.2


def test_with_a_shipped_mean_rows_are_made_as_texts_need_them(
    encoder: CountingEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = StaticEmbedder(encoder, cache=tmp_path / "whole")
    texts = ["Write a Python function that checks whether a string is a palindrome", "Draft a disclaimer"]
    expected = whole.encode(texts)

    monkeypatch.setattr(static_module, "centre_path", lambda _encoder: tmp_path / "centre.npy")
    static_module.write_centre(encoder)
    np.testing.assert_array_equal(np.load(tmp_path / "centre.npy"), distil_table(encoder).mean(axis=0))
    encoder.calls = 0
    lazy = StaticEmbedder(encoder, cache=tmp_path / "lazy")
    assert encoder.calls == 0 and not lazy.path.exists()  # nothing distilled, nothing written
    np.testing.assert_allclose(lazy.encode(texts), expected, atol=1e-6)
    assert encoder.calls == 1  # one encoder call for every token of both texts
    tokens = {i for ids in encoder.token_ids(texts) for i in ids} - set(encoder.special_ids())
    assert lazy._made is not None and set(np.flatnonzero(lazy._made)) == tokens
    lazy.encode(texts[:1])
    assert encoder.calls == 1  # rows made once
    np.testing.assert_allclose(
        np.asarray(lazy._table)[sorted(tokens)], np.asarray(whole._table)[sorted(tokens)], atol=1e-6
    )


def test_a_damaged_shipped_mean_falls_back_to_the_whole_table(
    encoder: CountingEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    centre = tmp_path / "centre.npy"
    monkeypatch.setattr(static_module, "centre_path", lambda _encoder: centre)
    np.save(centre, np.full(384, np.nan, dtype=np.float32))
    with caplog.at_level(logging.WARNING, logger="experts.embedding.static"):
        static = StaticEmbedder(encoder, cache=tmp_path / "cache")
    assert "is not 384 finite floats" in caplog.text and static._made is None and static.path.is_file()


def test_no_mean_ships_for_a_user_s_own_model(encoder: CountingEncoder) -> None:
    assert static_module.centre_path(encoder) is None  # another backend
    with pytest.raises(ConfigError, match="no mean ships"):
        static_module.write_centre(encoder)


def test_the_shipped_mean_is_the_bundled_encoder_s_whole_table_mean(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The file beside the code is what distilling every row gives (regenerate: ``write_centre(get_embedder())``)."""
    encoder = get_embedder("onnx")
    assert isinstance(encoder, BertSentenceEncoder)
    shipped = static_module.centre_path(encoder)
    assert shipped is not None and shipped.is_file(), f"no shipped mean at {shipped}: run write_centre"
    lazy = StaticEmbedder(encoder, cache=tmp_path)
    assert lazy._made is not None  # with no whole table cached, the bundled encoder makes rows on demand
    with monkeypatch.context() as patch:
        patch.setattr(static_module, "centre_path", lambda _encoder: None)
        whole = StaticEmbedder(encoder)  # distilled whole once into the model cache, read from it after
    texts = ["Write a Python function that parses a CSV file", "Compose a short poem about autumn leaves"]
    np.testing.assert_allclose(lazy.encode(texts), whole.encode(texts), atol=1e-6)
    made = np.flatnonzero(lazy._made)
    # a row is (raw - mean) * weight in both, so equal rows over all 384 dimensions mean equal means
    np.testing.assert_allclose(np.asarray(lazy._table)[made], np.asarray(whole._table)[made], atol=1e-6)
