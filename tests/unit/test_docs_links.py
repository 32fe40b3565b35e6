"""Every link and file path in the README and docs/ points at something that exists.

Checked: relative Markdown links (and their ``#anchors``, against the target's headings) and inline code spans
that name a path inside the repository (``engine/slots/run.py``, ``bench/results/routing.md``). Code blocks are
examples, not references, and are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").rglob("*.md")])
GENERATED = ("config/expert_embeddings", "config/template_embeddings")
"""Paths the harness writes at run time (gitignored), named in the docs but absent from a checkout."""

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
REPO_PATH = re.compile(r"^[\w.\-]+(?:/[\w.\-]+)*/?(?::[\w.]+)?$")


def _without_code_blocks(text: str) -> str:
    """The text with fenced code blocks blanked (lines kept, so messages can name them)."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        marker = re.match(r"^\s*(`{3,}|~{3,})", line)
        if fence is None and marker:
            fence = marker.group(1)
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
                fence = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in _without_code_blocks(page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = _slug(match.group(1))
            count = seen.get(slug, 0)
            anchors.add(slug if count == 0 else f"{slug}-{count}")
            seen[slug] = count + 1
    return anchors


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_pages_exist() -> None:
    names = {_name(p) for p in PAGES}
    for required in ("README.md", "docs/usage.md", "docs/server.md", "docs/settings.md", "docs/memory.md"):
        assert required in names
    for required in ("docs/models.md", "docs/benchmarks.md", "docs/development.md", "docs/decisions.md"):
        assert required in names


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_point_at_files_and_headings(page: Path) -> None:
    text = _without_code_blocks(page.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z+.\-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{_name(page)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_paths_in_code_spans_exist(page: Path) -> None:
    top_level = {p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in {".git", ".venv"}}
    text = _without_code_blocks(page.read_text(encoding="utf-8"))
    missing = []
    for span in CODE_SPAN.findall(text):
        if "/" not in span or not REPO_PATH.match(span) or span.split("/", 1)[0] not in top_level:
            continue
        path = span.split(":", 1)[0].rstrip("/")
        if path.startswith(GENERATED):
            continue
        if not (ROOT / path).exists():
            missing.append(span)
    assert not missing, f"{_name(page)} names paths that do not exist: {missing}"


def test_generated_paths_are_gitignored() -> None:
    """The only paths the check lets pass unseen are the ones the harness generates and git ignores."""
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    for path in GENERATED:
        assert f"{path}/" in ignored


def test_the_checks_find_what_is_broken(tmp_path: Path) -> None:
    """A broken link, a missing heading and a missing path are each found; code blocks are not read."""
    page = (
        "# Title\n\n## A `coe` section\n\n[ok](#a-coe-section) [bad](#nowhere) [gone](missing.md)\n"
        "`state/passport.py` `state/nowhere.py`\n\n```\n[in code](missing-too.md) `state/also-missing.py`\n```\n"
    )
    text = _without_code_blocks(page)
    assert "missing-too" not in text and "also-missing" not in text
    assert LINK.findall(text) == ["#a-coe-section", "#nowhere", "missing.md"]
    path = tmp_path / "page.md"
    path.write_text(page, encoding="utf-8")
    assert _anchors(path) == {"title", "a-coe-section"}
    spans = [s for s in CODE_SPAN.findall(text) if "/" in s and REPO_PATH.match(s)]
    assert spans == ["state/passport.py", "state/nowhere.py"]
    assert [(ROOT / s).exists() for s in spans] == [True, False]
