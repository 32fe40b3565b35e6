"""Issue 42, security: a server user's operator-only setting is refused before any file it names is touched.

The guard is driven as the server drives it: the graph run with ``langgraph_auth_user_id`` in its configurable
(the authenticated user) and the user's run context. An audit hook records every file the process opens or lists
under the test's sentinel directory while the run is refused: none may be touched.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from nodes.guard import MODEL_SETTINGS, OPERATOR_SETTINGS, refuse_operator_settings
from state.errors import ConfigError

_WATCHED: list[str] = []
"""The sentinel directory whose opening the audit hook reports (empty: the hook is idle)."""
_TOUCHED: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _WATCHED and event in ("open", "os.listdir", "os.scandir") and args:
        path = str(args[0])
        if path.startswith(_WATCHED[0]):
            _TOUCHED.append(f"{event} {path}")


sys.addaudithook(_audit)  # audit hooks cannot be removed: it records only while _WATCHED names a directory


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[Path]:
    """A directory of the 'server' with a file in it; every touch of either is recorded."""
    directory = tmp_path / "server-files"
    directory.mkdir()
    (directory / "secret.yaml").write_text("keys:\n  - key: do-not-leak-this-key\n", encoding="utf-8")
    _TOUCHED.clear()
    _WATCHED[:] = [str(directory)]
    yield directory
    _WATCHED.clear()


def _value(name: str, sentinel: Path) -> object:
    """A value of the setting that, were it read, would read the sentinel (or size the process)."""
    if name == "kb_path":
        return str(sentinel)
    if name in ("n_threads", "memory_limit_mb"):
        return 4096 if name == "memory_limit_mb" else 2
    if name == "profile":
        return "cpu"
    if name == "remote_url":
        return "http://127.0.0.1:9/v1"
    return str(sentinel / "secret.yaml")


def _run_as(user: str, context: dict[str, Any]) -> dict[str, Any]:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "langgraph_auth_user_id": user}}
    return dict(graph.invoke({"task": "Explain how TLS certificates are validated"}, config, context=context))


@pytest.mark.parametrize("name", OPERATOR_SETTINGS)
def test_every_operator_setting_is_refused_before_its_file_is_touched(name: str, sentinel: Path) -> None:
    context = {"backend": "llama" if name in MODEL_SETTINGS else "fake", name: _value(name, sentinel)}
    with pytest.raises(ConfigError) as error:
        _run_as("alice", context)
    assert "set by the server's operator" in str(error.value) and error.value.field == name
    assert "do-not-leak" not in str(error.value)
    assert _TOUCHED == []


@pytest.mark.parametrize("name", OPERATOR_SETTINGS)
def test_the_answer_does_not_depend_on_what_the_path_is(name: str, sentinel: Path) -> None:
    """A missing path, a directory and a file answer alike: nothing about the server's files can be probed."""
    answers = set()
    for value in (str(sentinel / "missing.gguf"), str(sentinel), str(sentinel / "secret.yaml")):
        with pytest.raises(ConfigError) as error:
            refuse_operator_settings({name: value}, "alice")
        answers.add(str(error.value))
    assert len(answers) == 1 and _TOUCHED == []


@pytest.mark.parametrize("name", MODEL_SETTINGS)
def test_a_bundled_model_name_stays_a_users_choice(name: str) -> None:
    refuse_operator_settings({name: "qwen2.5-coder-0.5b"}, "alice")  # no error


def test_the_cli_and_an_open_server_are_not_confined(sentinel: Path) -> None:
    for user in (None, "local"):
        refuse_operator_settings({"fake_script": str(sentinel / "secret.yaml")}, user)  # no error
