"""MBPP development problems: ``coe run`` against the best installed model asked directly, the same message.

The problems are MBPP's prompt, train and validation splits (``bench/data/mbpp_dev_prompts.json``, copied from
``../shared/data/mbpp_sanitized_dev.json``; MBPP's test problems are kept for an outside check and never read).
The message is the problem and its first assert, as a person would paste them::

    Write a function to find the shared elements from the given two lists. Your code should pass this test:
    assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))

* **harness**: the compiled graph with default settings, in process, as ``coe run`` runs it; its answer is the
  code the document delivers (every Python code slot's module, else the document's first Python block).
* **bare 1.5B**: the best installed model asked the message alone, greedy, at the repetition penalty of Qwen's
  own generation config (1.1); its answer is its first Python block (else the whole reply).

An answer passes when every one of the problem's asserts holds (its ``test_imports`` first), run in the sandbox
with a 10 s limit. Reported: pass rates, the difference against the goal (+10 points), median seconds and their
ratio, where the harness routed each problem, and every problem's outcome in the JSON.

Run: ``python -m bench.bench_mbpp [--limit N | --ids 0,5,12] [--name NAME]``; ``--quick`` runs two problems on
the fake backend (a test of the benchmark, not a measurement); ``--resume FILE`` continues a stopped run.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.bench_humaneval import bare_code, harness_code
from bench.common import md_table, median
from bench.versus import QUICK_LABEL, REFERENCE_PENALTY, Benchmark, Sides, compare, versus_parser
from bench.versus import REFERENCE_MODEL as BIG
from engine.slots.sandbox import SandboxLimits, run_python

DATA = Path(__file__).parent / "data" / "mbpp_dev_prompts.json"
GOAL_POINTS = 10.0
TIMEOUT_S = 10.0


@dataclass
class Outcome:
    """One problem, both ways."""

    task_id: int
    message: str = ""
    harness_passed: bool = False
    harness_error: str = ""
    harness_seconds: float = 0.0
    harness_status: str = ""
    expert: str = ""
    caveat: bool = False
    """The delivered answer came with a caveat (a failed check said so)."""
    big_passed: bool = False
    big_error: str = ""
    big_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def message(problem: dict[str, Any]) -> str:
    """The problem as a person pastes it: the prompt and its first assert."""
    return f"{problem['prompt'].strip()} Your code should pass this test: {problem['test_list'][0]}"


def problems(args: argparse.Namespace) -> list[dict[str, Any]]:
    every: list[dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))
    if args.ids:
        wanted = {int(i) for i in args.ids.split(",")}
        return [p for p in every if int(p["task_id"]) in wanted]
    if args.quick:
        return every[:2]
    return every[: args.limit] if args.limit else every


def passes(problem: dict[str, Any], code: str) -> tuple[bool, str]:
    """Whether ``code`` passes every assert of the problem; the first error line when not."""
    program = "\n".join([*problem.get("test_imports", []), code, "", *problem["test_list"]]) + "\n"
    ran = run_python({"solution.py": program}, "solution.py", limits=SandboxLimits(timeout_s=TIMEOUT_S))
    if ran.timed_out:
        return False, f"timed out after {TIMEOUT_S:g} s"
    if ran.returncode != 0:
        lines = [line for line in ran.stderr.strip().splitlines() if line.strip()]
        return False, (lines[-1] if lines else f"exit {ran.returncode}")[:200]
    return True, ""


def run_one(sides: Sides, problem: dict[str, Any]) -> Outcome:
    task = message(problem)
    outcome = Outcome(task_id=int(problem["task_id"]), message=task)
    run = sides.harness(task)
    outcome.harness_seconds = round(run.seconds, 2)
    outcome.harness_status = run.state.status.value
    outcome.expert = run.decision.expert if run.decision is not None else "direct"
    outcome.caveat = any(r.quality is not None and r.quality.caveat for r in run.state.results.values())
    outcome.harness_passed, outcome.harness_error = passes(problem, harness_code(run.state))
    big, outcome.big_seconds = sides.reference(task)
    outcome.big_passed, outcome.big_error = passes(problem, bare_code(big.text))
    return outcome


def progress(o: Outcome) -> str:
    mark = {True: "pass", False: "FAIL"}
    return (
        f"#{o.task_id}: harness {mark[o.harness_passed]} ({o.harness_seconds:.0f} s, {o.expert}"
        f"{', caveat' if o.caveat else ''}){'' if o.harness_passed else ' ' + o.harness_error[:80]}; "
        f"bare 1.5B {mark[o.big_passed]} ({o.big_seconds:.0f} s)"
    )


def summarise(outcomes: list[Outcome], args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    n = len(outcomes) or 1
    harness = 100.0 * sum(o.harness_passed for o in outcomes) / n
    big = 100.0 * sum(o.big_passed for o in outcomes) / n
    h_time = median(o.harness_seconds for o in outcomes) if outcomes else 0.0
    b_time = median(o.big_seconds for o in outcomes) if outcomes else 0.0
    ratio = h_time / b_time if b_time else 0.0
    only_harness = [o.task_id for o in outcomes if o.harness_passed and not o.big_passed]
    only_big = [o.task_id for o in outcomes if o.big_passed and not o.harness_passed]
    failed_silently = [o.task_id for o in outcomes if not o.harness_passed and not o.caveat]
    experts = dict(Counter(o.expert for o in outcomes))
    summary = {
        "problems": len(outcomes),
        "harness_pass": round(harness, 1),
        "bare_1.5b_pass": round(big, 1),
        "difference_points": round(harness - big, 1),
        "goal_points": GOAL_POINTS,
        "harness_median_s": round(h_time, 1),
        "bare_1.5b_median_s": round(b_time, 1),
        "median_time_ratio": round(ratio, 2),
        "harness_only": only_harness,
        "bare_only": only_big,
        "failed_without_caveat": failed_silently,
        "experts": experts,
        "quick": bool(args.quick),
    }
    rows = [
        ["harness (coe run, defaults)", f"{harness:.1f}", f"{h_time:.1f}"],
        [f"bare 1.5B (repeat penalty {REFERENCE_PENALTY:g})", f"{big:.1f}", f"{b_time:.1f}"],
    ]
    markdown = "\n".join(
        [
            f"MBPP development problems (prompt, train and validation splits), {len(outcomes)} problems"
            + (QUICK_LABEL if args.quick else ""),
            "",
            md_table(["side", "all asserts pass %", "median s / problem"], rows),
            "",
            f"Harness minus bare 1.5B: **{harness - big:+.1f} points** (goal >= +{GOAL_POINTS:g}); median time "
            f"ratio **{ratio:.2f}x**.",
            "",
            f"Passed by the harness only: {', '.join(map(str, only_harness)) or '-'}; by the bare 1.5B only: "
            f"{', '.join(map(str, only_big)) or '-'}.",
            "",
            "Failed by the harness without a caveat saying a check failed: "
            + (", ".join(map(str, failed_silently)) or "-"),
            "",
            "Experts: " + ", ".join(f"{k}: {v}" for k, v in sorted(experts.items(), key=lambda kv: -kv[1])),
        ]
    )
    return {
        "summary": summary,
        "outcomes": [asdict(o) for o in outcomes],
        "args": vars(args) | {"out": str(args.out)},
    }, (markdown)


def main(argv: list[str] | None = None) -> int:
    parser = versus_parser(__doc__, "mbpp", "comma-separated MBPP task ids")
    args = parser.parse_args(argv)
    bench: Benchmark[dict[str, Any], Outcome] = Benchmark(
        rows_key="outcomes",
        saved_row=lambda row: Outcome(**row),
        item_id=lambda problem: str(problem["task_id"]),
        row_id=lambda outcome: str(outcome.task_id),
        run_one=run_one,
        progress=progress,
        summarise=summarise,
        save_every=1,
        preload=(None, BIG),
    )
    return compare(bench, problems(args), args)


if __name__ == "__main__":
    raise SystemExit(main())
