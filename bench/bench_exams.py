"""Every shipped expert's exam on the installed models: score, time and the model each expert ran on.

Each expert's exam (``config/expert_scopes/exams/<id>.yaml``) is taken as ``coe experts examine ID`` takes it
(:func:`graph.examine.examine`: one slot per task, the expert named, the slot's own checks, then the exam's),
in a temporary ``COE_HOME`` so that the records do not bench the experts of the machine's own catalog.

``python -m bench.bench_exams [--experts a,b]`` writes ``bench/results/exams.{json,md}``; ``--quick`` examines
python_coder on the fake backend (a test of the bench, not a measurement).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.common import bench_parser, environment, md_table, write_results


def run(experts: list[str] | None, quick: bool) -> dict[str, Any]:
    """Examine each expert in a fresh COE_HOME; one row per expert."""
    from experts.catalog import load_catalog
    from graph.examine import examine

    rows = []
    with tempfile.TemporaryDirectory(prefix="coe-bench-exams-") as tmp, environment(COE_HOME=str(Path(tmp) / "home")):
        catalog = load_catalog()
        ids = experts or [i for i in catalog.ids if i in catalog.exams]
        context = {"backend": "fake"} if quick else None
        for expert_id in ids:
            record = examine(expert_id, context)
            print(f"{expert_id}: {record.line()}; {record.seconds:.0f} s", flush=True)
            rows.append(record.model_dump(mode="json"))
    return {"quick": quick, "rows": rows}


def summarise(result: dict[str, Any]) -> str:
    rows = result["rows"]
    table = md_table(
        ["expert", "model", "passed", "score", "bar", "verdict", "seconds", "s per task"],
        [
            [
                r["expert"],
                r["model"],
                f"{sum(t['passed'] for t in r['tasks'])}/{len(r['tasks'])}",
                f"{r['score']:.2f}",
                f"{r['bar']:.2f}",
                "passed" if r["passed"] else "FAILED",
                f"{r['seconds']:.0f}",
                f"{r['seconds'] / len(r['tasks']):.0f}",
            ]
            for r in rows
        ],
    )
    failures = []
    for r in rows:
        for t in r["tasks"]:
            if not t["passed"]:
                failures.append(f"- {r['expert']} / {t['id']} ({t['status']}): {'; '.join(t['failed'])[:300]}")
    passed = sum(r["passed"] for r in rows)
    return (
        f"Command: `python -m bench.bench_exams{' --quick' if result['quick'] else ''}`. {passed} of {len(rows)} "
        f"experts pass their exam.\n\n{table}\n\nFailed tasks:\n\n" + ("\n".join(failures) or "- none") + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--experts", default=None, help="comma-separated expert ids (default: every one with an exam)")
    parser.add_argument("--name", default="exams", help="results file name (default: exams)")
    args = parser.parse_args(argv)
    experts = ["python_coder"] if args.quick else (args.experts.split(",") if args.experts else None)
    result = run(experts, args.quick)
    json_path, md_path = write_results(
        args.name, result, f"# Expert exams on the installed models\n\n{summarise(result)}", args.out
    )
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
