"""Hardware profiles, auto-detection, the budget settings, and GGUF footprint estimates."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import yaml

from experts.models.footprint import MIB, estimate, read_shape
from state.context import resolve_settings
from state.errors import ConfigError, ModelUnavailableError
from state.hardware import Detected, load_profiles, parse_nvidia_smi, select_profile


def test_shipped_profiles_include_the_seed_ones_and_a_cpu_profile_for_this_machine() -> None:
    profiles = load_profiles()
    assert {"minimal", "compact", "standard", "performance", "unlimited", "cpu", "cpu-small"} <= set(profiles)
    standard = profiles["standard"]
    assert (standard.memory_mb, standard.max_parallel, standard.n_ctx, standard.preload) == (32768, 2, 8192, True)
    assert not profiles["minimal"].preload and profiles["cpu"].device == "cpu"


@pytest.mark.parametrize(
    ("detected", "name", "memory"),
    [
        (Detected(ram_mb=24000, gpu_mb=None, gpu_offload=False), "cpu", 6144),
        (Detected(ram_mb=8000, gpu_mb=None, gpu_offload=False), "cpu-small", 3072),
        (Detected(ram_mb=6000, gpu_mb=None, gpu_offload=False), "cpu-small", 3000),  # capped at half the RAM
        (Detected(ram_mb=128000, gpu_mb=81559, gpu_offload=True), "unlimited", 65536),  # an 80 GB H100
        (Detected(ram_mb=64000, gpu_mb=24576, gpu_offload=True), "compact", 16384),  # a 24 GB card
        (Detected(ram_mb=64000, gpu_mb=6144, gpu_offload=True), "minimal", 6144),  # smaller than every profile
    ],
)
def test_auto_detection_picks_the_profile_that_fits(detected: Detected, name: str, memory: int) -> None:
    profile, how = select_profile("auto", load_profiles(), detected)
    assert (profile.name, profile.memory_mb) == (name, memory)
    assert how.startswith("auto:") and name in how


def test_nvidia_smi_output_is_parsed_to_the_largest_gpu() -> None:
    assert parse_nvidia_smi("81559\n40960\n") == 81559
    assert parse_nvidia_smi("[N/A]\n") is None and parse_nvidia_smi("") is None


def test_unknown_profile_names_the_setting_and_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"environment variable COE_PROFILE: unknown hardware profile 'huge'.*auto"):
        resolve_settings(None, env={"COE_PROFILE": "huge"})
    with pytest.raises(ConfigError, match=r"run context field profile: unknown hardware profile 'x'"):
        resolve_settings({"profile": "x"}, env={})


def test_profile_sets_budget_and_defaults_but_explicit_settings_win() -> None:
    s = resolve_settings({"profile": "standard"}, env={})
    assert (s.profile, s.memory_mb, s.memory_overhead_mb, s.max_parallel, s.n_ctx, s.preload) == (
        "standard",
        32768,
        2048,
        2,
        8192,
        True,
    )
    assert s.gpu_offload and s.profile_source == "profile standard (chosen)"
    s = resolve_settings({"profile": "standard", "max_parallel": 7}, env={"COE_N_CTX": "2048"})
    assert (s.max_parallel, s.n_ctx) == (7, 2048)
    s = resolve_settings({"profile": "cpu", "memory_limit_mb": 3000}, env={})
    assert (s.memory_mb, s.memory_limit_mb, s.gpu_offload) == (3000, 3000, False)
    assert resolve_settings(None, env={"COE_MEMORY_LIMIT_MB": "2500", "COE_PROFILE": "cpu"}).memory_mb == 2500


def test_memory_limit_that_leaves_nothing_for_models_is_refused_naming_where_it_came_from() -> None:
    with pytest.raises(ConfigError, match=r"COE_MEMORY_LIMIT_MB: 1000 MB leaves nothing for the models.*1024 MB"):
        resolve_settings(None, env={"COE_MEMORY_LIMIT_MB": "1000", "COE_PROFILE": "cpu"})
    with pytest.raises(ConfigError, match=r"COE_MEMORY_LIMIT_MB: 'lots' is not a whole number"):
        resolve_settings(None, env={"COE_MEMORY_LIMIT_MB": "lots"})


def _write_profiles(tmp_path: Path, profiles: dict[str, object]) -> Path:
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump({"profiles": profiles}), encoding="utf-8")
    return path


CPU = {"device": "cpu", "memory_mb": 4000, "overhead_mb": 500, "max_parallel": 2, "n_ctx": 2048, "preload": True}


@pytest.mark.parametrize(
    ("profiles", "message"),
    [
        ({"cpu": {**CPU, "memory_mb": "lots"}}, r"profiles\.cpu\.memory_mb"),
        ({"cpu": {**CPU, "overhead_mb": 4000}}, r"profiles\.cpu\.overhead_mb: overhead_mb must be less"),
        ({"cpu": {**CPU, "colour": "red"}}, r"profiles\.cpu\.colour"),
        ({"auto": CPU}, r"profiles\.auto: 'auto' is reserved"),
        ({"g": {**CPU, "device": "gpu"}}, r"at least one profile must have device: cpu"),
        ({"cpu": {**CPU, "preload_threshold": 0.99}}, r"preload_threshold must not exceed emergency_threshold"),
    ],
)
def test_broken_profiles_file_is_reported_with_file_and_field(
    tmp_path: Path, profiles: dict[str, object], message: str
) -> None:
    path = _write_profiles(tmp_path, profiles)
    with pytest.raises(ConfigError, match=message) as info:
        load_profiles(path)
    assert str(path) in str(info.value)


def test_profiles_file_can_be_replaced_by_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write_profiles(tmp_path, {"tiny": {**CPU, "memory_mb": 1500}})
    monkeypatch.setenv("COE_HARDWARE_PROFILES", str(path))
    s = resolve_settings({"profile": "tiny"})
    assert (s.memory_mb, s.memory_overhead_mb, s.n_ctx) == (1500, 500, 2048)


# --- GGUF footprints ---------------------------------------------------------------------------------------


def _gguf(path: Path, meta: dict[str, object], *, tensor_bytes: int = 1000) -> Path:
    """Write a minimal GGUF v3 header with ``meta`` (ints as uint32, str, list of str), then filler bytes."""

    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    body = b""
    for key, value in meta.items():
        body += s(key)
        if isinstance(value, str):
            body += struct.pack("<I", 8) + s(value)
        elif isinstance(value, list):
            body += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(s(v) for v in value)
        else:
            body += struct.pack("<II", 4, int(value))  # type: ignore[call-overload]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta)) + body + b"\0" * tensor_bytes)
    return path


META = {
    "general.architecture": "llama",
    "llama.block_count": 4,
    "llama.embedding_length": 256,
    "llama.attention.head_count": 8,
    "llama.attention.head_count_kv": 2,
    "llama.context_length": 2048,
    "tokenizer.ggml.tokens": ["a", "b", "c", "d"],
}


def test_footprint_reads_the_shape_from_the_header_and_sizes_the_kv_cache(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "m.gguf", META)
    shape = read_shape(path)
    assert (shape.n_layer, shape.n_embd, shape.n_head, shape.n_head_kv, shape.key_length, shape.n_vocab) == (
        4,
        256,
        8,
        2,
        32,
        4,
    )
    fp = estimate(path, 1024)
    assert fp.weights == path.stat().st_size
    assert fp.kv_cache == 4 * 1024 * 2 * (32 + 32) * 2  # layers x context x kv heads x (k + v dims) x f16
    assert estimate(path, 2048).kv_cache == 2 * fp.kv_cache and estimate(path, 2048).compute > fp.compute
    assert fp.total == fp.weights + fp.kv_cache + fp.compute and "MiB" in fp.describe()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"NOPE" + b"\0" * 32, "not a GGUF file"),
        (b"GGUF" + struct.pack("<I", 3), "truncated GGUF header"),
    ],
)
def test_footprint_of_a_broken_file_names_it(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelUnavailableError, match=message) as info:
        estimate(path, 1024)
    assert str(path) in str(info.value)


def test_footprint_needs_the_architecture_sizes(tmp_path: Path) -> None:
    meta = {k: v for k, v in META.items() if k != "llama.block_count"}
    with pytest.raises(ModelUnavailableError, match=r"no llama\.block_count"):
        estimate(_gguf(tmp_path / "m.gguf", meta), 1024)


def test_bundled_model_estimate_is_within_reason() -> None:
    """The default model's estimate is above its file and below twice the file (measured: 584 MiB loaded)."""
    from experts.models.bundled import resolve_model_path

    fp = estimate(resolve_model_path(None), 4096)
    assert fp.weights < fp.total < 2 * fp.weights
    assert 600 * MIB < fp.total < 800 * MIB
