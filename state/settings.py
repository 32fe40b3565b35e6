"""The settings table: every per-run setting written once, with its type, bounds, default, variable and meaning.

:class:`Settings` is the table. A field annotated with :class:`Env` is a setting a person may give (run
context > environment variable > default, resolved by :func:`state.context.resolve_settings`); the others are
worked out from those (the hardware profile's budget, which settings were given explicitly). Everything else is
derived from it, so adding a setting means adding one field here:

* :data:`DEFAULTS` and :data:`ENV_VARS` (the built-in default and the environment variable of each setting);
* :data:`PROFILE_DEFAULTS` (settings whose default the hardware profile sets);
* the run-context schema callers and Studio see, :class:`state.context.RunContext` (the same fields, optional).

The resolved settings are recorded in the Passport by the guard node, so a resumed run behaves like the
original one in any process.

A few environment variables configure the process rather than a run and are never recorded (a secret must
never reach a checkpoint); they are listed in :data:`PROCESS_ENV` and read with :func:`process_env`. Locations
and their variables are in :mod:`state.paths`.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

__all__ = [
    "DEFAULTS",
    "ENV_VARS",
    "PROCESS_ENV",
    "PROFILE_DEFAULTS",
    "Env",
    "Settings",
    "process_env",
    "user_settings",
]


class Env:
    """Marks a :class:`Settings` field as a setting a person may give, and names its environment variable.

    ``from_profile``: when nobody gives it, the hardware profile's value is the default (not the field's).
    """

    __slots__ = ("from_profile", "name")

    def __init__(self, name: str, *, from_profile: bool = False) -> None:
        self.name = name
        self.from_profile = from_profile

    def __repr__(self) -> str:
        return f"Env({self.name!r})"


class Settings(BaseModel):
    """Effective per-run settings, resolved once (run context > environment > defaults) and recorded."""

    model_config = ConfigDict(extra="forbid")

    # --- the expert backend and its models ---------------------------------------------------------------------
    backend: Annotated[str, Env("COE_BACKEND")] = Field(
        default="llama", description="Expert backend: llama, fake or remote."
    )
    model_path: Annotated[str | None, Env("COE_MODEL")] = Field(
        default=None,
        description="The base model: a bundled model name (qwen2.5-coder-0.5b, smollm2-135m) or a GGUF path.",
    )
    fake_script: Annotated[str | None, Env("COE_FAKE_SCRIPT")] = Field(
        default=None, description="Script file for the fake backend (YAML/JSON)."
    )
    true_experts: Annotated[bool, Env("COE_TRUE_EXPERTS")] = Field(
        default=True, description="Run true experts on their own models (false: every expert on the base model)."
    )
    planner_model: Annotated[str | None, Env("COE_PLANNER_MODEL")] = Field(
        default="qwen2.5-coder-1.5b",
        description="Model that adapts templates (bundled name or GGUF path; else the base model).",
    )
    scope_reading: Annotated[bool, Env("COE_SCOPE_READING")] = Field(
        default=True,
        description="Ask the planner model whether a task read as a plan is one piece of work (false: rules only).",
    )
    plan_seconds: Annotated[float, Env("COE_PLAN_SECONDS")] = Field(
        default=20.0,
        ge=0.0,
        le=3600.0,
        description="Time the planner may spend editing a template (0: no planner; the fitted template runs).",
    )
    # --- generation ----------------------------------------------------------------------------------------------
    max_parallel: Annotated[int, Env("COE_MAX_PARALLEL", from_profile=True)] = Field(
        default=4, ge=1, le=64, description="Slots run at the same time (default: the hardware profile's)."
    )
    max_outline_retries: Annotated[int, Env("COE_MAX_OUTLINE_RETRIES")] = Field(
        default=2, ge=0, le=5, description="Fresh-prompt retries when an answer breaks the output contract."
    )
    max_tokens: Annotated[int, Env("COE_MAX_TOKENS")] = Field(
        default=600, ge=16, le=32768, description="Token budget per slot answer."
    )
    temperature: Annotated[float, Env("COE_TEMPERATURE")] = Field(
        default=0.0, ge=0.0, le=2.0, description="Sampling temperature (0: greedy, repeatable)."
    )
    repeat_penalty: Annotated[float, Env("COE_REPEAT_PENALTY")] = Field(
        default=1.1,
        ge=1.0,
        le=2.0,
        description=(
            "llama.cpp's repeat penalty for prose, plan and table answers (code and data: 1.0); 1.0: none "
            "(bench/results/repeat_penalty.md)."
        ),
    )
    use_grammar: Annotated[bool, Env("COE_USE_GRAMMAR")] = Field(
        default=True, description="Constrain output to the outline contract."
    )
    n_ctx: Annotated[int, Env("COE_N_CTX", from_profile=True)] = Field(
        default=4096, ge=512, le=131072, description="Context length in tokens (default: the hardware profile's)."
    )
    n_threads: Annotated[int | None, Env("COE_N_THREADS")] = Field(
        default=None, ge=1, le=256, description="CPU threads for llama.cpp (default: every core)."
    )
    prefix_cache: Annotated[bool, Env("COE_PREFIX_CACHE")] = Field(
        default=True, description="Keep a prompt's system message read between llama.cpp calls (same output)."
    )
    prefix_disk_cache: Annotated[bool, Env("COE_PREFIX_DISK_CACHE")] = Field(
        default=True,
        description="Save a system message's llama.cpp state on disk for the next process (same output; "
        "needs prefix_cache).",
    )
    best_of: Annotated[int, Env("COE_BEST_OF")] = Field(
        default=4,
        ge=1,
        le=16,
        description="Candidates a slot may draw in all when its answer fails its checks (1: no extra candidates).",
    )
    candidate_time_factor: Annotated[float, Env("COE_CANDIDATE_TIME_FACTOR")] = Field(
        default=4.0,
        ge=1.0,
        le=100.0,
        description="Extra candidates stop once a slot has spent this many times its first answer's time.",
    )
    escalate: Annotated[bool, Env("COE_ESCALATE")] = Field(
        default=True,
        description="A slot still failing its checks gets one last candidate from the biggest installed model.",
    )
    calculate: Annotated[bool, Env("COE_CALCULATE")] = Field(
        default=True,
        description="A task's numeric result (math; finance, general, medical tasks that ask for a value) is "
        "computed by a program a code model writes and the sandbox runs; the answer shows it and its program.",
    )
    completion_seconds: Annotated[float, Env("COE_COMPLETION_SECONDS")] = Field(
        default=240.0,
        ge=0.0,
        le=3600.0,
        description="The completion round's time budget: after the parts are written, what the document lacks "
        "(a part the task asks for, a failed part, a part that repeats another, work a part asked an expert for) "
        "gets one more round planned to fit in it, from the run's own part times; 0 turns the round off.",
    )
    check_timeout_s: Annotated[float, Env("COE_CHECK_TIMEOUT_S")] = Field(
        default=10.0, gt=0.0, le=600.0, description="Seconds the sandbox lets one check of generated code run."
    )
    reference_max_chars: Annotated[int, Env("COE_REFERENCE_MAX_CHARS")] = Field(
        default=6000, ge=200, description="Characters of a referenced slot's result put into a prompt."
    )
    # --- the remote backend (its API key is a process variable, never a setting: see PROCESS_ENV) --------------
    remote_url: Annotated[str | None, Env("COE_REMOTE_URL")] = Field(
        default=None, description="Remote backend: the server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1."
    )
    remote_model: Annotated[str | None, Env("COE_REMOTE_MODEL")] = Field(
        default=None, description="Remote backend: the model name of the base model."
    )
    remote_timeout: Annotated[float, Env("COE_REMOTE_TIMEOUT")] = Field(
        default=300.0, gt=0.0, le=3600.0, description="Remote backend: seconds to wait for one completion."
    )
    remote_retries: Annotated[int, Env("COE_REMOTE_RETRIES")] = Field(
        default=2, ge=0, le=10, description="Remote backend: retries after connection errors, 408, 409, 429 and 5xx."
    )
    # --- routing and planning (calibrated by bench/bench_routing.py; bench/results/routing.md) -----------------
    routing_lambda: Annotated[float, Env("COE_ROUTING_LAMBDA")] = Field(
        default=0.3, ge=0.0, le=5.0, description="Exclusion penalty of the router: cap - lambda * exc."
    )
    routing_threshold: Annotated[float, Env("COE_ROUTING_THRESHOLD")] = Field(
        default=0.04, ge=-1.0, le=1.0, description="Below this routing score a slot goes to general_reasoning."
    )
    routing_tie_margin: Annotated[float, Env("COE_ROUTING_TIE_MARGIN")] = Field(
        default=0.02, ge=0.0, le=1.0, description="Top-two gap under which a task-type specialist is preferred."
    )
    routing_fast_gap: Annotated[float, Env("COE_ROUTING_FAST_GAP")] = Field(
        default=0.08,
        ge=0.0,
        le=1.0,
        description="Top-two gap from which the router's static first stage decides (1: the encoder routes all).",
    )
    use_templates: Annotated[bool, Env("COE_USE_TEMPLATES")] = Field(
        default=True, description="Scope the task and choose its framework from the template library (false: one slot)."
    )
    # --- assists (the lookup threshold is calibrated by bench/bench_assist.py) -----------------------------------
    kb_path: Annotated[str | None, Env("COE_KB")] = Field(
        default=None, description="Knowledge base directory for lookup assists (coe kb add fills it)."
    )
    lookup_threshold: Annotated[float, Env("COE_LOOKUP_THRESHOLD")] = Field(
        default=0.71, ge=-1.0, le=1.0, description="Least passage similarity that fills a lookup assist."
    )
    memory_threshold: Annotated[float, Env("COE_MEMORY_THRESHOLD")] = Field(
        default=0.48,
        ge=-1.0,
        le=1.0,
        description="Least similarity of a remembered fact that fills a lookup assist (bench/results/memory.md).",
    )
    memory_check_model: Annotated[str | None, Env("COE_MEMORY_CHECK_MODEL")] = Field(
        default="qwen2.5-coder-1.5b",
        description=(
            "Model that checks a remembered fact above the line answers the lookup (bundled name or GGUF path; "
            "empty: no check). Not installed: no check, the line alone decides."
        ),
    )
    # --- the circuit breaker per expert --------------------------------------------------------------------------
    breaker_failures: Annotated[int, Env("COE_BREAKER_FAILURES")] = Field(
        default=5, ge=0, le=1000, description="Backend failures in the window that open an expert breaker (0: off)."
    )
    breaker_window_s: Annotated[float, Env("COE_BREAKER_WINDOW_S")] = Field(
        default=60.0, gt=0.0, le=86400.0, description="Sliding window of the circuit breaker, in seconds."
    )
    breaker_cooldown_s: Annotated[float, Env("COE_BREAKER_COOLDOWN_S")] = Field(
        default=30.0, ge=0.0, le=86400.0, description="Seconds an open breaker waits before one trial slot."
    )
    endpoint_health_s: Annotated[float, Env("COE_ENDPOINT_HEALTH_S")] = Field(
        default=30.0,
        ge=0.0,
        le=86400.0,
        description=(
            "Seconds between health checks of an expert's own server; a check opens or closes its breaker (0: none)."
        ),
    )
    # --- the memory budget (state/hardware.py) -------------------------------------------------------------------
    profile: Annotated[str, Env("COE_PROFILE")] = Field(
        default="auto", description="Hardware profile from config/hardware_profiles.yaml, or auto (detect)."
    )
    memory_limit_mb: Annotated[int | None, Env("COE_MEMORY_LIMIT_MB")] = Field(
        default=None,
        ge=64,
        description="Memory the process may use for models and runtime, in MB (replaces the profile's).",
    )

    # --- worked out when the settings are resolved, never given ------------------------------------------------
    profile_source: str = ""
    """How the profile was chosen (what auto-detection found)."""
    memory_mb: int | None = Field(default=None, ge=64)
    """The memory budget in effect (limit or profile); None: no budget (checkpoints from before budgets)."""
    memory_overhead_mb: int = Field(default=0, ge=0)
    """The part of ``memory_mb`` kept for the runtime and embedder; the models' pool gets the rest."""
    preload: bool = False
    preload_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    emergency_threshold: float = Field(default=0.95, gt=0.0, le=1.0)
    gpu_offload: bool = False
    """Offload every layer to the GPU (a GPU profile on a llama.cpp built with GPU support)."""
    explicit: list[str] = Field(default_factory=list)
    """Settings given by the run context or the environment (not defaults); they win over expert defaults."""


