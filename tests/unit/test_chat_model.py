"""Experts as LangChain chat models (issue 19): invoke, stream, callbacks, persona, and the pool underneath."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessageChunk, HumanMessage, SystemMessage

from experts.backends import ChatMessage, Generation, GenerationRequest
from experts.backends.chat_model import ExpertChatModel, generation_of
from experts.catalog import expert_chat_model
from state.context import resolve_settings
from state.errors import ConfigError


@pytest.fixture(autouse=True)
def _fresh_pool() -> Iterator[None]:
    """The backends these tests make leave the process's pool (other tests count its loads)."""
    from experts.pool.pooled import clear_backends

    yield
    clear_backends()


class Scripted:
    """A backend that writes its answer in three pieces and remembers what it was asked."""

    name = "scripted"

    def __init__(self) -> None:
        self.asked: list[GenerationRequest] = []

    def generate(self, request: GenerationRequest) -> Generation:
        self.asked.append(request)
        for piece in ("one ", "two ", "three"):
            if request.on_token is not None:
                request.on_token(piece)
        return Generation("one two three", 11, 3, 0.5, "stop", "tiny", {"tokens_per_second": 6.0})

    def supports_grammar(self) -> bool:
        return True


class Tokens(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.ids: set[str | None] = set()
        self.metadata: list[dict[str, Any]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.metadata.append(kwargs.get("metadata") or {})

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)
        self.ids.add(kwargs["chunk"].message.id)


def test_invoke_reports_each_piece_to_the_callbacks_and_answers_with_usage_and_timing() -> None:
    backend = Scripted()
    template = GenerationRequest(messages=(), max_tokens=64, temperature=0.3, grammar='root ::= "x"', slot_id="s1")
    model = ExpertChatModel(backend=backend, request=template, model_name="tiny", system="You are terse.")
    seen = Tokens()
    answer = model.invoke([HumanMessage("Count")], {"callbacks": [seen], "metadata": {"slot_id": "s1"}})
    assert answer.content == "one two three" and seen.tokens == ["one ", "two ", "three"]
    assert len(seen.ids) == 1 and seen.ids == {answer.id} and seen.metadata[0]["slot_id"] == "s1"
    assert answer.usage_metadata == {"input_tokens": 11, "output_tokens": 3, "total_tokens": 14}
    [asked] = backend.asked
    assert asked.messages == (ChatMessage("system", "You are terse."), ChatMessage("user", "Count"))
    assert (asked.max_tokens, asked.temperature, asked.grammar, asked.slot_id) == (64, 0.3, 'root ::= "x"', "s1")
    assert generation_of(answer) == Generation("one two three", 11, 3, 0.5, "stop", "tiny", {"tokens_per_second": 6.0})


def test_a_system_message_given_replaces_the_persona_and_stream_yields_the_pieces() -> None:
    backend = Scripted()
    model = ExpertChatModel(backend=backend, system="persona")
    chunks = list(model.stream([SystemMessage("mine"), HumanMessage("hi")]))
    assert (
        all(isinstance(c, AIMessageChunk) for c in chunks)
        and "".join(str(c.content) for c in chunks) == "one two three"
    )
    assert backend.asked[0].messages[0] == ChatMessage("system", "mine")
    with pytest.raises(ValueError, match="stop sequences"):
        model.invoke("hi", stop=["\n"])


def test_an_expert_of_the_catalog_is_a_chat_model_on_its_binding() -> None:
    settings = resolve_settings({"backend": "fake"}, env={})
    coder = expert_chat_model("python_coder", settings)
    assert coder.model_name == "qwen2.5-coder-1.5b" and coder.system and "Python" in coder.system
    answer = coder.invoke("Write a function that adds two numbers.")
    assert isinstance(answer.content, str) and answer.content and answer.usage_metadata is not None
    with pytest.raises(ConfigError, match="'poet' is not an expert"):
        expert_chat_model("poet", settings)


def test_a_stream_the_reader_leaves_stops_its_generation() -> None:
    stopped: list[bool] = []

    class Waits(Scripted):
        def generate(self, request: GenerationRequest) -> Generation:
            assert request.on_token is not None and request.cancel is not None
            request.on_token("first ")
            stopped.append(request.cancel.wait(10))
            return Generation("first ")

    stream = ExpertChatModel(backend=Waits()).stream("hi")
    assert next(stream).content == "first "
    stream.close()
    assert stopped == [True]
