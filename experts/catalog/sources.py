"""Where experts come from: the shipped catalog, the user's own experts, and installed expert packs.

An expert from outside the project is a directory::

    <id>/
      scope.yaml     the scope document (the shipped documents' format; ``id`` equals the directory's name)
      examples.txt   optional: requests it should receive, one per line (they train the router's learned term)
      exam.yaml      optional: its exam (:mod:`experts.catalog.exams`)

The user adds one with ``coe experts add PATH``: it is checked (every problem named with its file and field) and
copied to ``$COE_HOME/experts/<id>/``, never into the installed package. A Python package declares experts
through the ``coe.experts`` entry point group: each entry point names an object that is (or a function that
returns) the path of an expert directory, of a directory of them, or a list of such paths; ``pip install`` of
the pack adds them. An id may be taken once: an added expert cannot shadow a shipped one or another source's.

:func:`load_catalog` merges the three, cached until a file of any of them changes (the user directory's files,
and the ``sys.path`` directories where packages are installed), so a server sees a new expert on its next run.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from experts.catalog.exams import exam_errors, read_record
from experts.catalog.scopes import (
    GENERAL_EXPERT,
    Catalog,
    ExpertOrigin,
    ExpertScope,
    load_shipped,
    read_yaml,
    scope_errors,
)
from experts.models.bundled import BUNDLED_MODELS, verify_pinned_file
from state.errors import ConfigError, ModelUnavailableError
from state.files import atomic_write
from state.paths import catalog_dir, user_experts_dir
from state.template import load_library
from state.yaml_text import safe_load

__all__ = [
    "ENTRY_POINT_GROUP",
    "AddedExpert",
    "add_expert",
    "copy_expert",
    "load_catalog",
    "overriding",
    "read_expert_dir",
    "remove_expert",
]

ENTRY_POINT_GROUP = "coe.experts"
SCOPE_FILE = "scope.yaml"
EXAMPLES_FILE = "examples.txt"
EXAM_FILE = "exam.yaml"
ORIGIN_FILE = "origin.json"
TEMPLATES_DIR = "templates"
"""Framework templates an expert brings: they join the template library while the expert is in the catalog."""
SHIPPED_EXAMS = "exams"
"""The shipped experts' exams: ``exams/<id>.yaml`` beside the scope documents."""
MAX_EXAMPLES = 200


@dataclass(frozen=True)
class AddedExpert:
    """An expert directory, read and checked."""

    directory: Path
    scope: ExpertScope
    examples: list[str]
    exam: Path | None
    exam_tasks: list[str] = field(default_factory=list)
    """Its exam's tasks: texts of its scope never trained on, so they join the router's guard set."""


def read_expert_dir(directory: Path, expert_id: str | None = None) -> AddedExpert:
    """Read an expert directory and check all of it (scope, examples, exam, model binding).

    Args:
        directory: The expert's directory.
        expert_id: The id its scope must have (default: the directory's name; a kept version's directory is
            named after its version).

    Raises:
        ConfigError: listing every problem, each with its file and field and what to write.
    """
    errors: list[str] = []
    found = _read_dir(directory, errors, expert_id)
    if found is None or errors:
        raise ConfigError(str(directory), "invalid expert:\n" + "\n".join(f"  - {e}" for e in errors))
    return found


