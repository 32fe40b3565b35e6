"""Logits processors that llama.cpp runs at every token: the fast grammar mask and the stop switch.

llama-cpp-python's own ``grammar=`` argument checks every token of the vocabulary against the grammar at every
step (Qwen has 151,936 tokens): about 20-30 ms a token on 2 cores, which halved the generation speed of the
0.5B model. :class:`GrammarMask` enforces the grammar the way llama.cpp's own ``common_sampler`` does: at
temperature 0 it checks only the model's preferred token and masks the whole vocabulary only when that token is
not allowed (a few steps in a hundred with the outline grammar), so the chosen tokens are the same as with the
built-in path. At a temperature above 0 it masks the whole vocabulary at every step, as the built-in path does.
:class:`StopSwitch` ends a generation at the next token once the pool asks it to stop. :class:`RepeatPenalty`
applies llama.cpp's repeat penalty before the mask, so the mask's shortcut stays exact.
"""

from __future__ import annotations

import codecs
import ctypes
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from experts.backends.grammar import sections_grammar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from llama_cpp import Llama

    from experts.backends.protocol import EitherStop

__all__ = ["CompiledGrammar", "GrammarMask", "RepeatPenalty", "StopSwitch", "TokenTap", "only_end_of_text"]

logger = logging.getLogger(__name__)


def only_end_of_text(scores: npt.NDArray[np.single], eos: int) -> npt.NDArray[np.single]:
    """Logits that allow end-of-text only: the generation ends at the next token."""
    stopped = scores.copy()
    stopped[:] = float("-inf")
    stopped[eos] = 0.0
    return stopped


