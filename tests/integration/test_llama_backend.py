"""The llama.cpp backend with the real default model: assembly, grammars, determinism, thread safety."""

from __future__ import annotations

import ctypes
import hashlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.planning.scope_reading import GRAMMAR, reading_messages
from engine.slots.contracts import CONTRACTS
from experts.backends.grammar import (
    OUTLINE_GRAMMAR,
    fixed_outline_grammar,
    follow_outline_bounds,
    outline_grammar,
    sections_grammar,
)
from experts.backends.llama import LlamaBackend
from experts.backends.prefetch import Prefetch
from experts.backends.protocol import ChatMessage, GenerationRequest
from experts.models.bundled import BUNDLED_MODELS, DEFAULT_MODEL, bundled_model_path, resolve_model_path
from state.errors import BackendError, GenerationStopped, ModelUnavailableError
from state.settings import Settings

pytestmark = pytest.mark.model

llama_cpp: Any = pytest.importorskip("llama_cpp", reason='needs llama-cpp-python: pip install -e ".[llama]"')

MAX_TOKENS = 100
REQUEST = GenerationRequest(
    messages=(
        ChatMessage("system", "You are a careful expert. Answer with an outline, then one section per item."),
        ChatMessage("user", "Explain how to set up a Python virtual environment."),
    ),
    max_tokens=MAX_TOKENS,
    grammar=OUTLINE_GRAMMAR,
    slot_id="venv",
)

STATIC_GRAMMAR = outline_grammar(follow_outline=False)

GOOD_ANSWER = """\
## Outline
1. Create the environment
   1.1 Pick a Python
2. Activate it
3. Install packages

## 1. Create the environment
Run `python -m venv .venv` in the project directory.

### 1.1 Pick a Python
Use the interpreter the project targets: {{ASSIST:user:which Python version the project needs}}.

## 2. Activate it
```bash
# on Linux and macOS
source .venv/bin/activate
```

## 3. Install packages
Install what you need with pip, e.g. {{ASSIST:lookup:the project's requirements file}}.
"""


@pytest.fixture(scope="module")
def model_path() -> Path:
    return resolve_model_path(None)


@pytest.fixture(scope="module")
def backend(model_path: Path) -> LlamaBackend:
    backend = LlamaBackend(model_path, n_ctx=2048)
    backend.load()
    return backend


@pytest.fixture(scope="module")
def reference(backend: LlamaBackend) -> str:
    return backend.generate(REQUEST).text


@pytest.fixture(scope="module")
def vocab_model(model_path: Path) -> Any:
    return llama_cpp.Llama(str(model_path), vocab_only=True, verbose=False)


def _accepts(vocab_model: Any, grammar: str, text: str) -> bool:
    """Whether the grammar accepts ``text`` followed by end-of-text, token by token (as in generation)."""
    lc = llama_cpp
    sampler = lc.llama_sampler_init_grammar(lc.llama_model_get_vocab(vocab_model.model), grammar.encode(), b"root")
    assert sampler, "grammar does not compile"
    one = (lc.llama_token_data * 1)()
    try:
        eos = vocab_model.token_eos()
        for token in [*vocab_model.tokenize(text.encode(), add_bos=False, special=False), eos]:
            one[0].id, one[0].logit, one[0].p = token, 0.0, 0.0
            array = lc.llama_token_data_array(
                data=ctypes.cast(one, lc.llama_token_data_p), size=1, selected=-1, sorted=False
            )
            lc.llama_sampler_apply(sampler, ctypes.byref(array))
            if one[0].logit == float("-inf"):
                return False
            if token != eos:
                lc.llama_sampler_accept(sampler, token)
        return True
    finally:
        lc.llama_sampler_free(sampler)


