"""The static token table distilled from the sentence encoder (the router's first stage)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from experts.embedding import BertSentenceEncoder, default_model_dir, get_embedder
from experts.embedding.static import TABLE_VERSION, StaticEmbedder, distil_table, static_weights


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
