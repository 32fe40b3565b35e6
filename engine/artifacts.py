"""A run's code as files: each code or data slot's module (and its tests), so the result runs as delivered.

A code slot's first section is one complete module; :func:`code_artifacts` names it after the slot
(``<slot id>.py``, ``.sql``, ``.sh``, ``.yaml``, ``.json``, ``Dockerfile``...) and, for Python, writes its
tests section as ``test_<slot id>.py``. The tests were written to run right after the module, so that file
starts with one line the harness adds, ``from <slot id> import *``, marked as such; nothing else is changed.
``coe run --out-dir DIR`` writes these files beside the Markdown document.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.slots.checks import module_code, module_name
from state.framework import Framework
from state.result import SlotResult

__all__ = ["EXTENSIONS", "code_artifacts"]

EXTENSIONS = {
    "python": ".py",
    "sql": ".sql",
    "bash": ".sh",
    "sh": ".sh",
    "yaml": ".yaml",
    "yml": ".yaml",
    "json": ".json",
    "csv": ".csv",
    "toml": ".toml",
    "ini": ".ini",
    "hcl": ".tf",
    "javascript": ".js",
    "typescript": ".ts",
}
"""File extension by language; an unknown language gets ``.txt``, a Dockerfile is named ``Dockerfile``."""


def code_artifacts(framework: Framework, results: Mapping[str, SlotResult]) -> dict[str, str]:
    """File name -> content for every code and data slot with a result, in the framework's order."""
    files: dict[str, str] = {}
    for spec in framework.slots:
        result = results.get(spec.id)
        quality = result.quality if result is not None else None
        if result is None or quality is None or quality.deliverable not in ("code", "data"):
            continue
        code, tests = module_code(result)
        if code is None:
            continue
        language = (quality.language or "text").lower()
        module = module_name(spec.id)
        name = "Dockerfile" if language == "dockerfile" else module + EXTENSIONS.get(language, ".txt")
        if name in files:
            name = f"{module}_{len(files)}{EXTENSIONS.get(language, '.txt')}"
        files[name] = code if code.endswith("\n") else code + "\n"
        if tests and language == "python":
            header = f"from {module} import *  # noqa: F403 - added by coe: these tests run after {module}.py\n\n"
            files[f"test_{module}.py"] = header + tests + ("" if tests.endswith("\n") else "\n")
    return files
