"""The completion round's reading on documents the real models already wrote: which gaps it would find.

No model runs: the saved documents of earlier benchmarks (multi-part runs in ``bench/results/multipart_*.json``,
the review set's harness documents in ``bench/results/review_head_documents/``) are split back into their parts (a
top-level ``## `` heading per part; the document's own closing sections left out; a part whose caveat says it did
not pass its checks read as failing them) and read with :func:`engine.completion.read_gaps`, as ``nodes.complete``
reads a finished run. Each gap is listed with the document, so a reader can judge it against the document: the
share of gaps that are real is the reading's precision on work it was not written from (the rules were written
from the issue's library-API example; the todo-api document was read while writing them).

Run: ``python -m bench.bench_gaps`` (seconds); writes ``bench/results/gaps_saved.md`` and ``.json``. ``--quick``
reads the first six documents.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from bench.common import bench_parser, md_table, write_results
from engine.agreement import Part
from engine.completion import read_gaps
from nodes.assemble import FIGURES_TITLE, MISSING_TITLE
from state.quality import CheckResult, SlotQuality
from state.result import SlotResult

RESULTS = Path(__file__).parent / "results"
DATA = Path(__file__).parent / "data"
CLOSING = {"Warnings", "Unresolved", "Assist sources", FIGURES_TITLE, MISSING_TITLE, "Ledger"}
_PART = re.compile(r"^## (.+)$", re.M)


def parts_of(document: str) -> list[Part]:
    """The parts of an assembled document (its top-level sections before the closing ones)."""
    heads = list(_PART.finditer(document))
    parts = []
    for n, head in enumerate(heads):
        title = head.group(1).strip()
        if title in CLOSING:
            continue
        end = heads[n + 1].start() if n + 1 < len(heads) else len(document)
        text = document[head.end() : end].strip()
        caveat = "did not pass its checks" in text  # not "Not fully checked" (a package the sandbox lacks)
        check = CheckResult(name="caveat", passed=not caveat, detail="the part carries a caveat" if caveat else "")
        quality = SlotQuality(deliverable="prose", checks=[check])
        parts.append(
            Part(f"p{n + 1}", title, SlotResult(slot_id=f"p{n + 1}", expert="saved", raw=text, quality=quality))
        )
    return parts


def documents() -> list[tuple[str, str, str]]:
    """``(source, task, document)`` of every saved document read here."""
    tasks = {i["id"]: i["task"] for i in yaml.safe_load((DATA / "multipart_tasks.yaml").read_text())["items"]}
    out = []
    for path in sorted(RESULTS.glob("multipart_*.json")):
        for row in json.loads(path.read_text())["rows"]:
            if row.get("document") and row["id"] in tasks:
                out.append((f"{path.stem}/{row['id']}", tasks[row["id"]], row["document"]))
    review = yaml.safe_load((DATA / "review_set.yaml").read_text())
    for item in review["items"] if isinstance(review, dict) else review:
        doc = RESULTS / "review_head_documents" / f"{item['id']}.harness.md"
        if doc.exists():
            out.append((f"review_head/{item['id']}", item["task"], doc.read_text()))
    return out


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    rows: list[dict[str, Any]] = []
    for source, task, document in documents()[: 6 if args.quick else None]:
        parts = parts_of(document)
        gaps = read_gaps(task, parts, several=len(parts) > 1)
        rows.append({"document": source, "parts": len(parts), "gaps": [g.model_dump() for g in gaps]})
        print(f"{source}: {len(parts)} parts, {len(gaps)} gap(s)")
    kinds: dict[str, int] = {}
    for row in rows:
        for gap in row["gaps"]:
            kinds[gap["kind"]] = kinds.get(gap["kind"], 0) + 1
    with_gaps = [r for r in rows if r["gaps"]]
    table = md_table(
        ["document", "parts", "gaps"],
        [[r["document"], r["parts"], "<br>".join(f"{g['kind']}: {g['detail']}" for g in r["gaps"])] for r in with_gaps],
    )
    counted = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"
    markdown = (
        "Command: `python -m bench.bench_gaps` (no model). "
        f"Documents read: {len(rows)} ({sum(r['parts'] > 1 for r in rows)} of several parts); with a gap: "
        f"{len(with_gaps)}; gaps by kind: {counted}. Documents without a gap are not listed.\n\n{table}\n"
    )
    payload = {"quick": args.quick, "documents": len(rows), "with_gaps": len(with_gaps), "kinds": kinds, "rows": rows}
    write_results("gaps_saved", payload, markdown, directory=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
