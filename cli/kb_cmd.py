"""``coe kb``: the local knowledge base that ``{{ASSIST:lookup:...}}`` requests are answered from."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.errors import EXIT_USAGE, user_errors

kb_app = typer.Typer(
    help="The knowledge base for lookup assists: add text, Markdown and PDF files, search it.",
    no_args_is_help=True,
    add_completion=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
KbOpt = Annotated[
    Path | None,
    typer.Option("--kb", help="Knowledge base directory [env: COE_KB; default: kb in the user data directory]."),
]


def _dir(kb: Path | None) -> Path:
    from state.paths import kb_dir

    return kb_dir(kb)


@kb_app.command("add")
def add(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (.md, .markdown, .txt, .rst, .pdf).")],
    kb: KbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Index documents: each is cut into passages that keep their page, section and line range."""
    from experts.knowledge import add_documents

    with user_errors():
        directory = _dir(kb)
        report = add_documents(paths, directory)
    if as_json:
        payload = {
            "kb": str(directory),
            "added": report.added,
            "updated": report.updated,
            "unchanged": report.unchanged,
            "skipped": report.skipped,
            "chunks": report.chunks,
            "total_chunks": report.total_chunks,
            "seconds": round(report.seconds, 3),
        }
        print(json.dumps(payload, indent=2))
    else:
        for label, items in (("added", report.added), ("updated", report.updated), ("unchanged", report.unchanged)):
            for item in items:
                print(f"{label:<9} {item}")
        for item in report.skipped:
            print(f"skipped   {item}", file=sys.stderr)
        print(f"{report.chunks} passages indexed; {report.total_chunks} in {directory}")
    if not (report.added or report.updated or report.unchanged):
        raise typer.Exit(EXIT_USAGE)


@kb_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What you are looking for, in your words.")],
    k: Annotated[int, typer.Option("--k", min=1, max=50, help="How many passages to show.")] = 5,
    kb: KbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the passages most similar to QUERY with their source, location and cosine similarity."""
    from experts.knowledge import load_kb

    if not query.strip():
        raise typer.BadParameter("is empty; say what you are looking for", param_hint="QUERY")
    with user_errors():
        directory = _dir(kb)
        base = load_kb(directory)
        if base.empty:
            print(f"error: the knowledge base {directory} is empty; add documents: coe kb add PATH", file=sys.stderr)
            raise typer.Exit(EXIT_USAGE)
        hits = base.search(query, k)
    rows = [
        {
            "score": h.score,
            "source": h.chunk.source,
            "page": h.chunk.page,
            "section": h.chunk.section,
            "line_start": h.chunk.line_start,
            "line_end": h.chunk.line_end,
            "text": h.chunk.text,
        }
        for h in hits
    ]
    if as_json:
        print(json.dumps({"query": query, "kb": str(directory), "k": k, "results": rows}, indent=2))
        return
    for row in rows:
        where = [f"page {row['page']}"] if row["page"] is not None else []
        if row["section"]:
            where.append(f"§{row['section']}")
        if row["line_start"] is not None:
            where.append(f"lines {row['line_start']}-{row['line_end']}")
        print(f"{row['score']:.3f}  {row['source']}  ({', '.join(where)})")
        snippet = " ".join(str(row["text"]).split())
        print(f"       {snippet[:200]}{'...' if len(snippet) > 200 else ''}")


@kb_app.command("list")
def list_sources(kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """List the documents in the knowledge base."""
    from experts.knowledge import kb_sources

    with user_errors():
        directory = _dir(kb)
        sources = kb_sources(directory)
    if as_json:
        print(json.dumps({"kb": str(directory), "sources": [vars(s) for s in sources]}, indent=2))
        return
    for s in sources:
        print(f"{s.chunks:>5} passages  {s.kind:<8}  {s.path}")
    print(f"{len(sources)} documents, {sum(s.chunks for s in sources)} passages in {directory}")


@kb_app.command("remove")
def remove(
    paths: Annotated[list[Path], typer.Argument(help="Documents (or directories) to take out.")],
    kb: KbOpt = None,
) -> None:
    """Remove documents from the knowledge base."""
    from experts.knowledge import remove_documents

    with user_errors():
        gone = remove_documents(paths, _dir(kb))
    for g in gone:
        print(f"removed {g}")
    if not gone:
        print("error: none of these documents is in the knowledge base", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
