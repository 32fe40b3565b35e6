"""Expert tokens on stream_mode="messages" (issue 19): every slot's candidates and the direct answer, with
metadata that tells parallel slots apart; the pieces joined are the answer; the backends' token hooks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.checkpoint.memory import InMemorySaver

from experts.backends import ChatMessage, GenerationRequest
from experts.backends.fake import FakeBackend, load_script
from experts.backends.llama_mask import TokenTap
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.framework import load_framework_file
from state.io import RunInput
from tests.conftest import FIXTURES

BRANCHY = load_framework_file(str(FIXTURES / "branchy.yaml")).model_dump(mode="json")


def _script(tmp_path: Path, rules: list[dict[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": rules}))
    return str(path)


def test_every_slot_streams_its_tokens_with_metadata_and_parallel_slots_interleave(tmp_path: Path) -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "stream"}}
    context = {"backend": "fake", "max_parallel": 2, "fake_script": _script(tmp_path, [{"title": ".*", "delay": 0.6}])}
    run = RunInput(task="Plan a small service", options={"framework": BRANCHY})  # type: ignore[arg-type]
    pieces: dict[tuple[str, str], list[str]] = {}
    order: list[str] = []

    async def main() -> None:  # the server's way: the async graph
        async for message, meta in graph.astream(run, config, context=context, stream_mode="messages"):
            assert meta["langgraph_node"] == "execute_slots" and meta["expert"] and meta["model"]
            assert meta["attempt"] >= 1 and meta["prompt"] == "contract"
            pieces.setdefault((meta["slot_id"], meta["candidate"]), []).append(message.content)
            order.append(meta["slot_id"])
            assert message.id  # one id per generation: a client groups the chunks by it

    asyncio.run(main())
    state = Passport.model_validate(graph.get_state(config).values)
    assert set(state.results) == {"A", "B", "C", "D"}
    for slot_id, result in state.results.items():
        assert "".join(pieces[(slot_id, "c1")]) == result.raw  # the pieces joined are the kept answer
        assert len(pieces[(slot_id, "c1")]) > 10  # word by word, not one block at the end
    first_a, last_a = order.index("A"), len(order) - 1 - order[::-1].index("A")
    assert "C" in order[first_a:last_a]  # A and C ran side by side: their tokens interleave


def test_the_direct_answer_streams_too() -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "direct"}}
    chunks = [
        (message.content, meta["slot_id"])
        for message, meta in graph.stream(
            RunInput(task="hi there"), config, context={"backend": "fake"}, stream_mode="messages"
        )
    ]
    assert chunks and {slot for _, slot in chunks} == {"answer_directly"}
    state = Passport.model_validate(graph.get_state(config).values)
    assert "".join(text for text, _ in chunks).strip() in (state.document or "")


def test_without_a_listener_nothing_is_streamed(tmp_path: Path) -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "updates"}}
    run = RunInput(task="Plan a small service", options={"framework": BRANCHY})  # type: ignore[arg-type]
    modes = {mode for mode, _ in graph.stream(run, config, context={"backend": "fake"}, stream_mode=["updates"])}
    assert modes == {"updates"}


def test_the_fake_backend_hands_over_its_answer_word_by_word_over_its_delay(tmp_path: Path) -> None:
    backend = FakeBackend(load_script(_script(tmp_path, [{"slot": "s", "text": "one two three four", "delay": 0.2}])))
    got: list[str] = []
    request = GenerationRequest(messages=(ChatMessage("user", "x"),), max_tokens=10, slot_id="s", on_token=got.append)
    gen = backend.generate(request)
    assert got == ["one", " two", " three", " four"] and "".join(got) == gen.text


class _Words:
    """A stand-in for llama.cpp's detokenizer: token i is the i-th byte string."""

    def __init__(self, vocab: list[bytes]) -> None:
        self.vocab = vocab

    def detokenize(self, tokens: list[int]) -> bytes:
        return b"".join(self.vocab[t] for t in tokens)


def test_the_token_tap_decodes_each_step_and_hands_over_the_last_token_at_the_end() -> None:
    vocab = [b"<prompt>", b"Caf", "é".encode()[:1], "é".encode()[1:], b" ok", b"!"]
    got: list[str] = []
    tap = TokenTap(_Words(vocab), got.append)
    scores = np.zeros(4, dtype=np.single)
    ids: list[int] = [0]
    for token in (1, 2, 3, 4):  # each step sees the tokens sampled so far; the last one (5) is never seen
        assert tap(np.array(ids, dtype=np.intc), scores) is scores  # the logits are never changed
        ids.append(token)
    tap(np.array(ids, dtype=np.intc), scores)
    tap.finish("Café ok!")
    assert got == ["Caf", "é", " ok", "!"]  # a character split across two tokens comes out whole
    assert tap.sent == "Café ok!"


def test_a_failing_listener_never_breaks_the_generation() -> None:
    def boom(_: str) -> None:
        raise RuntimeError("listener bug")

    tap = TokenTap(_Words([b"p", b"a"]), boom)
    tap(np.array([0], dtype=np.intc), np.zeros(2, dtype=np.single))
    tap(np.array([0, 1], dtype=np.intc), np.zeros(2, dtype=np.single))
    tap.finish("a")
    assert tap.sent == "a"


def test_coe_run_stream_prints_each_writer_under_a_header_and_the_document_to_stdout(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    cp = ["--checkpoint", f"sqlite://{tmp_path / 'runs.sqlite'}"]
    args = ["run", "Plan a small service", "--framework", str(FIXTURES / "branchy.yaml"), "--backend", "fake"]
    result = CliRunner().invoke(app, [*args, "--stream", *cp])
    assert result.exit_code == 0, result.output
    for slot in ("A", "B", "C", "D"):
        assert f"--- {slot} (c1, " in result.stderr
    assert "## Outline" in result.stderr  # the answers as they were written
    assert result.stdout.startswith("# ") and "--- A" not in result.stdout  # the document alone on stdout
