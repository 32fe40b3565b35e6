"""An expert of the catalog as a LangChain chat model, for applications that embed College of Experts.

``expert_chat_model("python_coder")`` is the expert's model (its own, or the base model for a persona, as
:func:`experts.catalog.binding.resolve_binding` decides) behind the shared model pool, with the expert's persona
as its system prompt and its generation defaults: it can be invoked, streamed, or put in a LangChain chain or
LangGraph node, and it keeps the pool's guarantees (:mod:`experts.backends.chat_model`).
"""

from __future__ import annotations

from experts.backends.chat_model import ExpertChatModel
from experts.backends.protocol import GenerationRequest
from experts.catalog.binding import resolve_binding
from experts.catalog.sources import load_catalog
from experts.pool.pooled import get_backend
from state.errors import ConfigError
from state.settings import Settings

__all__ = ["expert_chat_model"]


def expert_chat_model(expert: str, settings: Settings | None = None, *, grammar: str | None = None) -> ExpertChatModel:
    """The chat model of ``expert`` under ``settings`` (default: the environment's settings).

    Args:
        expert: An expert id of the catalog (``coe experts list``).
        settings: The settings its backend and budget come from.
        grammar: A GBNF grammar every answer must follow (None: free text).

    Raises:
        ConfigError: For an unknown expert, or a true expert whose model is missing and whose scope says
            ``fallback: error``.
    """
    from state.context import resolve_settings

    settings = settings if settings is not None else resolve_settings(None)
    catalog = load_catalog()
    if expert not in catalog.ids:
        raise ConfigError("expert", f"{expert!r} is not an expert; known: {', '.join(catalog.ids)}")
    scope = catalog.get(expert)
    binding = resolve_binding(settings, scope)
    if binding.fatal:
        raise ConfigError("expert", f"{expert}: its model is unavailable: {binding.problem}")
    request = GenerationRequest(
        messages=(),
        max_tokens=scope.generation.max_tokens or settings.max_tokens,
        temperature=scope.generation.temperature if scope.generation.temperature is not None else 0.0,
        grammar=grammar,
    )
    return ExpertChatModel(
        backend=get_backend(settings, binding.model),
        request=request,
        model_name=binding.model or settings.model_path or "base model",
        system=scope.persona,
    )
