"""Fault matrix: bad input, broken files and interrupted runs, over the CLI and the embedded API.

Run: ``python -m bench.bench_faults``. Writes ``bench/results/faults.{json,md}``. ``--quick``: one case of each
kind (a test of the benchmark, not a measurement). ``--case ID``: only that case (repeatable).

The cases are tests, defined there and run by pytest as well: ``tests/integration/test_faults_cli.py`` (over the
``coe`` command) and ``tests/unit/test_faults_api.py`` (the embedded API), on the lab of ``tests/faults_lab.py``.
This benchmark runs every case and writes the matrix's table and totals. For each case the table gives the
exit code (CLI) or the exception (API), the first line of the message, and the state afterwards: whether the
saved runs can still be listed, and whether the case's thread holds what it should (nothing for a refused input;
a finished run for a good one; a resumable run, finished by a resume with no slot run twice, for an interrupted
one). A case *holds* when it is refused with exit code 2 and a message (or the matching user error over the
API), or runs correctly, and nothing is lost. Goal: every case holds.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from bench.common import bench_parser, md_table, write_results
from tests.faults_lab import Lab, Outcome
from tests.integration.test_faults_cli import CLI_CASES
from tests.unit.test_faults_api import API_CASES


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--case", action="append", default=[], help="run only this case (repeatable)")
    args = parser.parse_args(argv)
    cases = CLI_CASES + API_CASES
    if args.case:
        cases = [c for c in cases if c.id in args.case]
    if args.quick:
        seen: set[str] = set()
        cases = [c for c in cases if not (c.kind in seen or seen.add(c.kind))][:4]
    for case in cases:
        root = Path(tempfile.mkdtemp(prefix=f"coe-fault-{case.id}-"))
        try:
            case.result = case.run(Lab(root))
        except Exception as exc:  # noqa: BLE001 - a case whose set-up or checks broke is reported, not hidden
            case.result = Outcome("setup failed", f"{type(exc).__name__}: {exc}"[:200], "", False)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(
            f"{case.id:<20} {'held' if case.result.held else 'FAILED'}  {case.result.code}  {case.result.message[:90]}",
            file=sys.stderr,
        )
    held = sum(c.result.held for c in cases if c.result)
    rows = [
        (
            c.id,
            c.surface,
            c.what,
            c.result.code,
            c.result.message.replace("|", "\\|")[:140],
            c.result.state.replace("|", "\\|"),
            "held" if c.result.held else "**FAILED**",
        )
        for c in cases
        if c.result
    ]
    payload = {
        "cases": len(cases),
        "held": held,
        "by_surface": {s: sum(1 for c in cases if c.surface == s) for s in ("cli", "api")},
        "results": [
            {"id": c.id, "surface": c.surface, "kind": c.kind, "what": c.what, **vars(c.result)}
            for c in cases
            if c.result
        ],
    }
    md = [
        f"{held} of {len(cases)} cases held ({payload['by_surface']['cli']} CLI, "
        f"{payload['by_surface']['api']} embedded API); goal: all.",
        "",
        md_table(["case", "surface", "what", "exit / error", "message", "state afterwards", "verdict"], rows),
    ]
    write_results("faults", payload, "\n".join(md), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
