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

    def __init__(self, stream: TextIO | None = None, live: bool | None = None, tokens: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.tokens = tokens
        """Print the tokens as they come (``--stream``) instead of the table."""
        self.live_enabled = (self.stream.isatty() if live is None else live) and not tokens
        self.rows: dict[str, dict[str, Any]] = {}
        self._start = time.perf_counter()
        self._live: Live | None = None
        self._writer: tuple[object, object] | None = None
        self._drawn = 0.0

    @property
    def wants_tokens(self) -> bool:
        """Whether tokens are shown (the live table's last line, or ``--stream``)."""
        return self.tokens or self.live_enabled

    def token(self, meta: dict[str, Any], text: str) -> None:
        """One piece of an expert's answer as it is written (``meta``: the generation's stream metadata)."""
        slot = str(meta.get("slot_id", ""))
        if self.tokens:
            writer = (slot, meta.get("candidate"))
            if writer != self._writer:
                self._writer = writer
                who = [str(meta.get("candidate", "c1")), str(meta.get("expert", "")), str(meta.get("model", ""))]
                label = f"{slot} ({', '.join(w for w in who if w)})"
                print(f"\n--- {label} ---", file=self.stream, flush=True)
            print(text, end="", file=self.stream, flush=True)
            return
        row = self.rows.setdefault(slot, {"title": slot, "status": "running", "attempt": 1})
        written = (row.get("written", "") + text)[-400:]
        row["written"] = written
        lines = [ln.strip() for ln in written.splitlines() if ln.strip()]
        row["line"] = lines[-1] if lines else ""
        now = time.perf_counter()
        if self._live is not None and now - self._drawn > 0.1:  # the table is redrawn at most ten times a second
            self._drawn = now
            self._live.update(self._table())

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
        if kind == "figures_computed":  # the task's figures, before any part: a line of its own, not a slot's row
            elapsed = time.perf_counter() - self._start
            print(f"[{elapsed:7.1f}s] figures: {event.get('note', '')}", file=self.stream, flush=True)
            return
        if kind == "completion_round":  # the document read against the task once its parts are written
            if event.get("decision") == "nothing to do":
                return
            elapsed = time.perf_counter() - self._start
            actions = "; ".join(str(a) for a in event.get("actions", []))
            line = f"[{elapsed:7.1f}s] completion round: {event.get('decision', '')}"
            if actions:
                line += f" - {actions} (about {event.get('estimate_s', 0)} s)"
            print(line, file=self.stream, flush=True)
            return
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
            row["status"], row["attempt"], row["written"], row["line"] = "running", 1, "", ""
        elif kind == "slot_retry":
            row["status"], row["attempt"] = "retrying", event.get("attempt", row["attempt"] + 1)
            row["written"] = row["line"] = ""
            detail = "; ".join(str(p) for p in event.get("problems", [])[:2])
            if detail and event.get("candidate"):
                detail = f"{event['candidate']}: {detail}"  # the candidate drawn last, why one more is drawn
        elif kind == "slot_calculated":  # the task's result computed by a program, which checks every candidate
            detail = str(event.get("note", ""))
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
        elif not self.tokens:
            elapsed = time.perf_counter() - self._start
            status = {"dispatched": "queued", "running": "started"}.get(row["status"], row["status"])
            if kind == "slot_calculated":  # a second program votes when the answer and the first disagree
                status = "calculated again" if event.get("again") else "calculated"
            line = f"[{elapsed:7.1f}s] {slot}: {status}"
            if kind == "slot_retry":
                line += f" (attempt {row['attempt']})"
            if detail:
                line += f" - {detail}"
            print(line, file=self.stream, flush=True)

    def _table(self) -> Table:
        table = Table(title=f"slots ({time.perf_counter() - self._start:.0f}s)", expand=False)
        for col in ("", "slot", "title", "expert", "attempt", "writing"):
            table.add_column(col)
        for slot, row in self.rows.items():
            writing = row.get("line", "") if row["status"] in ("running", "retrying") else ""
            table.add_row(
                SYMBOLS.get(row["status"], "?"),
                slot,
                str(row["title"])[:50],
                str(row.get("expert", "")),
                str(row["attempt"] or ""),
                writing[-60:],
            )
        return table
