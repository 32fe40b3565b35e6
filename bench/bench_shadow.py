"""A second version of one expert, shadow-run against the first, and the promotion decision it leads to.

In a temporary ``COE_HOME`` with its own SQLite checkpoints: the review set's tasks of one expert (default
``technical_writer``) run as that expert's slots on the current version (the shipped scope, a persona over the
0.5B base model); a candidate version 2 (the same scope bound to the 1.5B code model) is added; both versions
take the expert's exam; the candidate answers the saved slots again in shadow (:func:`graph.shadow.shadow`); and
``promote`` is asked to make it current, without ``force``: the outcome (promoted, or refused and why) is the
decision the evidence leads to.

``python -m bench.bench_shadow [--expert ID]`` writes ``bench/results/shadow.{json,md}``; ``--quick`` runs one
task on the fake backend (a test of the bench, not a measurement).
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from bench.common import bench_parser, environment, md_table, write_results

REVIEW = Path(__file__).resolve().parent / "data" / "review_set.yaml"
CANDIDATE_MODEL = "qwen2.5-coder-1.5b"


def run(expert: str, quick: bool) -> dict[str, Any]:
    """The whole scenario in a fresh COE_HOME; the environment is restored after."""
    with tempfile.TemporaryDirectory(prefix="coe-bench-shadow-") as tmp:
        home, runs = str(Path(tmp) / "home"), f"sqlite://{Path(tmp) / 'runs.sqlite'}"
        with environment(COE_HOME=home, COE_CHECKPOINT_URL=runs):
            return _scenario(expert, Path(tmp), quick)


def _scenario(expert: str, tmp: Path, quick: bool) -> dict[str, Any]:
    from experts.catalog import load_catalog
    from experts.catalog.versions import add_candidate, promote
    from graph.examine import examine
    from graph.shadow import shadow
    from state.errors import ConfigError

    context = {"backend": "fake"} if quick else None
    tasks = [i for i in yaml.safe_load(REVIEW.read_text(encoding="utf-8"))["items"] if i["expert"] == expert]
    tasks = tasks[:1] if quick else tasks
    served = [_serve(expert, item, context) for item in tasks]

    scope = yaml.safe_load(load_catalog().origin(expert).path.read_text(encoding="utf-8"))
    scope["version"] = "2"
    scope["model"] = {"binding": "true", "model": CANDIDATE_MODEL, "fallback": "base"}
    directory = tmp / "candidate" / expert
    directory.mkdir(parents=True)
    (directory / "scope.yaml").write_text(yaml.safe_dump(scope, sort_keys=False), encoding="utf-8")
    add_candidate(directory)

    current = examine(expert, context)
    candidate = examine(expert, context, version="2")
    comparisons = shadow(expert, "2", slots=len(tasks), context=context)
    try:
        decision = {"promoted": True, **promote(expert, "2")}
    except ConfigError as exc:
        decision = {"promoted": False, "why": str(exc)}
    return {
        "quick": quick,
        "expert": expert,
        "candidate_model": CANDIDATE_MODEL,
        "served": served,
        "exams": {"1": current.model_dump(mode="json"), "2": candidate.model_dump(mode="json")},
        "shadow": [asdict(c) for c in comparisons],
        "decision": decision,
    }


def _serve(expert: str, item: dict[str, Any], context: dict[str, Any] | None) -> dict[str, Any]:
    """Run one review-set task as one slot of ``expert`` (current version) and keep it in the checkpoints."""
    from graph import open_checkpointer
    from graph.one_slot import run_one_slot, scratch_graph

    slot = {"id": "answer", "title": "Answer", "description": item["task"], "expert": expert}
    with open_checkpointer() as saver:
        state, seconds = run_one_slot(scratch_graph(saver), item["task"], slot, item["id"], context=context)
    quality = state.results["answer"].quality if "answer" in state.results else None
    return {
        "id": item["id"],
        "status": state.status.value,
        "seconds": seconds,
        "checks_passed": bool(quality and quality.passed),
        "model": state.routing["answer"].model or "base model",
    }


def summarise(result: dict[str, Any]) -> str:
    exams = result["exams"]
    exam_rows = [
        [
            f"v{v}",
            r["model"],
            f"{sum(t['passed'] for t in r['tasks'])}/{len(r['tasks'])}",
            f"{r['score']:.2f}",
            f"{r['seconds']:.0f}",
        ]
        for v, r in exams.items()
    ]
    shadow_rows = [
        [
            c["slot_id"],
            c["thread_id"][:20],
            f"{c['served_score']:.1f}",
            f"{c['candidate_score']:.1f}",
            c["winner"],
            f"{c['seconds']:.0f}",
        ]
        for c in result["shadow"]
    ]
    served = ", ".join(f"{s['id']} {s['status']} {s['seconds']:.0f} s" for s in result["served"])
    decision = result["decision"]
    verdict = (
        f"promoted: v{decision['from']} -> v{decision['to']}; evidence {decision['evidence']}"
        if decision["promoted"]
        else f"not promoted: {decision['why']}"
    )
    return (
        f"Command: `python -m bench.bench_shadow{' --quick' if result['quick'] else ''}`. Expert "
        f"{result['expert']}: v1 the shipped scope, v2 the same scope on {result['candidate_model']}.\n\n"
        f"Served on v1 (the review set's tasks of the expert): {served}.\n\n"
        f"Exams:\n\n{md_table(['version', 'model', 'passed', 'score', 'seconds'], exam_rows)}\n\n"
        f"Shadow (v2 answering v1's saved slots; scores are the slot checks' best-of-N scores):\n\n"
        f"{md_table(['slot', 'thread', 'served', 'candidate', 'winner', 'seconds'], shadow_rows)}\n\n"
        f"Decision: {verdict}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--expert", default="technical_writer", help="the expert whose second version is tried")
    args = parser.parse_args(argv)
    result = run(args.expert, args.quick)
    json_path, md_path = write_results(
        "shadow", result, f"# A second expert version in shadow\n\n{summarise(result)}", args.out
    )
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
