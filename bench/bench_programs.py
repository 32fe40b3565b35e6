"""A failed program, drawn again blind or repaired: which gives a value, and the right one.

The program of thought (:func:`engine.slots.program_of_thought.calculate`) asks the code model for a program that
prints a task's answer. When that first program fails (a ``TypeError``, a ``NameError``), the slot draws one more.
This benchmark runs the first program of each problem (greedy, as a slot does) and, for every one that failed with
an error, both ways of drawing the second: *blind* (the same request, sampled at the slot's recalculation
temperature, as before) and *repaired* (the model shown its program and the error's line, greedy). A way counts
as right when a value it printed is the problem's answer (within 1%, or as a percentage).

Problems: the quantity questions with answers (``bench/data/numeric_heldout.yaml``, ``numeric_heldout2.yaml``;
each already run once through the whole harness, so they are development data now) and GSM8K *train* rows
(``--gsm8k N``: the first N of the sample; the test split is never read). One model job at a time.

    python -m bench.bench_programs                      # both quantity sets
    python -m bench.bench_programs --gsm8k 40 --sets "" # GSM8K train rows 0-39 only
    python -m bench.bench_programs --first-temperature 0.6  # first programs sampled, as the vote's: more failures
    python -m bench.bench_programs --quick              # the fake backend: a test of the benchmark
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common import bench_parser, md_table, median, write_results
from bench.versus import REFERENCE_MODEL as MODEL
from engine.slots.program_of_thought import RECALCULATE_TEMPERATURE, Calculation, calculate
from engine.slots.sandbox import SandboxLimits
from experts.backends import ExpertBackend
from experts.backends.fake import FakeBackend, FakeResponse, FakeRule, FakeScript
from experts.pool import get_backend
from state.settings import Settings

DATA = Path(__file__).parent / "data"
SETS = "numeric_heldout.yaml,numeric_heldout2.yaml"
GSM8K = DATA / "gsm8k_train_sample200.jsonl"
TOLERANCE = 0.01


@dataclass
class Way:
    """One way of drawing the second program."""

    note: str = ""
    ran: bool = False
    right: bool = False
    seconds: float = 0.0


@dataclass
class Problem:
    """One problem: its first program, and (when that failed with an error) the second drawn both ways."""

    id: str
    answer: float | str
    first: Way = field(default_factory=Way)
    error: str = ""
    blind: Way | None = None
    repaired: Way | None = None


def right(values: tuple[float | str, ...], answer: float | str) -> bool:
    """A printed value is the answer: the same time of day, or within :data:`TOLERANCE` (or as a percentage)."""
    if isinstance(answer, str):
        return answer.lstrip("0") in {str(v).lstrip("0") for v in values}
    for v in values:
        if isinstance(v, str):
            continue
        for option in (v, v * 100):
            if abs(option - answer) <= max(1e-9, TOLERANCE * abs(answer)):
                return True
    return False


def problems(sets: str, gsm8k: int) -> list[tuple[str, str, float | str]]:
    """(id, task, answer) of each problem asked for."""
    out: list[tuple[str, str, float | str]] = []
    for name in filter(None, sets.split(",")):
        for item in yaml.safe_load((DATA / name).read_text(encoding="utf-8"))["items"]:
            if "answer" in item:
                out.append((item["id"], item["task"], item["answer"]))
    rows = [json.loads(line) for line in GSM8K.read_text(encoding="utf-8").splitlines() if line.strip()]
    for i, row in enumerate(rows[:gsm8k]):
        out.append((f"gsm8k-{i}", row["question"], float(row["answer"].split("####")[-1].replace(",", "").strip())))
    return out


def way(calc: Calculation, seconds: float, answer: float | str) -> Way:
    return Way(calc.note[:160], bool(calc.values), right(calc.values, answer), round(seconds, 1))


def run_one(
    backend: ExpertBackend, limits: SandboxLimits, item: tuple[str, str, float | str], first_temperature: float = 0.0
) -> Problem:
    pid, task, answer = item
    problem = Problem(pid, answer)

    def timed(**options: Any) -> tuple[Calculation, float]:
        t0 = time.perf_counter()
        calc = calculate(task, backend, MODEL, limits, slot_id=pid, **options)
        return calc, time.perf_counter() - t0

    # sampled like the vote's programs (draw 1), failures are more common: more cases for the comparison
    first, seconds = timed(temperature=first_temperature, draw=1) if first_temperature else timed()
    problem.first = way(first, seconds, answer)
    if first.error:
        problem.error = first.error
        problem.blind = way(*timed(temperature=RECALCULATE_TEMPERATURE), answer)
        problem.repaired = way(*timed(failed=first), answer)
    return problem


def quick_backend() -> FakeBackend:
    """A fake whose first program fails and whose second (either way) prints the answer."""
    failing = "```python\nprint(4000 / 1.1 ** range(1, 4))\n```"
    fixed = "```python\nprint(round(sum(4000 / 1.1**t for t in range(1, 4)) - 10000, 2))\n```"
    rules = [
        FakeRule(slot="quick@calculate", responses=[FakeResponse(text=failing)]),
        FakeRule(slot="quick@recalculate", responses=[FakeResponse(text=fixed)]),
    ]
    return FakeBackend(script=FakeScript(rules=rules))


def summarise(rows: list[Problem], first_temperature: float = 0.0) -> tuple[dict[str, Any], str]:
    temperature = f"sampled at {first_temperature:g}" if first_temperature else "greedy"
    failed = [r for r in rows if r.error]
    summary: dict[str, Any] = {
        "problems": len(rows),
        "first_ran": sum(r.first.ran for r in rows),
        "first_right": sum(r.first.right for r in rows),
        "first_failed_with_error": len(failed),
        "blind_ran": sum(bool(r.blind and r.blind.ran) for r in failed),
        "blind_right": sum(bool(r.blind and r.blind.right) for r in failed),
        "repaired_ran": sum(bool(r.repaired and r.repaired.ran) for r in failed),
        "repaired_right": sum(bool(r.repaired and r.repaired.right) for r in failed),
        "first_seconds_median": median(r.first.seconds for r in rows) if rows else 0.0,
        "blind_seconds_median": median(r.blind.seconds for r in failed if r.blind) if failed else 0.0,
        "repaired_seconds_median": median(r.repaired.seconds for r in failed if r.repaired) if failed else 0.0,
    }
    s = summary
    lines = [
        f"{s['problems']} problems; the first program ({temperature}) printed a value in {s['first_ran']} "
        f"({s['first_right']} right) and failed with an error in {s['first_failed_with_error']}.",
        "",
        md_table(
            ["second program, after an error", "printed a value", "right", "median seconds"],
            [
                ["blind (sampled again)", s["blind_ran"], s["blind_right"], s["blind_seconds_median"]],
                ["repaired (shown its error)", s["repaired_ran"], s["repaired_right"], s["repaired_seconds_median"]],
            ],
        ),
        "",
        md_table(
            ["problem", "first", "error", "blind", "repaired"],
            [
                [
                    r.id,
                    ("right" if r.first.right else "ran" if r.first.ran else "no value") + f" {r.first.seconds} s",
                    r.error[:70].replace("|", "/"),
                    f"{'right' if r.blind.right else 'ran' if r.blind.ran else r.blind.note[:50]}" if r.blind else "",
                    f"{'right' if r.repaired.right else 'ran' if r.repaired.ran else r.repaired.note[:50]}"
                    if r.repaired
                    else "",
                ]
                for r in rows
            ],
        ),
    ]
    return summary, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--sets", default=SETS, help=f"comma-separated sets in bench/data (default {SETS})")
    parser.add_argument("--gsm8k", type=int, default=0, help="also the first N rows of the GSM8K train sample")
    parser.add_argument("--name", default="programs", help="results file name (default programs)")
    parser.add_argument(
        "--first-temperature",
        type=float,
        default=0.0,
        help="sample the first program at this temperature, as the vote's are (default 0: greedy, as a slot's first)",
    )
    args = parser.parse_args(argv)
    limits = SandboxLimits(timeout_s=10)
    if args.quick:
        backend: ExpertBackend = quick_backend()
        items: list[tuple[str, str, float | str]] = [("quick", "NPV: 10,000 now, 4,000 a year, 3 years, 10%?", -52.59)]
    else:
        backend = get_backend(Settings(), MODEL)
        items = problems(args.sets, args.gsm8k)
    rows: list[Problem] = []
    for item in items:
        rows.append(run_one(backend, limits, item, args.first_temperature))
        r = rows[-1]
        second = f"; blind {asdict(r.blind)}, repaired {asdict(r.repaired)}" if r.blind and r.repaired else ""
        print(f"[{len(rows)}/{len(items)}] {r.id}: first {r.first.note[:70]!r}{second}", flush=True)
    summary, markdown = summarise(rows, args.first_temperature)
    head = "(QUICK: fake backend, not a measurement)\n\n" if args.quick else ""
    paths = write_results(
        args.name,
        {"quick": args.quick, "summary": summary, "rows": [asdict(r) for r in rows]}
        | {"args": vars(args) | {"out": str(args.out)}},
        head + markdown + "\n",
        directory=args.out,
    )
    print(f"wrote {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
