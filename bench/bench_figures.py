"""The figures a multi-part task's parts are given: right, wrong, or none, by the prompt the programs are asked with.

:func:`engine.figures.compute_figures` runs as a run does (the biggest installed model, greedy then sampled
programs, the left-out and units rules) on the multi-part tasks that want figures and state their right values
(``values`` in ``bench/data/multipart_tasks*.yaml``: development data, each set run before). A confirmed figure
is *right* when it is one of the task's values (within 1%), else *not listed*: wrong, or a quantity the task's
values do not list (read them: a wrong confirmed figure is the worst outcome, since every part is told it).
``--prompt before`` asks with the figures prompt as it was before it asked for one variable per number the task
gives (:data:`BEFORE`), for the comparison; one model job at a time.

    python -m bench.bench_figures --ids mp-loan-model-memo,mp3-server-consolidation --name figures_now
    python -m bench.bench_figures --prompt before --name figures_before
    python -m bench.bench_figures --quick     # the fake backend: a test of the benchmark
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

import engine.prompts as prompts
from bench.common import bench_parser, md_table, median, write_results
from bench.versus import REFERENCE_MODEL as MODEL
from engine.figures import compute_figures, wants_figures
from engine.slots.sandbox import SandboxLimits
from experts.backends import ExpertBackend
from experts.backends.fake import FakeBackend, FakeResponse, FakeRule, FakeScript
from experts.pool import get_backend
from state.settings import Settings

DATA = Path(__file__).parent / "data"
SETS = ("multipart_tasks.yaml", "multipart_tasks2.yaml", "multipart_tasks3.yaml")
TOLERANCE = 0.01
BEFORE = """\
Write a short Python program that computes the key quantities this task asks for or implies from its numbers \
(for example a payment, a total, an interest, a rate, a final balance). Print only one line per quantity, in the \
form `name: value`, the name in two to five plain words and the value a number rounded to two decimals, with no \
unit; print no table. Use only the standard library.

Task:
{task}"""
"""The figures prompt before 2026-12-02 (kept here to compare; the shipped one is ``engine.prompts.FIGURES_PROMPT``)."""


@dataclass
class Row:
    id: str
    values: list[float]
    right: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    unconfirmed: int = 0
    note: str = ""
    seconds: float = 0.0


def tasks(ids: str) -> list[tuple[str, str, list[float]]]:
    """(id, task, numeric values) of each multi-part task that wants figures and states its values."""
    wanted = set(filter(None, ids.split(",")))
    out = []
    for name in SETS:
        for item in yaml.safe_load((DATA / name).read_text(encoding="utf-8"))["items"]:
            values = [float(v) for v in (item.get("values") or {}).values() if isinstance(v, int | float)]
            if values and wants_figures(item["task"]) and (not wanted or item["id"] in wanted):
                out.append((item["id"], item["task"], values))
    return out


def is_right(value: float, values: list[float]) -> bool:
    return any(abs(value - v) <= max(0.01, TOLERANCE * abs(v)) for v in values)


def run_one(backend: ExpertBackend, item: tuple[str, str, list[float]]) -> Row:
    tid, task, values = item
    t0 = time.perf_counter()
    figures = compute_figures(task, backend, MODEL, SandboxLimits(timeout_s=10))
    row = Row(tid, values, note=figures.note[:400], seconds=round(time.perf_counter() - t0, 1))
    for f in figures.figures:
        (row.right if is_right(f.value, values) else row.wrong).append(f"{f.name}: {f.value:g}")
    row.unconfirmed = len(figures.unconfirmed)
    return row


def quick_backend() -> FakeBackend:
    """A fake whose two programs print the quick task's figure, one right and one not."""
    program = "```python\nprint(f'monthly cost: {14 * 350 * 720 / 1000 * 0.28:.2f}')\nprint('other total: 5.00')\n```"
    rules = [
        FakeRule(slot="@figures", responses=[FakeResponse(text=program)]),
        FakeRule(slot="@figures-2", responses=[FakeResponse(text=program)]),
    ]
    return FakeBackend(script=FakeScript(rules=rules))


def summarise(rows: list[Row], prompt: str) -> tuple[dict[str, Any], str]:
    summary = {
        "prompt": prompt,
        "tasks": len(rows),
        "right_confirmed": sum(len(r.right) for r in rows),
        "wrong_confirmed": sum(len(r.wrong) for r in rows),  # not listed: wrong, or a quantity the values lack
        "tasks_with_a_wrong_confirmed_figure": sum(bool(r.wrong) for r in rows),
        "tasks_with_a_right_confirmed_figure": sum(bool(r.right) for r in rows),
        "seconds_median": median(r.seconds for r in rows) if rows else 0.0,
    }
    s = summary
    lines = [
        f"Prompt: **{prompt}**. {s['tasks']} tasks; confirmed figures that are the task's values "
        f"{s['right_confirmed']}, not listed (wrong, or a quantity the values do not list: read them) "
        f"{s['wrong_confirmed']}; tasks with a listed one: {s['tasks_with_a_right_confirmed_figure']}, with one not "
        f"listed: {s['tasks_with_a_wrong_confirmed_figure']}; median {s['seconds_median']} s a task.",
        "",
        md_table(
            ["task", "confirmed, the task's values", "confirmed, not listed", "unconfirmed", "s", "note"],
            [
                [r.id, "; ".join(r.right), "; ".join(r.wrong), r.unconfirmed, r.seconds, r.note[:160].replace("|", "/")]
                for r in rows
            ],
        ),
    ]
    return summary, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--ids", default="", help="comma-separated task ids (default: every task with values)")
    parser.add_argument("--prompt", choices=("now", "before"), default="now", help="the figures prompt to ask with")
    parser.add_argument("--name", default="figures", help="results file name (default figures)")
    args = parser.parse_args(argv)
    if args.prompt == "before":
        prompts.FIGURES_PROMPT = BEFORE  # the comparison only: compute_figures reads the prompt when it asks
    if args.quick:
        backend: ExpertBackend = quick_backend()
        items = [("quick", "14 machines at 350 W, 720 hours at 0.28 per kWh: the monthly cost and total?", [987.84])]
    else:
        backend = get_backend(Settings(), MODEL)
        items = tasks(args.ids)
    rows: list[Row] = []
    for item in items:
        rows.append(run_one(backend, item))
        r = rows[-1]
        print(f"[{len(rows)}/{len(items)}] {r.id}: right {r.right} wrong {r.wrong} ({r.seconds} s)", flush=True)
    summary, markdown = summarise(rows, args.prompt)
    payload = {"summary": summary, "rows": [asdict(r) for r in rows], "args": vars(args) | {"out": str(args.out)}}
    paths = write_results(args.name, payload, "# Figures given to the parts\n\n" + markdown + "\n", args.out)
    print(f"wrote {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
