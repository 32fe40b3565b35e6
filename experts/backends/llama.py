"""The in-process expert backend: a GGUF model run by llama.cpp (``llama-cpp-python``).

``LlamaBackend.from_settings`` resolves and verifies the model file but loads nothing; the weights are
loaded on the first ``generate`` (or an explicit ``load()``), once, and shared by every caller. One lock
guards the model: a llama.cpp context is not safe to use from two threads at once. Before each call the
context holds exactly the prompt's system message, kept from the last call or read alone
(:mod:`experts.backends.llama_prefix`), so greedy output does not depend on what was generated before; with
``prefix_cache`` off it is reset.

Grammars are enforced by a fast logits processor by default (:mod:`experts.backends.llama_mask`: the same tokens
as llama-cpp-python's own ``grammar=`` path at temperature 0, at a fraction of its cost);
``grammar_mode="builtin"`` selects llama-cpp-python's own path.

A grammar that starts with :data:`experts.backends.grammar.FOLLOW_OUTLINE_MARKER` (the default
:data:`~experts.backends.grammar.OUTLINE_GRAMMAR` does) is switched, once the outline is written, to the grammar of
exactly that outline's sections (:func:`experts.backends.grammar.sections_grammar`): the section headings then repeat
the outline's numbers and titles, with a sub-section for each sub-item. The built-in path cannot switch and
keeps the general grammar.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from experts.backends.cpu_share import Share, ShareWaitStopped, cpu_share
from experts.backends.decode_thread import on_decode_thread
from experts.backends.grammar import follow_outline_bounds
from experts.backends.llama_mask import CompiledGrammar, GrammarMask, RepeatPenalty, StopSwitch, TokenTap
from experts.backends.llama_prefix import PrefixCache, PrefixStore
from experts.backends.prefetch import Prefetch
from experts.backends.protocol import EitherStop, Generation, GenerationRequest
from experts.models.bundled import resolve_model_path
from experts.models.footprint import estimate
from state.errors import BackendError, GenerationStopped, ModelUnavailableError
from state.paths import cpu_share_dir, prefix_states_dir
from state.settings import Settings

if TYPE_CHECKING:
    import numpy.typing as npt
    from llama_cpp import Llama
    from llama_cpp.llama_types import ChatCompletionRequestMessage, CreateChatCompletionResponse

__all__ = ["GrammarMode", "LlamaBackend"]

logger = logging.getLogger(__name__)

GrammarMode = Literal["fast", "builtin"]

_INSTALL_HINT = (
    'the llama backend needs llama-cpp-python: pip install -e ".[llama]" (it compiles llama.cpp; '
    'CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" makes the build shorter and portable)'
)


_LOAD_LOCK = threading.Lock()
"""Loads and frees of models happen one at a time in the process (which also keeps two loads' peaks apart), and
:func:`_output_left_alone` is only entered under it."""


@contextlib.contextmanager
def _output_left_alone(llama_cpp: Any) -> Iterator[None]:
    """Load without pointing the process's stdout and stderr at /dev/null.

    With ``verbose=False`` llama-cpp-python (0.3.36) silences a load by ``dup2``-ing file descriptors 1 and 2 to
    /dev/null and back. That silences every thread of the process, not just the loading one: a progress line or
    a log record another thread wrote during the second or two of a load was lost, and two loads at once
    restored the descriptors in the wrong order so that everything printed afterwards was lost. The silencing
    is not needed once llama.cpp's log goes to ``logging`` (:func:`_route_llama_log`), so for the length of a
    load its ``suppress_stdout_stderr`` is replaced by a no-op (if a later version moves it, nothing is replaced
    and the old behaviour stays). Only entered under :data:`_LOAD_LOCK`.
    """
    _route_llama_log(llama_cpp)
    modules = [m for m in (getattr(llama_cpp, "llama", None), getattr(llama_cpp, "_internals", None)) if m]
    saved = [(m, m.suppress_stdout_stderr) for m in modules if hasattr(m, "suppress_stdout_stderr")]
    for module, _ in saved:
        module.suppress_stdout_stderr = _no_suppression
    try:
        yield
    finally:
        for module, original in saved:
            module.suppress_stdout_stderr = original


def _no_suppression(disable: bool = True) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


_GGML_LOG_ERROR = 4
_llama_logger = logging.getLogger("llama.cpp")
_llama_errors: collections.deque[str] = collections.deque(maxlen=8)
"""llama.cpp's latest error lines, for the message of a failed load (cleared before each load)."""


@functools.cache
def _route_llama_log(llama_cpp: Any) -> Any:
    """Send what llama.cpp logs, process-wide, to the ``llama.cpp`` logger at debug level; once per process.

    llama-cpp-python's own callback maps an older ggml's log levels: it prints warnings on stderr (the bundled
    model's "control-looking token" notice at every load, "removing memory module entries" after a stopped
    generation) and drops errors. Error lines are kept too (:data:`_llama_errors`): a failed load's error
    message quotes them. They are not warnings, because the failures they explain are raised anyway, and a
    stopped computation logs three of them ("llama_decode: failed to decode, ret = 2") that are no failure.
    Returns the ctypes callback, which the cache keeps alive for as long as llama.cpp may call it.
    """

    def forward(level: int, text: bytes, user_data: Any) -> None:
        line = text.decode("utf-8", "replace").rstrip()
        if line:
            if level == _GGML_LOG_ERROR:
                _llama_errors.append(line)
            _llama_logger.debug("%s", line)

    callback = llama_cpp.llama_log_callback(forward)
    llama_cpp.llama_log_set(callback, None)
    return callback


@functools.cache
def _native_abort_callback(llama_cpp: Any) -> Any | None:
    """A ggml abort callback that runs no Python: the C library's ``strlen``, given a two-byte flag buffer.

    llama.cpp asks its abort callback between the operations of every compute graph, from its own threads. A
    Python callback would take the GIL hundreds of times a token: measured with another Python thread busy,
    40 tokens took 153 s instead of 10 s. ``strlen`` of the buffer ``{flag, 0}`` is 0 or 1, which is the bool
    the callback returns (x86-64 and AArch64 return a bool in the low byte of the same register). None where
    the C library cannot be opened this way (then a stop waits for the next token). Made once per process.
    """
    try:
        strlen = ctypes.CDLL(None).strlen
        return llama_cpp.ggml_abort_callback(ctypes.cast(strlen, ctypes.c_void_p).value)
    except (OSError, AttributeError, TypeError) as exc:
        logger.debug("no native abort callback: %s", exc)
        return None


def _install_abort(llama_cpp: Any, llm: Llama, flag: ctypes.Array[ctypes.c_char]) -> None:
    """Make llama.cpp stop ``llm``'s computation as soon as ``flag[0]`` is set (not exposed by ``Llama``)."""
    callback = _native_abort_callback(llama_cpp)
    setter = getattr(getattr(llama_cpp.llama_cpp, "_lib", None), "llama_set_abort_callback", None)
    ctx = getattr(getattr(llm, "_ctx", None), "ctx", None)
    if callback is None or setter is None or ctx is None:
        logger.debug("llama.cpp's abort callback is not reachable; stops wait for the next token")
        return
    setter.argtypes = [ctypes.c_void_p, llama_cpp.ggml_abort_callback, ctypes.c_void_p]
    setter.restype = None
    setter(ctx, callback, ctypes.cast(flag, ctypes.c_void_p))


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelUnavailableError(f"{_INSTALL_HINT} ({exc})") from exc
    return llama_cpp


@dataclass(frozen=True)
class _Sampling:
    """One generation's llama.cpp options (its logits processors) and the processors read after it."""

    options: dict[str, Any]
    stop: EitherStop
    switch: StopSwitch
    mask: GrammarMask | None
    tap: TokenTap | None


class LlamaBackend:
    """An expert backend running one GGUF model in this process.

    ``generate`` is blocking and thread-safe: calls are serialised by the model's lock.
    """

    name = "llama"

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        grammar_mode: GrammarMode = "fast",
        n_gpu_layers: int = 0,
        use_mmap: bool = False,
        prefetch: bool = True,
        prefix_cache: bool = True,
        prefix_states: Path | None = None,
    ) -> None:
        """Prepare a backend for ``model_path``; nothing is loaded until it is needed.

        Args:
            model_path: A verified GGUF file (see :func:`experts.models.resolve_model_path`).
            n_ctx: Context window, in tokens (prompt and completion together).
            n_threads: CPU threads for llama.cpp; None uses every CPU.
            grammar_mode: ``"fast"`` (check the preferred token first; same output) or ``"builtin"``
                (llama-cpp-python's ``grammar=``, which checks the whole vocabulary every step).
            n_gpu_layers: Layers offloaded to a GPU (-1: all; 0: none, the CPU build's only choice).
            use_mmap: Map the file instead of reading it. Off by default: a mapped model's pages count in the
                process's memory on top of llama.cpp's repacked copy of the weights (1.8 GiB instead of 1.2 GiB
                for the 1.5B model here), stay cached after unloading, and would escape the pool's estimate.
            prefetch: Read the file ahead of llama.cpp in a background thread while loading
                (:mod:`experts.backends.prefetch`): llama.cpp alone alternates reading and computing, so a load from a
                cold page cache took 1.25-1.7x as long as a warm one for the 1.5B model.
            prefix_cache: Keep the system message's tokens read between calls
                (:mod:`experts.backends.llama_prefix`); off: the context is reset before every call.
            prefix_states: Where to save the system messages' states for other processes (a
                :class:`~experts.backends.llama_prefix.PrefixStore` root); None: not saved.
        """
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else (os.cpu_count() or 1)
        self.grammar_mode: GrammarMode = grammar_mode
        self.n_gpu_layers = n_gpu_layers
        self.use_mmap = use_mmap
        self.prefetch = prefetch
        self.prefix_cache = prefix_cache
        self.prefix_states = prefix_states
        self._prefix: PrefixCache | None = None
        self.load_seconds: float | None = None
        """How long loading the weights took, once loaded."""
        self.last_first_token_s: float | None = None
        """How long the last generation took to its first token (reading the prompt), for benchmarks."""
        self._llm: Llama | None = None
        self._grammars: dict[str, CompiledGrammar] = {}
        self._mask_buffer: npt.NDArray[Any] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._abort = ctypes.create_string_buffer(2)  # byte 0 set: llama.cpp stops computing (_install_abort)

    @classmethod
    def from_settings(cls, settings: Settings) -> LlamaBackend:
        """Create the backend for a run's settings: resolve and verify the model file, load nothing.

        Args:
            settings: The run's effective settings (``model_path``, ``n_ctx``, ``n_threads``).

        Returns:
            A backend whose model loads on first use.

        Raises:
            ModelUnavailableError: If the model file cannot be found, assembled or verified.
        """
        path = resolve_model_path(settings.model_path)
        return cls(
            path,
            n_ctx=settings.n_ctx,
            n_threads=settings.n_threads,
            n_gpu_layers=-1 if settings.gpu_offload else 0,
            prefix_cache=settings.prefix_cache,
            prefix_states=prefix_states_dir() if settings.prefix_disk_cache else None,
        )

    @property
    def loaded(self) -> bool:
        """Whether the model's weights are loaded."""
        return self._llm is not None

    def supports_grammar(self) -> bool:
        """Whether ``GenerationRequest.grammar`` is honoured (always, with llama.cpp)."""
        return True

    def load(self) -> None:
        """Load the model now (for preloading and benchmarks); does nothing if it is loaded.

        Raises:
            ModelUnavailableError: If llama-cpp-python is missing or the file cannot be loaded.
        """
        with self._lock:
            self._ensure_loaded()

    def footprint_bytes(self) -> int:
        """The memory this model will hold once loaded: weights + KV cache + compute.

        An estimate from the file's metadata; see :mod:`experts.models.footprint`.
        """
        return estimate(self.model_path, self.n_ctx).total

    def unload(self) -> None:
        """Free the model (the pool calls this when no generation holds it); a later call loads it again."""
        with self._lock:
            llm, self._llm = self._llm, None
            self._prefix = None
            self._grammars.clear()
            self._mask_buffer = None
            self._stop.clear()
            self._abort[0] = b"\x00"
        if llm is not None:
            with _LOAD_LOCK:
                llm.close()
            logger.info("unloaded %s", self.model_path.name)

    def cancel(self) -> None:
        """Stop the generation in progress, and fail the ones that start before ``unload``.

        llama.cpp stops within one operation of its compute graph (milliseconds, even in the middle of reading a
        long prompt) where the native abort callback could be installed (:func:`_native_abort_callback`), and
        at the next token otherwise.
        """
        self._stop.set()
        self._abort[0] = b"\x01"

    def check_grammar(self, grammar: str) -> None:
        """Compile a GBNF grammar with llama.cpp (loading the model if needed) and cache it.

        Args:
            grammar: The grammar text; its start rule is ``root``.

        Raises:
            BackendError: If llama.cpp cannot parse the grammar.
            ModelUnavailableError: If the model cannot be loaded.
        """
        with self._lock:
            self._compiled(self._ensure_loaded(), grammar, slot_id=None)

    def generate(self, request: GenerationRequest) -> Generation:
        """Produce one chat completion (blocking; serialised with other callers by the model's lock).

        Args:
            request: Messages, limits, sampling settings and an optional GBNF grammar.

        Returns:
            The completion text, token counts, wall time and finish reason.

        Raises:
            ModelUnavailableError: If the model cannot be loaded.
            BackendError: If the grammar is invalid or llama.cpp fails (e.g. the prompt exceeds ``n_ctx``).
        """
        messages = cast(
            "list[ChatCompletionRequestMessage]",
            [{"role": m.role, "content": m.content} for m in request.messages],
        )
        with self._lock:
            self._check_stop(request)
            llm = self._ensure_loaded()
            sampling = self._sampling(llm, request)
            response, started, waited = self._complete(llm, request, messages, sampling)
            self._check_stop(request)
            seconds = time.perf_counter() - started
        if sampling.mask is not None and sampling.mask.error is not None:
            raise BackendError(sampling.mask.error, slot_id=request.slot_id)
        completion = cast("CreateChatCompletionResponse", response)  # not streamed: the tap streams it
        return self._generation(completion, sampling, seconds, started, waited)

    # --- internals (called with the lock held) -----------------------------------------------------------

    def _sampling(self, llm: Llama, request: GenerationRequest) -> _Sampling:
        """The logits processors of one generation, in order: tap, repeat penalty, grammar mask, stop switch."""
        options: dict[str, Any] = {}
        processors: list[Any] = []
        if request.repeat_penalty != 1.0:  # before the mask: it must see the logits that will be sampled
            processors.append(RepeatPenalty(request.repeat_penalty))
        mask: GrammarMask | None = None
        if request.grammar is not None:
            compiled = self._compiled(llm, request.grammar, slot_id=request.slot_id)
            llama_cpp = _import_llama_cpp()
            if self.grammar_mode == "builtin":
                options["grammar"] = llama_cpp.LlamaGrammar.from_string(request.grammar, verbose=False)
            else:
                mask = GrammarMask(
                    llama_cpp,
                    llm,
                    compiled,
                    self._buffer(llm),
                    greedy=request.temperature == 0,
                    follow_outline=follow_outline_bounds(request.grammar),
                )
                processors.append(mask)
        # Last, so a stop overrides the grammar (which may not allow end-of-text mid-section).
        asked = time.perf_counter()  # a time limit counts the wait for a share of the cores too
        deadline = None if request.time_limit is None else asked + request.time_limit
        stop = EitherStop(self._stop, request.cancel)
        switch = StopSwitch(stop, llm.token_eos(), deadline, request.halt)
        processors.append(switch)
        tap = TokenTap(llm, request.on_token) if request.on_token is not None else None
        if tap is not None:
            processors.insert(0, tap)  # it sees each step's tokens before any processor changes the logits
        options["logits_processor"] = _import_llama_cpp().LogitsProcessorList(processors)
        return _Sampling(options, stop, switch, mask, tap)

    def _complete(
        self,
        llm: Llama,
        request: GenerationRequest,
        messages: list[ChatCompletionRequestMessage],
        sampling: _Sampling,
    ) -> tuple[Any, float, float]:
        """Run llama.cpp's chat completion with a share of the cores: the response, its start and the wait.

        Raises:
            GenerationStopped: If the pool or the run stopped it (also while it waited for the cores).
            BackendError: If llama.cpp fails.
        """
        share = (
            cpu_share(cpu_share_dir(), self.n_threads, sampling.stop)
            if self.n_gpu_layers == 0
            else contextlib.nullcontext(Share(0, 0.0))
        )

        def decode() -> Any:
            if self._prefix is not None:  # it prepares the context: the system message kept or read alone
                self._prefix.system = request.shared_prefix or next(
                    (m.content for m in request.messages if m.role == "system"), None
                )
            else:
                llm.reset()  # type: ignore[no-untyped-call]  # untyped in llama-cpp-python
            return llm.create_chat_completion(
                messages=messages,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                seed=request.seed,
                repeat_penalty=1.0,  # applied by RepeatPenalty, ahead of the grammar mask
                **sampling.options,
            )

        try:
            with share as held, self._aborted_on(request.cancel):
                started, waited = time.perf_counter(), held.waited
                response = on_decode_thread(held.number, decode)  # one thread per share: decode_thread.py
        except ShareWaitStopped:
            self._check_stop(request)  # stopped while waiting for the cores: a stop like any other
            raise
        except (ValueError, RuntimeError, OSError) as exc:
            self._check_stop(request)  # an aborted decode ("llama_decode returned 2") is a stop, not a failure
            raise BackendError(f"llama.cpp failed with {self.model_path.name}: {exc}", slot_id=request.slot_id) from exc
        finally:
            if sampling.mask is not None:
                sampling.mask.close()
        return response, started, waited

    def _generation(
        self,
        completion: CreateChatCompletionResponse,
        sampling: _Sampling,
        seconds: float,
        started: float,
        waited: float,
    ) -> Generation:
        """The :class:`Generation` of a finished completion, with what the processors saw in ``extra``."""
        choice = completion["choices"][0]
        text = choice["message"].get("content") or ""
        if sampling.tap is not None:
            sampling.tap.finish(text)
        usage = completion["usage"]
        completion_tokens = usage["completion_tokens"]
        extra = {"tokens_per_second": completion_tokens / seconds if seconds > 0 else 0.0, "cpu_wait_seconds": waited}
        if self._prefix is not None:
            extra["prefix_cached_tokens"] = float(self._prefix.reused)
            extra["prefix_loaded_tokens"] = float(self._prefix.loaded)
        switch, mask = sampling.switch, sampling.mask
        if switch.first_at is not None:
            extra["first_token_seconds"] = switch.first_at - started
            self.last_first_token_s = extra["first_token_seconds"]
        if mask is not None:
            extra["grammar_full_masks"] = float(mask.full_masks)
            extra["followed_outline"] = float(mask.followed_outline)
        finish = "time" if switch.timed_out else "halted" if switch.halted else choice.get("finish_reason") or "stop"
        return Generation(
            text=text,
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=completion_tokens,
            seconds=seconds,
            finish_reason=finish,
            model=self.model_path.name,
            extra=extra,
        )

    def _check_stop(self, request: GenerationRequest) -> None:
        if self._stop.is_set():
            raise GenerationStopped(
                f"{self.model_path.name}: generation stopped by the model pool", "stopped", slot_id=request.slot_id
            )
        if request.cancel is not None and request.cancel.is_set():
            raise GenerationStopped(
                f"{self.model_path.name}: generation stopped, its run was cancelled",
                "cancelled",
                slot_id=request.slot_id,
            )

    @contextlib.contextmanager
    def _aborted_on(self, cancel: threading.Event | None) -> Iterator[None]:
        """While a generation runs, its run's ``cancel`` stops llama.cpp within one operation.

        A prompt being read is stopped too: the abort flag :meth:`cancel` sets for the whole model is set here for
        this generation only, and cleared after it.
        """
        if cancel is None:
            yield
            return
        done = threading.Event()

        def watch() -> None:
            while not done.wait(EitherStop.POLL_SECONDS):
                if cancel.is_set():
                    self._abort[0] = b"\x01"
                    return

        watcher = threading.Thread(target=watch, name="coe-cancel-watch", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()
            if cancel.is_set() and not self._stop.is_set():
                self._abort[0] = b"\x00"  # the next generation, another run's, must not stop

    def _ensure_loaded(self) -> Llama:
        if self._llm is not None:
            return self._llm
        llama_cpp = _import_llama_cpp()
        started = time.perf_counter()
        try:
            # The reader starts before the lock: waiting for another model's load overlaps with the disk too.
            with (
                Prefetch(self.model_path) if self.prefetch else contextlib.nullcontext(),
                _LOAD_LOCK,
                _output_left_alone(llama_cpp),
            ):
                _llama_errors.clear()
                llm: Llama = llama_cpp.Llama(
                    model_path=str(self.model_path),
                    n_ctx=self.n_ctx,
                    n_threads=self.n_threads,
                    n_gpu_layers=self.n_gpu_layers,
                    use_mmap=self.use_mmap,
                    verbose=False,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            said = "; ".join(_llama_errors)
            raise ModelUnavailableError(
                f"llama.cpp cannot load {self.model_path}: {exc}" + (f" (llama.cpp: {said})" if said else "") + "; "
                "check that it is a complete GGUF model supported by the installed llama-cpp-python"
            ) from exc
        self.load_seconds = time.perf_counter() - started
        _install_abort(llama_cpp, llm, self._abort)
        store = (
            PrefixStore.for_model(self.prefix_states, self.model_path, self.n_ctx, llama_cpp.__version__)
            if self.prefix_states is not None
            else None
        )
        self._prefix = PrefixCache(llm, store) if self.prefix_cache else None
        logger.info(
            "loaded %s in %.2f s (n_ctx=%d, n_threads=%d)",
            self.model_path.name,
            self.load_seconds,
            self.n_ctx,
            self.n_threads,
        )
        self._llm = llm
        return llm

    def _compiled(self, llm: Llama, grammar: str, *, slot_id: str | None) -> CompiledGrammar:
        compiled = self._grammars.get(grammar)
        if compiled is None:
            llama_cpp = _import_llama_cpp()
            vocab = llama_cpp.llama_model_get_vocab(llm.model)
            started = time.perf_counter()
            handle = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
            if not handle:
                raise BackendError(
                    "llama.cpp cannot parse the GBNF grammar (its parser logged the reason to stderr); "
                    f"grammar starts with: {grammar[:80]!r}",
                    slot_id=slot_id,
                )
            compiled = CompiledGrammar(llama_cpp, handle)
            logger.debug(
                "compiled a %d-character grammar in %.1f ms", len(grammar), 1e3 * (time.perf_counter() - started)
            )
            self._grammars[grammar] = compiled
        return compiled

    def _buffer(self, llm: Llama) -> npt.NDArray[Any]:
        if self._mask_buffer is None:
            import numpy as np

            llama_cpp = _import_llama_cpp()
            dtype = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)
            if dtype.itemsize != ctypes.sizeof(llama_cpp.llama_token_data):  # pragma: no cover - ABI guard
                raise BackendError("llama_token_data layout changed; use grammar_mode='builtin'")
            buffer = np.zeros(llm.n_vocab(), dtype=dtype)
            buffer["id"] = np.arange(llm.n_vocab(), dtype=np.int32)
            self._mask_buffer = buffer
        return self._mask_buffer