def test_default_model_assembles_verifies_and_repairs_its_cache(tmp_path: Path) -> None:
    model = BUNDLED_MODELS[DEFAULT_MODEL]
    path = bundled_model_path(DEFAULT_MODEL, cache_dir=tmp_path)
    assert path.stat().st_size == model.size
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model.sha256

    with path.open("r+b") as handle:  # a damaged cached copy (its mtime changes)
        handle.seek(model.size // 2)
        handle.write(b"\0" * 16)
    assert bundled_model_path(DEFAULT_MODEL, cache_dir=tmp_path) == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model.sha256


@pytest.mark.parametrize("name", [name for name, model in BUNDLED_MODELS.items() if not model.in_place])
def test_a_model_s_pinned_parts_make_its_pinned_file(name: str, tmp_path: Path) -> None:
    """Assembly checks each part's SHA-256 only; the registry's whole-file hash must follow from the parts."""
    model = BUNDLED_MODELS[name]
    try:
        path = bundled_model_path(name, cache_dir=tmp_path)
    except ModelUnavailableError as exc:
        if name == DEFAULT_MODEL:
            raise
        pytest.skip(f"{name} is not installed: {exc}")
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    assert path.stat().st_size == model.size and digest.hexdigest() == model.sha256


def test_from_settings_loads_nothing_until_the_first_generation(model_path: Path) -> None:
    settings = Settings(
        backend="llama",
        model_path=str(model_path),
        max_parallel=1,
        max_outline_retries=0,
        max_tokens=64,
        temperature=0.0,
        use_grammar=True,
        n_ctx=512,
        n_threads=1,
        reference_max_chars=1000,
    )
    backend = LlamaBackend.from_settings(settings)
    assert not backend.loaded and backend.n_ctx == 512 and backend.n_threads == 1
    assert backend.supports_grammar()
    too_long = GenerationRequest(messages=(ChatMessage("user", "word " * 800),), max_tokens=8, slot_id="s1")
    with pytest.raises(BackendError, match="slot s1") as info:
        backend.generate(too_long)
    assert info.value.slot_id == "s1" and not hasattr(info.value, "node")  # the node that asked reports it
    assert backend.loaded


def test_loading_reads_the_file_ahead_of_llama_cpp(model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readers: list[Prefetch] = []

    class Recorded(Prefetch):
        def __init__(self, path: Path) -> None:
            super().__init__(path)
            readers.append(self)

    monkeypatch.setattr("experts.backends.llama.Prefetch", Recorded)
    backend = LlamaBackend(model_path, n_ctx=512, n_threads=1)
    backend.load()
    try:
        assert [r.path for r in readers] == [model_path]
        assert readers[0].done and readers[0].error is None and readers[0].bytes_read > 0
        one = GenerationRequest(messages=(ChatMessage("user", "Say hello."),), max_tokens=1)
        assert backend.generate(one).completion_tokens == 1
    finally:
        backend.unload()
    without = LlamaBackend(model_path, n_ctx=512, n_threads=1, prefetch=False)
    without.load()
    without.unload()
    assert len(readers) == 1


def test_a_truncated_model_is_refused_with_llama_cpps_reason(model_path: Path, tmp_path: Path) -> None:
    broken = tmp_path / "truncated.gguf"
    with model_path.open("rb") as fh:
        broken.write_bytes(fh.read(3_000_000))
    with pytest.raises(ModelUnavailableError, match=r"cannot load .*truncated\.gguf.*\(llama\.cpp: .*failed"):
        LlamaBackend(broken, n_ctx=512).load()


def test_a_stop_interrupts_llama_cpp_in_the_middle_of_reading_the_prompt(
    model_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Ctrl+C and the pool's emergency stop must not wait for a long prompt to be read (tens of seconds with the
    1.5B model): llama.cpp's abort callback stops it between two operations of the compute graph."""
    caplog.set_level(logging.DEBUG, logger="llama.cpp")
    backend = LlamaBackend(model_path, n_ctx=4096, n_threads=2)
    long = GenerationRequest(messages=(ChatMessage("user", "word " * 3500),), max_tokens=4, slot_id="s1")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            backend.generate(long)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    backend.load()
    try:
        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(0.5)  # reading 3,500 tokens takes seconds even on a fast CPU
        backend.cancel()
        worker.join(timeout=60)
        assert not worker.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], GenerationStopped), errors
        assert errors[0].slot_id == "s1"
        llm = backend._llm
        assert llm is not None and llm.n_tokens < 3500, "the whole prompt was read before stopping"
        # llama.cpp logs the aborted decode as three errors; a stop is no failure, so nothing reaches a user
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    finally:
        backend.unload()
    one = GenerationRequest(messages=(ChatMessage("user", "Say hello."),), max_tokens=1)
    assert backend.generate(one).completion_tokens == 1  # unloading cleared the stop; the model loads again
    backend.unload()


