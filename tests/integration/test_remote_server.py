"""The remote backend against a real OpenAI-compatible server: llama-cpp-python's own, on 127.0.0.1.

The server (``python -m llama_cpp.server``, installed by the ``test`` extra's ``llama-cpp-python[server]``)
loads the bundled small model once for the module; the tests send it a grammar-constrained request directly,
then run ``coe run --backend remote`` end to end with ``COE_REMOTE_URL``.

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
from pathlib import Path

import httpx
import pytest

from experts.models.bundled import resolve_model_path
from experts.models.protocol import ChatMessage, GenerationRequest
from experts.models.remote import RemoteBackend
from tests.integration.cli_proc import coe_run, free_port

pytestmark = [pytest.mark.integration, pytest.mark.model]

TASK = "Write a haiku about the first snow of winter"  # one expert, one slot, a short answer
SMALL_GRAMMAR = 'root ::= "## Outline\\n1. " [A-Za-z ]+ "\\n"'


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = resolve_model_path("qwen2.5-coder-0.5b")
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
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


def test_coe_run_on_the_remote_backend(server_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "COE_HOME": str(tmp_path), "COE_REMOTE_URL": server_url, "COE_REMOTE_RETRIES": "0"}
    env |= {"COE_USE_GRAMMAR": "false", "COE_MAX_OUTLINE_RETRIES": "0"}
    env.pop("COE_REMOTE_API_KEY", None)
    args = ("run", TASK, "--backend", "remote", "--no-templates", "--json", "--max-tokens", "200")
    out = coe_run(*args, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["status"] == "completed", summary
    (slot,) = summary["slots"]
    assert slot["status"] == "done", slot
    doc = summary["document"]
    assert doc.startswith("# " + TASK)
    assert len(doc.removeprefix("# " + TASK).strip()) > 40  # the server's answer, assembled under the slot
