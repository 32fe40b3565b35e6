"""``coe kb``: the local knowledge base that ``{{ASSIST:lookup:...}}`` requests are answered from."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.exit_codes import EXIT_INTERRUPTED, EXIT_USAGE, user_errors
from cli.text import CoeTyper, one_line

if TYPE_CHECKING:
    from experts.knowledge import IngestProgress

kb_app = CoeTyper(
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


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[IngestProgress], None] | None]:
    """A progress bar on stderr when it is a terminal; a line every 15 s otherwise (none with ``quiet``)."""
    if quiet:
        yield None
        return
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("passages", total=None)

            def show(p: IngestProgress) -> None:
                what = f"file {min(p.files_done + 1, p.files_total)}/{p.files_total}, {p.bytes_total / 1e6:.1f} MB"
                bar.update(task, total=p.passages_total, completed=p.passages_done, description=what)

            yield show
        return
    last = [0.0]

    def line(p: IngestProgress) -> None:
        now = time.monotonic()
        if now - last[0] >= 15 or p.passages_done == p.passages_total:
            last[0] = now
            print(
                f"embedded {p.passages_done}/{p.passages_total} passages ({p.files_done}/{p.files_total} files)",
                file=sys.stderr,
            )

    yield line


@kb_app.command("add")
def add(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (.md, .markdown, .txt, .rst, .pdf).")],
    kb: KbOpt = None,
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
) -> None:
    """Index documents: each is cut into passages that keep their page, section and line range.

    Progress goes to stderr. Ctrl+C keeps what was done: the files finished are in the knowledge base, and the
    same command run again goes on where it stopped.
    """
    from experts.knowledge import add_documents

    with user_errors():
        directory = _dir(kb)
        try:
            with _progress(quiet or as_json) as show:
                report = add_documents(paths, directory, progress=show)
        except KeyboardInterrupt:
            print(
                f"\ninterrupted; what was embedded is kept in {directory}: run the same command again to go on",
                file=sys.stderr,
            )
            raise typer.Exit(EXIT_INTERRUPTED) from None
    if as_json:
        payload = {
            "kb": str(directory),
            "added": report.added,
            "updated": report.updated,
            "unchanged": report.unchanged,
            "skipped": report.skipped,
            "chunks": report.chunks,
            "total_chunks": report.total_chunks,
            "resumed": report.resumed,
            "seconds": round(report.seconds, 3),
        }
        print(json.dumps(payload, indent=2))
    else:
        for label, items in (("added", report.added), ("updated", report.updated), ("unchanged", report.unchanged)):
            for item in items:
                print(f"{label:<9} {item}")
        for item in report.skipped:
            print(f"skipped   {item}", file=sys.stderr)
        again = f" ({report.resumed} embedded by an earlier, interrupted add)" if report.resumed else ""
        print(f"{report.chunks} passages indexed{again}; {report.total_chunks} in {directory}")
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
        print(f"{row['score']:.3f}  {one_line(str(row['source']))}  ({one_line(', '.join(where))})")
        snippet = one_line(" ".join(str(row["text"]).split()))
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
