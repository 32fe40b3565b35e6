"""Hardware profiles (``config/hardware_profiles.yaml``) and detecting which one fits this machine.

A profile is a source of settings (the memory budget, and the defaults of the slots run at once and the
context length), so it is resolved with the settings (:func:`state.context.resolve_settings`). Detection asks
only the operating system, ``nvidia-smi`` and, where that exists, the installed llama.cpp whether it can
offload to a GPU; no expert code is involved.

A profile sets the memory the process may use on its device, the part of it kept for everything but the
expert models, the slots run at once, the context length and whether models are preloaded. ``auto`` picks
one: on a machine where llama.cpp can offload to an NVIDIA GPU, the largest GPU profile that fits the GPU's
memory; otherwise the CPU profile for the machine's RAM, its budget capped at half of the RAM (the machine
is shared with everything else the user runs). ``--memory-limit`` replaces the profile's budget.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from state.errors import ConfigError
from state.paths import profiles_path
from state.yaml_text import safe_load

__all__ = ["AUTO", "Detected", "Profile", "detect", "load_profiles", "select_profile"]

AUTO = "auto"
_CPU_SMALL_BELOW_MB = 12 * 1024
"""Below this much RAM, auto-detection picks ``cpu-small`` instead of ``cpu``."""


class Profile(BaseModel):
    """One hardware profile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    description: str = ""
    device: Literal["cpu", "gpu"]
    memory_mb: int = Field(ge=64)
    overhead_mb: int = Field(ge=0)
    max_parallel: int = Field(ge=1, le=64)
    n_ctx: int = Field(ge=512, le=131072)
    preload: bool
    preload_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    emergency_threshold: float = Field(default=0.95, gt=0.0, le=1.0)


class _ProfilesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profiles: dict[str, Profile]


@dataclass(frozen=True)
class Detected:
    """What auto-detection found on this machine."""

    ram_mb: int
    gpu_mb: int | None
    """Total memory of the largest NVIDIA GPU, when llama.cpp was built to offload to one."""
    gpu_offload: bool
    """Whether the installed llama.cpp can offload layers to a GPU."""

    def describe(self) -> str:
        """RAM and GPU in one line."""
        gpu = f"GPU {self.gpu_mb} MB" if self.gpu_mb is not None else "no GPU offload"
        return f"RAM {self.ram_mb} MB, {gpu}"


def load_profiles(path: Path | None = None) -> dict[str, Profile]:
    """Load and validate the profiles file; errors name the file and the field.

    Raises:
        ConfigError: If the file is missing, not YAML, or a profile is invalid.
    """
    path = path or profiles_path()
    return _load(str(path))


@functools.lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Profile]:
    try:
        data: Any = safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(path, "hardware profiles file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(path, f"not valid YAML: {exc}") from None
    try:
        parsed = _ProfilesFile.model_validate(data or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(path, first["msg"], field=".".join(str(p) for p in first["loc"])) from None
    profiles: dict[str, Profile] = {}
    for name, profile in parsed.profiles.items():
        if name == AUTO:
            raise ConfigError(path, f"{AUTO!r} is reserved for auto-detection", field=f"profiles.{name}")
        if profile.overhead_mb >= profile.memory_mb:
            raise ConfigError(
                path,
                "overhead_mb must be less than memory_mb (nothing would be left for the models)",
                field=f"profiles.{name}.overhead_mb",
            )
        if profile.preload_threshold > profile.emergency_threshold:
            raise ConfigError(path, "preload_threshold must not exceed emergency_threshold", field=f"profiles.{name}")
        profiles[name] = profile.model_copy(update={"name": name})
    if not any(p.device == "cpu" for p in profiles.values()):
        raise ConfigError(path, "at least one profile must have device: cpu (auto-detection needs one)")
    return profiles


@functools.lru_cache(maxsize=1)
def detect() -> Detected:
    """Measure this machine once per process: RAM, and GPU memory where llama.cpp can offload.

    Without ``nvidia-smi`` there is no GPU to size, so llama.cpp is not asked (importing it costs 0.2 s, which
    every command that resolves settings, ``coe route`` included, would pay).
    """
    ram_mb = _ram_mb()
    if shutil.which("nvidia-smi") is None:
        return Detected(ram_mb=ram_mb, gpu_mb=None, gpu_offload=False)
    offload = _gpu_offload()
    return Detected(ram_mb=ram_mb, gpu_mb=_nvidia_gpu_mb() if offload else None, gpu_offload=offload)


def select_profile(name: str, profiles: dict[str, Profile], detected: Detected | None = None) -> tuple[Profile, str]:
    """The profile named ``name`` (or detected for ``auto``), and a line saying how it was chosen.

    Raises:
        ConfigError: If ``name`` is not a profile.
    """
    if name != AUTO:
        if name not in profiles:
            raise ConfigError(
                "profile", f"unknown hardware profile {name!r}; allowed: {AUTO}, {', '.join(sorted(profiles))}"
            )
        return profiles[name], f"profile {name} (chosen)"
    found = detected or detect()
    if found.gpu_mb is not None:
        gpus = sorted((p for p in profiles.values() if p.device == "gpu"), key=lambda p: p.memory_mb)
        fitting = [p for p in gpus if p.memory_mb <= found.gpu_mb]
        if fitting:
            return fitting[-1], f"auto: {found.describe()} -> {fitting[-1].name}"
        if gpus:
            smallest = gpus[0].model_copy(update={"memory_mb": found.gpu_mb})
            if smallest.overhead_mb < smallest.memory_mb:
                return smallest, f"auto: {found.describe()} -> {smallest.name} with the GPU's {found.gpu_mb} MB"
    cpus = sorted((p for p in profiles.values() if p.device == "cpu"), key=lambda p: p.memory_mb)
    small = found.ram_mb < _CPU_SMALL_BELOW_MB
    profile = cpus[0] if small else cpus[-1]
    cap = found.ram_mb // 2
    if profile.memory_mb > cap and cap > profile.overhead_mb:
        profile = profile.model_copy(update={"memory_mb": cap})
        return profile, f"auto: {found.describe()} -> {profile.name}, capped at half the RAM ({cap} MB)"
    return profile, f"auto: {found.describe()} -> {profile.name}"


def _ram_mb() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8192


def _gpu_offload() -> bool:
    """Whether the installed llama-cpp-python was built with GPU offload (False when it is not installed)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        import llama_cpp

        return bool(llama_cpp.llama_supports_gpu_offload())
    except (ImportError, OSError, AttributeError):
        return False


def _nvidia_gpu_mb() -> int | None:
    """Total memory of the largest NVIDIA GPU, from ``nvidia-smi`` (None when there is none)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_nvidia_smi(out)


def parse_nvidia_smi(output: str) -> int | None:
    """The largest value of ``nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits`` (MiB)."""
    sizes = []
    for line in output.splitlines():
        try:
            sizes.append(int(float(line.strip())))
        except ValueError:
            continue
    return max(sizes) if sizes else None
