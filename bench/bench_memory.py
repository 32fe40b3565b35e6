"""Memory (issue 20): do remembered facts and earlier turns reach the prompts that need them, and nothing else?

Run: ``python -m bench.bench_memory``. Writes ``bench/results/memory.{json,md}``. ``--quick``: 6 facts, 4 threads.

1. **Facts** (``bench/data/memory_facts.yaml``: 30 facts, 30 lookup requests each answered by one of them, 30
   that none answers, several on a fact's topic). Each fact is remembered (:class:`memory.store.FactMemory`, an
   in-process store, the bundled embedder); each request is searched. A request is filled when its best fact
   reaches the line. The line is calibrated on the even-numbered requests (the middle of the widest interval of
   lines with the fewest errors there, a wrong fill counting as two misses) and reported on the odd-numbered
   ones (held out) and on all: the share of answerable requests filled with their fact (goal >= 95%), and of
   requests filled with a fact that does not answer them (goal <= 5%). Twice: the line alone, and the line with
   the check model (``Settings.memory_check_model``, :func:`memory.store.fact_answers`) asked about every
   request's best fact, a fact filling only on its yes (the line calibrated again that way). Not in ``--quick``.
2. **Follow-up turns** (the fake backend, 30 threads): turn 1's answer carries a marker; turn 2 is a follow-up;
   turn 3 is unrelated to turn 1. Reported: how often turn 1's answer reaches every prompt of turn 2 (goal >= 95%)
   and how often it reaches a prompt of turn 3, two turns later (goal <= 5%: only the latest turn is memory).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from bench.common import bench_parser, md_table, write_results
from experts.catalog import resolve_binding
from experts.embedding import get_embedder
from experts.pool import get_backend
from graph import build_graph
from graph.persistence import serializer
from memory.store import FactMemory, fact_answers
from state.context import resolve_settings
from state.io import RunInput

DATA = Path(__file__).resolve().parent / "data" / "memory_facts.yaml"
GOAL_RECALL = 0.95
GOAL_FALSE = 0.05


def fact_scores(data: dict[str, Any], check: Callable[[str, str], bool | None] | None = None) -> list[dict[str, Any]]:
    """Each request's best fact, its similarity and, with ``check``, whether the check reads it as the answer."""
    memory = FactMemory(InMemoryStore(), "bench", get_embedder())
    ids = {}
    for fact in data["facts"]:
        ids[memory.add(fact["text"]).id] = fact["id"]
    rows = []
    for n, query in enumerate(data["queries"]):
        [(best, score)] = memory.search(query["text"], k=1)
        row = {"n": n, "text": query["text"], "fact": query.get("fact"), "best": ids[best.id], "score": score}
        if check is not None:
            row["answers"] = check(query["text"], best.text)
        rows.append(row)
    return rows


def filled(row: dict[str, Any], line: float, checked: bool) -> bool:
    """Whether the request is filled: its best fact reaches the line (and, ``checked``, the check said yes)."""
    return bool(row["score"] >= line and (not checked or row.get("answers") is not False))


def rates(rows: list[dict[str, Any]], line: float, checked: bool = False) -> dict[str, float]:
    answerable = [r for r in rows if r["fact"]]
    filled_right = sum(1 for r in answerable if filled(r, line, checked) and r["best"] == r["fact"])
    filled_wrong = sum(1 for r in rows if filled(r, line, checked) and r["best"] != r["fact"])
    return {
        "recall": round(filled_right / max(1, len(answerable)), 4),
        "false_fills": round(filled_wrong / max(1, len(rows)), 4),
        # a wrong value filled in is worse than a request left open (the person sees the open one): counted twice
        "errors": (len(answerable) - filled_right) + 2 * filled_wrong,
    }


def calibrate(rows: list[dict[str, Any]], checked: bool = False) -> float:
    """The middle of the widest run of candidate lines with the fewest errors on ``rows``."""
    grid = [round(0.20 + 0.01 * i, 2) for i in range(71)]
    errors = [rates(rows, line, checked)["errors"] for line in grid]
    fewest = min(errors)
    runs: list[list[float]] = []
    for line, err in zip(grid, errors, strict=True):
        if err == fewest:
            if runs and round(runs[-1][-1] + 0.01, 2) == line:
                runs[-1].append(line)
            else:
                runs.append([line])
    widest = max(runs, key=len)
    return round((widest[0] + widest[-1]) / 2, 2)


