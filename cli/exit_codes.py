"""Exit codes and the translation of our exceptions into one clear line on stderr."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from state.errors import CoeError, UserError

EXIT_OK, EXIT_RUN, EXIT_USAGE, EXIT_WAITING, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn user errors into one clear line on stderr and exit code 2; run failures into exit code 1."""
    try:
        yield
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE) from None
    except CoeError as exc:
        print(f"run failed: {exc}", file=sys.stderr)
        raise typer.Exit(EXIT_RUN) from None
