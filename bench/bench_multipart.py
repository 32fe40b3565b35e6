"""Multi-part tasks whose parts must agree: what ``check_parts`` finds, sends back and leaves, and what it costs.

Data: ``bench/data/multipart_tasks.yaml`` (20 tasks written by a helper who had not read the planning code: code
with its tests and docs, a schema with its queries, a model with its memo, a config with its script; the figures a
task implies are given, computed, under ``values``).

Each task runs through the compiled graph with default settings, in process, as ``coe run`` runs it. Per task:

* the slots planned, the run's status and wall time, and the seconds the second writing of sent-back parts took
  (the round's cost: the ``execute_slots`` time after the first ``check_parts``);
* ``check_parts``' findings in its first round (``found``), the parts it sent back, and what still disagreed
  after the round (``left``: the document's ``parts disagree`` warnings); the document **agrees by the checks**
  when nothing is left;
* the completion round (``nodes.complete``): its decision and actions, its wall time (from its
  ``completion_round`` ledger entry to its ``completion_outcome``) and what the document still lacks after it;
* the document itself (in the JSON), to be read;
* for a task with ``values``: how many of them the parts state (a number equal to the value to the cent; the
  harness's "Computed figures" section left out). This is the one measure here not made by the checker itself.

The agreement statements of the data file are for a reader's rubric; this benchmark does not score them.

Run: ``python -m bench.bench_multipart`` (all 20: several hours on 2 cores); ``--limit N`` or ``--ids
mp-slugify,mp-library-schema``; ``--set bench/data/multipart_tasks2.yaml`` for the second set (10 tasks, written
2026-11-29 by a helper who had not read the planning code); ``--quick`` runs two tasks on the fake backend (a test
of the bench, not a measurement); ``--resume FILE`` continues a stopped run.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common import md_table, median
from bench.versus import QUICK_LABEL, Benchmark, Sides, compare, versus_parser
from nodes.assemble import FIGURES_TITLE
from state import Passport

DATA = Path(__file__).parent / "data" / "multipart_tasks.yaml"
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_COMPUTED = re.compile(rf"^## {FIGURES_TITLE}\n.*?(?=^## |\Z)", re.M | re.S)


@dataclass(frozen=True)
class Item:
    id: str
    task: str
    values: dict[str, float]


@dataclass
class Row:
    id: str
    status: str
    slots: int
    seconds: float
    found: list[str] = field(default_factory=list)
    sent_back: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    resend_seconds: float = 0.0
    completion: str = ""
    """The completion round's decision and actions."""
    round_seconds: float = 0.0
    gaps: list[str] = field(default_factory=list)
    """What the round's first reading found."""
    missing: list[str] = field(default_factory=list)
    values_stated: int = 0
    values_total: int = 0
    document: str = ""
    """The delivered document, to be read (in the JSON only)."""

    @property
    def agrees(self) -> bool:
        """Nothing the checks compare still disagrees in the delivered document."""
        return not self.left


