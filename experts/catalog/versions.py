"""Expert versions: a candidate beside the current version, examined, then promoted (with its evidence) or not.

Layout in ``$COE_HOME/experts/``:

* ``<id>/``: the current version of an expert the user added, or of a shipped expert a promoted candidate
  replaces (its ``origin.json`` says ``replaces: shipped``; the shipped document stays in the package);
* ``.candidates/<id>/<version>/``: candidate versions, never routed to; ``coe experts examine ID --version V``
  examines one (:func:`serving` makes it serve this process's runs while it does);
* ``.previous/<id>/<version>/``: versions a promotion or ``add --replace`` put aside, for ``rollback``;
* ``.history/<id>.jsonl``: every promotion and rollback, with the exam records (and shadow tally) behind it;
* ``.shadow/<id>@<version>.jsonl``: a candidate's shadow answers to real slots (:mod:`graph.shadow`).

A run keeps the versions it was routed to (:func:`pinned`), so a promotion, rollback or replacement while it runs
changes only later runs. A promotion needs the candidate's exam record at or above its bar and no lower than the
current version's score, and, when it has shadow runs, no more of them won by the served answers than by its own
(``force`` overrides all three, and is recorded); the evidence is recorded with it.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from experts.catalog import sources
from experts.catalog.exams import read_record
from experts.catalog.scopes import Catalog, load_shipped
from experts.catalog.sources import ORIGIN_FILE, AddedExpert, load_catalog, read_expert_dir
from state.errors import ConfigError
from state.paths import user_experts_dir

__all__ = [
    "add_candidate",
    "candidate",
    "candidates",
    "history",
    "keep_shadow",
    "pinned",
    "previous",
    "promote",
    "rollback",
    "serving",
    "shadow_path",
    "shadow_pin",
    "shadow_source",
    "shadow_tally",
    "tally_line",
]

CANDIDATES = ".candidates"
PREVIOUS = ".previous"
HISTORY = ".history"
SHADOW = ".shadow"
SHADOW_SOURCE = "shadow:"
"""A shadow run's one-slot framework has the source ``shadow:<id>@<version>``: the run is routed to that version."""


def shadow_source(expert_id: str, version: str) -> str:
    """The framework source of a shadow run of candidate ``version`` of ``expert_id``."""
    return f"{SHADOW_SOURCE}{expert_id}@{version}"


def shadow_pin(source: str) -> tuple[str, str] | None:
    """(expert id, version) a framework source pins (``shadow:<id>@<version>``), or None."""
    if not source.startswith(SHADOW_SOURCE):
        return None
    expert_id, at, version = source.removeprefix(SHADOW_SOURCE).partition("@")
    return (expert_id, version) if at and expert_id and version else None


def _versions(kind: str, expert_id: str) -> dict[str, Path]:
    root = user_experts_dir() / kind / expert_id
    try:
        return {p.name: p for p in sorted(root.iterdir()) if (p / sources.SCOPE_FILE).is_file()}
    except OSError:
        return {}


def candidates(expert_id: str) -> dict[str, Path]:
    """The expert's candidate versions (version -> directory)."""
    return _versions(CANDIDATES, expert_id)


def candidate(expert_id: str, version: str, purpose: str) -> Path:
    """The directory of candidate ``version`` of ``expert_id``, needed ``purpose`` ("to shadow", "to promote").

    Raises:
        ConfigError: no such candidate (the message names the candidates there are).
    """
    kept = candidates(expert_id)
    if version not in kept:
        known = ", ".join(kept) or "none; add one with coe experts add DIR --candidate"
        raise ConfigError(expert_id, f"no candidate version {version!r} {purpose}; candidates: {known}", "version")
    return kept[version]


def previous(expert_id: str) -> dict[str, Path]:
    """The versions put aside by promotions and replacements (version -> directory)."""
    return _versions(PREVIOUS, expert_id)


def history(expert_id: str) -> list[dict[str, Any]]:
    """Every promotion and rollback of the expert, oldest first."""
    return _lines(_history_path(expert_id))


def shadow_path(expert_id: str, version: str) -> Path:
    """Where the shadow comparisons of a candidate version are kept (one JSON line each)."""
    return user_experts_dir() / SHADOW / f"{expert_id}@{version}.jsonl"


def keep_shadow(expert_id: str, version: str, comparison: dict[str, Any]) -> None:
    """Keep one shadow comparison of a candidate version (its ``winner`` counts in :func:`shadow_tally`)."""
    _append(shadow_path(expert_id, version), comparison)


def shadow_tally(expert_id: str, version: str) -> dict[str, int]:
    """How the candidate's shadow answers fared: slots answered, and wins of the candidate, the served answer, ties."""
    winners = [entry["winner"] for entry in _lines(shadow_path(expert_id, version))]
    return {"slots": len(winners), **{w: winners.count(w) for w in ("candidate", "served", "tie")}}


def tally_line(tally: dict[str, int]) -> str:
    """``shadow: 5 slots, candidate 3, served 1, tie 1`` (or ``no shadow runs``)."""
    if not tally["slots"]:
        return "no shadow runs"
    return (
        f"shadow: {tally['slots']} slots, candidate {tally['candidate']}, served {tally['served']}, tie {tally['tie']}"
    )


def _record(entry: dict[str, Any]) -> None:
    _append(_history_path(entry["expert"]), entry)


def _history_path(expert_id: str) -> Path:
    return user_experts_dir() / HISTORY / f"{expert_id}.jsonl"


