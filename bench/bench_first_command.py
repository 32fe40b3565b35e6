"""The README's demo as a new user's first command: ``coe run`` on a machine where nothing has been built yet.

Run: ``python -m bench.bench_first_command [--repeats N]``. Writes ``bench/results/first_command.{json,md}``.
``--quick``: one repetition on the fake backend (a test of the benchmark, not a measurement).

Each repetition gives the command everything new, as a fresh clone and a fresh install would: a new ``COE_HOME``,
a new model cache (so both bundled models are assembled or verified from their packages, the ONNX sentence
encoder is built and no prompt prefix is saved), new expert and template index directories (filled from the
vectors the package ships, or computed where none ship), and the project's own modules without bytecode (the
``__pycache__`` folders under the repository are removed and ``PYTHONDONTWRITEBYTECODE`` is unset, as in a
user's shell; the installed packages keep the bytecode pip compiled when it installed them: until 2026-12-04 a
new ``PYTHONPYCACHEPREFIX`` compiled those too, 1.8 s more than a fresh clone pays). Then the same command once
more with the same directories, as the user's second command.
Then the reference: the bare 1.5B asked the same words in a new process (``bench.bench_coe_run.bare``: load the
model from that model cache, one chat completion at Qwen's repetition penalty, greedy; 16 tokens in quick mode,
from this process' model cache), what a person using llama-cpp-python directly would wait for.

Reported per command: the wall seconds from the process' start to its end, the seconds from the run's start
to the moment the slot is queued (what precedes the answer: scope, planning, routing), as the CLI's progress
lines print them, and the document's SHA-256 (the same document each time, or not). The goal (issue 39): the
demo under 30 s on an idle machine. On a busy or slower machine the ratio to the bare 1.5B's seconds in the same
repetition says how much of the time is the harness's.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_coe_run import bare
from bench.common import ROOT, bench_parser, md_table, median, write_results
from bench.versus import BARE_MAX_TOKENS

DEMO = "Write a Python function that checks whether a string is a palindrome"
GOAL_S = 30.0
_QUEUED = re.compile(r"^\[\s*([0-9.]+)s\] \S+: queued", re.MULTILINE)


def command(env: dict[str, str]) -> dict[str, Any]:
    """``coe run DEMO`` as a new process: wall seconds, seconds to the first queued slot, the document's hash."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cli", "run", DEMO], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 3):
        raise RuntimeError(f"coe run failed ({done.returncode}): {done.stderr[-2000:]}")
    queued = _QUEUED.search(done.stderr)
    return {
        "wall_s": round(seconds, 2),
        "to_slot_s": float(queued.group(1)) if queued else None,
        "exit": done.returncode,
        "document_sha256": hashlib.sha256(done.stdout.encode("utf-8")).hexdigest()[:16],
    }


def fresh_env(root: Path, quick: bool) -> dict[str, str]:
    """The environment of a new user: every directory the first command fills, new and empty."""
    dirs = {
        "COE_HOME": "home",
        "COE_MODEL_CACHE": "models",
        "COE_EXPERT_EMBEDDINGS": "expert_embeddings",
        "COE_TEMPLATE_EMBEDDINGS": "template_embeddings",
    }
    # a user's shell writes bytecode: the first command compiles the project's modules, the second reads them
    env = {k: v for k, v in os.environ.items() if not k.startswith("COE_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update({key: str(root / name) for key, name in dirs.items()})
    if quick:
        env["COE_BACKEND"] = "fake"
    return env


def fresh_clone_bytecode() -> int:
    """Remove the bytecode of the project's own modules (as a fresh clone has none); how many folders went."""
    removed = 0
    for folder, subfolders, _ in os.walk(ROOT):
        if "__pycache__" in subfolders:
            shutil.rmtree(Path(folder) / "__pycache__", ignore_errors=True)
            removed += 1
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d != "__pycache__"]  # not .venv, .git
    return removed


def run(repeats: int, quick: bool) -> dict[str, Any]:
    from state.context import resolve_settings

    n_ctx = resolve_settings({}).n_ctx
    rows: list[dict[str, Any]] = []
    for i in range(1 if quick else repeats):
        with tempfile.TemporaryDirectory(prefix="coe-bench-first-") as tmp:
            env = fresh_env(Path(tmp), quick)
            if not quick:  # a test of the benchmark must not take the bytecode from under the tests beside it
                fresh_clone_bytecode()
            first = command(env)
            second = command(env)
            _, bare_s = bare(DEMO, n_ctx, 16 if quick else BARE_MAX_TOKENS, None if quick else env)
        rows.append({"repeat": i + 1, "first": first, "second": second, "bare_s": round(bare_s, 2)})
        print(rows[-1], flush=True)
    return {"quick": quick, "task": DEMO, "n_ctx": n_ctx, "rows": rows}


def summarise(result: dict[str, Any]) -> str:
    rows = result["rows"]
    table = md_table(
        [
            "repeat",
            "first: wall s",
            "first: to the slot s",
            "second: wall s",
            "second: to the slot s",
            "bare 1.5B s",
            "document",
        ],
        [
            [
                r["repeat"],
                r["first"]["wall_s"],
                r["first"]["to_slot_s"],
                r["second"]["wall_s"],
                r["second"]["to_slot_s"],
                r["bare_s"],
                r["first"]["document_sha256"]
                + ("" if r["second"]["document_sha256"] == r["first"]["document_sha256"] else " (second differs)"),
            ]
            for r in rows
        ],
    )
    first = median(r["first"]["wall_s"] for r in rows)
    second = median(r["second"]["wall_s"] for r in rows)
    bare_s = median(r["bare_s"] for r in rows)
    documents = len({r["first"]["document_sha256"] for r in rows} | {r["second"]["document_sha256"] for r in rows})
    return (
        f"Command: `python -m bench.bench_first_command{' --quick' if result['quick'] else ''}`. `coe run "
        f'"{result["task"]}"` as a new process with a new COE_HOME, model cache and index directories, the '
        f"project's modules without bytecode; then the same command again (the second command).\n\n{table}\n\n"
        f"Median: first command **{first:.1f} s**, second {second:.1f} s (goal: under {GOAL_S:.0f} s on an idle "
        f"machine); {documents} distinct document(s) over {2 * len(rows)} commands. The bare 1.5B in a new process, "
        f"the same words: {bare_s:.1f} s (first command {first / bare_s:.2f}x, second {second / bare_s:.2f}x; its "
        f"context {result['n_ctx']} tokens).\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="how many fresh installs to time (default 3)")
    parser.add_argument("--name", default="first_command", help="results file name (default first_command)")
    args = parser.parse_args(argv)
    result = run(args.repeats, args.quick)
    summary = summarise(result)
    paths = write_results(args.name, result, f"# The README demo as a first command\n\n{summary}", args.out)
    print(summary)
    print(f"wrote {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