@pytest.mark.parametrize(
    "grammar",
    [
        OUTLINE_GRAMMAR,
        outline_grammar(max_sub_items=0),
        fixed_outline_grammar([("1", "Setup"), ("1.1", 'A "quoted" title'), ("2", "Use"), ("3", "Done")]),
        sections_grammar('## Outline\n1. Setup\n   1.1 A "quoted" title\n2. Use\n3. Done\n\n'),
    ],
    ids=["outline", "flat", "fixed", "sections"],
)
def test_grammars_compile(backend: LlamaBackend, grammar: str | None) -> None:
    assert grammar is not None
    backend.check_grammar(grammar)


def test_an_invalid_grammar_is_a_backend_error(backend: LlamaBackend) -> None:
    with pytest.raises(BackendError, match="cannot parse the GBNF grammar"):
        backend.check_grammar("root ::= undefined-rule")


def test_the_outline_grammar_accepts_the_contract(vocab_model: Any) -> None:
    assert _accepts(vocab_model, OUTLINE_GRAMMAR, GOOD_ANSWER)


def test_a_code_block_under_a_list_item_may_be_indented(vocab_model: Any) -> None:
    step = "## 3. Install packages\n1. Install Django:\n   ```bash\n   pip install django\n   ```\n"
    indented = GOOD_ANSWER.split("## 3. Install packages")[0] + step
    assert _accepts(vocab_model, OUTLINE_GRAMMAR, indented)
    assert not _accepts(vocab_model, OUTLINE_GRAMMAR, indented.replace("   ```\n", "")), "an unclosed indented fence"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda t: t + "\n## 4. An extra section\nText.\n", "more sections than outline items"),
        (lambda t: t.replace("## 2. Activate it", "## 3. Activate it"), "sections out of order"),
        (lambda t: t.replace("3. Install packages\n", ""), "fewer outline items than sections"),
        (lambda t: t.replace("```\n\n## 3.", "\n## 3."), "an unclosed code fence"),
        (lambda t: t.replace("Run `python", "# 4. Run `python"), "a line that reads as a numbered heading"),
        (lambda t: t.replace("## Outline\n", "# Outline\n"), "a wrong outline marker"),
        (lambda t: t.replace("### 1.1 Pick", "### 2.1 Pick"), "a sub-section numbered for another section"),
    ],
)
def test_the_outline_grammar_rejects_broken_structure(vocab_model: Any, change: Any, why: str) -> None:
    assert not _accepts(vocab_model, OUTLINE_GRAMMAR, change(GOOD_ANSWER)), why


def test_the_fixed_grammar_forces_the_given_outline(vocab_model: Any) -> None:
    grammar = fixed_outline_grammar(
        [("1", "Create the environment"), ("1.1", "Pick a Python"), ("2", "Activate it"), ("3", "Install packages")]
    )
    assert _accepts(vocab_model, grammar, GOOD_ANSWER)
    assert not _accepts(vocab_model, grammar, GOOD_ANSWER.replace("## 2. Activate it", "## 2. Activate"))
    assert not _accepts(vocab_model, grammar, GOOD_ANSWER.replace("\n### 1.1 Pick a Python\n", "\n"))