def follow_ups(threads: int, workdir: Path) -> dict[str, Any]:
    """Turn 1's answer in turn 2's prompts (a follow-up) and in turn 3's (two turns later)."""
    calls = workdir / "calls.jsonl"
    graph = build_graph(InMemorySaver(serde=serializer()))
    reached, leaked = 0, 0
    for n in range(threads):
        marker = f"MARKER-{n:03d}-QX"
        config = {"configurable": {"thread_id": f"t{n}"}}
        turns = (
            (
                f"Write a Python function f{n}(x) that returns x plus {n}",
                f"def f{n}(x):\n    return x + {n}  # {marker}",
            ),  # noqa: E501
            (f"Now write a pytest test for f{n}", f"def test_f{n}():\n    assert f{n}(1) == {n + 1}"),
            ("Write a haiku about the sea", "Waves fold into foam"),
        )
        prompts: list[list[str]] = []
        for task, body in turns:
            text = f"## Outline\n1. Code\n\n## 1. Code\n```python\n{body}\n```\n"
            script = workdir / f"script{n}.json"
            script.write_text(json.dumps({"calls_log": str(calls), "rules": [{"title": ".*", "text": text}]}))
            calls.write_text("")
            graph.invoke(RunInput(task=task), config, context={"backend": "fake", "fake_script": str(script)})
            seen = [json.loads(line) for line in calls.read_text().splitlines()]
            prompts.append([c["user"] for c in seen if not c["slot"].endswith("@judge")])
        reached += bool(prompts[1]) and all(marker in p for p in prompts[1])
        leaked += any(marker in p for p in prompts[2])
    return {
        "threads": threads,
        "reached_next_turn": round(reached / threads, 4),
        "reached_two_turns_later": round(leaked / threads, 4),
    }


def checker() -> tuple[Callable[[str, str], bool | None] | None, str | None]:
    """The check the harness runs (the check model on the bundled llama.cpp backend), or None when not installed."""
    settings = resolve_settings({"backend": "llama"}, env={})
    binding = resolve_binding(settings, model=settings.memory_check_model)
    if binding.kind != "true" or binding.model is None:
        return None, settings.memory_check_model
    backend = get_backend(settings, binding.model)
    return (lambda request, fact: fact_answers(backend, request, fact)), binding.model


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    args = parser.parse_args(argv)
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    if args.quick:
        keep = {f["id"] for f in data["facts"][:6]}
        data = {
            "facts": data["facts"][:6],
            "queries": [q for q in data["queries"] if q.get("fact") in keep] + data["queries"][30:36],
        }
    check, check_model = (None, None) if args.quick else checker()
    rows = fact_scores(data, check)
    even, odd = rows[::2], rows[1::2]
    line = calibrate(even)
    held_out, everything = rates(odd, line), rates(rows, line)
    checked_line = calibrate(even, checked=True) if check else None
    checked = (
        {"line": checked_line, "held_out": rates(odd, checked_line, True), "all": rates(rows, checked_line, True)}
        if checked_line is not None
        else None
    )
    with tempfile.TemporaryDirectory() as tmp:
        turns = follow_ups(4 if args.quick else 30, Path(tmp))
    md = [
        ("QUICK: a sample, not a measurement. " if args.quick else "")
        + f"{len(data['facts'])} facts, {len(rows)} lookup requests "
        f"({sum(1 for r in rows if r['fact'])} answerable); line calibrated on the even-numbered requests: "
        f"**{line}**.",
        "",
        md_table(
            ["measure", "held out (odd)", "all", "goal"],
            [
                ["answerable requests filled with their fact", held_out["recall"], everything["recall"], ">= 0.95"],
                [
                    "requests filled with a fact that does not answer them",
                    held_out["false_fills"],
                    everything["false_fills"],
                    "<= 0.05",
                ],
            ],
        ),
        "",
        (
            f"With the check model ({check_model}: a fact fills only when it reads it as the answer), line "
            f"calibrated the same way: **{checked['line']}**; answerable requests filled: held out "
            f"{checked['held_out']['recall']}, all {checked['all']['recall']}; filled with a fact that does not "
            f"answer them: held out **{checked['held_out']['false_fills']}**, all **{checked['all']['false_fills']}**."
            if checked is not None
            else "No check model: "
            + ("--quick runs none." if args.quick else f"{check_model} is not installed; the line alone decides.")
        ),
        "",
        f"Follow-up turns ({turns['threads']} threads, fake backend): turn 1's answer reached every prompt of the "
        f"follow-up in **{turns['reached_next_turn']:.0%}**, and a prompt two turns later in "
        f"**{turns['reached_two_turns_later']:.0%}** (goals >= 95% and <= 5%).",
        "",
        "Misses and false fills at the line (the check's answer where it was asked):",
        "",
        md_table(
            ["request", "wanted", "best fact", "score", "check"],
            [
                [
                    r["text"],
                    r["fact"] or "-",
                    r["best"],
                    r["score"],
                    {True: "yes", False: "no"}.get(r.get("answers"), "-"),
                ]
                for r in rows
                if (r["fact"] and r["score"] < line) or (r["score"] >= line and r["best"] != r["fact"])
            ],
        ),
    ]
    payload = {
        "line": line,
        "held_out": held_out,
        "all": everything,
        "check_model": check_model,
        "checked": checked,
        "rows": rows,
        "turns": turns,
    }
    write_results("memory", payload, "\n".join(md) + "\n", args.out)
    print("\n".join(md[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
