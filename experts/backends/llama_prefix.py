"""Prefix caching for one llama.cpp context: a prompt's system message is read once, not on every call.

A slot's candidates, and the slots of one expert, share their system message (the expert's persona and the
output contract), often most of the prompt. llama.cpp keeps what it read in the context's KV cache, and
llama-cpp-python reuses the longest cached prefix of a new prompt; but a prefix that ends wherever the last prompt
happened to diverge changes how the rest is computed (the batches start elsewhere), so greedy output would
depend on what ran before. The backend therefore reset the context before every call.

:class:`PrefixCache` makes the split fixed: the prompt's *canonical prefix* is its tokens up to the end of the
system message. Before each generation the context holds exactly that prefix: kept when it is already there
(cut back to it), else read from an empty context on its own. The rest of the prompt is then always read
from the same position, so the same request gives the same tokens whatever ran before, hit or miss
(``tests/integration/test_llama_backend.py``). A prompt whose system message cannot be found among its tokens,
or is short, is read whole from an empty context as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["MIN_PREFIX_TOKENS", "PrefixCache"]

MIN_PREFIX_TOKENS = 32
"""A shorter system message is not worth a separate read."""


class PrefixCache:
    """Wraps a ``llama_cpp.Llama``'s ``generate`` so that each call starts from its canonical prefix.

    Set :attr:`system` (the request's system message, or None) before each ``create_chat_completion``, under
    the model's lock; :attr:`reused` then says how many prompt tokens were not read again.
    """

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        self._generate: Callable[..., Any] = llm.generate
        self.system: str | None = None
        self.reused = 0
        """Prompt tokens of the last call that came from the cache."""
        self._system_tokens: dict[str, list[int]] = {}
        llm.generate = self._prepared_generate  # an attribute of the instance: _create_completion calls it

    def _prepared_generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
        tokens = list(tokens)
        llm = self._llm
        cut = self._prefix_length(tokens)
        self.reused = 0
        if cut and llm.n_tokens >= cut and list(llm._input_ids[:cut]) == tokens[:cut]:
            if cut < llm.n_tokens:
                llm._ctx.kv_cache_seq_rm(-1, cut, -1)
                llm.n_tokens = cut
            self.reused = cut
        else:
            llm.reset()
            if cut:
                llm.eval(tokens[:cut])  # the prefix alone, from an empty context: the same batches every time
        return self._generate(tokens, *args, **kwargs)

    def _prefix_length(self, tokens: list[int]) -> int:
        """Where the system message ends among ``tokens`` (0: no usable prefix)."""
        if not self.system:
            return 0
        wanted = self._system_tokens.get(self.system)
        if wanted is None:
            wanted = list(self._llm.tokenize(self.system.encode("utf-8"), add_bos=False, special=False))
            if len(self._system_tokens) > 64:
                self._system_tokens.clear()
            self._system_tokens[self.system] = wanted
        if len(wanted) < MIN_PREFIX_TOKENS:
            return 0
        first = wanted[0]
        for start in (i for i, t in enumerate(tokens) if t == first):
            end = start + len(wanted)
            if tokens[start:end] == wanted:
                return end if end < len(tokens) else 0  # something must follow it: the prompt's own part
        return 0
