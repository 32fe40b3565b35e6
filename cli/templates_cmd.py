"""``coe templates``: validate, show and search the framework template library."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.exit_codes import EXIT_USAGE, user_errors
from cli.text import CoeTyper

if TYPE_CHECKING:
    from state.template import LibraryReport

templates_app = CoeTyper(
    help="The framework template library: config/framework_templates.",
    no_args_is_help=True,
    add_completion=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def library_dir() -> Path:
    """The library directory; imported lazily so that ``coe --help`` does not load NumPy and FAISS."""
    from experts.routing.templates import library_dir as configured

    return configured()


def _report(paths: list[Path] | None = None) -> LibraryReport:
    """The report of ``paths``, or of the whole library: its directory and the templates added experts bring."""
    from experts.catalog import load_catalog
    from state.template import load_library

    catalog = load_catalog()
    return load_library(paths if paths is not None else [library_dir(), *catalog.template_dirs], catalog.ids)


@templates_app.command("validate")
def validate(
    path: Annotated[
        Path | None, typer.Argument(help="A template file or directory (default: the whole library).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check templates: print every error and warning with its file, template and field. Exit 2 on errors."""
    target = path if path is not None else library_dir()
    with user_errors():
        if not target.exists():
            print(f"error: {target}: no such file or directory", file=sys.stderr)
            raise typer.Exit(EXIT_USAGE)
        report = _report([target] if path is not None else None)
    if as_json:
        payload = {
            "files": report.files,
            "templates": len(report.templates),
            "errors": [vars(i) for i in report.errors],
            "warnings": [vars(i) for i in report.warnings],
        }
        print(json.dumps(payload, indent=2))
    else:
        for issue in report.issues:
            print(issue)
        print(
            f"{len(report.files)} files, {len(report.templates)} valid templates, "
            f"{len(report.errors)} errors, {len(report.warnings)} warnings"
        )
    if report.errors:
        raise typer.Exit(EXIT_USAGE)


@templates_app.command("show")
def show(
    template_id: Annotated[str, typer.Argument(metavar="ID", help="A template id.")],
    as_json: JsonOpt = False,
) -> None:
    """Print one template: pattern, description, adaptable ranges and its slot DAG."""
    with user_errors():
        report = _report()
    template = report.templates.get(template_id)
    if template is None:
        known = ", ".join(sorted(report.templates)[:20])
        print(f"error: unknown template id {template_id!r}; some known: {known}", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    if as_json:
        print(json.dumps(template.model_dump(mode="json"), indent=2))
        return
    low, high = template.adaptable.slot_count
    print(f"{template.title} ({template.id}), family {template.family}, pattern: {template.pattern}")
    print(template.description.strip())
    print(f"adaptable: {low}-{high} slots" + (f"; subtypes: {', '.join(template.adaptable.subtypes)}" or ""))
    for slot in template.slots:
        deps = f" after {', '.join(slot.deps)}" if slot.deps else ""
        print(f"  {slot.id:<20} {slot.expert or '-':<20} {slot.title}{deps}")


@templates_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="A task, in your words.")],
    k: Annotated[int, typer.Option("--k", min=1, max=50, help="How many templates to show.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """Find the templates that fit a task best, by meaning, with their cosine similarity."""
    from experts.embedding import get_embedder
    from experts.routing.templates import AS_IS_SIMILARITY, load_or_build

    if not query.strip():
        raise typer.BadParameter("is empty; describe the task", param_hint="QUERY")
    with user_errors():
        report = _report()
        if not report.templates:
            print(f"error: {library_dir()}: no valid templates (run: coe templates validate)", file=sys.stderr)
            raise typer.Exit(EXIT_USAGE)
        index = load_or_build(report.templates, get_embedder())
        hits = index.search(query, k)
    rows = [
        {
            "id": h.template_id,
            "similarity": h.similarity,
            "as_is": h.similarity >= AS_IS_SIMILARITY,
            "title": report.templates[h.template_id].title,
            "pattern": report.templates[h.template_id].pattern,
        }
        for h in hits
    ]
    if as_json:
        print(json.dumps({"query": query, "k": k, "results": rows}, indent=2))
        return
    for row in rows:
        mark = "  (as is)" if row["as_is"] else ""
        print(f"{row['similarity']:.3f}  {row['id']:<36} {row['title']}{mark}")
