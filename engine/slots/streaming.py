"""Where a generation's tokens go as they are written: to LangGraph's ``stream_mode="messages"``.

Every generation that reaches the person (a slot's candidates, the direct answer) is a run of the expert's chat
model (:class:`experts.backends.chat_model.ExpertChatModel`, a thin ``BaseChatModel`` over the pooled backend)
under the node's callbacks, with the generation's own metadata (``slot_id``, ``expert``, ``model``, ``attempt``,
``candidate``, ``origin``, ``prompt``), so parallel slots and their candidates can be told apart. LangGraph's
messages handler records a run's metadata at ``on_chat_model_start`` and emits each ``on_llm_new_token`` chunk:
every chunk of a generation carries the same message id, and the pieces joined are the answer's text. The
handler is thread-safe (a queue; on the server, the event loop's ``call_soon_threadsafe``), so the scheduler's
worker threads invoke the chat model directly. The node's callbacks are read from the config LangGraph runs it
with (:func:`node_stream`: langchain_core's context variable, the one ``langgraph.config.get_config`` reads, so
this module does not import LangGraph).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables.config import var_child_runnable_config

from experts.backends import ChatMessage, ExpertBackend, Generation, GenerationRequest
from experts.backends.chat_model import ExpertChatModel, generation_of

__all__ = ["Listeners", "generate_streamed", "message_stream", "node_stream"]

Listeners = BaseCallbackManager
"""The callbacks a node runs with: the expert chat models it drives report to them."""


def message_stream(config: Mapping[str, Any] | None) -> Listeners | None:
    """The callbacks of a node run with this config (None when nothing listens)."""
    callbacks = (config or {}).get("callbacks")
    if not isinstance(callbacks, BaseCallbackManager) or not callbacks.handlers:
        return None
    return callbacks


def node_stream() -> Listeners | None:
    """The callbacks of the node running in this context (None: outside a graph run, or nothing listens)."""
    return message_stream(var_child_runnable_config.get())


def generate_streamed(
    backend: ExpertBackend, request: GenerationRequest, listeners: Listeners | None, meta: Mapping[str, object]
) -> Generation:
    """``backend.generate(request)``, as a run of the expert's chat model under ``listeners`` (none: a plain call).

    The run ends with the whole answer, or with the error the generation raised (which is raised again).
    """
    if listeners is None:
        return backend.generate(request)
    name = str(meta.get("model") or "expert")
    # disable_streaming: invoke generates on this (the slot's) thread, its pieces still reported one by one
    model = ExpertChatModel(backend=backend, request=request, model_name=name, disable_streaming=True)
    config: dict[str, Any] = {"callbacks": listeners, "metadata": dict(meta), "run_name": name}
    return generation_of(model.invoke([_message(m) for m in request.messages], config))  # type: ignore[arg-type]


_ROLES: dict[str, Any] = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def _message(message: ChatMessage) -> BaseMessage:
    made: BaseMessage = _ROLES[message.role](content=message.content)
    return made
