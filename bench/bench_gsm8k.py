"""GSM8K word problems: ``coe run`` against the bare 1.5B and the bare 0.5B, the question alone, one run.

Development data only: ``bench/data/gsm8k_train_sample200.jsonl`` holds 200 problems of GSM8K's *train* split
(MIT, Cobbe et al. 2021; a fixed random sample, copied from ``../shared/data``). The test split is kept for an
outside check: this benchmark never reads it.

For each problem the same message, the question alone, goes to three sides, alternating problem by problem:

* **harness**: the compiled graph with default settings, in process, as ``coe run`` runs it. Its answer is the
  result its "Computed result" section gives (``**Result: V**``: the value the answer and the programs' vote
  agree on), else (no program gave a value, or the vote split three ways) the last number of the expert's own
  text. That last number (the working section left out) is scored too, as **harness text**.
* **bare 1.5B** and **bare 0.5B**: each model asked the question alone, greedy, 900 tokens, at the repetition
  penalty of Qwen2.5's own generation config (1.1; llama-cpp-python's default is 1.0): the reference is the best
  installed model with the sampling its makers recommend. Its answer is the value in its last ``\\boxed{}``, else
  the last number of its reply.

A value is right when it equals the problem's ``#### N`` within 1e-6 (commas, currency signs and units ignored).

Reported: accuracy of each side, the difference against the goal (harness >= bare 1.5B + 15 points), median seconds
of each and their ratio, how often the program's value and the expert's first answer agreed and how often each was
right (which one to trust when they disagree is decided on these counts), and the **consistency** measure: a
document whose expert text states a final number other than the computed one must say that the two disagree (goal:
0 that do not).

Run: ``python -m bench.bench_gsm8k`` (all 200: about 8 hours on 2 cores); ``--limit N`` or ``--ids 0,5,12`` (row
numbers) for a subset; ``--quick`` runs two problems on the fake backend (a test of the bench, not a measurement);
``--resume FILE`` continues a stopped run.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.common import md_table, median, write_results
from bench.versus import (
    QUICK_LABEL,
    REFERENCE_PENALTY,
    Benchmark,
    HarnessRun,
    Sides,
    compare,
    versus_parser,
)
from bench.versus import REFERENCE_MODEL as BIG
from engine.slots.program_of_thought import WORKING_TITLE

DATA = Path(__file__).parent / "data" / "gsm8k_train_sample200.jsonl"
GOAL_POINTS = 15.0
SMALL = "qwen2.5-coder-0.5b"

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_BOXED = re.compile(r"\\boxed\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
_WORKING = re.compile(rf"^#+\s*(?:\d+\.\s*)?{WORKING_TITLE}\s*$", re.M)
_SHOWN = re.compile(r"^\*\*(?:Result|Computed): (.+?)\*\*", re.M)
_RESULT = re.compile(r"^\*\*Result: (.+?)\*\*", re.M)


@dataclass
class Outcome:
    """One problem, three ways."""

    row: int
    gold: float
    harness_value: float | None = None
    harness_right: bool = False
    harness_text_value: float | None = None
    harness_text_right: bool = False
    computed_value: float | None = None
    """The value the document's working section shows (None: no program gave a result)."""
    disagreement_said: bool = False
    vote: str = ""
    """How the vote went (agrees, confirmed, answer, computed, split, unconfirmed; '' without a program's result)."""
    calculation: str = ""
    """The ledger's note of the program (what it printed, or why it gives no result)."""
    stages: dict[str, float] = field(default_factory=dict)
    """Seconds the run's ledger records by action (plan, calculate, generate, judge, ...): where the time went."""
    harness_seconds: float = 0.0
    harness_status: str = ""
    expert: str = ""
    slots: int = 0
    candidates: int = 0
    big_value: float | None = None
    big_right: bool = False
    big_seconds: float = 0.0
    small_value: float | None = None
    small_right: bool = False
    small_seconds: float = 0.0
    document: str = ""
    notes: list[str] = field(default_factory=list)