def test_the_sections_grammar_follows_a_written_outline(vocab_model: Any) -> None:
    outline, _, sections = GOOD_ANSWER.partition("\n\n")
    assert follow_outline_bounds(OUTLINE_GRAMMAR) == {"max_line_chars": 300, "max_block_lines": 4}
    assert follow_outline_bounds(STATIC_GRAMMAR) is None
    grammar = sections_grammar(outline + "\n\n")
    assert grammar is not None
    assert _accepts(vocab_model, grammar, sections)
    assert not _accepts(vocab_model, grammar, sections.replace("\n### 1.1 Pick a Python\n", "\n"))
    assert not _accepts(vocab_model, grammar, sections.replace("## 3. Install packages", "## 3. Packages"))
    assert sections_grammar("## Outline\n1. A\n3. B\n\n") is None  # not an outline the grammar could write


def test_generation_follows_the_outline_grammar(backend: LlamaBackend, reference: str, model_path: Path) -> None:
    assert reference.startswith("## Outline\n1. ")
    generation = backend.generate(REQUEST)
    assert generation.text == reference, "greedy output must not depend on the previous call"
    # The sections follow the outline just written: section 1 repeats item 1's title.
    first_title = reference.split("\n")[1].removeprefix("1. ")
    assert f"\n\n## 1. {first_title}\n" in reference
    assert generation.extra["followed_outline"] == 1.0
    assert 0 < generation.completion_tokens <= MAX_TOKENS
    assert generation.prompt_tokens > 0
    assert generation.finish_reason in ("stop", "length")
    assert generation.model == model_path.name


def test_a_given_first_title_is_written_for_the_model(backend: LlamaBackend) -> None:
    """A plan's slot starts with its own title (engine.slots.run), escaped, on the real grammar path."""
    grammar = CONTRACTS["prose"].grammar(first_title='Compute the "terminal" value')
    generation = backend.generate(replace(REQUEST, grammar=grammar, max_tokens=24))
    assert generation.text.startswith('## Outline\n1. Compute the "terminal" value\n'), generation.text


