"""The graph's picture in docs/graph.mmd and in the README is the compiled graph's, drawn again."""

from __future__ import annotations

import re
from pathlib import Path

from graph.picture import mermaid

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "regenerate it: python -m graph.picture > docs/graph.mmd (and copy it into README.md's mermaid block)"


def test_docs_graph_matches_the_compiled_graph() -> None:
    drawn = mermaid()
    assert "execute_slots -.-> execute_slots" in drawn  # the loop node is drawn with its own edge
    assert (ROOT / "docs" / "graph.mmd").read_text(encoding="utf-8") == drawn, REGENERATE


def test_readme_shows_the_same_picture() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```mermaid\n(.*?)```", readme, re.S)
    assert match, "README.md has no mermaid block"
    assert match.group(1) == (ROOT / "docs" / "graph.mmd").read_text(encoding="utf-8"), REGENERATE


def test_the_picture_names_the_public_nodes() -> None:
    """Studio and the docs speak of these node names; the picture must show each one."""
    drawn = mermaid()
    public = ["guard", "scope", "answer_directly", "select_template", "adapt_template", "ask_plan_fit"]
    public += ["route_slots", "confirm_plan", "execute_slots", "ask_user", "check_parts", "assemble"]
    for node in public:
        assert re.search(rf"^\t{node}\({node}\)$", drawn, re.M), f"{node} missing from the picture"