def load_items(path: Path = DATA) -> list[Item]:
    """The tasks of the data file, in order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [Item(i["id"], i["task"], _numbers(i.get("values") or {})) for i in data["items"]]


def _numbers(values: dict[str, Any]) -> dict[str, float]:
    """The numeric ``values`` of an item; a time or a cron line ("22:30", "15 2 * * *") is for the reader."""
    return {k: float(v) for k, v in values.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def stated_values(document: str, values: dict[str, float]) -> int:
    """How many of ``values`` the parts state (a number equal to the value to the cent).

    The harness's own "Computed figures" section is left out: it is what the parts were given, not what they say.
    """
    numbers = set()
    for match in _NUMBER.finditer(_COMPUTED.sub("", document)):
        try:
            numbers.add(round(float(match.group().replace(",", "")), 2))
        except ValueError:
            continue
    return sum(1 for v in values.values() if round(v, 2) in numbers)


def row_of(item: Item, state: Passport, seconds: float) -> Row:
    """The row of one finished run, read from its Passport and ledger."""
    rounds = [e for e in state.ledger if e.action == "check_parts"]
    first = rounds[0].outputs_summary if rounds else ""
    found = [] if not rounds or first == "the parts agree" else first.split("; ")
    back = [e for e in state.ledger if e.action == "send_back"]
    resend = 0.0
    if back:
        after = state.ledger.index(back[-1])
        resend = sum(e.duration_ms for e in state.ledger[after:] if e.slot_id is not None) / 1000
    left = [n.message for n in state.notices if n.source == "check_parts"]
    c = state.completion
    started = next((e.at for e in state.ledger if e.action == "completion_round"), None)
    ended = next((e.at for e in state.ledger if e.action == "completion_outcome"), None)
    return Row(
        id=item.id,
        status=state.status.value,
        slots=len(state.framework.slots) if state.framework is not None else 0,
        seconds=round(seconds, 1),
        found=found,
        sent_back=[f"{e.slot_id}: {e.outputs_summary}" for e in back],
        left=left,
        resend_seconds=round(resend, 1),
        completion=(c.decision + "".join(f"; {g.action()}" for g in c.planned)) if c is not None else "",
        round_seconds=round((ended - started).total_seconds(), 1) if started and ended else 0.0,
        gaps=[g.detail for g in c.gaps] if c is not None else [],
        missing=list(c.missing) if c is not None else [],
        values_stated=stated_values(state.document or "", item.values),
        values_total=len(item.values),
        document=state.document or "",
    )


def run_one(sides: Sides, item: Item) -> Row:
    run = sides.harness(item.task)
    return row_of(item, run.state, run.seconds)


def summarise(rows: list[Row], args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    multi = [r for r in rows if r.slots > 1]
    agree = sum(r.agrees for r in multi)
    with_values = [r for r in rows if r.values_total]
    back = [r for r in rows if r.sent_back]
    ran = [r for r in rows if r.completion.startswith("ran")]
    payload = {
        "quick": bool(args.quick),
        "tasks": len(rows),
        "multi_slot": len(multi),
        "agree_by_checks": agree,
        "sent_back_runs": len(back),
        "median_seconds": round(median(r.seconds for r in rows), 1) if rows else 0.0,
        "median_resend_seconds": round(median(r.resend_seconds for r in back), 1) if back else 0.0,
        "completion_rounds": len(ran),
        "median_round_seconds": round(median(r.round_seconds for r in ran), 1) if ran else 0.0,
        "complete_after_round": sum(not r.missing for r in rows),
        "values_stated": sum(r.values_stated for r in with_values),
        "values_total": sum(r.values_total for r in with_values),
        "rows": [asdict(r) for r in rows],
    }
    title = "# Multi-part tasks: parts that agree" + (QUICK_LABEL if args.quick else "")
    table = md_table(
        [
            "task",
            "status",
            "slots",
            "s",
            "found (round 1)",
            "sent back",
            "left",
            "resend s",
            "gaps found",
            "completion round",
            "round s",
            "still missing",
            "values",
        ],
        [
            [
                r.id,
                r.status,
                r.slots,
                r.seconds,
                "<br>".join(r.found) or "none",
                len(r.sent_back),
                "<br>".join(r.left) or "none",
                r.resend_seconds,
                "<br>".join(r.gaps) or "none",
                r.completion or "not reached",
                r.round_seconds,
                "<br>".join(r.missing) or "none",
                f"{r.values_stated}/{r.values_total}" if r.values_total else "",
            ]
            for r in rows
        ],
    )
    share = f"{agree}/{len(multi)}" if multi else "no multi-slot plan"
    markdown = (
        f"{title}\n\nCommand: `python -m bench.bench_multipart{' --quick' if args.quick else ''}`; data "
        f"`{_shown(args.set)}`. Multi-slot documents that agree by the checks (`engine/agreement.py`): "
        f"**{share}**; runs with a part sent back: {len(back)} (median second writing "
        f"{payload['median_resend_seconds']} s); values stated: {payload['values_stated']}/{payload['values_total']}"
        f"; completion rounds run: {len(ran)} (median {payload['median_round_seconds']} s); documents with nothing "
        f"missing after it: {payload['complete_after_round']}/{len(rows)}; median run {payload['median_seconds']} s."
        f"\n\n{table}\n"
    )
    return payload, markdown


def _shown(path: Path) -> str:
    """``path`` as the repository names it, where it is inside the repository."""
    root = Path(__file__).resolve().parent.parent
    resolved = path.resolve()
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = versus_parser(__doc__, "multipart", "comma-separated task ids")
    parser.add_argument("--set", type=Path, default=DATA, help="the tasks (default bench/data/multipart_tasks.yaml)")
    args = parser.parse_args(argv)
    items = load_items(args.set)
    if args.ids:
        wanted = args.ids.split(",")
        items = [i for i in items if i.id in wanted]
    if args.quick:
        items = items[:2]
    elif args.limit:
        items = items[: args.limit]
    bench: Benchmark[Item, Row] = Benchmark(
        rows_key="rows",
        saved_row=lambda d: Row(**d),
        item_id=lambda i: i.id,
        row_id=lambda r: r.id,
        run_one=run_one,
        progress=lambda r: f"{r.id}: {r.status}, {r.slots} slots, {r.seconds} s, left {len(r.left)}",
        summarise=summarise,
    )
    return compare(bench, items, args)


if __name__ == "__main__":
    raise SystemExit(main())