class StopSwitch:
    """A logits processor that ends the generation at the next token on a stop or once the time limit passed.

    ``create_chat_completion`` takes no stopping criteria, so stopping works like the grammar mask does:
    every token but end-of-text is masked (later processors see only end-of-text allowed and leave it).
    """

    def __init__(
        self,
        stop: threading.Event | EitherStop,
        eos: int,
        deadline: float | None = None,
        halt: threading.Event | None = None,
    ) -> None:
        self._stop = stop
        self._eos = eos
        self._deadline = deadline
        self._halt = halt
        self.first_at: float | None = None
        """When the first token's logits were ready (``time.perf_counter``): the prompt has been read."""
        self.timed_out = False
        """The deadline (``time.perf_counter``) passed and the answer was ended there."""
        self.halted = False
        """The caller's ``halt`` was set and the answer was ended there."""

    def __call__(self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
        """The logits unchanged, or only end-of-text once a stop was asked for."""
        if self.first_at is None:
            self.first_at = time.perf_counter()
        if self._deadline is not None and time.perf_counter() > self._deadline:
            self.timed_out = True
        if self._halt is not None and self._halt.is_set():
            self.halted = True
        if not self._stop.is_set() and not self.timed_out and not self.halted:
            return scores
        return only_end_of_text(scores, self._eos)


class RepeatPenalty:
    """llama.cpp's repeat penalty as a logits processor, so that the grammar mask after it sees the final logits.

    llama.cpp applies its own ``repeat_penalty`` after the logits processors: the mask's greedy shortcut (let the
    model's preferred token through unmasked when the grammar allows it) would then see a token that the penalty
    demotes, and the one sampled instead may be one the grammar forbids. Here the penalty comes first, with
    llama.cpp's rule: each distinct token among the last ``last_n`` (prompt included) has a positive logit divided
    by ``penalty`` and a negative one multiplied by it.
    """

    LAST_N = 64
    """llama-cpp-python's default window (``last_n_tokens_size``)."""

    def __init__(self, penalty: float, last_n: int = LAST_N) -> None:
        self.penalty = penalty
        self.last_n = last_n

    def __call__(self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
        """The logits with the recent tokens penalised."""
        import numpy as np

        recent = np.unique(input_ids[-self.last_n :])
        if not len(recent):
            return scores
        out = scores.copy()
        picked = out[recent]
        out[recent] = np.where(picked > 0, picked / self.penalty, picked * self.penalty)
        return out


class TokenTap:
    """A logits processor that hands each new token's text to a callback as the answer is written.

    ``create_chat_completion`` streams only as an iterator of chunks without its usage counts; a processor sees
    every step's tokens instead, so the generation path stays the one that is measured and tested. It never
    changes the logits. At each step the tokens sampled since the last one are decoded (bytes through an
    incremental UTF-8 decoder: a character split across tokens comes out whole); the last token, sampled after
    the last step, is handed over by :meth:`finish` from the completion's text.
    """

    def __init__(self, llm: Any, on_token: Callable[[str], None]) -> None:
        self._llm = llm
        self._on_token = on_token
        self._seen: int | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.sent = ""
        """The text handed over so far."""

    def __call__(self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
        """The logits unchanged; the tokens sampled since the last step go to the callback."""
        if self._seen is None:
            self._seen = len(input_ids)  # the prompt
            return scores
        new = [int(t) for t in input_ids[self._seen :]]
        self._seen = len(input_ids)
        if new:
            self._send(self._decoder.decode(self._llm.detokenize(new)))
        return scores

    def finish(self, text: str) -> None:
        """Hand over what the steps did not: the completion's text after what was sent.

        Should the text sent not begin the completion's (it has not happened with the bundled models), nothing
        more is sent and the difference is logged: the listener gets the whole text at the end anyway.
        """
        if text.startswith(self.sent):
            self._send(text[len(self.sent) :])
        else:
            logger.warning("the streamed text differs from the completion after %d characters", len(self.sent))

    def _send(self, piece: str) -> None:
        if not piece:
            return
        self.sent += piece
        try:
            self._on_token(piece)
        except Exception:  # a listener's fault never breaks the generation
            logger.exception("a token listener failed")


class CompiledGrammar:
    """A parsed grammar sampler in its initial state; each generation works on a clone."""

    def __init__(self, llama_cpp: Any, handle: Any) -> None:
        self._llama_cpp = llama_cpp
        self._handle: Any = handle  # a ctypes pointer to a llama_sampler

    def clone(self) -> Any:
        """A fresh sampler in the grammar's initial state (the caller frees it)."""
        return self._llama_cpp.llama_sampler_clone(self._handle)

    def __del__(self) -> None:
        if self._handle:
            self._llama_cpp.llama_sampler_free(self._handle)
            self._handle = None


class GrammarMask:
    """A logits processor that enforces a grammar, checking the preferred token before the vocabulary.

    Called by llama-cpp-python once per generated token with every token evaluated so far and the next
    token's logits (indexed by token id); returns the logits to sample from. New tokens since the last call
    (the one just sampled) are first accepted by the grammar, after checking they are allowed.

    With ``follow_outline`` (the bounds from a grammar's follow-outline marker), the text is tracked until
    the outline ends (its first blank line); the grammar is then replaced by
    :func:`experts.backends.grammar.sections_grammar` for that outline, so the sections repeat its titles and
    sub-items exactly.

    A callback cannot raise through llama.cpp, so a failure is recorded in ``error``, every token but
    end-of-text is masked to stop the generation, and the caller raises.
    """

    def __init__(
        self,
        llama_cpp: Any,
        llm: Llama,
        grammar: CompiledGrammar,
        buffer: npt.NDArray[Any],
        *,
        greedy: bool,
        follow_outline: dict[str, Any] | None = None,
    ) -> None:
        self._llama_cpp = llama_cpp
        self._llm = llm
        self._sampler: Any = grammar.clone()
        self._buffer = buffer
        self._eos = llm.token_eos()
        self._greedy = greedy
        self._follow = follow_outline
        self._text = b""
        self._seen: int | None = None
        self._one = (llama_cpp.llama_token_data * 1)()
        self.full_masks = 0
        self.followed_outline = False
        self.error: str | None = None

    def close(self) -> None:
        """Free the grammar sampler."""
        if self._sampler:
            self._llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None

    def _apply(self, data: Any, size: int) -> None:
        lc = self._llama_cpp
        array = lc.llama_token_data_array(
            data=ctypes.cast(data, lc.llama_token_data_p), size=size, selected=-1, sorted=False
        )
        lc.llama_sampler_apply(self._sampler, ctypes.byref(array))

    def _allowed(self, token: int) -> bool:
        self._one[0].id = token
        self._one[0].logit = 0.0
        self._one[0].p = 0.0
        self._apply(self._one, 1)
        return bool(self._one[0].logit != float("-inf"))

    def _accept(self, token: int) -> bool:
        if not self._allowed(token):
            self.error = f"grammar mask: token {token} was sampled but the grammar does not allow it"
            return False
        self._llama_cpp.llama_sampler_accept(self._sampler, token)
        return True

    def _follow_outline(self, bounds: dict[str, Any]) -> bool:
        """Switch to the sections grammar of the outline just written; False on an error."""
        self._follow = None
        outline, _, rest = self._text.partition(b"\n\n")
        grammar = sections_grammar(outline.decode("utf-8", errors="replace") + "\n\n", **bounds)
        if grammar is None:
            logger.warning("could not read the outline back; its sections follow the general grammar")
            return True
        lc = self._llama_cpp
        handle = lc.llama_sampler_init_grammar(lc.llama_model_get_vocab(self._llm.model), grammar.encode(), b"root")
        if not handle:
            logger.warning("llama.cpp rejected the sections grammar; the sections follow the general grammar")
            return True
        lc.llama_sampler_free(self._sampler)
        self._sampler = handle
        self.followed_outline = True
        # A token may have run past the blank line ("\n\n##"); the new grammar starts at the blank line.
        return all(self._accept(t) for t in self._llm.tokenize(rest, add_bos=False, special=False))

    def _stop(self, scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
        return only_end_of_text(scores, self._eos)

    def __call__(self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
        """Accept the tokens sampled since the last call, then mask what the grammar forbids next."""
        if self.error is not None or not self._sampler:
            return self._stop(scores)
        seen = len(input_ids) if self._seen is None else self._seen
        for token in input_ids[seen:]:
            if not self._accept(int(token)):
                return self._stop(scores)
            if self._follow is not None:
                self._text += self._llm.detokenize([int(token)])
                if b"\n\n" in self._text and not self._follow_outline(self._follow):
                    return self._stop(scores)
        self._seen = len(input_ids)
        if self._greedy and self._allowed(int(scores.argmax())):
            return scores
        self.full_masks += 1
        self._buffer["logit"] = scores
        self._apply(self._buffer.ctypes.data, len(self._buffer))
        masked: npt.NDArray[np.single] = self._buffer["logit"].copy()
        return masked
