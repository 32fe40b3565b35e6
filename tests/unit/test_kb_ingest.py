"""Adding at scale: passages embedded in batches through a staging file, progress, and an add that resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.main import app
from experts.embedding import get_embedder
from experts.knowledge import IngestProgress, add_documents, load_kb, remove_documents, split_document
from experts.knowledge import ingest as kb_ingest
from experts.knowledge import store as kb_store
from experts.knowledge.ingest import CHUNK_CHARS

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("keyword_embedder")  # about batches, staging and resuming, not similarity


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


def test_vectors_are_merged_and_removed_block_by_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kb_store, "VECTOR_BLOCK", 5)
    first, second = _document(tmp_path / "a.md", 8, seed=7), _document(tmp_path / "b.md", 12, seed=8)
    kb_path = tmp_path / "kb"
    add_documents([first], kb_path)
    add_documents([second], kb_path)
    _document(first, 10, seed=9)  # changed: its rows leave the middle, the other file's are picked out
    add_documents([first], kb_path)
    embedder = get_embedder()
    kb = load_kb(kb_path)
    assert not kb.vectors.flags.owndata  # vectors.npy is mapped, not read into memory
    expected = len(split_document(second)[1]) + len(split_document(first)[1])
    assert expected > 3 * 5  # several blocks from each side
    assert kb.vectors.shape[0] == kb.faiss_index.ntotal == len(kb.chunks) == expected
    assert [c.source for c in kb.chunks[:2]] == [str(second.resolve())] * 2  # kept rows first, then the new file
    assert np.allclose(kb.vectors, embedder.encode([c.embed_text() for c in kb.chunks]), atol=1e-5)
    assert kb.search(kb.chunks[17].embed_text(), 1)[0].chunk.id == kb.chunks[17].id
    remove_documents([second], kb_path)
    kb = load_kb(kb_path)
    assert {c.source for c in kb.chunks} == {str(first.resolve())} and kb.faiss_index.ntotal == len(kb.chunks)
    assert np.allclose(kb.vectors, embedder.encode([c.embed_text() for c in kb.chunks]), atol=1e-5)


def test_a_long_text_goes_to_the_splitter_in_windows_with_true_line_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kb_ingest, "WINDOW", 3000)
    paragraphs = [f"Paragraph {i}: " + " ".join(f"word{i}x{j}" for j in range(8 + i % 30)) for i in range(120)]
    paragraphs.insert(60, "y" * 7000)  # no line end at all: cut where the window ends
    doc = tmp_path / "long.txt"
    doc.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    lines = doc.read_text(encoding="utf-8").split("\n")
    _, chunks = split_document(doc)
    for chunk in chunks:
        assert len(chunk.text) <= CHUNK_CHARS
        assert chunk.line_start is not None and chunk.line_end is not None
        assert chunk.text in "\n".join(lines[chunk.line_start - 1 : chunk.line_end])
    joined = "\n".join(c.text for c in chunks)
    monkeypatch.setattr(kb_ingest, "WINDOW", 10**9)
    whole = "\n".join(c.text for c in split_document(doc)[1])
    kept = [p for p in paragraphs if p in whole]
    assert len(kept) > 100 and all(p in joined for p in kept)  # a paragraph whole in one passage stays so at a cut
    assert sum(c.text.count("y") for c in chunks) >= 7000
