"""The expert catalog: grounded scope documents in ``config/expert_scopes/``, validated at load.

Each expert has one YAML file (``<id>.yaml``) and a line in ``index.yaml``. A scope document says what the
bound model can really deliver (``capability_scope``, one concrete task per line: each line is embedded on
its own for routing), where its boundaries are (``exclusion_scope``, embedded for anti-routing), the persona
prompt (``harness_constraints``), known weaknesses, its kind (task-type specialist, domain specialist or the
generalist), its model binding (a persona over the shared base model, or its own GGUF) and its generation
defaults.

Every problem is reported with the file and the field, all at once, as a :class:`~state.errors.ConfigError`.
The catalog directory is ``$COE_EXPERT_SCOPES`` when set, else ``config/expert_scopes`` of the project. The
experts a user adds, and those installed packages declare, join it in :mod:`experts.catalog.sources`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from state.errors import ConfigError
from state.paths import CATALOG_ENV, catalog_dir
from state.yaml_text import safe_load

__all__ = [
    "GENERAL_EXPERT",
    "Catalog",
    "ExpertOrigin",
    "ExpertScope",
    "ModelBinding",
    "load_shipped",
    "problems",
    "read_yaml",
    "scope_errors",
]

GENERAL_EXPERT = "general_reasoning"
"""The generalist: the low-confidence fallback and the default expert."""
ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
MIN_CAPABILITY_LINES = 5
MIN_EXCLUSION_LINES = 1


def _lines(text: str) -> list[str]:
    """Non-empty lines of a block, without list bullets."""
    out = []
    for raw in text.splitlines():
        line = raw.strip().lstrip("-*").strip()
        if line:
            out.append(line)
    return out


class EndpointSpec(BaseModel):
    """A true expert's own OpenAI-compatible server (see :mod:`experts.backends.endpoint`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(pattern=r"^https?://\S+$", description="The server's OpenAI base URL (http://host:port/v1).")
    model: str | None = Field(default=None, description="The model name sent (default: the expert's model name).")
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="The environment variable holding the server's API key (default: COE_REMOTE_API_KEY).",
    )


class ModelBinding(BaseModel):
    """Which model an expert runs on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    binding: Literal["faux", "true"] = Field(
        description="faux: a persona over the shared base model; true: the expert's own GGUF model."
    )
    model: str | None = Field(
        default=None, description="For a true expert: a bundled model name or the path of a GGUF file."
    )
    endpoint: EndpointSpec | None = Field(
        default=None,
        description="For a true expert: the OpenAI-compatible server its model runs on, whatever the run's backend.",
    )
    sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-fA-F]{64}$",
        description="For a GGUF path (an expert pack's own model): the SHA-256 the file must have, checked at add "
        "and whenever the file changes.",
    )
    fallback: Literal["base", "error"] = Field(
        default="base",
        description="When a true expert's model is not installed: run as a persona over the base model "
        "(recorded in the ledger), or fail the slot.",
    )

    @field_validator("binding", mode="before")
    @classmethod
    def _yaml_true(cls, value: object) -> object:
        # YAML reads an unquoted ``binding: true`` as a boolean; it means the true-expert binding.
        return "true" if value is True else value

    @field_validator("model")
    @classmethod
    def _strip(cls, value: str | None) -> str | None:
        return value.strip() if isinstance(value, str) and value.strip() else None


class GenerationDefaults(BaseModel):
    """Per-expert generation defaults; a value the user sets explicitly wins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=16, le=32768)


class Verification(BaseModel):
    """When and how the scope was checked against the bound model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    method: str = Field(min_length=1)


class ExpertScope(BaseModel):
    """One expert's scope document."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    version: str = Field(
        default="1", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$", description="The scope document's version."
    )
    display_name: str = Field(min_length=1)
    kind: Literal["task", "domain", "general"]
    summary: str = Field(min_length=1)
    capability_scope: str
    exclusion_scope: str
    harness_constraints: str = Field(min_length=20)
    known_weaknesses: list[str] = Field(default_factory=list)
    model: ModelBinding
    generation: GenerationDefaults = Field(default_factory=GenerationDefaults)
    verification: Verification

    @property
    def capabilities(self) -> list[str]:
        """The capability scope, one routing line each."""
        return _lines(self.capability_scope)

    @property
    def exclusions(self) -> list[str]:
        """The exclusion scope, one anti-routing line each."""
        return _lines(self.exclusion_scope)

    @property
    def persona(self) -> str:
        """The persona system prompt."""
        return self.harness_constraints.strip()

    @property
    def is_true_expert(self) -> bool:
        """Whether the expert has its own model (not a persona over the base model)."""
        return self.model.binding == "true"