def _append(path: Path, entry: dict[str, Any]) -> None:
    """Add one JSON line to ``path`` (its directory made if need be)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def _lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path``, oldest first (none when it does not exist)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def pinned(catalog: Catalog, versions: dict[str, str]) -> tuple[Catalog, list[str]]:
    """The catalog with each expert of ``versions`` at that version: a run keeps the versions it was routed to.

    A version other than the current one is looked for among the versions put aside, the candidates and the
    shipped documents. Returns the catalog and, for each version that is gone, a line saying which serves instead.
    """
    experts = dict(catalog.experts)
    gone: list[str] = []
    shipped: Catalog | None = None
    for expert_id, version in versions.items():
        current = experts.get(expert_id)
        if current is None or current.version == version:
            continue
        kept = previous(expert_id).get(version) or candidates(expert_id).get(version)
        if kept is not None:
            experts[expert_id] = read_expert_dir(kept, expert_id).scope
            continue
        shipped = shipped or load_shipped()
        if expert_id in shipped and shipped.get(expert_id).version == version:
            experts[expert_id] = shipped.get(expert_id)
            continue
        gone.append(f"expert {expert_id} v{version} is no longer kept; v{current.version} serves the run's slots")
    if experts == catalog.experts:
        return catalog, gone
    return replace(catalog, experts=experts), gone


def add_candidate(source: Path) -> AddedExpert:
    """Add an expert directory as a candidate version of the expert of its id.

    Raises:
        ConfigError: the directory is invalid, no expert has its id, or its version is the current one or a
            candidate's already.
    """
    found = read_expert_dir(source.expanduser().resolve())
    scope = found.scope
    current = load_catalog().get(scope.id)  # an unknown id is named with the known ones
    if scope.version == current.version or scope.version in candidates(scope.id):
        where = "the current version" if scope.version == current.version else "a candidate already"
        raise ConfigError(
            str(source / sources.SCOPE_FILE), f"version {scope.version!r} is {where}; give a new version", "version"
        )
    target = user_experts_dir() / CANDIDATES / scope.id / scope.version
    sources.copy_expert(found, target)
    return read_expert_dir(target, scope.id)


@contextmanager
def serving(expert_id: str, version: str) -> Iterator[None]:
    """Within the block, the candidate ``version`` serves ``expert_id`` in this process (its exam runs on it).

    Raises:
        ConfigError: no such candidate.
    """
    directory = candidate(expert_id, version, "to examine")
    with sources.overriding(expert_id, directory):
        yield


def promote(expert_id: str, version: str, *, force: bool = False, rule: str | None = None) -> dict[str, Any]:
    """Make candidate ``version`` the current version of ``expert_id``, with its exam as the evidence.

    ``rule`` names the shadow share's automatic rule that asked for the promotion (recorded; None: by hand).

    Raises:
        ConfigError: no such candidate; a package's expert; the candidate is not examined, failed its exam, or
            scored below the current version (unless ``force``).
    """
    catalog = load_catalog()
    current = catalog.get(expert_id)
    origin = catalog.origin(expert_id)
    directory = candidate(expert_id, version, "to promote")
    if origin.kind == "package":
        raise ConfigError(str(origin.path), f"{expert_id} comes from {origin.package}; install a new version of it")
    new, old = read_record(expert_id, version), read_record(expert_id, current.version)
    tally = shadow_tally(expert_id, version)
    problem = None
    if new is None:
        problem = f"examine it first: coe experts examine {expert_id} --version {version}"
    elif not new.passed:
        problem = f"its exam failed: {new.line()}"
    elif old is not None and new.score < old.score:
        problem = f"it scored {new.score:.2f}, below the current v{current.version}'s {old.score:.2f}"
    elif tally["served"] > tally["candidate"]:
        problem = f"the served answers won its shadow runs ({tally_line(tally)})"
    if problem is not None and not force:
        raise ConfigError(expert_id, f"candidate v{version} is not promoted: {problem} (--force promotes it anyway)")
    live = user_experts_dir() / expert_id
    if origin.kind == "user":
        _move(live, user_experts_dir() / PREVIOUS / expert_id / current.version)
    _move(directory, live)
    if origin.kind == "shipped":
        _set_origin(live, replaces="shipped")
    entry = {
        "action": "promote",
        "expert": expert_id,
        "from": current.version,
        "from_origin": origin.kind,
        "to": version,
        "at": _now(),
        "forced": problem is not None,
        "rule": rule,
        "evidence": {
            "from": old.line() if old else None,
            "to": new.line() if new else None,
            "shadow": tally_line(tally),
        },
    }
    _record(entry)
    return entry


def rollback(expert_id: str) -> dict[str, Any]:
    """Undo the expert's last promotion: the version it replaced is current again; the promoted one a candidate.

    Raises:
        ConfigError: nothing to roll back.
    """
    steps = history(expert_id)
    last = next((e for e in reversed(steps) if e["action"] in ("promote", "rollback")), None)
    if last is None or last["action"] != "promote":
        raise ConfigError(expert_id, "no promotion to roll back")
    live = user_experts_dir() / expert_id
    _move(live, user_experts_dir() / CANDIDATES / expert_id / last["to"])
    if last["from_origin"] == "user":
        _move(user_experts_dir() / PREVIOUS / expert_id / last["from"], live)
    entry = {"action": "rollback", "expert": expert_id, "from": last["to"], "to": last["from"], "at": _now()}
    _record(entry)
    return entry


def _move(source: Path, target: Path) -> None:
    if not source.is_dir():
        raise ConfigError(str(source), "is missing; the user catalog was changed by hand")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    source.rename(target)


def _set_origin(directory: Path, **changes: str) -> None:
    path = directory / ORIGIN_FILE
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    data.update(changes)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
