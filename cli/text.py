r"""Text in and out of the terminal: every text argument must be UTF-8, stored text is printed escaped.

Arguments: Python turns bytes of ``argv`` that are not UTF-8 into lone surrogates (``\udcff``), which fail
later, far from the argument (a ``UnicodeEncodeError`` in SQLite or on print, "the saved run cannot be read").
:class:`CoeCommand` refuses them when the command line is parsed: a usage error naming the argument, exit 2.
Paths are left alone (a file name may be any bytes).

Help: Typer renders help with rich markup, where ``[env: COE_BACKEND]`` is a style tag and vanishes; our help
texts are plain text, so :class:`CoeCommand` escapes them.

Output: a task, a fact or a document may hold escape sequences (ESC ``[2J`` clears the screen, OSC sets the
window title) or bidirectional overrides; :func:`escaped` and :func:`one_line` show them as ``\x1b`` or
``\u202e`` instead of replaying them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperCommand
from typer.models import CommandFunctionType

from state.io import first_surrogate

__all__ = ["CoeCommand", "CoeTyper", "escaped", "first_surrogate", "one_line"]

_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control characters (but newline and tab), DEL, C1 controls and the bidirectional controls."""
_UNSAFE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""The same, and every line break and tab: what one line of a listing may not hold."""


def _code(match: re.Match[str]) -> str:
    char = match.group()
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def escaped(text: str) -> str:
    """``text`` with control and bidirectional characters written as escapes; lines and tabs kept."""
    return _UNSAFE.sub(_code, text)


def one_line(text: str) -> str:
    """``text`` escaped for one line of a listing: line breaks and tabs written as escapes too."""
    return _UNSAFE_LINE.sub(_code, text)


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


class CoeCommand(TyperCommand):
    """A Typer command whose text arguments must be UTF-8 and whose help is shown as written (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            help_text = getattr(param, "help", None)
            if isinstance(help_text, str):
                param.help = escape(help_text)  # type: ignore[attr-defined]  # Option and TyperArgument have help

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: Typer's own click Context
        """Parse as click does, then refuse a text argument with bytes that are not UTF-8 (exit 2)."""
        rest = super().parse_args(ctx, args)
        for param in self.params:
            for text in _texts(ctx.params.get(param.name or "")):
                at = first_surrogate(text)
                if at is not None:
                    raise typer.BadParameter(
                        f"is not UTF-8 text (a byte that is not UTF-8 at character {at}); give it as UTF-8",
                        ctx=ctx,
                        param=param,  # type: ignore[arg-type]  # Typer's stubs name its own subclass
                    )
        return rest


class CoeTyper(typer.Typer):
    """``typer.Typer`` whose commands are :class:`CoeCommand`s."""

    def command(
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        """``Typer.command`` with ``cls`` defaulting to :class:`CoeCommand`."""
        return super().command(name, cls=cls or CoeCommand, **kwargs)