def test_a_halt_ends_the_answer_where_it_is(backend: LlamaBackend, reference: str) -> None:
    """What the loop watch does (engine.slots.loop_watch): the caller sets ``halt`` from ``on_token``.

    The answer so far stays.
    """
    halt = threading.Event()
    pieces: list[str] = []

    def token(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 8:
            halt.set()

    generation = backend.generate(replace(REQUEST, on_token=token, halt=halt))
    assert generation.finish_reason == "halted"
    assert generation.completion_tokens <= 10 < len(reference.split())
    assert reference.startswith(generation.text) and generation.text == "".join(pieces)


LONG_SYSTEM = (
    "You are a careful technical writer. You write for readers who are new to the subject, in short sentences, "
    "with one idea per paragraph. Answer with an outline first, then one numbered section per outline item, "
    "and never repeat the task's title as an item. Where you do not know a fact, say so instead of guessing."
)


def test_the_prefix_cache_keeps_the_system_message_and_greedy_output_does_not_change(backend: LlamaBackend) -> None:
    def ask(user: str) -> GenerationRequest:
        return replace(REQUEST, messages=(ChatMessage("system", LONG_SYSTEM), ChatMessage("user", user)), max_tokens=30)

    first = backend.generate(ask("Explain how to set up a Python virtual environment."))  # a miss
    other = backend.generate(ask("Explain what a Python decorator is."))
    again = backend.generate(ask("Explain how to set up a Python virtual environment."))
    assert first.extra["prefix_cached_tokens"] == 0
    assert other.extra["prefix_cached_tokens"] >= 32 and again.extra["prefix_cached_tokens"] >= 32
    assert again.text == first.text  # the system message kept or read alone: the same tokens either way
    assert again.prompt_tokens == first.prompt_tokens


def test_two_threads_share_one_backend(backend: LlamaBackend, reference: str) -> None:
    start = threading.Barrier(2)

    def run(_: int) -> str:
        start.wait()
        return backend.generate(REQUEST).text

    with ThreadPoolExecutor(max_workers=2) as pool:
        texts = list(pool.map(run, range(2)))
    assert texts == [reference, reference]


def test_the_fast_grammar_path_matches_llama_cpp_python(backend: LlamaBackend, model_path: Path) -> None:
    request = GenerationRequest(messages=REQUEST.messages, max_tokens=60, grammar=STATIC_GRAMMAR)
    builtin = LlamaBackend(model_path, n_ctx=2048, grammar_mode="builtin")
    assert builtin.generate(request).text == backend.generate(request).text


def test_the_repeat_penalty_comes_before_the_grammar_mask(backend: LlamaBackend, model_path: Path) -> None:
    """llama.cpp applied its own penalty after the mask, whose greedy shortcut then let through a token the penalty
    demoted; the token sampled instead broke the grammar (review set: a legal slot failed with "grammar mask:
    token 21 was sampled but the grammar does not allow it"). The penalty now runs before the mask, on both paths.
    """
    request = replace(REQUEST, max_tokens=60, repeat_penalty=1.1)
    fast = backend.generate(request).text
    builtin = LlamaBackend(model_path, n_ctx=2048, grammar_mode="builtin")
    assert fast.startswith("## Outline\n1. ") and builtin.generate(request).text == fast


LOAD_TWO_AT_ONCE = """
import threading
from experts.backends.llama import LlamaBackend
from experts.models.bundled import resolve_model_path

path = resolve_model_path(None)
backends = [LlamaBackend(path, n_ctx=1024), LlamaBackend(path, n_ctx=2048)]
for round in range(3):
    threads = [threading.Thread(target=b.load, daemon=True) for b in backends]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    loaded = all(b.loaded for b in backends)
    for b in backends:
        b.unload()
    print(f"round {round}: both loaded {loaded}", flush=True)
"""


def test_two_models_loading_at_once_keep_the_process_output() -> None:
    """Regression: llama-cpp-python silences llama.cpp during a load by pointing the process's stdout and stderr
    at /dev/null and back; two loads at once (a preload beside a slot's own load) restored them in the wrong
    order and every later line the process printed was lost (the CLI's document included). Loads are
    serialised now. Run in a child process, whose output is what is at stake."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", LOAD_TWO_AT_ONCE], cwd=root, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == [f"round {i}: both loaded True" for i in range(3)], out.stdout


PRINT_DURING_A_LOAD = """
import threading, time
from experts.backends.llama import LlamaBackend
from experts.models.bundled import resolve_model_path

backend = LlamaBackend(resolve_model_path(None), n_ctx=512)
done = threading.Event()

def tick():
    n = 0
    while not done.is_set() or n < 10:
        print(f"tick {n}", flush=True)
        n += 1
        time.sleep(0.005)

ticker = threading.Thread(target=tick)
ticker.start()
backend.load()
done.set()
ticker.join()
print("loaded", backend.loaded, "in", backend.load_seconds, flush=True)
"""


def test_lines_printed_by_other_threads_during_a_load_are_kept() -> None:
    """Regression: the silencing of a load (file descriptors 1 and 2 pointed at /dev/null) swallowed what other
    threads printed meanwhile, e.g. the CLI's progress lines while a model was preloaded."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", PRINT_DURING_A_LOAD], cwd=root, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[-1].startswith("loaded True"), out.stdout[-500:]
    ticks = lines[:-1]
    assert len(ticks) >= 10
    assert ticks == [f"tick {n}" for n in range(len(ticks))], "lines are missing"
    assert out.stderr == ""


def test_a_generation_waits_for_its_share_of_the_cores_and_a_stop_ends_the_wait(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another generation holds the machine's cores (another process, or another model of this one)."""
    import experts.backends.llama as llama_module
    from experts.backends.cpu_share import cpu_share

    monkeypatch.setattr(llama_module, "cpu_share_dir", lambda: tmp_path)
    backend = LlamaBackend(model_path, n_ctx=512)
    short = GenerationRequest(messages=REQUEST.messages, max_tokens=4, slot_id="short")
    try:
        with cpu_share(tmp_path, backend.n_threads, threading.Event()):
            threading.Timer(0.3, backend.cancel).start()
            started = time.perf_counter()
            with pytest.raises(GenerationStopped):
                backend.generate(short)
            assert 0.25 < time.perf_counter() - started < 5
        backend.unload()  # clears the stop
        backend.load()  # the wait measured below is for the cores, not for the weights
        with ThreadPoolExecutor(1) as pool, cpu_share(tmp_path, backend.n_threads, threading.Event()):
            waiting = pool.submit(backend.generate, short)
            time.sleep(0.5)
            assert not waiting.done()
        generation = waiting.result(timeout=120)
        assert generation.extra["cpu_wait_seconds"] >= 0.3 and generation.completion_tokens > 0
    finally:
        backend.unload()


def test_a_new_process_loads_the_saved_system_message_and_greedy_output_does_not_change(
    backend: LlamaBackend, model_path: Path, tmp_path: Path
) -> None:
    request = replace(
        REQUEST,
        messages=(ChatMessage("system", LONG_SYSTEM), ChatMessage("user", "Explain what a Python decorator is.")),
        max_tokens=30,
    )
    plain = backend.generate(request)  # no store: the system message read from an empty context
    saving = LlamaBackend(model_path, n_ctx=2048, prefix_states=tmp_path)  # as a first process would
    first = saving.generate(request)
    [saved] = list(tmp_path.glob("*/*.npz"))
    fresh = LlamaBackend(model_path, n_ctx=2048, prefix_states=tmp_path)  # as the next process would
    loaded = fresh.generate(request)
    assert first.extra["prefix_loaded_tokens"] == 0 and loaded.extra["prefix_loaded_tokens"] >= 32
    assert loaded.extra["prefix_cached_tokens"] == loaded.extra["prefix_loaded_tokens"]
    assert plain.text == first.text == loaded.text and loaded.prompt_tokens == plain.prompt_tokens
    saved.write_bytes(b"not a state")  # a damaged file: read the prefix again, same output
    again = LlamaBackend(model_path, n_ctx=2048, prefix_states=tmp_path).generate(request)
    assert again.extra["prefix_loaded_tokens"] == 0 and again.text == plain.text
    assert saved.read_bytes().startswith(b"PK")  # and saved again in its place


def test_a_shared_prefix_is_kept_across_systems_that_differ_after_it(model_path: Path, tmp_path: Path) -> None:
    # a function task's contract names its function: only the lines before that are shared between tasks
    head = LONG_SYSTEM + "\nREQUIRED OUTPUT STRUCTURE (mandatory):\n"

    def ask(function: str) -> GenerationRequest:
        system = head + f'1. First write the line "## Outline". Under it write the line "1. {function}".'
        return replace(
            REQUEST,
            messages=(ChatMessage("system", system), ChatMessage("user", f"Write {function}.")),
            max_tokens=12,
            shared_prefix=head,
        )

    LlamaBackend(model_path, n_ctx=2048, prefix_states=tmp_path).generate(ask("add"))
    other = LlamaBackend(model_path, n_ctx=2048, prefix_states=tmp_path).generate(ask("similar_elements"))
    plain = LlamaBackend(model_path, n_ctx=2048).generate(ask("similar_elements"))
    assert other.extra["prefix_loaded_tokens"] >= 32 and other.text == plain.text


def test_the_scope_readings_labelled_turns_are_a_prefix_kept_across_calls(backend: LlamaBackend) -> None:
    # the shared prefix spans chat turns (written in ChatML): found among the prompt's tokens, read once
    def ask(task: str) -> GenerationRequest:
        messages, shared = reading_messages(task)
        return GenerationRequest(messages=messages, max_tokens=4, grammar=GRAMMAR, shared_prefix=shared)

    first = backend.generate(ask("Write a haiku about a lighthouse"))
    other = backend.generate(ask("Write a SQL query for late invoices and an email to the customers who owe"))
    again = backend.generate(ask("Write a haiku about a lighthouse"))
    assert first.text in ("ONE", "SEVERAL") and other.text in ("ONE", "SEVERAL")
    assert other.extra["prefix_cached_tokens"] >= 800 and again.extra["prefix_cached_tokens"] >= 800
    assert again.text == first.text and again.prompt_tokens == first.prompt_tokens
