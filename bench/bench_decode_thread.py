"""Decoding from the threads that ask, or on one decode thread: a generation's time once two threads have asked.

Run: ``python -m bench.bench_decode_thread [--repeats N] [--tokens N]``. Writes
``bench/results/decode_thread.{json,md}``. ``--quick``: one repeat of 8 tokens (a test of the benchmark).

Each setting runs in a new process (llama.cpp's thread teams live as long as the threads that lead them): the
reference model (the biggest installed) and the default model are loaded, one generation runs on the main thread,
then ``--repeats`` rounds ask each model from two pool threads in turn, as the graph's slots, the planner and a
benchmark's bare side do. "caller" decodes on the asking thread (how the backend ran before
:mod:`experts.backends.decode_thread`); "decode thread" is the backend as it is. The same prompt, greedy, no grammar.
Reported: the median seconds of the rounds' generations per model and setting, and their ratio.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench.common import ROOT, bench_parser, md_table, median, write_results

CHILD = """
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
import experts.backends.llama as llama
from experts.backends.protocol import ChatMessage, GenerationRequest
from experts.pool import get_backend
from state.context import resolve_settings
if sys.argv[1] == "caller":
    llama.on_decode_thread = lambda share, call: call()
settings = resolve_settings({})
models = {"default": get_backend(settings, None)}
try:
    models["reference"] = get_backend(settings, "qwen2.5-coder-1.5b")
except Exception:
    pass
for backend in models.values():
    backend.load()
request = GenerationRequest(
    messages=(ChatMessage("user", "Write a Python function that merges two sorted lists into one sorted list."),),
    max_tokens=int(sys.argv[2]), temperature=0.0, slot_id="s",
)
seconds = {name: [] for name in models}
for backend in models.values():
    backend.generate(request)  # on the main thread first
pools = (ThreadPoolExecutor(1), ThreadPoolExecutor(1))
for round_ in range(int(sys.argv[3])):
    for name, backend in models.items():
        for pool in pools:
            t0 = time.perf_counter()
            tokens = pool.submit(backend.generate, request).result().completion_tokens
            seconds[name].append((time.perf_counter() - t0, tokens))
print(json.dumps(seconds))
"""


def measure(setting: str, tokens: int, repeats: int) -> dict[str, list[tuple[float, int]]]:
    """One process of ``setting``: each model's (seconds, tokens) per generation of the rounds."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, setting, str(tokens), str(repeats)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, list[tuple[float, int]]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    tokens, repeats = (8, 1) if args.quick else (args.tokens, args.repeats)
    runs = {setting: measure(setting, tokens, repeats) for setting in ("caller", "decode thread")}
    rows: list[list[Any]] = []
    for model in runs["caller"]:
        caller = median(s for s, _ in runs["caller"][model])
        own = median(s for s, _ in runs["decode thread"][model])
        counts = sorted({n for setting in runs.values() for _, n in setting[model]})
        rows.append([model, ", ".join(map(str, counts)), f"{caller:.2f}", f"{own:.2f}", f"{caller / own:.2f}x"])
    md = "\n".join(
        [
            f"{repeats} round(s), each model asked from two pool threads in turn after one generation on the main "
            f"thread; {tokens} tokens at most, greedy. Median seconds of a generation.",
            "",
            md_table(["model", "tokens", "decoding on the caller's thread", "on the decode thread", "ratio"], rows),
        ]
    )
    write_results("decode_thread", {"tokens": tokens, "repeats": repeats, "runs": runs}, md + "\n", directory=args.out)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
