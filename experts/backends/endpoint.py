"""An expert's own OpenAI-compatible endpoint, and the model reference that carries it through a run.

A true expert's scope may name the server its model runs on (``model.endpoint``: ``url``, ``model``,
``api_key_env``), so experts can live on different machines: a code expert on one llama-server or vLLM box, the
base model on another. Its slots then go to that server whatever the run's backend is.

Through routing, the checkpoint and the pool the endpoint travels as a model reference, one string
(:meth:`Endpoint.ref`): the URL, with the model name and the key variable in its fragment, e.g.
``http://10.0.0.5:8000/v1#model=qwen2.5-coder-1.5b&key=CODER_API_KEY``. It holds no secret: the key is read
from the named variable when the backend is made (:func:`experts.pool.pooled.get_backend`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

__all__ = ["Endpoint"]


@dataclass(frozen=True)
class Endpoint:
    """Where an expert's generations go."""

    url: str
    """The OpenAI base URL (``http://host:port/v1``)."""
    model: str | None = None
    """The ``model`` name sent (None: the expert's model name, else the server's default)."""
    key_env: str | None = None
    """The environment variable that holds the server's API key (None: ``COE_REMOTE_API_KEY``)."""

    def ref(self) -> str:
        """The model reference of this endpoint (see the module notes)."""
        query = {k: v for k, v in (("model", self.model), ("key", self.key_env)) if v}
        return self.url.rstrip("/") + (f"#{urlencode(query)}" if query else "")

    @classmethod
    def parse(cls, ref: str | None) -> Endpoint | None:
        """The endpoint a model reference names, or None for a model name or GGUF path."""
        if not ref or not ref.startswith(("http://", "https://")):
            return None
        parts = urlsplit(ref)
        query = parse_qs(parts.fragment)
        url = parts._replace(fragment="").geturl()
        model, key = query.get("model"), query.get("key")
        return cls(url, model[0] if model else None, key[0] if key else None)

    @property
    def label(self) -> str:
        """A short name for logs and the ledger: the model at the host."""
        return f"{self.model or 'default'}@{urlsplit(self.url).netloc}"
