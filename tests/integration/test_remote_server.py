"""The remote backend against real OpenAI-compatible servers: llama-cpp-python's own, on 127.0.0.1.

Two servers (``python -m llama_cpp.server``, installed by the ``test`` extra's ``llama-cpp-python[server]``) load
the two bundled models once for the module: the base model, and the code expert's. The tests send the first a
grammar-constrained request directly, then run ``coe run --backend remote`` end to end with one plan on both: the
base model's slot through ``COE_REMOTE_URL``, the code slot through the code expert's own endpoint (its scope's
``model.endpoint``).

The server applies a grammar with llama-cpp-python's built-in sampler, which checks the whole vocabulary at
every token: about 1 s a token on this shared 2-core machine (73 s for 60 tokens of the outline grammar). So
the direct test asks for 30 tokens of a small grammar, and the end-to-end run has the grammar off (the
outline check still runs; a non-compliant answer is accepted with a warning) to stay within a CI budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from experts.backends.endpoint import Endpoint
from experts.backends.protocol import ChatMessage, GenerationRequest
from experts.backends.remote import RemoteBackend
from experts.models.bundled import resolve_model_path
from experts.pool.health import probe
from tests.integration.cli_proc import coe_run, free_port
from tests.scopes import persona_scopes

pytestmark = [pytest.mark.model, pytest.mark.server]

TASK = "Write a haiku about the first snow of winter"  # one expert, one slot, a short answer
SMALL_GRAMMAR = 'root ::= "## Outline\\n1. " [A-Za-z ]+ "\\n"'


@contextmanager
def _llama_server(model_name: str, log_path: Path) -> Iterator[str]:
    model = resolve_model_path(model_name)
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_ctx", "2048", "--n_threads", "2", "--verbose", "False"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start in 180 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _llama_server("qwen2.5-coder-0.5b", tmp_path_factory.mktemp("llama-server") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def coder_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _llama_server("qwen2.5-coder-1.5b", tmp_path_factory.mktemp("coder-server") / "server.log") as url:
        yield url


def test_a_grammar_constrained_completion_from_the_real_server(server_url: str) -> None:
    backend = RemoteBackend(server_url, model="qwen2.5-coder-0.5b", timeout=300, retries=0)
    try:
        gen = backend.generate(
            GenerationRequest(
                messages=(
                    ChatMessage("system", "You are a careful expert. Answer with an outline, then its sections."),
                    ChatMessage("user", "Explain how to set up a Python virtual environment."),
                ),
                max_tokens=30,
                grammar=SMALL_GRAMMAR,
            )
        )
    finally:
        backend.close()
    assert gen.text.startswith("## Outline\n1. ")  # the server honoured the GBNF grammar field
    assert all(c.isalpha() or c == " " for c in gen.text.removeprefix("## Outline\n1. ").rstrip("\n"))
    assert gen.prompt_tokens > 20 and 0 < gen.completion_tokens <= 30
    assert gen.finish_reason in ("stop", "length") and gen.seconds > 0
    assert backend.supports_grammar()


def test_the_real_server_answers_the_health_check_and_a_stopped_one_does_not(server_url: str) -> None:
    up = probe(Endpoint(server_url))
    assert up.up and "HTTP 200" in up.detail, up
    down = probe(Endpoint(f"http://127.0.0.1:{free_port()}/v1"), timeout_s=1.0)
    assert not down.up and "ConnectError" in down.detail


def test_one_plan_on_two_servers_the_base_model_and_the_code_experts_own(
    server_url: str, coder_url: str, tmp_path: Path
) -> None:
    scopes = persona_scopes(tmp_path, "general_reasoning")  # a persona over the base model's server
    coder = scopes / "python_coder.yaml"
    doc = yaml.safe_load(coder.read_text(encoding="utf-8"))
    doc["model"]["endpoint"] = {"url": coder_url, "model": "qwen2.5-coder-1.5b"}
    coder.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    plan = tmp_path / "plan.yaml"
    slots = [
        {"id": "poem", "title": "Haiku", "description": TASK, "expert": "general_reasoning"},  # a persona
        {"id": "code", "title": "Function", "description": "Write a Python function is_even(n) that returns "
         "whether n is even.", "expert": "python_coder"},
    ]  # fmt: skip
    plan.write_text(yaml.safe_dump({"id": "two", "title": "Two servers", "slots": slots}), encoding="utf-8")
    env = {**os.environ, "COE_HOME": str(tmp_path), "COE_REMOTE_URL": server_url, "COE_REMOTE_RETRIES": "0"}
    env |= {"COE_USE_GRAMMAR": "false", "COE_MAX_OUTLINE_RETRIES": "0", "COE_BEST_OF": "1", "COE_ESCALATE": "false"}
    env |= {"COE_COMPLETION_SECONDS": "0"}  # no completion round: this test is about two servers
    env |= {"COE_EXPERT_SCOPES": str(scopes), "COE_MAX_PARALLEL": "1"}
    env.pop("COE_REMOTE_API_KEY", None)
    args = ("run", "A haiku and a function", "--framework", str(plan), "--backend", "remote", "--json")
    out = coe_run(*args, "--max-tokens", "160", env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["status"] == "completed", summary
    assert {s["id"]: s["status"] for s in summary["slots"]} == {"poem": "done", "code": "done"}, summary["slots"]
    # the code server passed its health check: its slot ran on python_coder there, not on the generalist
    assert {s["id"]: s["expert"] for s in summary["slots"]}["code"] == "python_coder"
    shown = coe_run("show", summary["thread_id"], "--json", env=env, timeout=120)
    routing = json.loads(shown.stdout)["routing"]
    assert routing["code"]["model"] == f"{coder_url}#model=qwen2.5-coder-1.5b" and routing["poem"]["model"] is None
    assert "def is_even" in summary["document"]  # the code server's answer, assembled under its slot
