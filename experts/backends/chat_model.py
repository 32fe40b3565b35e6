"""An expert's model as a LangChain chat model: a thin ``BaseChatModel`` over a pooled backend.

Every guarantee stays the pool's: :meth:`ExpertChatModel._generate` is one ``backend.generate`` call (the lock per
loaded model, the memory reservation, the abort, ``reset()`` for repeatable greedy output, the fast grammar mask),
and the answer's pieces reach LangChain's callbacks as the backend writes them (``on_llm_new_token``), so a
LangGraph node that invokes it streams on ``stream_mode="messages"`` like any chat model. What a request needs
beyond the messages (grammar, budget, sampling, time limit, cancel event, the slot it is for) is the model's
``request`` template; the answer's token counts and timing are its ``usage_metadata`` and ``response_metadata``
(:func:`generation_of` turns an answer back into the backend's :class:`~experts.backends.protocol.Generation`).

``experts.catalog.chat.expert_chat_model`` makes one for an expert of the catalog (its model and persona).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict

from experts.backends.protocol import ChatMessage, ExpertBackend, Generation, GenerationRequest

__all__ = ["ExpertChatModel", "generation_of"]

_ROLES = {"system": "system", "human": "user", "ai": "assistant"}


class ExpertChatModel(BaseChatModel):
    """A pooled backend as a chat model (see the module notes)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    backend: Any
    """The backend (:func:`experts.pool.pooled.get_backend`'s pooled model, or any :class:`ExpertBackend`)."""
    request: GenerationRequest = GenerationRequest(messages=(), max_tokens=512)
    """Everything but the messages: budget, temperature, grammar, seed, slot, time limit, cancel event."""
    model_name: str = "expert"
    """The name the callbacks and the answer's metadata give the model."""
    system: str | None = None
    """A system prompt (an expert's persona) put first when the messages bring none."""

    @property
    def _llm_type(self) -> str:
        return "college-of-experts"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        r = self.request
        return {"model": self.model_name, "max_tokens": r.max_tokens, "temperature": r.temperature, "seed": r.seed}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message_id = f"run--{run_manager.run_id}" if run_manager is not None else None

        def token(text: str) -> None:
            if run_manager is not None:
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=text, id=message_id))
                run_manager.on_llm_new_token(text, chunk=chunk)
            if self.request.on_token is not None:
                self.request.on_token(text)

        backend: ExpertBackend = self.backend
        gen = backend.generate(replace(self._request(messages, stop), on_token=token))
        answer = AIMessage(content=gen.text, id=message_id, **_accounts(gen, self.model_name))
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """The pieces as the backend writes them (the generation runs in a thread; closing the stream cancels it)."""
        pieces: queue.Queue[object] = queue.Queue()
        outcome: dict[str, Any] = {}
        own_stop = threading.Event() if self.request.cancel is None else None  # a run's cancel is not ours to set
        request = replace(self._request(messages, stop), on_token=pieces.put, cancel=own_stop or self.request.cancel)
        backend: ExpertBackend = self.backend

        def work() -> None:
            try:
                outcome["gen"] = backend.generate(request)
            except BaseException as exc:  # raised again in the caller's thread
                outcome["error"] = exc
            finally:
                pieces.put(_DONE)

        worker = threading.Thread(target=work, name="expert-chat-stream", daemon=True)
        worker.start()
        try:
            while (piece := pieces.get()) is not _DONE:
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=str(piece)))
                if run_manager is not None:
                    run_manager.on_llm_new_token(str(piece), chunk=chunk)
                if self.request.on_token is not None:
                    self.request.on_token(str(piece))
                yield chunk
        finally:
            if worker.is_alive() and own_stop is not None:
                own_stop.set()  # the reader went away: the generation stops and the model serves others
            worker.join()
        if "error" in outcome:
            raise outcome["error"]
        yield ChatGenerationChunk(message=AIMessageChunk(content="", **_accounts(outcome["gen"], self.model_name)))

    def _request(self, messages: list[BaseMessage], stop: list[str] | None) -> GenerationRequest:
        if stop:
            raise ValueError("stop sequences are not supported: the output contract ends an answer")
        said = tuple(_chat_message(m) for m in messages)
        if self.system and (not said or said[0].role != "system"):
            said = (ChatMessage("system", self.system), *said)
        return replace(self.request, messages=said)


_DONE = object()


def _accounts(gen: Generation, name: str) -> dict[str, Any]:
    """An answer's usage and response metadata (what :func:`generation_of` reads back)."""
    return {
        "usage_metadata": {
            "input_tokens": gen.prompt_tokens,
            "output_tokens": gen.completion_tokens,
            "total_tokens": gen.prompt_tokens + gen.completion_tokens,
        },
        "response_metadata": {
            "model_name": gen.model or name,
            "finish_reason": gen.finish_reason,
            "seconds": gen.seconds,
            "extra": dict(gen.extra),
        },
    }


def generation_of(message: BaseMessage) -> Generation:
    """The backend's :class:`Generation` of an :class:`ExpertChatModel` answer."""
    usage = getattr(message, "usage_metadata", None) or {}
    meta = message.response_metadata
    return Generation(
        text=message.content if isinstance(message.content, str) else str(message.content),
        prompt_tokens=int(usage.get("input_tokens", 0)),
        completion_tokens=int(usage.get("output_tokens", 0)),
        seconds=float(meta.get("seconds", 0.0)),
        finish_reason=str(meta.get("finish_reason", "stop")),
        model=str(meta.get("model_name", "")),
        extra=dict(meta.get("extra") or {}),
    )


def _chat_message(message: BaseMessage) -> ChatMessage:
    role = _ROLES.get(message.type)
    if role is None or not isinstance(message.content, str):
        raise ValueError(f"an expert reads system, human and ai messages of text, not a {message.type} message")
    return ChatMessage(role, message.content)  # type: ignore[arg-type]
