"""Prefix caching (issue 19): prompt-reading time a slot saves when its system message is kept between calls.

Run: ``python -m bench.bench_prefix``. Writes ``bench/results/prefix.{json,md}``. ``--quick``: 2 tasks, 1 round.

Real slot prompts (``engine.slots.prompt.fit_prompt``: the expert's persona and the output contract in the system
message, the task in the user message) of four prose tasks for one expert, on the bundled default model, each
generated as its slot's first answer would be (greedy, the contract's grammar, a short answer budget). Two
backends on the same model file, one with ``prefix_cache`` off (the context reset before each call, as before)
and one with it on, alternate task by task; each task runs twice on the cached backend, after another task
(a hit) and first in its round after a different expert's prompt (a miss). Reported: time to the first token
(the prompt read) per call, off and on, the tokens the cache kept, and whether every cached call's text equals
the same request's text on a miss: the output must not depend on what ran before.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from typing import Any

from bench.common import bench_parser, md_table, write_results
from engine.slots.prompt import SlotJob, fit_prompt
from experts.backends import GenerationRequest
from experts.backends.llama import LlamaBackend
from experts.catalog import load_catalog
from experts.models.bundled import resolve_model_path
from state.context import resolve_settings
from state.framework import SlotSpec

TASKS = [
    "Explain to new staff how our expense claims are approved and paid.",
    "Explain the difference between a warm and a cold backup for a small office.",
    "Describe how to prepare a room for a two-hour workshop with twelve people.",
    "Explain why a team should write down its decisions and where to keep them.",
]
EXPERT = "technical_writer"
OTHER = "general_reasoning"
MAX_TOKENS = 24


def request(task: str, expert: str) -> GenerationRequest:
    """The slot's first request for ``task`` routed to ``expert`` (its real prompt, a short answer budget)."""
    scope = load_catalog().get(expert)
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable="prose")
    job = SlotJob(
        spec=spec,
        task=task,
        constraints=(),
        expert=expert,
        persona=scope.persona,
        references={},
        max_tokens=MAX_TOKENS,
        temperature=0.0,
    )
    settings = resolve_settings({"backend": "llama"}, env={})
    prompt = fit_prompt(job, settings)
    return GenerationRequest(
        messages=prompt.messages, max_tokens=MAX_TOKENS, grammar=job.slot_contract.grammar(), slot_id="answer"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    tasks = TASKS[:2] if args.quick else TASKS
    rounds = 1 if args.quick else args.rounds
    path = resolve_model_path(None)
    off = LlamaBackend(path, prefix_cache=False)
    on = LlamaBackend(path, prefix_cache=True)
    off.load()
    on.load()
    asks = [request(t, EXPERT) for t in tasks]
    breaker = request(TASKS[0], OTHER)  # another expert's system message: the next call is a miss
    rows: list[dict[str, Any]] = []
    for r in range(rounds):
        if r:  # a fresh backend holds nothing: the first round starts with a miss as it is
            on.generate(replace(breaker, max_tokens=1))
        for n, ask in enumerate(asks):
            plain = off.generate(ask)
            cached = on.generate(ask)
            rows.append(
                {
                    "round": r,
                    "task": n,
                    "prompt_tokens": plain.prompt_tokens,
                    "off_first_token_s": plain.extra.get("first_token_seconds", 0.0),
                    "on_first_token_s": cached.extra.get("first_token_seconds", 0.0),
                    "kept_tokens": int(cached.extra.get("prefix_cached_tokens", 0)),
                    "text": cached.text,
                }
            )
    # Repeatability: every task once more, each right after a miss (another expert), against its cached texts.
    same = True
    for n, ask in enumerate(asks):
        if args.quick and not any(row["kept_tokens"] for row in rows if row["task"] == n):
            continue  # quick mode checks the calls that hit (the point of the check) and saves two prompt reads
        on.generate(replace(breaker, max_tokens=1))
        missed = on.generate(ask)
        same = same and all(row["text"] == missed.text for row in rows if row["task"] == n)
    hits = [row for row in rows if row["kept_tokens"] > 0]
    off_s = statistics.mean(row["off_first_token_s"] for row in rows)
    on_hit = statistics.mean(row["on_first_token_s"] for row in hits) if hits else float("nan")
    summary = {
        "calls": len(rows),
        "hits": len(hits),
        "prompt_tokens_mean": round(statistics.mean(row["prompt_tokens"] for row in rows), 1),
        "kept_tokens_mean_on_hits": round(statistics.mean(row["kept_tokens"] for row in hits), 1) if hits else 0,
        "first_token_s_off": round(off_s, 3),
        "first_token_s_on_hits": round(on_hit, 3),
        "saved_s_per_hit": round(off_s - on_hit, 3),
        "same_text_hit_and_miss": same,
    }
    md = [
        ("QUICK: a sample, not a measurement. " if args.quick else "")
        + f"{len(tasks)} prose tasks of `{EXPERT}` (real slot prompts), {rounds} round(s), default model "
        f"({path.name}), answers of {MAX_TOKENS} tokens; the first call of each round is a miss (nothing, or "
        "another expert's prompt, ran before it).",
        "",
        md_table(
            ["measure", "value"],
            [
                ["prompt tokens per call (mean)", summary["prompt_tokens_mean"]],
                ["calls with the system message kept", f"{summary['hits']} of {summary['calls']}"],
                ["tokens kept per hit (mean)", summary["kept_tokens_mean_on_hits"]],
                ["time to first token, cache off (s, mean)", summary["first_token_s_off"]],
                ["time to first token, cache on, hits (s, mean)", summary["first_token_s_on_hits"]],
                ["prompt reading saved per hit (s)", summary["saved_s_per_hit"]],
                ["same text on a hit as on a miss, every task", summary["same_text_hit_and_miss"]],
            ],
        ),
    ]
    payload = {"summary": summary, "rows": [{k: v for k, v in r.items() if k != "text"} for r in rows]}
    write_results("prefix", payload, "\n".join(md) + "\n", args.out)
    print("\n".join(md))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
