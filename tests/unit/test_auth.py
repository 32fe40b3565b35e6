"""The server's API keys and owners (server/auth.py) and a user's own knowledge base (nodes/guard.py)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from langgraph_sdk import Auth

from nodes.guard import confine_to_user
from server import auth as server_auth
from state.context import resolve_settings
from state.errors import ConfigError
from state.paths import user_kb_dir

ALICE = "alice-key-0123456789abcdef"


def _keys_file(tmp_path: Path, keys: list[dict[str, Any]]) -> Path:
    path = tmp_path / "keys.yaml"
    path.write_text(yaml.safe_dump({"keys": keys}), encoding="utf-8")
    return path


def _authenticate(headers: dict[bytes, bytes]) -> Any:
    return asyncio.run(server_auth.authenticate(headers=headers))


def test_an_open_server_has_one_local_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(server_auth.KEYS_ENV, raising=False)
    assert _authenticate({})["identity"] == "local"


def test_keys_by_header_or_bearer_plain_or_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bob = "bob-key-0123456789abcdefghij"
    path = _keys_file(
        tmp_path,
        [
            {"key": ALICE, "identity": "alice", "tenant": "acme"},
            {"sha256": hashlib.sha256(bob.encode()).hexdigest(), "identity": "bob"},
        ],
    )
    monkeypatch.setenv(server_auth.KEYS_ENV, str(path))
    monkeypatch.setattr(server_auth, "_KEYS", server_auth._Keys())
    assert _authenticate({b"x-api-key": ALICE.encode()}) == {"identity": "alice", "tenant": "acme"}
    assert _authenticate({b"authorization": f"Bearer {bob}".encode()}) == {"identity": "bob", "tenant": "bob"}
    for headers in ({}, {b"x-api-key": b"guess"}, {b"authorization": b"Basic abc"}):
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            _authenticate(headers)
        assert refused.value.status_code == 401


def test_a_revoked_key_stops_working_without_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _keys_file(tmp_path, [{"key": ALICE, "identity": "alice"}])
    monkeypatch.setenv(server_auth.KEYS_ENV, str(path))
    monkeypatch.setattr(server_auth, "_KEYS", server_auth._Keys())
    assert _authenticate({b"x-api-key": ALICE.encode()})["identity"] == "alice"
    _keys_file(tmp_path, [{"key": "another-key-0123456789", "identity": "carol"}])
    with pytest.raises(Auth.exceptions.HTTPException):
        _authenticate({b"x-api-key": ALICE.encode()})


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"key": "short", "identity": "alice"}, "16 characters"),
        ({"key": ALICE, "identity": "../etc"}, "identity '../etc'"),
        ({"key": ALICE, "identity": "local"}, "not 'local'"),
        ({"sha256": "xyz", "identity": "alice"}, "64 hex digits"),
    ],
)
def test_a_bad_keys_file_names_the_entry(tmp_path: Path, entry: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as bad:
        server_auth.load_keys(_keys_file(tmp_path, [entry]))
    assert problem in str(bad.value) and "keys[0]" in str(bad.value)


def test_a_missing_keys_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the API keys file"):
        server_auth.load_keys(tmp_path / "nope.yaml")


def test_what_a_user_creates_is_owned_and_what_they_read_is_filtered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(server_auth.KEYS_ENV, raising=False)
    open_server = SimpleNamespace(user=_User("local", "local"), resource="threads", action="search")
    assert asyncio.run(server_auth.owned(open_server, {})) is None  # type: ignore[arg-type]
    monkeypatch.setenv(server_auth.KEYS_ENV, str(_keys_file(tmp_path, [{"key": ALICE, "identity": "alice"}])))
    monkeypatch.setattr(server_auth, "_KEYS", server_auth._Keys())
    ctx = SimpleNamespace(user=_User("alice", "acme"), resource="threads", action="create")
    value: dict[str, Any] = {"metadata": {"topic": "x"}}
    filters = asyncio.run(server_auth.owned(ctx, value))  # type: ignore[arg-type]
    assert filters == {"owner": "alice", "tenant": "acme"}
    assert value["metadata"] == {"topic": "x", "owner": "alice", "tenant": "acme"}
    read = SimpleNamespace(user=_User("bob", "globex"), resource="assistants", action="search")
    assert asyncio.run(server_auth.assistants(read, {})) is None  # type: ignore[arg-type]


class _User:
    def __init__(self, identity: str, tenant: str) -> None:
        self.identity = identity
        self._tenant = tenant

    def __getitem__(self, key: str) -> str:
        if key == "tenant":
            return self._tenant
        raise KeyError(key)


def test_a_server_user_looks_things_up_in_their_own_knowledge_base() -> None:
    settings = resolve_settings({"backend": "fake"}, env={})
    assert confine_to_user(settings, None, None) is settings
    assert confine_to_user(settings, None, "local") is settings
    confined = confine_to_user(settings, {"backend": "fake"}, "alice")
    assert confined.kb_path == str(user_kb_dir("alice")) and confined.kb_path.endswith("/users/alice")
    with pytest.raises(ConfigError, match="kb_path"):
        confine_to_user(settings, {"kb_path": "/srv/kb/users/bob"}, "alice")
    for name, value in (("model_path", "/etc/passwd"), ("fake_script", "/srv/x.yaml"), ("remote_url", "http://x")):
        with pytest.raises(ConfigError, match=f"run context field {name}"):
            confine_to_user(settings, {name: value}, "alice")
    assert confine_to_user(settings, {"model_path": "qwen2.5-coder-1.5b"}, "alice").kb_path == confined.kb_path
    assert confine_to_user(settings, {"model_path": "/etc/passwd"}, None) is settings  # the CLI: as is
    assert Path(str(user_kb_dir("../bob"))).name != ".." and "/users/" in str(user_kb_dir("../bob"))
