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

:class:`PrefixStore` keeps a prefix's state on disk, so a new process (each ``coe run``) does not read the
persona and the output contract again: the context's state right after the prefix was read from an empty
context (llama.cpp's ``llama_state_get_data``: the KV cache of those tokens) is saved once, and loaded in place
of reading it. Loading puts back exactly what reading computed, so the output is the same either way.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MAX_STATES", "MIN_PREFIX_TOKENS", "PrefixCache", "PrefixStore"]

logger = logging.getLogger(__name__)

MAX_STATES = 64
"""Saved prefix states kept per model; the least recently used go first (1.5B: about 30 KB a token)."""

MIN_PREFIX_TOKENS = 32
"""A shorter system message is not worth a separate read."""


class PrefixCache:
    """Wraps a ``llama_cpp.Llama``'s ``generate`` so that each call starts from its canonical prefix.

    Set :attr:`system` (the request's system message, or None) before each ``create_chat_completion``, under
    the model's lock; :attr:`reused` then says how many prompt tokens were not read again.
    """

    def __init__(self, llm: Any, store: PrefixStore | None = None) -> None:
        self._llm = llm
        self._generate: Callable[..., Any] = llm.generate
        self._store = store
        self.system: str | None = None
        self.reused = 0
        """Prompt tokens of the last call that came from the cache (the context's, or the disk's)."""
        self.loaded = 0
        """Of those, the tokens loaded from the disk store."""
        self._system_tokens: dict[str, list[int]] = {}
        llm.generate = self._prepared_generate  # an attribute of the instance: _create_completion calls it

    def _prepared_generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
        tokens = list(tokens)
        llm = self._llm
        cut = self._prefix_length(tokens)
        self.reused = self.loaded = 0
        if cut and llm.n_tokens >= cut and list(llm._input_ids[:cut]) == tokens[:cut]:
            if cut < llm.n_tokens:
                llm._ctx.kv_cache_seq_rm(-1, cut, -1)
                llm.n_tokens = cut
            self.reused = cut
        else:
            llm.reset()
            if cut and self._store is not None and self._store.load(llm, tokens[:cut]):
                self.reused = self.loaded = cut
            elif cut:
                llm.eval(tokens[:cut])  # the prefix alone, from an empty context: the same batches every time
                if self._store is not None:
                    self._store.save(llm, tokens[:cut])
        return self._generate(tokens, *args, **kwargs)

    def _prefix_length(self, tokens: list[int]) -> int:
        """Where the system message (or the shared prefix) ends among ``tokens`` (0: no usable prefix).

        Read as the prompt is (special tokens as such), so a shared prefix may span chat turns written in the
        model's template (``engine/planning/scope_reading.py``); one in another template is not found.
        """
        if not self.system:
            return 0
        wanted = self._system_tokens.get(self.system)
        if wanted is None:
            wanted = list(self._llm.tokenize(self.system.encode("utf-8"), add_bos=False, special=True))
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


class PrefixStore:
    """Prefix states of one model on disk: ``<directory>/<sha256 of the model's key and the tokens>.npz``.

    The key names what the state depends on: the model file (path, size, modification time), the context size
    and the llama-cpp-python version. A file holds the tokens (checked on load) and the state bytes; it is written
    to a temporary name and renamed, so a reader never sees half a file. Any failure to read or write is logged
    and the prefix is read as without a store.
    """

    def __init__(self, directory: Path, model_key: str) -> None:
        self.directory = directory
        self.model_key = model_key

    @classmethod
    def for_model(cls, root: Path, model_path: Path, n_ctx: int, version: str) -> PrefixStore:
        """The store of one model file at one context size, under ``root``."""
        stat = model_path.stat()
        key = f"{model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|n_ctx={n_ctx}|llama-cpp-python={version}"
        return cls(root / hashlib.sha256(key.encode()).hexdigest()[:16], key)

    def _path(self, tokens: Sequence[int]) -> Path:
        digest = hashlib.sha256(self.model_key.encode() + np.asarray(tokens, dtype=np.int32).tobytes()).hexdigest()
        return self.directory / f"{digest[:32]}.npz"

    def load(self, llm: Any, tokens: Sequence[int]) -> bool:
        """Put the saved state of ``tokens`` into ``llm``'s empty context; False when there is none (or it fails)."""
        import llama_cpp  # only a loaded llama.cpp model reaches here

        path = self._path(tokens)
        try:
            with np.load(path, allow_pickle=False) as saved:
                if not np.array_equal(saved["tokens"], np.asarray(tokens, dtype=np.int32)):
                    return False
                state = saved["state"].tobytes()
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            logger.warning("prefix state %s not read (%s): removed; the prefix is read and saved again", path, exc)
            path.unlink(missing_ok=True)
            return False
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if llama_cpp.llama_state_set_data(llm._ctx.ctx, buffer, len(state)) != len(state):
            logger.warning("prefix state %s not loaded by llama.cpp; reading the prefix instead", path)
            llm.reset()
            return False
        llm.input_ids[: len(tokens)] = tokens
        llm.n_tokens = len(tokens)
        try:
            os.utime(path)  # recently used: kept longest
        except OSError:
            pass
        return True

    def save(self, llm: Any, tokens: Sequence[int]) -> None:
        """Save the state of ``llm``'s context, which holds exactly ``tokens`` read from an empty context."""
        import llama_cpp

        path = self._path(tokens)
        if path.exists():
            return
        try:
            size = llama_cpp.llama_state_get_size(llm._ctx.ctx)
            buffer = (ctypes.c_uint8 * size)()
            written = llama_cpp.llama_state_get_data(llm._ctx.ctx, buffer, size)
            self.directory.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.stem}.{os.getpid()}.npz")
            np.savez(
                partial,
                tokens=np.asarray(tokens, dtype=np.int32),
                state=np.frombuffer(buffer, dtype=np.uint8, count=written),
            )
            os.replace(partial, path)
            self._trim()
        except OSError as exc:
            logger.warning("prefix state not saved in %s: %s", self.directory, exc)

    def _trim(self) -> None:
        dated = []
        for state in self.directory.glob("*.npz"):
            try:
                dated.append((state.stat().st_mtime_ns, state))
            except OSError:  # another process trimmed it
                continue
        for _, old in sorted(dated)[: max(0, len(dated) - MAX_STATES)]:
            old.unlink(missing_ok=True)
