"""Where a generation's tokens go as they are written: to LangGraph's ``stream_mode="messages"``.

A node hands a :class:`TokenStream` to the work it drives; every generation that reaches the person (a slot's
candidates, the direct answer) starts a listener with its messages and what it is (slot, expert, model,
attempt, candidate), feeds it the answer's pieces as the backend writes them (``GenerationRequest.on_token``),
and ends it with the whole text or the error that stopped it.

:class:`MessageStream` is the implementation over LangChain callbacks. LangGraph streams ``messages`` from the
chat-model runs made inside a node: its handler records a run's metadata at ``on_chat_model_start`` and emits
each ``on_llm_new_token`` chunk as an ``AIMessageChunk`` with it. The experts are llama.cpp models behind the
pool, called from the scheduler's worker threads, so :class:`MessageStream` makes those callbacks itself: one
chat-model run per generation, a child of the node's run (so the node's LangGraph metadata is inherited), with
the generation's own metadata beside it (``slot_id``, ``expert``, ``model``, ``attempt``, ``candidate``,
``origin``, ``prompt``), so parallel slots and their candidates can be told apart. Every chunk of a generation
carries the same message id; the pieces joined are the answer's text. LangGraph's handler is thread-safe (a
queue; on the server, the event loop's ``call_soon_threadsafe``), so worker threads call it directly. The node
passes its callbacks (``get_config()["callbacks"]``: this module does not import LangGraph).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from langchain_core.callbacks import BaseCallbackManager, CallbackManager
from langchain_core.callbacks.manager import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, LLMResult

from experts.models import ChatMessage, ExpertBackend, Generation, GenerationRequest

__all__ = ["DrawListener", "MessageStream", "TokenStream", "generate_streamed", "message_stream"]


class DrawListener(Protocol):
    """One generation being written."""

    def token(self, text: str) -> None:
        """The next piece of the answer."""

    def end(self, text: str) -> None:
        """The generation finished; ``text`` is the whole answer."""

    def error(self, error: BaseException) -> None:
        """The generation failed or was stopped."""


class TokenStream(Protocol):
    """Starts a listener per generation."""

    def start(self, messages: tuple[ChatMessage, ...], meta: Mapping[str, object]) -> DrawListener:
        """A listener for a generation of ``messages``; ``meta`` says what it is (slot, expert, candidate ...)."""


def generate_streamed(
    backend: ExpertBackend, request: GenerationRequest, stream: TokenStream | None, meta: Mapping[str, object]
) -> Generation:
    """``backend.generate(request)`` with its tokens going to a listener of ``stream`` (none: a plain call).

    The listener ends with the whole text, or with the error the generation raised (which is raised again).
    """
    if stream is None:
        return backend.generate(request)
    listener = stream.start(request.messages, meta)
    try:
        gen = backend.generate(replace(request, on_token=listener.token))
    except BaseException as exc:
        listener.error(exc)
        raise
    listener.end(gen.text)
    return gen


def message_stream(config: Mapping[str, Any] | None) -> MessageStream | None:
    """The stream of a node run with this config (None when no callbacks listen)."""
    callbacks = (config or {}).get("callbacks")
    if not isinstance(callbacks, BaseCallbackManager) or not callbacks.handlers:
        return None
    return MessageStream(callbacks)


class MessageStream:
    """Starts one chat-model run per generation, under the callbacks it was made with."""

    def __init__(self, callbacks: BaseCallbackManager) -> None:
        self._callbacks = callbacks

    def start(self, messages: tuple[ChatMessage, ...], meta: Mapping[str, object]) -> DrawListener:
        """A listener that reports one generation of ``messages`` as a chat-model run with ``meta``."""
        manager = CallbackManager.configure(inheritable_callbacks=self._callbacks, local_metadata=dict(meta))
        model = str(meta.get("model") or "expert")
        [run] = manager.on_chat_model_start(
            {"name": model, "id": ["college_of_experts", "expert", model]},
            [[_message(m) for m in messages]],
            name=model,
            invocation_params={"model": model, **{k: v for k, v in meta.items() if k != "model"}},
        )
        return _Run(run)


class _Run:
    """One generation as a chat-model run: its chunks share the run's message id."""

    def __init__(self, run: CallbackManagerForLLMRun) -> None:
        self._run = run
        self._id = f"run--{run.run_id}"

    def token(self, text: str) -> None:
        chunk = ChatGenerationChunk(message=AIMessageChunk(content=text, id=self._id))
        self._run.on_llm_new_token(text, chunk=chunk)

    def end(self, text: str) -> None:
        message = AIMessage(content=text, id=self._id)
        self._run.on_llm_end(LLMResult(generations=[[ChatGeneration(message=message)]]))

    def error(self, error: BaseException) -> None:
        self._run.on_llm_error(error)


_ROLES: dict[str, Any] = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def _message(message: ChatMessage) -> BaseMessage:
    made: BaseMessage = _ROLES[message.role](content=message.content)
    return made
