"""Per-run settings (LangGraph runtime context) and how they are resolved.

Precedence, highest first: the run's context > environment variables (``COE_*``) > built-in defaults.
The resolved :class:`~state.passport.Settings` are recorded in the Passport by the guard node, so a resumed
run behaves like the original even when resumed from another process.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from state.errors import ConfigError
from state.passport import Settings

DEFAULTS: dict[str, Any] = {
    "backend": "llama",
    "model_path": None,
    "fake_script": None,
    "max_parallel": 4,
    "max_outline_retries": 2,
    "max_tokens": 600,
    "temperature": 0.0,
    "use_grammar": True,
    "n_ctx": 4096,
    "n_threads": None,
    # The remote backend (experts/remote.py): an OpenAI-compatible server. Its API key is read from
    # $COE_REMOTE_API_KEY when the backend is created and is never a setting (it would reach the checkpoint).
    "remote_url": None,
    "remote_model": None,
    "remote_timeout": 300.0,
    "remote_retries": 2,
    "reference_max_chars": 6000,
    # Routing, calibrated by bench/bench_routing.py (dev split + probes; results in bench/results/routing.md)
    "routing_lambda": 0.3,
    "routing_threshold": 0.04,
    "routing_tie_margin": 0.02,
    "routing_fast_gap": 0.08,
    "true_experts": True,
    "use_templates": True,
    "planner_model": "qwen2.5-coder-1.5b",
    # Assists: the knowledge base (None: $COE_KB, else the user data directory) and the lookup threshold,
    # calibrated by bench/bench_assist.py (results in bench/results/assist.md).
    "kb_path": None,
    "lookup_threshold": 0.71,
    # Circuit breaker per expert (experts/breaker.py): failures within the window open it; cooldown before a trial.
    "breaker_failures": 5,
    "breaker_window_s": 60.0,
    "breaker_cooldown_s": 30.0,
    # The memory budget (experts/hardware.py, experts/residency.py): a profile from config/hardware_profiles.yaml
    # (auto: detected) sets the budget and the defaults of max_parallel and n_ctx; memory_limit_mb replaces
    # the profile's budget.
    "profile": "auto",
    "memory_limit_mb": None,
}

ENV_VARS: dict[str, str] = {
    "backend": "COE_BACKEND",
    "model_path": "COE_MODEL",
    "fake_script": "COE_FAKE_SCRIPT",
    "max_parallel": "COE_MAX_PARALLEL",
    "max_outline_retries": "COE_MAX_OUTLINE_RETRIES",
    "max_tokens": "COE_MAX_TOKENS",
    "temperature": "COE_TEMPERATURE",
    "use_grammar": "COE_USE_GRAMMAR",
    "n_ctx": "COE_N_CTX",
    "n_threads": "COE_N_THREADS",
    "remote_url": "COE_REMOTE_URL",
    "remote_model": "COE_REMOTE_MODEL",
    "remote_timeout": "COE_REMOTE_TIMEOUT",
    "remote_retries": "COE_REMOTE_RETRIES",
    "reference_max_chars": "COE_REFERENCE_MAX_CHARS",
    "routing_lambda": "COE_ROUTING_LAMBDA",
    "routing_threshold": "COE_ROUTING_THRESHOLD",
    "routing_tie_margin": "COE_ROUTING_TIE_MARGIN",
    "routing_fast_gap": "COE_ROUTING_FAST_GAP",
    "true_experts": "COE_TRUE_EXPERTS",
    "use_templates": "COE_USE_TEMPLATES",
    "planner_model": "COE_PLANNER_MODEL",
    "kb_path": "COE_KB",
    "lookup_threshold": "COE_LOOKUP_THRESHOLD",
    "breaker_failures": "COE_BREAKER_FAILURES",
    "breaker_window_s": "COE_BREAKER_WINDOW_S",
    "breaker_cooldown_s": "COE_BREAKER_COOLDOWN_S",
    "profile": "COE_PROFILE",
    "memory_limit_mb": "COE_MEMORY_LIMIT_MB",
}

PROFILE_DEFAULTS = ("max_parallel", "n_ctx")
"""Settings whose default comes from the hardware profile when nobody set them."""


class RunContext(BaseModel):
    """Settings a caller may pass per run (``context=`` in LangGraph). Unset fields fall back to env/defaults."""

    model_config = ConfigDict(extra="forbid")

    backend: str | None = Field(default=None, description="Expert backend: llama, fake or remote.")
    model_path: str | None = Field(
        default=None, description="A bundled model name (qwen2.5-coder-0.5b, smollm2-135m) or a GGUF path."
    )
    fake_script: str | None = Field(default=None, description="Script file for the fake backend (YAML/JSON).")
    max_parallel: int | None = Field(default=None, ge=1, le=64, description="Slots run at the same time.")
    max_outline_retries: int | None = Field(default=None, ge=0, le=5)
    max_tokens: int | None = Field(default=None, ge=16, le=32768, description="Token budget per slot answer.")
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    use_grammar: bool | None = Field(default=None, description="Constrain output to the outline contract.")
    n_ctx: int | None = Field(default=None, ge=512, le=131072)
    n_threads: int | None = Field(default=None, ge=1, le=256)
    remote_url: str | None = Field(
        default=None, description="Remote backend: the server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1."
    )
    remote_model: str | None = Field(default=None, description="Remote backend: the model name of the base model.")
    remote_timeout: float | None = Field(
        default=None, gt=0.0, le=3600.0, description="Remote backend: seconds to wait for one completion."
    )
    remote_retries: int | None = Field(
        default=None, ge=0, le=10, description="Remote backend: retries after connection errors, 429 and 5xx."
    )
    reference_max_chars: int | None = Field(default=None, ge=200)
    routing_lambda: float | None = Field(
        default=None, ge=0.0, le=5.0, description="Exclusion penalty of the router: cap - lambda * exc."
    )
    routing_threshold: float | None = Field(
        default=None, ge=-1.0, le=1.0, description="Below this routing score a slot goes to general_reasoning."
    )
    routing_tie_margin: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Top-two gap under which a task-type specialist is preferred."
    )
    routing_fast_gap: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Top-two gap from which the router's static first stage decides (1: the encoder routes all).",
    )
    true_experts: bool | None = Field(
        default=None, description="Run true experts on their own models (false: every expert on the base model)."
    )
    use_templates: bool | None = Field(
        default=None,
        description="Scope the task and choose its framework from the template library (false: one slot).",
    )
    planner_model: str | None = Field(
        default=None, description="Model that adapts templates (bundled name or GGUF path; else the base model)."
    )
    kb_path: str | None = Field(
        default=None, description="Knowledge base directory for lookup assists (coe kb add fills it)."
    )
    lookup_threshold: float | None = Field(
        default=None, ge=-1.0, le=1.0, description="Least passage similarity that fills a lookup assist."
    )
    breaker_failures: int | None = Field(
        default=None, ge=0, le=1000, description="Backend failures in the window that open an expert breaker (0: off)."
    )
    breaker_window_s: float | None = Field(
        default=None, gt=0.0, le=86400.0, description="Sliding window of the circuit breaker, in seconds."
    )
    breaker_cooldown_s: float | None = Field(
        default=None, ge=0.0, le=86400.0, description="Seconds an open breaker waits before one trial slot."
    )
    profile: str | None = Field(
        default=None, description="Hardware profile from config/hardware_profiles.yaml, or auto (detect)."
    )
    memory_limit_mb: int | None = Field(
        default=None,
        ge=64,
        description="Memory the process may use for models and runtime, in MB (replaces the profile's).",
    )


def resolve_settings(context: RunContext | dict[str, Any] | None, env: dict[str, str] | None = None) -> Settings:
    """Resolve the effective settings: run context > environment > defaults.

    Raises:
        ConfigError: naming the environment variable or context field that holds a bad value.
    """
    environ = os.environ if env is None else env
    if isinstance(context, dict):
        try:
            context = RunContext.model_validate(context)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise ConfigError("run context", first["msg"], field=field) from None
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
    from experts.hardware import load_profiles, select_profile

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