def _read_dir(directory: Path, errors: list[str], expert_id: str | None = None) -> AddedExpert | None:
    scope_path = directory / SCOPE_FILE
    if not directory.is_dir():
        errors.append(f"{directory}: not a directory; an expert is a directory holding {SCOPE_FILE}")
        return None
    if not scope_path.is_file():
        errors.append(f"{scope_path}: missing; write the expert's scope document there (see docs/experts.md)")
        return None
    data = read_yaml(scope_path, errors)
    if data is None:
        return None
    scope = scope_errors(scope_path, data, errors, stem=expert_id or directory.name)
    if scope is None:
        return None
    model = scope.model.model
    if scope.model.endpoint is None and model is not None and model not in BUNDLED_MODELS:
        gguf = Path(model).expanduser()
        if not gguf.is_absolute():
            gguf = directory / gguf
        if not gguf.is_file():
            errors.append(
                f"{scope_path}: model.model: {model!r} is neither a bundled model ({', '.join(BUNDLED_MODELS)}) "
                "nor an existing GGUF file"
            )
        else:
            if scope.model.sha256 is not None:
                try:
                    verify_pinned_file(gguf, scope.model.sha256)
                except ModelUnavailableError as exc:
                    errors.append(f"{scope_path}: model.sha256: {exc}")
            scope = scope.model_copy(update={"model": scope.model.model_copy(update={"model": str(gguf.resolve())})})
    elif scope.model.sha256 is not None:
        errors.append(f"{scope_path}: model.sha256: pins a GGUF file's hash; a bundled model or an endpoint has none")
    examples = _examples(directory / EXAMPLES_FILE, errors)
    templates = directory / TEMPLATES_DIR
    if templates.is_dir():  # its slots may name the shipped experts and itself
        report = load_library([templates], [*load_shipped().ids, scope.id])
        errors += [f"{issue.file}: {issue.template}: {issue.field}: {issue.message}" for issue in report.errors]
    exam_path = directory / EXAM_FILE
    exam = None
    if exam_path.is_file():
        data = read_yaml(exam_path, errors)
        if data is not None:
            exam = exam_errors(exam_path, data, scope.id, errors)
    tasks = [task.task for task in exam.tasks] if exam is not None else []
    return AddedExpert(directory, scope, examples, exam_path if exam_path.is_file() else None, tasks)


def _examples(path: Path, errors: list[str]) -> list[str]:
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(f"{path}: cannot read: {exc}")
        return []
    lines = [" ".join(raw.split()) for raw in text.splitlines() if raw.strip() and not raw.lstrip().startswith("#")]
    if len(lines) > MAX_EXAMPLES:
        errors.append(f"{path}: has {len(lines)} examples; keep at most {MAX_EXAMPLES}")
    for number, line in enumerate(lines, start=1):
        if len(line) > 2000:
            errors.append(f"{path}: example {number}: over 2000 characters; an example is one request")
    return lines


def _user_dirs() -> list[Path]:
    root = user_experts_dir()
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and (p / SCOPE_FILE).is_file())
    except OSError:
        return []


def _package_dirs(errors: list[str]) -> list[tuple[Path, str]]:
    """(expert directory, ``package version``) for every expert the installed packages declare."""
    from importlib.metadata import entry_points

    found: list[tuple[Path, str]] = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        dist = entry.dist
        package = f"{dist.name} {dist.version}" if dist is not None else entry.value
        where = f"entry point {entry.name} = {entry.value} ({ENTRY_POINT_GROUP}, package {package})"
        try:
            target = entry.load()
            value = target() if callable(target) else target
        except Exception as exc:  # a broken pack must name itself, not stop the catalog with a traceback
            errors.append(f"{where}: cannot be loaded: {type(exc).__name__}: {exc}")
            continue
        paths = [value] if isinstance(value, str | Path) else value
        if not isinstance(paths, list | tuple) or not all(isinstance(p, str | Path) for p in paths):
            errors.append(f"{where}: must give a path or a list of paths of expert directories, not {value!r}")
            continue
        for raw in paths:
            path = Path(raw)
            if (path / SCOPE_FILE).is_file():
                found.append((path, package))
            elif path.is_dir():
                found += [(p, package) for p in sorted(path.iterdir()) if (p / SCOPE_FILE).is_file()]
            else:
                errors.append(f"{where}: {path} is not an expert directory (no {SCOPE_FILE}) nor a directory of them")
    return found


def _fingerprint(paths: Iterable[Path]) -> tuple[tuple[str, int], ...]:
    out = []
    for path in paths:
        try:
            out.append((str(path), path.stat().st_mtime_ns))
        except OSError:
            out.append((str(path), -1))
    return tuple(out)


def _extras_fingerprint() -> tuple[Any, ...]:
    """What changes when an expert is added, edited or removed, or a package is installed or removed."""
    user = [user_experts_dir(), user_experts_dir() / "exams"]
    for directory in _user_dirs():
        user += [directory, *sorted(directory.iterdir())]
    site = [Path(p) for p in sys.path if p and Path(p).is_dir()]
    return _fingerprint(user), _fingerprint(site)


