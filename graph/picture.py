"""The graph's picture: Mermaid text drawn from the compiled graph, kept in ``docs/graph.mmd``.

Drawn by LangGraph's public ``get_graph().draw_mermaid()``, so the picture is the graph that runs, not a
drawing of it; ``tests/unit/test_graph_picture.py`` fails when the file and the README's copy fall behind.
Regenerate with ``python -m graph.picture > docs/graph.mmd`` (and paste it into the README's mermaid block).
"""

from __future__ import annotations

import sys

from graph.builder import build_graph


def mermaid() -> str:
    """Return the compiled graph (no checkpointer) as Mermaid flowchart text, ending with a newline."""
    text = build_graph().get_graph().draw_mermaid()
    return text if text.endswith("\n") else text + "\n"


if __name__ == "__main__":
    sys.stdout.write(mermaid())
