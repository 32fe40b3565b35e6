"""The run context (the per-run settings a caller passes) and how settings are resolved.

Precedence, highest first: the run's context > environment variables (``COE_*``) > built-in defaults; a
setting nobody gave whose default comes from the hardware profile (:data:`~state.settings.PROFILE_DEFAULTS`)
takes the profile's value. The fields, bounds, defaults and variables all come from the one settings table,
:class:`~state.settings.Settings`. The resolved settings are recorded in the Passport by the guard node, so a
resumed run behaves like the original even when resumed from another process.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
)
from pydantic.fields import FieldInfo

from state.errors import ConfigError
from state.hardware import load_profiles, select_profile
from state.settings import DEFAULTS, ENV_VARS, PROFILE_DEFAULTS, Settings, user_settings

__all__ = ["RunContext", "resolve_settings"]


def _context_field(field: FieldInfo) -> tuple[Any, Any]:
    """The run-context version of a setting: the same type, bounds and description, but optional (None)."""
    bounds = {}
    for constraint in field.metadata:
        for name in ("gt", "ge", "lt", "le"):
            value = getattr(constraint, name, None)
            if value is not None:
                bounds[name] = value
    annotation: Any = field.annotation
    return (annotation | None, Field(default=None, description=field.description, **bounds))


class _ContextBase(BaseModel):
    """What every run context does: refuse unknown and bad fields with a :class:`ConfigError` naming the field.

    LangGraph builds the context from the caller's dict itself (``context_schema(**context)`` in ``invoke``, the
    server's run request); a pydantic error there would reach the caller as a generic validation error, not a
    user error. The error is raised from ``__init__``, outside pydantic (which would wrap it, a ``ValueError``).
    """

    model_config = ConfigDict(extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or None
            fields = type(self).model_fields
            hint = f"; allowed: {', '.join(fields)}" if first["type"] == "extra_forbidden" else ""
            raise ConfigError("run context", f"{first['msg']}{hint}", field=field) from None


def _run_context_model() -> type[BaseModel]:
    fields = {name: _context_field(field) for name, (field, _) in user_settings().items()}
    return create_model(  # type: ignore[call-overload, no-any-return]
        "RunContext",
        __base__=_ContextBase,
        __doc__="Settings a caller may pass per run (``context=`` in LangGraph); unset ones fall back to env/defaults.",
        __module__=__name__,
        **fields,
    )


if TYPE_CHECKING:

    class RunContext(BaseModel):
        """The typing view of the run context: its fields are made from the settings table at import."""

        def __init__(self, **settings: Any) -> None: ...

else:
    RunContext = _run_context_model()
    """Settings a caller may pass per run: every field of :class:`~state.settings.Settings` that has an
    :class:`~state.settings.Env` marker, optional, with the same bounds and description (Studio shows them)."""


def resolve_settings(context: RunContext | dict[str, Any] | None, env: dict[str, str] | None = None) -> Settings:
    """Resolve the effective settings: run context > environment > defaults.

    Raises:
        ConfigError: naming the environment variable or context field that holds a bad value.
    """
    environ = os.environ if env is None else env
    if isinstance(context, dict):
        context = RunContext(**context)  # a bad field: ConfigError naming it
    given = context.model_dump(exclude_none=True) if context is not None else {}
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for name, default in DEFAULTS.items():
        if name in given:
            values[name], origin[name] = given[name], f"run context field {name}"
        elif environ.get(ENV_VARS[name], "") != "":
            values[name], origin[name] = environ[ENV_VARS[name]], f"environment variable {ENV_VARS[name]}"
        else:
            values[name], origin[name] = default, f"default {name}"
    values["explicit"] = sorted(n for n, o in origin.items() if not o.startswith("default"))
    if values["backend"] not in ("llama", "fake", "remote"):
        raise ConfigError(origin["backend"], f"unknown backend {values['backend']!r}; allowed: llama, fake, remote")
    if values["backend"] == "remote" and not values["remote_url"]:
        raise ConfigError(
            origin["backend"],
            "the remote backend needs the server's OpenAI base URL (e.g. http://127.0.0.1:8000/v1): "
            "set COE_REMOTE_URL or the run context field remote_url",
        )
    if values["remote_url"] and not str(values["remote_url"]).startswith(("http://", "https://")):
        raise ConfigError(origin["remote_url"], f"{values['remote_url']!r} is not an http(s) URL")
    if values["backend"] == "fake" and not values["fake_script"]:
        values["fake_script"] = None
    _apply_profile(values, origin)
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "settings"
        raise ConfigError(origin.get(name, "settings"), f"{first['msg']} (got {values.get(name)!r})") from None


def _apply_profile(values: dict[str, Any], origin: dict[str, str]) -> None:
    """Resolve the hardware profile into the budget settings, and the defaults it sets."""
    try:
        profile, how = select_profile(str(values["profile"]), load_profiles())
    except ConfigError as exc:
        if exc.source != "profile":
            raise
        raise ConfigError(origin["profile"], str(exc).split(": ", 1)[1]) from None
    for name in PROFILE_DEFAULTS:
        if origin[name].startswith("default"):
            values[name], origin[name] = getattr(profile, name), f"hardware profile {profile.name}"
    limit = values["memory_limit_mb"]
    if limit not in (None, ""):
        try:
            limit = int(limit)
        except (TypeError, ValueError):
            raise ConfigError(origin["memory_limit_mb"], f"{limit!r} is not a whole number of MB") from None
        if limit <= profile.overhead_mb:
            raise ConfigError(
                origin["memory_limit_mb"],
                f"{limit} MB leaves nothing for the models: profile {profile.name} keeps {profile.overhead_mb} MB "
                "for the runtime and the embedder (raise the limit, or pick a profile with less overhead)",
            )
    values["memory_limit_mb"] = limit if limit not in (None, "") else None
    values["profile"] = profile.name
    values["profile_source"] = how
    values["memory_mb"] = values["memory_limit_mb"] or profile.memory_mb
    values["memory_overhead_mb"] = profile.overhead_mb
    values["preload"] = profile.preload
    values["preload_threshold"] = profile.preload_threshold
    values["emergency_threshold"] = profile.emergency_threshold
    values["gpu_offload"] = profile.device == "gpu"