_cache: dict[tuple[Any, ...], Catalog] = {}
_overrides: dict[str, Path] = {}
"""Experts whose candidate version serves this process's runs for a while (:func:`overriding`)."""


@contextmanager
def overriding(expert_id: str, directory: Path) -> Iterator[None]:
    """Within the block, the expert directory ``directory`` serves ``expert_id`` in this process.

    For examining a candidate version (:func:`experts.catalog.versions.serving`); a server never sets it.
    """
    _overrides[expert_id] = directory
    try:
        yield
    finally:
        _overrides.pop(expert_id, None)


def _origin_data(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / ORIGIN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_catalog(directory: Path | str | None = None, *, extras: bool | None = None) -> Catalog:
    """The expert catalog: the shipped scope documents, the user's experts and installed packs' experts.

    Args:
        directory: The shipped scope directory (default ``$COE_EXPERT_SCOPES`` or ``config/expert_scopes``).
        extras: Add the user's and packages' experts (default: only when ``directory`` is not given, so a
            benchmark or test that names a directory gets that directory alone).

    Raises:
        ConfigError: listing every problem found, each with its file (or package) and field.
    """
    shipped = load_shipped(directory)
    if not (directory is None if extras is None else extras):
        return shipped
    key = (id(shipped), _extras_fingerprint(), tuple(sorted((i, str(p)) for i, p in _overrides.items())))
    cached = _cache.get(key)
    if cached is None:
        _cache.clear()  # one catalog per process is current; a changed file makes the old one stale
        cached = _cache[key] = _with_extras(shipped)
    return cached


def _with_extras(shipped: Catalog) -> Catalog:
    errors: list[str] = []
    experts = dict(shipped.experts)
    origins = {i: ExpertOrigin("shipped", shipped.directory / f"{i}.yaml") for i in experts}
    exams = {i: p for i in experts if (p := shipped.directory / SHIPPED_EXAMS / f"{i}.yaml").is_file()}
    examples: list[tuple[str, str]] = []
    template_dirs: list[Path] = []
    guard: list[tuple[str, str]] = []
    sources: list[tuple[Path, ExpertOrigin]] = [(d, ExpertOrigin("user", d)) for d in _user_dirs()]
    sources.sort(key=lambda row: _origin_data(row[0]).get("replaces") != "shipped")  # replacements first
    sources += [(d, ExpertOrigin("package", d, package)) for d, package in _package_dirs(errors)]
    for directory, origin in sources:
        found = _read_dir(directory, errors)
        if found is None:
            continue
        expert_id = found.scope.id
        replaces = origin.kind == "user" and _origin_data(directory).get("replaces") == "shipped"
        if replaces and expert_id in experts and origins[expert_id].kind == "shipped":
            origin = ExpertOrigin("user", directory, replaces=f"shipped v{experts[expert_id].version}")
        elif expert_id in experts:
            errors.append(
                f"{directory}: id: {expert_id!r} is already an expert ({origins[expert_id].label()}, "
                f"{origins[expert_id].path}); give this one another id"
            )
            continue
        experts[expert_id], origins[expert_id] = found.scope, origin
        examples = [row for row in examples if row[0] != expert_id]
        examples += [(expert_id, text) for text in found.examples]
        if found.exam is not None:
            exams[expert_id] = found.exam
        guard = [row for row in guard if row[0] != expert_id] + [(expert_id, t) for t in found.exam_tasks]
        if (directory / TEMPLATES_DIR).is_dir():
            template_dirs.append(directory / TEMPLATES_DIR)
    for expert_id, directory in _overrides.items():
        found = _read_dir(directory, errors, expert_id)
        if found is not None and expert_id in experts:
            experts[expert_id] = found.scope
            origins[expert_id] = ExpertOrigin("candidate", directory, replaces=f"v{experts[expert_id].version}")
            examples = [row for row in examples if row[0] != expert_id] + [(expert_id, t) for t in found.examples]
            if found.exam is not None:
                exams[expert_id] = found.exam
    if errors:
        raise ConfigError(str(user_experts_dir()), "invalid expert(s):\n" + "\n".join(f"  - {e}" for e in errors))
    benched = {i: why for i, s in experts.items() if (why := _benched(s)) is not None}
    return replace(
        shipped,
        experts=experts,
        origins=origins,
        extra_examples=tuple(examples),
        exams=exams,
        benched=benched,
        template_dirs=tuple(template_dirs),
        extra_guard=tuple(guard),
    )


def _benched(scope: ExpertScope) -> str | None:
    """Why the expert is kept out of routing: its last exam, of this version, scored under its bar."""
    record = read_record(scope.id, scope.version)
    if record is None or record.passed or scope.id == GENERAL_EXPERT:
        return None
    return f"its exam failed: {record.line()}; run `coe experts examine {scope.id}` again after fixing it"


def add_expert(source: Path, *, replace_existing: bool = False) -> AddedExpert:
    """Check an expert directory and copy it into the user's catalog (``$COE_HOME/experts/<id>``).

    Args:
        source: The expert directory.
        replace_existing: Replace a user expert of the same id (a new version of it).

    Raises:
        ConfigError: the directory is invalid (every problem named), the id is shipped or a package's, or the
            user has an expert of that id already and ``replace_existing`` is not set.
    """
    found = read_expert_dir(source.expanduser().resolve())
    expert_id = found.scope.id
    catalog = load_catalog()
    target = user_experts_dir() / expert_id
    if expert_id in catalog:
        origin = catalog.origin(expert_id)
        if origin.kind != "user":
            raise ConfigError(
                str(source / SCOPE_FILE),
                f"{expert_id!r} is already an expert ({origin.label()}); give this one another id",
                field="id",
            )
        if not replace_existing:
            raise ConfigError(
                str(source / SCOPE_FILE),
                f"you have an expert {expert_id!r} already (version {catalog.get(expert_id).version}); "
                "use --replace to replace it, or give this one another id",
                field="id",
            )
    if target.is_dir():  # the replaced version is kept for a rollback
        aside = user_experts_dir() / ".previous" / expert_id / catalog.get(expert_id).version
        shutil.rmtree(aside, ignore_errors=True)
        aside.parent.mkdir(parents=True, exist_ok=True)
        target.rename(aside)
    copy_expert(found, target)
    return read_expert_dir(target)


def copy_expert(found: AddedExpert, target: Path) -> None:
    """Copy a checked expert directory to ``target`` (replacing it), with an ``origin.json`` saying where from."""
    staging = target.parent / f".{target.name}.adding"
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    # a GGUF is named where it is (its absolute path), never copied: models are large
    skip = shutil.ignore_patterns(".*", "__pycache__", ORIGIN_FILE, "*.gguf")
    shutil.copytree(found.directory, staging, ignore=skip)
    origin_data = {"source": str(found.directory), "added_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _write_json(staging / ORIGIN_FILE, origin_data)
    if found.scope.model.model is not None and found.scope.model.model != _raw_model(found.directory):
        _pin_model_path(staging / SCOPE_FILE, found.scope.model.model)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def _raw_model(directory: Path) -> Any:

    data = safe_load((directory / SCOPE_FILE).read_text(encoding="utf-8"))
    return data.get("model", {}).get("model") if isinstance(data, dict) else None


def _pin_model_path(scope_path: Path, model: str) -> None:
    """A GGUF path given relative to the expert's directory becomes absolute in the copy (the copy moved)."""
    import yaml

    data = safe_load(scope_path.read_text(encoding="utf-8"))
    data["model"]["model"] = model
    atomic_write(scope_path, lambda tmp: tmp.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8"))


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def remove_expert(expert_id: str, catalog_loader: Callable[[], Catalog] = load_catalog) -> Path:
    """Remove an expert the user added; returns the directory removed.

    Raises:
        ConfigError: the id is unknown, shipped or a package's (named with how to remove those).
    """
    catalog = catalog_loader()
    catalog.get(expert_id)  # an unknown id is named with the known ones
    origin = catalog.origin(expert_id)
    if origin.kind == "shipped":
        raise ConfigError(str(catalog_dir()), f"{expert_id!r} is shipped with the project; it cannot be removed")
    if origin.kind == "package":
        raise ConfigError(
            str(origin.path), f"{expert_id!r} comes from the installed package {origin.package}; pip uninstall it"
        )
    shutil.rmtree(origin.path)
    return origin.path
