"""Bad input is refused at the edge, with the limits the later steps enforce, before anything is saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from cli.main import app
from graph import build_graph
from state.errors import InputError
from state.io import MAX_TASK_CHARS

runner = CliRunner()


@pytest.fixture
def cp(tmp_path: Path) -> list[str]:
    return ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"]


def _saved_threads(cp: list[str]) -> list[dict[str, Any]]:
    listed = runner.invoke(app, ["threads", "--json", *cp])
    assert listed.exit_code == 0, listed.output
    return list(json.loads(listed.stdout))


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["run", "x" * (MAX_TASK_CHARS + 1)], None, f"the limit is {MAX_TASK_CHARS}"),
        (["run", "-"], b"Explain \xff\xfe TLS", "task (standard input): is not UTF-8 text (byte 8)"),
        (["run", "Explain\x00 TLS"], None, "task: contains a NUL character at position 7"),
        (["run", "Explain TLS", "--model", "/no/such/model.gguf"], None, "model file not found: /no/such/model.gguf"),
        (["run", "Explain TLS", "--model", "qwen-huge"], None, "unknown model 'qwen-huge'"),
        (["run", "Explain TLS", "--out", "/no/dir/answer.md"], None, "--out: directory /no/dir does not exist"),
        (["run", "Explain TLS", "--out-dir", "/etc/hostname"], None, "--out-dir: /etc/hostname is a file"),
    ],
)
def test_bad_input_exits_2_naming_it_and_saves_nothing(
    args: list[str], stdin: bytes | None, message: str, cp: list[str]
) -> None:
    backend = [] if "--model" in args else ["--backend", "fake"]
    result = runner.invoke(app, [*args, *backend, "--thread-id", "t-bad", *cp], input=stdin)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert _saved_threads(cp) == []


@pytest.mark.slow  # an 8,000-character task embedded and routed at every step
def test_a_task_at_the_limit_runs_through_every_step(cp: list[str]) -> None:
    sentence = "Design the schema of the orders table and write the migration for it. "
    task = (sentence * (MAX_TASK_CHARS // len(sentence) + 1))[:MAX_TASK_CHARS].strip()
    result = runner.invoke(app, ["run", task, "--backend", "fake", "--json", *cp])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "completed"


def test_a_broken_catalog_fails_before_the_run_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cp: list[str]
) -> None:
    broken = tmp_path / "scopes"
    broken.mkdir()
    (broken / "index.yaml").write_text("experts: [python_coder\n", encoding="utf-8")
    monkeypatch.setenv("COE_EXPERT_SCOPES", str(broken))
    result = runner.invoke(app, ["run", "Explain TLS", "--backend", "fake", "--no-templates", *cp])
    assert result.exit_code == 2, result.output
    assert str(broken / "index.yaml") in result.stderr
    monkeypatch.delenv("COE_EXPERT_SCOPES")
    assert _saved_threads(cp) == []  # nothing to resume with the wrong settings: the person runs it again


def test_a_framework_naming_an_unknown_expert_saves_nothing(tmp_path: Path, cp: list[str]) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("id: p\ntitle: P\nslots:\n  - {id: c, title: C, description: d, expert: wizard}\n")
    result = runner.invoke(app, ["run", "x", "--backend", "fake", "--framework", str(plan), *cp])
    assert result.exit_code == 2 and "unknown expert id 'wizard'" in result.stderr
    assert _saved_threads(cp) == []


def test_an_answers_file_that_is_not_text_is_named(tmp_path: Path, cp: list[str]) -> None:
    started = runner.invoke(
        app, ["run", "Plan a service", "--backend", "fake", "--mode", "confirm", "--thread-id", "t-a", *cp]
    )
    assert started.exit_code == 3, started.output
    binary = tmp_path / "answers.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    result = runner.invoke(app, ["resume", "t-a", "--answers-file", str(binary), *cp])
    assert result.exit_code == 2, result.output
    assert f"{binary}: is not a UTF-8 text file" in result.stderr
    still = runner.invoke(app, ["resume", "t-a", "--answer", "approve", *cp])
    assert still.exit_code == 0, still.output  # the thread is untouched and answers as before


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"task": "   "}, "task: is empty"),
        ({"task": "x" * (MAX_TASK_CHARS + 1)}, f"the limit is {MAX_TASK_CHARS}"),
        ({"task": "a\ud800b"}, "task: is not valid Unicode at position 1"),
    ],
)
def test_the_graph_refuses_the_same_inputs(payload: dict[str, Any], message: str) -> None:
    graph = build_graph(InMemorySaver())
    with pytest.raises(InputError, match=message):
        graph.invoke(payload, {"configurable": {"thread_id": "bad"}}, context={"backend": "fake"})


def test_a_byte_order_mark_on_stdin_is_not_part_of_the_task(cp: list[str]) -> None:
    result = runner.invoke(app, ["run", "-", "--backend", "fake", "--json", *cp], input="\ufeffExplain TLS\n".encode())
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["title"] == "Explain TLS"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"task": 123}, "task: must be a string, got int"),
        ({"task": "Explain TLS", "mode": "yolo"}, "mode: unknown mode 'yolo'"),
        ({"task": "Explain TLS", "options": "x"}, "options: Input should be a valid dictionary"),
        ({"task": "Explain TLS", "options": {"colour": 1}}, "options.colour: Extra inputs are not permitted; allowed:"),
    ],
)
def test_a_wrong_typed_input_is_refused_and_the_thread_stays_usable(payload: dict[str, Any], message: str) -> None:
    graph = build_graph(InMemorySaver())
    config: Any = {"configurable": {"thread_id": "typed"}}
    with pytest.raises(InputError, match=message):
        graph.invoke(payload, config, context={"backend": "fake"})
    snapshot = graph.get_state(config)  # readable: the refused field is back to its default, the refusal recorded
    refused = snapshot.values["refused"]
    assert f"{refused.field}: {refused.message}".startswith(message)
    out = graph.invoke({"task": "Explain TLS"}, config, context={"backend": "fake"})
    assert out["status"] == "completed"


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"colour": 1}, "run context: colour: Extra inputs are not permitted; allowed: backend"),
        ({"max_tokens": -1}, "run context: max_tokens: Input should be greater than or equal to 16"),
    ],
)
def test_a_bad_run_context_is_a_user_error_naming_the_field(context: dict[str, Any], message: str) -> None:
    from state.errors import ConfigError

    graph = build_graph(InMemorySaver())
    config: Any = {"configurable": {"thread_id": "ctx"}}
    with pytest.raises(ConfigError, match=message):
        graph.invoke({"task": "Explain TLS"}, config, context={"backend": "fake", **context})
    assert graph.invoke({"task": "Explain TLS"}, config, context={"backend": "fake"})["status"] == "completed"


def test_an_invalid_framework_over_the_api_is_refused_and_the_thread_stays_usable() -> None:
    cyclic = {
        "id": "p",
        "title": "P",
        "slots": [
            {"id": "a", "title": "A", "description": "d", "deps": ["b"]},
            {"id": "b", "title": "B", "description": "d", "deps": ["a"]},
        ],
    }
    graph = build_graph(InMemorySaver())
    config: Any = {"configurable": {"thread_id": "fw"}}
    with pytest.raises(InputError, match="options.framework: .*dependency cycle"):
        graph.invoke({"task": "Explain TLS", "options": {"framework": cyclic}}, config, context={"backend": "fake"})
    assert graph.invoke({"task": "Explain TLS"}, config, context={"backend": "fake"})["status"] == "completed"
