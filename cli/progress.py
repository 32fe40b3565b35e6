"""Live progress of a run in the terminal: a table on a TTY, plain lines otherwise (logs, pipes, CI)."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

SYMBOLS = {
    "pending": "·",
    "dispatched": "…",
    "running": "▶",
    "retrying": "↻",
    "done": "✔",
    "failed": "✘",
    "blocked": "⊘",
}


class Progress:
    """Consumes the graph's custom stream events and shows them."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live_enabled = self.stream.isatty() if live is None else live
        self.rows: dict[str, dict[str, Any]] = {}
        self._start = time.perf_counter()
        self._live: Live | None = None

    def __enter__(self) -> Progress:
        if self.live_enabled:
            self._live = Live(self._table(), console=Console(file=self.stream), refresh_per_second=8, transient=False)
            self._live.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def event(self, event: dict[str, Any]) -> None:
        """Record one progress event and show it."""
        kind = str(event.get("event", ""))
        slot = str(event.get("slot", ""))
        row = self.rows.setdefault(slot, {"title": event.get("title", slot), "status": "pending", "attempt": 0})
        if "title" in event:
            row["title"] = event["title"]
        if "expert" in event:
            row["expert"] = event["expert"]
        detail = ""
        if kind == "slot_dispatched":
            row["status"] = "dispatched"
        elif kind == "slot_started":
            row["status"], row["attempt"] = "running", 1
        elif kind == "slot_retry":
            row["status"], row["attempt"] = "retrying", event.get("attempt", row["attempt"] + 1)
            detail = "; ".join(str(p) for p in event.get("problems", [])[:2])
        elif kind == "slot_done":
            row["status"], row["attempt"] = "done", event.get("attempts", row["attempt"])
        elif kind == "slot_failed":
            row["status"] = "failed"
            detail = str(event.get("error", ""))
        elif kind == "slot_evicted":
            row["status"] = "evicted, queued again"
            detail = str(event.get("error", ""))
        else:
            return
        if self._live is not None:
            self._live.update(self._table())
        else:
            elapsed = time.perf_counter() - self._start
            status = {"dispatched": "queued", "running": "started"}.get(row["status"], row["status"])
            line = f"[{elapsed:7.1f}s] {slot}: {status}"
            if kind == "slot_retry":
                line += f" (attempt {row['attempt']})"
            if detail:
                line += f" - {detail}"
            print(line, file=self.stream, flush=True)

    def _table(self) -> Table:
        table = Table(title=f"slots ({time.perf_counter() - self._start:.0f}s)", expand=False)
        for col in ("", "slot", "title", "expert", "attempt"):
            table.add_column(col)
        for slot, row in self.rows.items():
            table.add_row(
                SYMBOLS.get(row["status"], "?"),
                slot,
                str(row["title"])[:50],
                str(row.get("expert", "")),
                str(row["attempt"] or ""),
            )
        return table