def env_of(field: FieldInfo) -> Env | None:
    """The :class:`Env` marker of a field (None: a worked-out field nobody sets)."""
    return next((m for m in field.metadata if isinstance(m, Env)), None)


def user_settings() -> dict[str, tuple[FieldInfo, Env]]:
    """Every setting a person may give, in table order, with its field and its :class:`Env` marker."""
    out: dict[str, tuple[FieldInfo, Env]] = {}
    for name, field in Settings.model_fields.items():
        marker = env_of(field)
        if marker is not None:
            out[name] = (field, marker)
    return out


DEFAULTS: dict[str, Any] = {name: field.default for name, (field, _) in user_settings().items()}
"""The built-in default of every setting."""
ENV_VARS: dict[str, str] = {name: marker.name for name, (_, marker) in user_settings().items()}
"""The environment variable of every setting."""
PROFILE_DEFAULTS: tuple[str, ...] = tuple(name for name, (_, marker) in user_settings().items() if marker.from_profile)
"""Settings whose default comes from the hardware profile when nobody set them."""

PROCESS_ENV: dict[str, str] = {
    "COE_REMOTE_API_KEY": "the remote server's API key, sent as Authorization: Bearer; never recorded",
    "COE_EMBED_BACKEND": "the process's embedding backend: onnx (default), onnx-int8, sentence-transformers",
    "COE_FAKE_CALLS_LOG": "the fake backend writes one JSON line per call to this file (tests)",
    "COE_RETENTION_DAYS": "coe prune: the age (days) past which finished runs are deleted",
    "COE_LEASE_SECONDS": "seconds a run's lease on its thread outlives its last renewal (default 30)",
    "COE_API_KEYS_FILE": "the server's API keys (YAML: keys with key or sha256, identity, tenant); unset: open",
    "COE_SHADOW_IDLE_SECONDS": "seconds the server stays idle before its shadow worker answers a slot (60; 0: off)",
}
"""Environment variables of the process, not of a run: read when needed, never recorded in a checkpoint."""


def process_env(name: str, named_by: str | None = None) -> str | None:
    """The value of a process variable of :data:`PROCESS_ENV` (None when unset or blank).

    Args:
        name: The variable.
        named_by: Where a variable outside :data:`PROCESS_ENV` was named (an expert's endpoint names the variable
            of its server's key): it may then be read too.
    """
    if name not in PROCESS_ENV and named_by is None:
        raise KeyError(f"{name} is not a process variable; known: {', '.join(PROCESS_ENV)}")
    value = os.environ.get(name, "").strip()
    return value or None
