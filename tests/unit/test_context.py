import pytest

from state.context import RunContext, resolve_settings
from state.errors import ConfigError


def test_defaults() -> None:
    s = resolve_settings(None, env={})
    assert s.backend == "llama" and s.max_outline_retries == 2 and s.use_grammar is True


def test_run_context_beats_env_beats_default() -> None:
    env = {"COE_BACKEND": "fake", "COE_MAX_PARALLEL": "3", "COE_MAX_TOKENS": "100"}
    s = resolve_settings(RunContext(max_parallel=7), env=env)
    assert s.backend == "fake"  # env over default
    assert s.max_parallel == 7  # run over env
    assert s.max_tokens == 100


def test_bad_env_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="COE_MAX_PARALLEL"):
        resolve_settings(None, env={"COE_MAX_PARALLEL": "zero"})


def test_unknown_backend_lists_allowed() -> None:
    with pytest.raises(ConfigError, match="allowed: llama, fake"):
        resolve_settings(None, env={"COE_BACKEND": "gpt"})


def test_context_dict_with_unknown_field() -> None:
    with pytest.raises(ConfigError, match="colour"):
        resolve_settings({"colour": "red"}, env={})


def test_the_run_context_is_derived_from_the_settings_table() -> None:
    from state.settings import DEFAULTS, ENV_VARS, PROFILE_DEFAULTS, Settings, user_settings

    schema = RunContext.model_json_schema()["properties"]
    assert list(schema) == list(user_settings()) == list(DEFAULTS) == list(ENV_VARS)
    assert len(set(ENV_VARS.values())) == len(ENV_VARS)  # one variable per setting
    assert PROFILE_DEFAULTS == ("max_parallel", "n_ctx")
    assert schema["max_parallel"]["anyOf"][0] == {"maximum": 64, "minimum": 1, "type": "integer"}
    assert schema["backend"]["description"] == Settings.model_fields["backend"].description
    assert "explicit" not in schema and "memory_mb" not in schema  # worked out, never given
    with pytest.raises(ConfigError, match="max_parallel"):
        resolve_settings({"max_parallel": 0}, env={})
