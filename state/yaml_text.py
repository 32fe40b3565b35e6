"""YAML read with libyaml's parser where PyYAML has it.

The template library, the expert scopes and the other configuration files are read on every run. PyYAML's pure
Python loader took 0.58 s for the 40 shipped files on this machine, its C loader (``CSafeLoader``, libyaml, which
PyYAML's wheels include) 0.06 s for the same data; both are safe loaders and build the same objects from every
shipped file (docs/decisions/harness.md). Without libyaml the pure Python loader is used.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["safe_load"]

_LOADER: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


def safe_load(text: str) -> Any:
    """The one YAML document in ``text``, as :func:`yaml.safe_load` reads it; errors are :class:`yaml.YAMLError`."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader, C or Python
