"""Knowledge-base ingestion at scale: ``coe kb add`` of 1, 10 and 50 MB of text, time and peak memory.

Run: ``python -m bench.bench_ingest``. Writes ``bench/results/ingest.{json,md}``. ``--quick``: 0.05 MB (a test of
the benchmark, not a measurement). ``--sizes 1,10`` for other sizes (MB).

Each size is a generated Markdown handbook (deterministic: headings and paragraphs of policy sentences drawn
from word lists, so passages differ), added to a fresh knowledge base by ``python -m cli kb add FILE --kb DIR
--json --quiet`` in its own process, with the real default embedder. Reported: wall time, MB/s, passages/s
and the process' peak RSS (``wait4``'s ``ru_maxrss``). Goal (issue 22): 50 MB in under 10 minutes, peak RSS
under 1 GB.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import bench_parser, md_table, write_results

ROOT = Path(__file__).resolve().parents[1]
GOAL_SECONDS_50MB = 600
GOAL_RSS_MB = 1024

_TOPICS = [
    "encryption keys",
    "backup retention",
    "access reviews",
    "incident response",
    "vendor onboarding",
    "data residency",
    "password rotation",
    "audit logging",
    "network segmentation",
    "patch management",
    "expense approval",
    "travel booking",
    "remote work",
    "hiring panels",
    "release trains",
    "on-call",
]
_WHO = [
    "The security team",
    "Each service owner",
    "The finance lead",
    "Every engineer",
    "The data protection officer",
    "Team managers",
    "The on-call engineer",
    "HR partners",
]
_VERBS = ["must", "should", "may", "is required to", "is expected to", "can"]
_ACTS = ["review", "approve", "document", "rotate", "archive", "escalate", "encrypt", "verify", "report", "retain"]
_OBJECTS = [
    "the quarterly report",
    "every production secret",
    "customer records",
    "the change request",
    "system logs",
    "the backup set",
    "access tokens",
    "the vendor contract",
    "incident tickets",
    "the audit trail",
    "laptop images",
    "database snapshots",
]
_WHEN = [
    "within 30 days",
    "before each release",
    "at least once a year",
    "after every incident",
    "on the first Monday of the month",
    "when a team member leaves",
    "before data leaves the region",
    "every 90 days",
]
_TAIL = ["", " unless an exception is approved", " and record the outcome", ", with a second reviewer"]


def handbook(megabytes: float, seed: int = 1) -> str:
    """A deterministic Markdown handbook of about ``megabytes`` MB."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    number = 0
    while size < megabytes * 1_000_000:
        number += 1
        paragraphs = []
        for _ in range(rng.randint(3, 8)):
            sentences = [
                f"{rng.choice(_WHO)} {rng.choice(_VERBS)} {rng.choice(_ACTS)} {rng.choice(_OBJECTS)} "
                f"{rng.choice(_WHEN)}{rng.choice(_TAIL)}."
                for _ in range(rng.randint(3, 7))
            ]
            paragraphs.append(" ".join(sentences))
        block = f"# {rng.choice(_TOPICS).title()} policy {number}\n\n" + "\n\n".join(paragraphs) + "\n\n"
        parts.append(block)
        size += len(block)
    return "".join(parts)


def ingest(megabytes: float, workdir: Path) -> dict[str, float | int]:
    """Add a ``megabytes`` MB handbook to a fresh knowledge base in a child process; its time and peak RSS."""
    doc = workdir / f"handbook-{megabytes:g}mb.md"
    doc.write_text(handbook(megabytes), encoding="utf-8")
    size_mb = doc.stat().st_size / 1e6
    out_path, err_path = workdir / "out.json", workdir / "err.txt"
    start = time.perf_counter()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli",
                "kb",
                "add",
                str(doc),
                "--kb",
                str(workdir / f"kb-{megabytes:g}"),
                "--json",
                "-q",
            ],
            cwd=ROOT,
            stdout=out,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS (ru_maxrss, KiB on Linux)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code != 0:
        raise RuntimeError(f"kb add of {megabytes} MB failed (rc {code}): {err_path.read_text()[-2000:]}")
    report = json.loads(out_path.read_text())
    peak_mb = usage.ru_maxrss / 1024
    return {
        "megabytes": round(size_mb, 2),
        "passages": int(report["chunks"]),
        "seconds": round(seconds, 1),
        "mb_per_s": round(size_mb / seconds, 4),
        "passages_per_s": round(report["chunks"] / seconds, 1),
        "peak_rss_mb": round(peak_mb, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--sizes", default="1,10,50", help="comma-separated sizes in MB")
    args = parser.parse_args(argv)
    sizes = [0.05] if args.quick else [float(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="coe-ingest-") as tmp:
        for size in sorted(sizes):
            row = ingest(size, Path(tmp))
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    fifty = next((r for r in rows if r["megabytes"] >= 49), None)
    verdict = (
        f"50 MB: {fifty['seconds']} s (goal < {GOAL_SECONDS_50MB} s), peak RSS {fifty['peak_rss_mb']} MB "
        f"(goal < {GOAL_RSS_MB} MB)."
        if fifty
        else "50 MB not run."
    )
    table = md_table(
        ["MB", "passages", "seconds", "MB/s", "passages/s", "peak RSS (MB)"],
        [
            (r["megabytes"], r["passages"], r["seconds"], r["mb_per_s"], r["passages_per_s"], r["peak_rss_mb"])
            for r in rows
        ],
    )
    write_results("ingest", {"sizes": sizes, "rows": rows, "verdict": verdict}, f"{verdict}\n\n{table}", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