@dataclass(frozen=True)
class ExpertOrigin:
    """Where an expert came from: shipped with the project, added by the user, or installed with a package."""

    kind: Literal["shipped", "user", "package", "candidate"]
    path: Path
    """The scope document (shipped) or the expert's directory."""
    package: str | None = None
    """For a package's expert: ``name version`` of the distribution that declares it."""
    replaces: str | None = None
    """What this version stands in for: ``shipped v1`` (a promoted version), ``v1`` (a candidate under exam)."""

    def label(self) -> str:
        """``shipped``, ``user``, ``package acme-experts 1.2``, ``user, replaces shipped v1``: for the ledger."""
        label = f"package {self.package}" if self.kind == "package" and self.package else self.kind
        return f"{label}, replaces {self.replaces}" if self.replaces else label


@dataclass(frozen=True)
class Catalog:
    """The loaded, validated experts, in index order (the shipped ones first, then the user's and packages')."""

    directory: Path
    experts: dict[str, ExpertScope]
    default_expert: str
    origins: dict[str, ExpertOrigin] = field(default_factory=dict)
    """Every expert's origin (an expert missing here is shipped)."""
    extra_examples: tuple[tuple[str, str], ...] = ()
    """Routing examples (expert, text) that added experts bring in their ``examples.txt``."""
    exams: dict[str, Path] = field(default_factory=dict)
    """Each expert's exam file, where it has one."""
    benched: dict[str, str] = field(default_factory=dict)
    """Experts kept out of routing, with why (their last exam failed); their slots go to the generalist."""
    left_out: frozenset[str] = frozenset()
    """In the router's catalog (:meth:`routable`): the benched experts it leaves out."""
    extra_guard: tuple[tuple[str, str], ...] = ()
    """Guard-set texts (expert, text) of added experts: their exam tasks (never trained on)."""
    template_dirs: tuple[Path, ...] = ()
    """Framework template directories that added experts bring (``templates/`` in an expert's directory)."""

    def __iter__(self) -> Iterator[ExpertScope]:
        return iter(self.experts.values())

    def __contains__(self, expert_id: object) -> bool:
        return expert_id in self.experts

    def __len__(self) -> int:
        return len(self.experts)

    @property
    def ids(self) -> tuple[str, ...]:
        """Expert ids in index order."""
        return tuple(self.experts)

    def get(self, expert_id: str) -> ExpertScope:
        """The scope of ``expert_id``.

        Raises:
            ConfigError: naming the unknown id and the known ones.
        """
        scope = self.experts.get(expert_id)
        if scope is None:
            raise ConfigError(str(self.directory), f"unknown expert id {expert_id!r}; known: {', '.join(self.experts)}")
        return scope

    def origin(self, expert_id: str) -> ExpertOrigin:
        """Where ``expert_id`` came from."""
        return self.origins.get(expert_id) or ExpertOrigin("shipped", self.directory / f"{expert_id}.yaml")

    def routable(self) -> Catalog:
        """The catalog the router sees: without the benched experts (the generalist is never benched)."""
        if not self.benched:
            return self
        keep = {i: s for i, s in self.experts.items() if i not in self.benched}
        examples = tuple(row for row in self.extra_examples if row[0] in keep)
        guard = tuple(row for row in self.extra_guard if row[0] in keep)
        left_out = frozenset(self.experts) - frozenset(keep)
        return replace(self, experts=keep, extra_examples=examples, extra_guard=guard, benched={}, left_out=left_out)

    def routing_hash(self) -> str:
        """SHA-256 over everything routing embeds (ids, kinds, capability and exclusion lines, added examples)."""
        payload: list[Any] = [[s.id, s.kind, s.capabilities, s.exclusions] for s in self.experts.values()]
        if self.extra_examples:
            payload.append([list(row) for row in self.extra_examples])
        return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


_cache: dict[tuple[str, tuple[tuple[str, int, int], ...]], Catalog] = {}


def _fingerprint(directory: Path) -> tuple[tuple[str, int, int], ...]:
    try:
        files = sorted(directory.glob("*.y*ml"))
        return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    except OSError:
        return ()


def load_shipped(directory: Path | str | None = None) -> Catalog:
    """Load and validate the scope directory's catalog alone (cached per directory until a file changes).

    :func:`experts.catalog.sources.load_catalog` adds the user's and packages' experts to it.

    Args:
        directory: The scope directory; default ``$COE_EXPERT_SCOPES`` or ``config/expert_scopes``.

    Raises:
        ConfigError: listing every problem found, each with its file and field.
    """
    path = Path(directory).expanduser() if directory is not None else catalog_dir()
    key = (str(path.resolve()), _fingerprint(path))
    cached = _cache.get(key)
    if cached is not None:
        return cached
    catalog = _load(path)
    _cache[key] = catalog
    return catalog


def problems(path: Path, exc: ValidationError) -> list[str]:
    """A validation error as lines naming the file and the field: ``FILE: a.b: message``."""
    return [f"{path}: {'.'.join(str(p) for p in err['loc']) or '(document)'}: {err['msg']}" for err in exc.errors()]


def read_yaml(path: Path, errors: list[str]) -> Any:
    """A YAML file's data, or None with the problem (file, line) appended to ``errors``."""
    try:
        return safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        errors.append(f"{path}: cannot read: {exc.strerror or exc}")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        errors.append(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}")
    return None


