"""Adding at scale: passages embedded in batches through a staging file, progress, and an add that resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.main import app
from experts.embedding import get_embedder
from experts.knowledge import IngestProgress, add_documents, load_kb, split_document
from experts.knowledge import store as kb_store

runner = CliRunner()


def _document(path: Path, paragraphs: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    words = ["backup", "tokens", "rotate", "audit", "region", "owner", "review", "incident", "archive", "policy"]
    body = []
    for i in range(paragraphs):
        picked = rng.choice(words, size=60)
        body.append(f"## Rule {i}\n\n" + " ".join(picked) + f" number {i}.")
    path.write_text("# Handbook\n\n" + "\n\n".join(body) + "\n", encoding="utf-8")
    return path


class Interrupting:
    """The real embedder, stopped (as by Ctrl+C) on its ``after``-th call."""

    def __init__(self, after: int) -> None:
        self.inner = get_embedder()
        self.model_id, self.dim = self.inner.model_id, self.inner.dim
        self.calls, self.after = 0, after

    def encode(self, texts: list[str]) -> Any:
        self.calls += 1
        if self.calls == self.after:
            raise KeyboardInterrupt
        return self.inner.encode(texts)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(kb_store, "EMBED_BATCH", 8)
    return 8


def test_an_interrupted_add_keeps_what_was_embedded_and_resumes(tmp_path: Path, small_batches: int) -> None:
    first = _document(tmp_path / "first.md", 20, seed=1)
    second = _document(tmp_path / "second.md", 60, seed=2)
    kb_path = tmp_path / "kb"
    passages = len(split_document(second)[1])
    stopped = Interrupting(after=len(split_document(first)[1]) // small_batches + 4)
    with pytest.raises(KeyboardInterrupt):
        add_documents([first, second], kb_path, embedder=stopped)  # type: ignore[arg-type]
    kept = load_kb(kb_path)
    assert {c.source for c in kept.chunks} == {str(first.resolve())}  # the finished file is in
    staged = list((kb_path / "staging").glob("*.f32"))
    assert len(staged) == 1 and 0 < staged[0].stat().st_size < passages * kept.vectors.shape[1] * 4
    seen: list[IngestProgress] = []
    again = add_documents([first, second], kb_path, progress=seen.append)
    assert again.unchanged == [str(first.resolve())] and again.added == [str(second.resolve())]
    assert 0 < again.resumed < passages and again.chunks == passages
    assert seen[0].passages_done == again.resumed and seen[-1].passages_done == seen[-1].passages_total == passages
    kb = load_kb(kb_path)
    assert len(kb.chunks) == len({c.id for c in kb.chunks}) == kept.vectors.shape[0] + passages  # no duplicates
    fresh = get_embedder().encode([c.embed_text() for c in kb.chunks[-3:]])
    assert np.allclose(kb.vectors[-3:], fresh, atol=1e-5)  # resumed rows line up with their passages
    assert not list((kb_path / "staging").glob("*.f32"))  # staging is cleared once merged


def test_a_changed_file_replaces_its_passages(tmp_path: Path) -> None:
    doc = _document(tmp_path / "doc.md", 5, seed=3)
    kb_path = tmp_path / "kb"
    add_documents([doc], kb_path)
    _document(doc, 9, seed=4)
    report = add_documents([doc], kb_path)
    kb = load_kb(kb_path)
    assert report.updated == [str(doc.resolve())]
    assert len(kb.chunks) == len(split_document(doc)[1]) == kb.vectors.shape[0]


def test_kb_add_reports_progress_and_ctrl_c_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_batches: int
) -> None:
    doc = _document(tmp_path / "doc.md", 30, seed=5)
    kb_path = tmp_path / "kb"
    done = runner.invoke(app, ["kb", "add", str(doc), "--kb", str(kb_path)])
    assert done.exit_code == 0, done.output
    assert "embedded" in done.stderr and "passages indexed" in done.stdout  # not a TTY: a line of progress
    quiet = runner.invoke(app, ["kb", "add", str(_document(tmp_path / "b.md", 3)), "--kb", str(kb_path), "-q"])
    assert quiet.exit_code == 0 and "embedded" not in quiet.stderr
    monkeypatch.setattr(kb_store, "get_embedder", lambda: Interrupting(after=2))
    stopped = runner.invoke(app, ["kb", "add", str(_document(tmp_path / "c.md", 30, seed=6)), "--kb", str(kb_path)])
    assert stopped.exit_code == 130 and "run the same command again" in stopped.stderr