def problems(args: argparse.Namespace) -> list[tuple[int, dict[str, str]]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    numbered = list(enumerate(rows))
    if args.ids:
        wanted = {int(i) for i in args.ids.split(",")}
        return [(n, r) for n, r in numbered if n in wanted]
    if args.quick:
        return numbered[:2]
    return numbered[: args.limit] if args.limit else numbered


def gold(answer: str) -> float:
    """The reference value after ``####``."""
    return float(answer.rsplit("####", 1)[1].strip().replace(",", ""))


def last_number(text: str) -> float | None:
    """The last number of ``text`` (commas dropped), None when it states none."""
    found = [m.group(0).replace(",", "").rstrip(".") for m in _NUMBER.finditer(text)]
    for token in reversed(found):
        try:
            return float(token)
        except ValueError:
            continue
    return None


def bare_value(text: str) -> float | None:
    """A bare reply's answer: its last ``\\boxed{}`` value, else its last number."""
    boxed = _BOXED.findall(text)
    if boxed:
        value = last_number(boxed[-1])
        if value is not None:
            return value
    return last_number(text)


def split_working(document: str) -> tuple[str, str]:
    """(the document without its working section, the section), the second '' when it has none.

    The section is the answer's last, or its first when programs outvoted the answer; it runs to the next heading
    of its level or above.
    """
    m = _WORKING.search(document)
    if m is None:
        return document, ""
    level = len(m.group(0)) - len(m.group(0).lstrip("#"))
    heading = re.compile(rf"^#{{1,{level}}}\s")
    end, fenced, at = len(document), False, m.end()
    for line in document[m.end() :].splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            fenced = not fenced  # a program's comment ("# Given values") is not a heading
        elif not fenced and heading.match(line):
            end = at
            break
        at += len(line)
    return document[: m.start()] + document[end:], document[m.start() : end]


def right(value: float | None, expected: float) -> bool:
    return value is not None and abs(value - expected) < 1e-6


def judge_harness(outcome: Outcome, run: HarnessRun) -> None:
    """Read the harness's document: the computed value, the expert's own last number, and whether they agree."""
    state = run.state
    document = state.document or ""
    outcome.document = document
    outcome.harness_status = state.status.value
    outcome.slots = len(state.framework.slots) if state.framework else 0
    outcome.expert = run.decision.expert if run.decision is not None else "direct"
    outcome.candidates = run.drawn()[0]
    outcome.calculation = next((e.outputs_summary for e in state.ledger if e.action == "calculate"), "")
    for entry in state.ledger:
        key = "generate" if entry.action.startswith("generate") else entry.action
        outcome.stages[key] = round(outcome.stages.get(key, 0.0) + entry.duration_ms / 1000, 1)
    outcome.vote = next((e.outputs_summary.split(":", 1)[0] for e in state.ledger if e.action == "show_working"), "")
    read_document(outcome)


def read_document(outcome: Outcome) -> None:
    """The values the document gives: its working section's result, the expert's own last number, and whether the
    document says where they disagree (``--rescore`` reads a saved run's documents again with this)."""
    text, working = split_working(outcome.document)
    outcome.harness_text_value = bare_value(text)
    outcome.computed_value = None
    outcome.disagreement_said = False
    if working:
        shown = _SHOWN.search(working)
        outcome.computed_value = last_number(shown.group(1)) if shown else None
        said = ("does not state this value", "states it rounded", "the value is not confirmed")
        outcome.disagreement_said = any(phrase in working for phrase in said)
    result = _RESULT.search(working)
    # the document's result: the one its working section gives, else (no program, or a split vote) the answer's own
    outcome.harness_value = last_number(result.group(1)) if result else outcome.harness_text_value
    outcome.harness_right = right(outcome.harness_value, outcome.gold)
    outcome.harness_text_right = right(outcome.harness_text_value, outcome.gold)


def run_one(sides: Sides, item: tuple[int, dict[str, str]]) -> Outcome:
    n, problem = item
    question = problem["question"]
    outcome = Outcome(row=n, gold=gold(problem["answer"]))
    run = sides.harness(question)
    outcome.harness_seconds = round(run.seconds, 2)
    judge_harness(outcome, run)
    big, outcome.big_seconds = sides.reference(question)
    outcome.big_value = bare_value(big.text)
    outcome.big_right = right(outcome.big_value, outcome.gold)
    small, outcome.small_seconds = sides.reference(question, SMALL)
    outcome.small_value = bare_value(small.text)
    outcome.small_right = right(outcome.small_value, outcome.gold)
    return outcome


def progress(o: Outcome) -> str:
    mark = {True: "right", False: "WRONG"}
    return (
        f"#{o.row} gold {o.gold:g}: harness {o.harness_value} {mark[o.harness_right]} ({o.harness_seconds:.0f} s, "
        f"{o.expert}, computed {o.computed_value}, text {o.harness_text_value}), bare 1.5B {o.big_value} "
        f"{mark[o.big_right]} ({o.big_seconds:.0f} s), bare 0.5B {o.small_value} {mark[o.small_right]} "
        f"({o.small_seconds:.0f} s); stages {o.stages}"
    )


def summarise(outcomes: list[Outcome], args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    n = len(outcomes) or 1

    def pct(xs: list[bool]) -> float:
        return round(100.0 * sum(xs) / n, 1)

    acc = {
        "harness": pct([o.harness_right for o in outcomes]),
        "harness_text": pct([o.harness_text_right for o in outcomes]),
        "bare_1.5b": pct([o.big_right for o in outcomes]),
        "bare_0.5b": pct([o.small_right for o in outcomes]),
    }
    times = {
        "harness": median(o.harness_seconds for o in outcomes) if outcomes else 0.0,
        "bare_1.5b": median(o.big_seconds for o in outcomes) if outcomes else 0.0,
        "bare_0.5b": median(o.small_seconds for o in outcomes) if outcomes else 0.0,
    }
    computed = [o for o in outcomes if o.computed_value is not None]
    agreeing = [o for o in computed if right(o.harness_text_value, o.computed_value or 0.0)]
    disagreeing = [o for o in computed if o not in agreeing]
    unsaid = [o.row for o in disagreeing if not o.disagreement_said]
    split = {
        "computed": len(computed),
        "agree": len(agreeing),
        "agree_and_right": sum(o.harness_right for o in agreeing),
        "disagree": len(disagreeing),
        "disagree_program_right": sum(right(o.computed_value, o.gold) for o in disagreeing),
        "disagree_text_right": sum(o.harness_text_right for o in disagreeing),
        "disagreements_not_said": unsaid,
    }
    ratio = times["harness"] / times["bare_1.5b"] if times["bare_1.5b"] else 0.0
    experts = dict(Counter(o.expert for o in outcomes))
    summary = {
        "problems": len(outcomes),
        "accuracy_percent": acc,
        "difference_points_vs_bare_1.5b": round(acc["harness"] - acc["bare_1.5b"], 1),
        "goal_points": GOAL_POINTS,
        "median_seconds": {k: round(v, 1) for k, v in times.items()},
        "median_time_ratio_vs_bare_1.5b": round(ratio, 2),
        "program_and_text": split,
        "experts": experts,
        "votes": dict(Counter(o.vote or "no program result" for o in outcomes)),
        "statuses": dict(Counter(o.harness_status for o in outcomes)),
        "quick": bool(args.quick),
    }
    rows = [
        ["harness (coe run, defaults): the document's result", acc["harness"], f"{times['harness']:.1f}"],
        ["harness: the expert's own last number", acc["harness_text"], "-"],
        [f"bare 1.5B (repeat penalty {REFERENCE_PENALTY})", acc["bare_1.5b"], f"{times['bare_1.5b']:.1f}"],
        [f"bare 0.5B (repeat penalty {REFERENCE_PENALTY})", acc["bare_0.5b"], f"{times['bare_0.5b']:.1f}"],
    ]
    markdown = "\n".join(
        [
            f"GSM8K train-split sample (development data, not the test split), {len(outcomes)} problems"
            + (QUICK_LABEL if args.quick else ""),
            "",
            md_table(["side", "right %", "median s / problem"], rows),
            "",
            f"Harness minus bare 1.5B: **{acc['harness'] - acc['bare_1.5b']:+.1f} points** (goal >= +{GOAL_POINTS:g});"
            f" median time ratio **{ratio:.2f}x**.",
            "",
            f"A program gave a result in {split['computed']} documents: the expert's text agreed in {split['agree']} "
            f"({split['agree_and_right']} right); disagreed in {split['disagree']} (program right "
            f"{split['disagree_program_right']}, text right {split['disagree_text_right']}). Disagreements the "
            f"document does not say (goal 0): {len(unsaid)} {unsaid or ''}",
            "",
            "Experts: " + ", ".join(f"{k}: {v}" for k, v in experts.items()),
            "",
            "Votes (agrees: the answer states the program's value; confirmed: told the value, and a second program "
            "printed it too; answer: a second program agrees with the answer; computed: two programs against the "
            "answer; split, unconfirmed: no result): "
            + ", ".join(f"{k}: {v}" for k, v in Counter(o.vote or "no program result" for o in outcomes).items()),
        ]
    )
    return {
        "summary": summary,
        "outcomes": [asdict(o) for o in outcomes],
        "args": vars(args) | {"out": str(args.out)},
    }, markdown


def main(argv: list[str] | None = None) -> int:
    parser = versus_parser(__doc__, "gsm8k", "comma-separated row numbers of the sample (0-199)")
    parser.add_argument(
        "--rescore", type=Path, help="a results JSON: read its saved documents again and rewrite it (no model runs)"
    )
    args = parser.parse_args(argv)
    if args.rescore is not None:
        return rescore(args)
    bench: Benchmark[tuple[int, dict[str, str]], Outcome] = Benchmark(
        rows_key="outcomes",
        saved_row=lambda row: Outcome(**row),
        item_id=lambda item: str(item[0]),
        row_id=lambda outcome: str(outcome.row),
        run_one=run_one,
        progress=progress,
        summarise=summarise,
        save_every=1,
        preload=(None, BIG),
    )
    return compare(bench, problems(args), args)


def rescore(args: argparse.Namespace) -> int:
    """Read every saved document of a results file again (:func:`read_document`) and write its results anew."""
    saved = json.loads(args.rescore.read_text(encoding="utf-8"))
    outcomes = [Outcome(**row) for row in saved["outcomes"]]
    for outcome in outcomes:
        read_document(outcome)
    args.name = args.rescore.stem
    args.limit, args.ids = saved["args"].get("limit"), saved["args"].get("ids")
    paths = write_results(args.name, *summarise(outcomes, args), directory=args.out or args.rescore.parent)
    print(f"rescored {len(outcomes)} problems: wrote {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
