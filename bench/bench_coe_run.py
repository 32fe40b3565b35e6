"""A one-function task as a user runs it: ``coe run`` in a new process against the bare 1.5B in a new process.

Run: ``python -m bench.bench_coe_run [--limit N]``. Writes ``bench/results/coe_run.{json,md}``. ``--quick``: one
task, the fake backend on the harness side, 16 tokens on the bare side (a test of the benchmark).

Each task is an MBPP development problem (``bench/data/mbpp_dev_prompts.json``: the prompt and its first assert,
as issue 39 gives them; MBPP's test problems are never read). Both sides are timed from the process' start to its
end, as a person waits:

* **harness**: ``coe run TASK --json`` with default settings and one ``COE_HOME`` for all tasks (a user's), after
  one untimed run that builds what a first run builds; its answer is the document's first Python block.
* **bare 1.5B**: a script that does what a person using llama-cpp-python directly would do: load the best
  installed model (Qwen2.5-Coder-1.5B, from the same cache) and ask it the task alone, greedy, at the repetition
  penalty of Qwen's generation config (1.1), in a context as large as the harness's; its answer is its first
  Python block.

An answer passes when every assert of the problem holds in the sandbox. Reported: pass counts, each side's median
seconds and their ratio against issue 39's goal (1.5x).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench.bench_humaneval import bare_code
from bench.bench_mbpp import DATA, message, passes
from bench.common import ROOT, bench_parser, coe_run_json, md_table, median, write_results
from bench.versus import BARE_MAX_TOKENS, REFERENCE_MODEL, REFERENCE_PENALTY

GOAL_RATIO = 1.5

BARE = """
import json, sys
from llama_cpp import Llama
from experts.models.bundled import resolve_model_path
llm = Llama(model_path=str(resolve_model_path(sys.argv[2])), n_ctx=int(sys.argv[3]), verbose=False)
out = llm.create_chat_completion(
    messages=[{"role": "user", "content": sys.argv[1]}], max_tokens=int(sys.argv[4]), temperature=0.0,
    repeat_penalty=float(sys.argv[5]),
)
print(json.dumps({"text": out["choices"][0]["message"]["content"], "tokens": out["usage"]["completion_tokens"]}))
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``command`` from the repository root; the finished process and its wall seconds."""
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    return done, time.perf_counter() - t0


def harness(task: str, env: dict[str, str]) -> tuple[str, float, str]:
    """``coe run`` of ``task``: the answer's code, the wall seconds and the run's status."""
    summary, seconds = coe_run_json(task, env)
    return bare_code(summary["document"]), seconds, str(summary["status"])


def bare(task: str, n_ctx: int, tokens: int, env: dict[str, str] | None = None) -> tuple[str, float]:
    """The bare 1.5B in a new process (``env``: its environment, default this one's): its code and wall seconds."""
    args = [task, REFERENCE_MODEL, str(n_ctx), str(tokens), str(REFERENCE_PENALTY)]
    done, seconds = timed([sys.executable, "-c", BARE, *args], dict(os.environ) if env is None else env)
    if done.returncode != 0:
        raise RuntimeError(f"the bare model's process failed: {done.stderr[-2000:]}")
    return bare_code(json.loads(done.stdout.strip().splitlines()[-1])["text"]), seconds


def run(limit: int, quick: bool) -> dict[str, Any]:
    from state.context import resolve_settings

    problems: list[dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))[: 1 if quick else limit]
    n_ctx = resolve_settings({}).n_ctx
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="coe-bench-coe-run-") as home:
        env = {**os.environ, "COE_HOME": home}
        if quick:
            env["COE_BACKEND"] = "fake"
        warm = harness(message(problems[0]), env)[1]
        for problem in problems:
            task = message(problem)
            code, seconds, status = harness(task, env)
            bare_answer, bare_seconds = bare(task, n_ctx, 16 if quick else BARE_MAX_TOKENS)
            rows.append(
                {
                    "task_id": problem["task_id"],
                    "harness_s": round(seconds, 2),
                    "harness_passed": passes(problem, code)[0],
                    "status": status,
                    "bare_s": round(bare_seconds, 2),
                    "bare_passed": passes(problem, bare_answer)[0],
                }
            )
            print(rows[-1], flush=True)
    return {"quick": quick, "warm_up_s": round(warm, 2), "n_ctx": n_ctx, "rows": rows}


def summarise(result: dict[str, Any]) -> str:
    rows = result["rows"]
    table = md_table(
        ["MBPP task", "coe run s", "passed", "bare 1.5B process s", "passed"],
        [[r["task_id"], r["harness_s"], r["harness_passed"], r["bare_s"], r["bare_passed"]] for r in rows],
    )
    ours, theirs = median(r["harness_s"] for r in rows), median(r["bare_s"] for r in rows)
    ratio = ours / theirs if theirs else 0.0
    return (
        f"Command: `python -m bench.bench_coe_run{' --quick' if result['quick'] else ''}`. Each side a new process "
        f"per task, timed from start to end; one COE_HOME for the harness, warmed by one untimed run "
        f"({result['warm_up_s']} s); the bare side's context {result['n_ctx']} tokens.\n\n{table}\n\n"
        f"Passed: harness {sum(r['harness_passed'] for r in rows)}, bare 1.5B {sum(r['bare_passed'] for r in rows)} "
        f"of {len(rows)}. Median {ours:.1f} s against {theirs:.1f} s: **{ratio:.2f}x** (goal <= {GOAL_RATIO}x).\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--limit", type=int, default=10, help="how many MBPP development problems (default 10)")
    args = parser.parse_args(argv)
    result = run(args.limit, args.quick)
    paths = write_results(
        "coe_run", result, f"# A one-function task through `coe run`\n\n{summarise(result)}", args.out
    )
    print(summarise(result))
    print(f"wrote {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
