"""Streaming expert tokens (issue 19): what it costs in tokens/s, and the first token in-process and over the API.

Run: ``python -m bench.bench_streaming``. Writes ``bench/results/streaming.{json,md}``. ``--quick``: the fake
backend, one repetition (a test of the benchmark, not a measurement).

1. **Tokens/s with and without a listener.** The default model writes the same answer (greedy, ``--max-tokens``
   tokens, no grammar) with ``on_token`` unset and with a listener that collects the pieces, alternating,
   ``--repeats`` times each; the ratio of the medians (goal >= 0.98), and whether the pieces joined are the
   answer's text every time.
2. **First token.** A one-slot run of the default model (``--max-tokens`` tokens) through the compiled graph in
   this process (``stream_mode="messages"``), and through ``langgraph dev`` with langgraph-sdk
   (``messages-tuple``), alternating, ``--repeats`` times each after one warm-up run each: seconds from the
   request to the first token of the slot. The server loads its own copy of the model in the warm-up.
3. **A follow-up turn** (issue 20). Right after each run over the API, a second run on the same thread asks a
   follow-up (:data:`FOLLOW_UP`): the first run is now a turn whose answer the new slot gets as working memory.
   Seconds from the request to its first token, against the first turn's.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from bench.common import GRAPH, bench_parser, dev_server, md_table, run_input, write_results
from experts.backends import ChatMessage, GenerationRequest
from experts.pool import get_backend
from graph import build_graph
from graph.persistence import serializer
from state.context import resolve_settings
from state.framework import parse_framework

PROMPT = "Explain in a few paragraphs how a hash map works, with its costs."
FRAMEWORK = parse_framework(
    {
        "id": "one",
        "title": "One slot",
        "slots": [
            {
                "id": "explain",
                "title": "How a hash map works",
                "description": PROMPT,
                "expert": "general_reasoning",
            }
        ],
    },
    source="bench_streaming",
)
FOLLOW_UP_TASK = "Now compare it with a balanced search tree"
FOLLOW_UP = parse_framework(
    {
        "id": "follow_up",
        "title": "Follow-up",
        "slots": [
            {
                "id": "compare",
                "title": "Hash map or search tree",
                "description": "Compare the hash map explained in the earlier turn with a balanced search tree.",
                "expert": "general_reasoning",
            }
        ],
    },
    source="bench_streaming",
)


def tokens_per_second(settings: Any, repeats: int, max_tokens: int) -> dict[str, Any]:
    backend = get_backend(settings)
    backend.load()
    rates: dict[str, list[float]] = {"without": [], "with": []}
    joined_ok = True
    for _ in range(repeats):
        for kind in ("without", "with"):
            pieces: list[str] = []
            request = GenerationRequest(
                messages=(ChatMessage("user", PROMPT),),
                max_tokens=max_tokens,
                temperature=0.0,
                slot_id="bench",
                on_token=pieces.append if kind == "with" else None,
            )
            t0 = time.perf_counter()
            gen = backend.generate(request)
            seconds = time.perf_counter() - t0
            rates[kind].append(gen.completion_tokens / seconds if seconds else 0.0)
            if kind == "with":
                joined_ok = joined_ok and "".join(pieces) == gen.text and len(pieces) > 1
    without, with_ = statistics.median(rates["without"]), statistics.median(rates["with"])
    return {
        "rates": rates,
        "median_without": round(without, 2),
        "median_with": round(with_, 2),
        "ratio": round(with_ / without, 4) if without else None,
        "pieces_join_to_the_text": joined_ok,
    }


def first_token_in_process(context: dict[str, Any]) -> float:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": f"stream-{time.monotonic_ns()}"}}
    t0 = time.perf_counter()
    first = None
    for _message, meta in graph.stream(run_input(FRAMEWORK), config, context=context, stream_mode="messages"):
        if first is None and meta.get("slot_id") == "explain":
            first = time.perf_counter() - t0
    assert first is not None, "no token was streamed"
    return first


async def first_token_over_api(
    client: Any, context: dict[str, Any], thread: str | None = None, follow_up: bool = False
) -> float:
    """Seconds to the first token of a run on ``thread`` (a new one if None), or of a follow-up; it runs to its end."""
    thread = thread or (await client.threads.create())["thread_id"]
    run = run_input(FOLLOW_UP, FOLLOW_UP_TASK) if follow_up else run_input(FRAMEWORK)
    t0 = time.perf_counter()
    first = None
    async for part in client.runs.stream(thread, GRAPH, input=run, context=context, stream_mode=["messages-tuple"]):
        if part.event == "messages" and first is None:
            first = time.perf_counter() - t0
    assert first is not None, "no token was streamed"
    return first


async def first_tokens(workdir: Path, repeats: int, context: dict[str, Any], backend: str) -> dict[str, Any]:
    env = {"COE_BACKEND": backend, "COE_CHECKPOINT_URL": f"sqlite://{workdir / 'server.sqlite'}"}
    times: dict[str, list[float]] = {"in_process": [], "api": [], "api_follow_up": []}
    async with dev_server(env, workdir / "server.log") as client:
        first_token_in_process(context)  # warm-up: the models loaded in both processes
        await first_token_over_api(client, context)
        for _ in range(repeats):
            times["in_process"].append(round(await asyncio.to_thread(first_token_in_process, context), 3))
            thread = (await client.threads.create())["thread_id"]
            times["api"].append(round(await first_token_over_api(client, context, thread), 3))
            times["api_follow_up"].append(round(await first_token_over_api(client, context, thread, True), 3))
    return {
        "times": times,
        "median_in_process": statistics.median(times["in_process"]),
        "median_api": statistics.median(times["api"]),
        "median_api_follow_up": statistics.median(times["api_follow_up"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=120)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    backend = "fake" if args.quick else "llama"
    context: dict[str, Any] = {"backend": backend, "max_tokens": args.max_tokens, "use_grammar": False}
    settings = resolve_settings(context)
    rates = tokens_per_second(settings, repeats, args.max_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        firsts = asyncio.run(first_tokens(Path(tmp), repeats, context, backend))
    md = [
        ("QUICK: fake backend, not a measurement. " if args.quick else "")
        + f"Default model, greedy, {args.max_tokens} tokens, {repeats} repetitions of each, alternating.",
        "",
        md_table(
            ["measure", "value", "goal"],
            [
                ["tokens/s without a listener (median)", rates["median_without"], ""],
                ["tokens/s with a listener (median)", rates["median_with"], ""],
                ["ratio", rates["ratio"], ">= 0.98"],
                ["pieces joined = the answer, every time", rates["pieces_join_to_the_text"], "True"],
                ["first token in-process, stream_mode=messages (median s)", firsts["median_in_process"], ""],
                ["first token over langgraph dev + sdk, messages-tuple (median s)", firsts["median_api"], ""],
                [
                    "first token of a follow-up turn on the same thread, over the API (median s)",
                    firsts["median_api_follow_up"],
                    "",
                ],
            ],
        ),
    ]
    payload = {"max_tokens": args.max_tokens, "repeats": repeats, "tokens": rates, "first_token": firsts}
    write_results("streaming", payload, "\n".join(md) + "\n", args.out)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
