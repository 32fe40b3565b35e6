"""The saved prompt prefix across processes: ``coe run`` of one-function tasks with the disk store off and on.

Run: ``python -m bench.bench_prefix_disk [--limit N]``. Writes ``bench/results/prefix_disk.{json,md}``.

Each task is an MBPP development problem (``../shared/data/mbpp_sanitized_dev.json``, copied to
``bench/data/mbpp_dev_prompts.json``: the prompt and its first assert, as issue 39 gives them), run as a user runs
it: ``coe run TASK`` as a new process, default settings, a fresh ``COE_HOME`` each time. With
``COE_PREFIX_DISK_CACHE=0`` every process reads the expert's system message (persona and output contract) from an
empty context; with it on, the first process saves the state and later ones load it
(:class:`experts.backends.llama_prefix.PrefixStore`). The store is emptied first, then one process fills it
(not counted); then the tasks run off and on in turn. Reported per run: the wall time, the first answer's
generation time (the ledger's first ``generate``) and whether the two documents are the same: the store must not
change an answer. ``--quick``: one task, the fake backend (a test of the bench).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.common import bench_parser, coe_run_json, md_table, median, write_results
from state.paths import prefix_states_dir

DATA = Path(__file__).parent / "data" / "mbpp_dev_prompts.json"
_GENERATE = re.compile(r"^\|[^|]*\|[^|]*\| generate \|[^|]*\| (\d+) \|", re.M)


def tasks(limit: int) -> list[str]:
    """The first ``limit`` problems as messages: the prompt and its first assert."""
    rows = json.loads(DATA.read_text(encoding="utf-8"))
    return [f"{r['prompt']} Your code should pass this test: {r['test_list'][0]}" for r in rows[:limit]]


def coe_run(task: str, disk: bool, quick: bool) -> dict[str, Any]:
    """One ``coe run`` as a new process; its wall time, first answer's milliseconds and document."""
    with tempfile.TemporaryDirectory(prefix="coe-bench-prefix-disk-") as home:
        env = {**os.environ, "COE_HOME": home, "COE_PREFIX_DISK_CACHE": "1" if disk else "0"}
        if quick:
            env["COE_BACKEND"] = "fake"
        summary, seconds = coe_run_json(task, env, "--ledger")
    document = summary["document"]
    first = _GENERATE.search(document)
    return {
        "disk": disk,
        "seconds": round(seconds, 1),
        "first_answer_s": round(int(first.group(1)) / 1000, 1) if first else None,
        "status": summary["status"],
        "answer": document.split("## Ledger")[0],
    }


def run(limit: int, quick: bool) -> dict[str, Any]:
    """Empty the store, fill it with one process, then each task off and on in turn."""
    if not quick:  # the fake backend has no store
        shutil.rmtree(prefix_states_dir(), ignore_errors=True)
    chosen = tasks(1 if quick else limit)
    warm = coe_run(chosen[0], True, quick)
    rows = []
    for task in chosen:
        off, on = coe_run(task, False, quick), coe_run(task, True, quick)
        rows.append({"task": task, "off": off, "on": on, "same_answer": off["answer"] == on["answer"]})
    return {"quick": quick, "warm_up_s": warm["seconds"], "rows": rows}


def summarise(result: dict[str, Any]) -> str:
    rows = result["rows"]
    table = md_table(
        ["task", "off s", "on s", "first answer off s", "on s", "same answer"],
        [
            [
                r["task"][:60],
                r["off"]["seconds"],
                r["on"]["seconds"],
                r["off"]["first_answer_s"],
                r["on"]["first_answer_s"],
                r["same_answer"],
            ]
            for r in rows
        ],
    )
    off = median(r["off"]["seconds"] for r in rows)
    on = median(r["on"]["seconds"] for r in rows)
    firsts = [r for r in rows if r["off"]["first_answer_s"] is not None and r["on"]["first_answer_s"] is not None]
    first = (
        f"; first answer median {median(r['off']['first_answer_s'] for r in firsts):.1f} s off, "
        f"{median(r['on']['first_answer_s'] for r in firsts):.1f} s on"
        if firsts
        else ""
    )
    return (
        f"Command: `python -m bench.bench_prefix_disk{' --quick' if result['quick'] else ''}`. `coe run` as a new "
        f"process per task, a fresh COE_HOME each, the disk store of prompt prefixes off and on in turn (filled by "
        f"one process first, {result['warm_up_s']} s, not counted).\n\n{table}\n\nMedian wall time {off:.1f} s off, "
        f"{on:.1f} s on{first}; answers the same in {sum(r['same_answer'] for r in rows)} of {len(rows)}.\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--limit", type=int, default=4, help="how many MBPP development problems (default 4)")
    args = parser.parse_args(argv)
    result = run(args.limit, args.quick)
    json_path, md_path = write_results(
        "prefix_disk", result, f"# The prompt prefix saved across processes\n\n{summarise(result)}", args.out
    )
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