def _load(directory: Path) -> Catalog:
    if not directory.is_dir():
        raise ConfigError(str(directory), f"the expert scope directory does not exist (set {CATALOG_ENV} or create it)")
    index_path = directory / "index.yaml"
    errors: list[str] = []
    index = read_yaml(index_path, errors) if index_path.is_file() else None
    if not index_path.is_file():
        errors.append(f"{index_path}: missing; it lists the experts (version, default_expert, experts: [id, file])")
    entries: list[tuple[str, str]] = []
    default_expert = GENERAL_EXPERT
    if isinstance(index, dict):
        default_expert = str(index.get("default_expert", GENERAL_EXPERT))
        raw = index.get("experts")
        if not isinstance(raw, list) or not raw:
            errors.append(f"{index_path}: experts: must be a non-empty list of {{id, file}}")
            raw = []
        for i, item in enumerate(raw):
            if (
                not isinstance(item, dict)
                or not isinstance(item.get("id"), str)
                or not isinstance(item.get("file"), str)
            ):
                errors.append(f"{index_path}: experts[{i}]: must have string fields id and file")
                continue
            entries.append((item["id"], item["file"]))
    elif index is not None:
        errors.append(f"{index_path}: must be a mapping with version, default_expert and experts")

    experts: dict[str, ExpertScope] = {}
    listed_files = set()
    for expert_id, file_name in entries:
        listed_files.add(file_name)
        path = directory / file_name
        if expert_id in experts:
            errors.append(f"{index_path}: expert id {expert_id!r} is listed twice")
            continue
        if not path.is_file():
            errors.append(f"{index_path}: expert {expert_id!r}: file {file_name} does not exist in {directory}")
            continue
        data = read_yaml(path, errors)
        if data is None:
            continue
        scope = scope_errors(path, data, errors)
        if scope is None:
            continue
        if scope.id != expert_id:
            errors.append(f"{path}: id: {scope.id!r} does not match the index entry {expert_id!r}")
            continue
        experts[scope.id] = scope
    for stray in sorted(p.name for p in directory.glob("*.y*ml")):
        if stray != "index.yaml" and stray not in listed_files:
            errors.append(f"{directory / stray}: not listed in {index_path.name}; add it to experts or remove it")
    if entries and default_expert not in {e for e, _ in entries}:
        errors.append(f"{index_path}: default_expert: {default_expert!r} is not one of the listed experts")
    if entries and GENERAL_EXPERT not in {e for e, _ in entries}:
        errors.append(f"{index_path}: experts: {GENERAL_EXPERT!r} is required (it is the low-confidence fallback)")
    if errors:
        raise ConfigError(str(directory), "invalid expert catalog:\n" + "\n".join(f"  - {e}" for e in errors))
    return Catalog(directory=directory.resolve(), experts=experts, default_expert=default_expert)


def scope_errors(path: Path, data: Any, errors: list[str], *, stem: str | None = None) -> ExpertScope | None:
    """Validate a scope document's data; each problem is appended to ``errors`` with the file and the field.

    Args:
        path: The document's file, named in every problem.
        data: Its parsed YAML.
        errors: Where problems are appended.
        stem: What the id must equal (default: the file name's stem; an expert directory's scope.yaml: the
            directory's name).
    """
    if not isinstance(data, dict):
        errors.append(f"{path}: must be a mapping of scope fields")
        return None
    try:
        scope = ExpertScope.model_validate(data)
    except ValidationError as exc:
        errors += problems(path, exc)
        return None
    before = len(errors)
    if not ID_RE.match(scope.id):
        errors.append(f"{path}: id: {scope.id!r} must be snake_case (lowercase letters, digits, underscores)")
    stem = path.stem if stem is None else stem
    if stem != scope.id:
        named = "file name stem" if stem == path.stem else "directory name"
        errors.append(f"{path}: id: {scope.id!r} must equal the {named} {stem!r}")
    if len(scope.capabilities) < MIN_CAPABILITY_LINES:
        errors.append(
            f"{path}: capability_scope: has {len(scope.capabilities)} lines; write at least "
            f"{MIN_CAPABILITY_LINES} concrete tasks, one per line"
        )
    if len(scope.exclusions) < MIN_EXCLUSION_LINES:
        errors.append(f"{path}: exclusion_scope: is empty; list the boundaries, one per line")
    if scope.model.binding == "true" and scope.model.model is None and scope.model.endpoint is None:
        errors.append(f"{path}: model.model: a true expert needs a bundled model name, a GGUF path or an endpoint")
    if scope.model.binding == "faux" and scope.model.endpoint is not None:
        errors.append(f"{path}: model.endpoint: only a true expert runs on its own endpoint; use binding: true")
    if scope.model.binding == "faux" and scope.model.model is not None:
        errors.append(f"{path}: model.model: a faux expert uses the base model; remove model or use binding: true")
    if scope.kind == "general" and scope.id != GENERAL_EXPERT:
        errors.append(f"{path}: kind: only {GENERAL_EXPERT} may be of kind general")
    return scope if len(errors) == before else None
