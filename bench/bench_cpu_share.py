"""Several processes generating at once on one machine: with the shared CPU budget and without it.

Run: ``python -m bench.bench_cpu_share``. Writes ``bench/results/cpu_share.{json,md}``. ``--quick``: 2 processes,
8 tokens (a test of the benchmark, not a measurement).

Each process loads the default model (``LlamaBackend``, all cores, as ``coe run`` does), waits for the others to
be loaded, then generates ``--tokens`` tokens for the same prompt (no grammar, greedy). Reported per setting and
number of processes: the time from the common start to the last process done (makespan), the first process done,
and each generation's own seconds. "without" replaces :func:`experts.backends.cpu_share.cpu_share` with a no-op in
the children, which is how the processes ran before the budget existed.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, bench_parser, md_table, write_results

CHILD = """
import contextlib, json, os, sys, time
from pathlib import Path
import experts.backends.llama as llama
from experts.models.bundled import resolve_model_path
from experts.backends.protocol import ChatMessage, GenerationRequest
from experts.backends.cpu_share import Share
if sys.argv[1] == "without":
    llama.cpu_share = lambda *args: contextlib.nullcontext(Share(0, 0.0))
llama.cpu_share_dir = lambda: Path(sys.argv[4])
backend = llama.LlamaBackend(resolve_model_path(None), n_ctx=1024)
backend.load()
Path(sys.argv[3]).touch()
go = Path(sys.argv[3]).with_name("go")
while not go.exists():
    time.sleep(0.01)
request = GenerationRequest(
    messages=(ChatMessage("user", "Explain in detail how a hash table works, with an example."),),
    max_tokens=int(sys.argv[2]), temperature=0.0, slot_id="s",
)
generation = backend.generate(request)
print(json.dumps({"done_at": time.time(), "seconds": generation.seconds,
                  "tokens": generation.completion_tokens, "wait": generation.extra.get("cpu_wait_seconds", 0.0)}))
"""


def measure(setting: str, processes: int, tokens: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        children = [
            subprocess.Popen(
                [sys.executable, "-c", CHILD, setting, str(tokens), str(work / f"ready-{n}"), str(work / "shares")],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(processes)
        ]
        while not all((work / f"ready-{n}").exists() for n in range(processes)):
            if any(child.poll() is not None for child in children):
                raise SystemExit("a child process ended before its model was loaded")
            time.sleep(0.05)
        start = time.time()
        (work / "go").touch()
        results = [json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children]
    ends = sorted(r["done_at"] - start for r in results)
    return {
        "setting": setting,
        "processes": processes,
        "makespan_s": round(ends[-1], 2),
        "first_done_s": round(ends[0], 2),
        "median_done_s": round(statistics.median(ends), 2),
        "generation_s": [round(r["seconds"], 2) for r in results],
        "waited_s": [round(r["wait"], 2) for r in results],
        "tokens": [r["tokens"] for r in results],
    }


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--tokens", type=int, default=96)
    args = parser.parse_args(argv)
    counts, tokens = ((2,), 8) if args.quick else ((1, 2, 4), args.tokens)
    rows: list[dict[str, Any]] = []
    for processes in counts:
        for setting in ("with", "without"):
            rows.append(measure(setting, processes, tokens))
            print(rows[-1], flush=True)
    md = [
        f"Each process: the default model on all cores, {tokens} tokens for the same prompt, greedy; all start "
        "together once every model is loaded. Seconds from the common start.",
        "",
        md_table(
            ["processes", "CPU budget", "last done (makespan)", "first done", "median done", "each generation's s"],
            [
                [
                    r["processes"],
                    r["setting"],
                    r["makespan_s"],
                    r["first_done_s"],
                    r["median_done_s"],
                    ", ".join(map(str, r["generation_s"])),
                ]
                for r in rows
            ],
        ),
    ]
    write_results("cpu_share", {"tokens": tokens, "rows": rows}, "\n".join(md) + "\n", directory=args.out)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
