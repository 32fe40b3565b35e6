"""The knowledge base: cutting documents with their locations, FAISS search, updates, and `coe kb`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.main import app
from experts.knowledge import add_documents, kb_sources, load_kb, remove_documents, split_document
from state.errors import UserError
from state.paths import kb_dir
from tests.conftest import FIXTURES

KB_DOCS = FIXTURES / "kb"
runner = CliRunner()


def test_markdown_passages_keep_section_and_line_range() -> None:
    kind, chunks = split_document(KB_DOCS / "security_policy.md")
    assert kind == "markdown"
    lines = (KB_DOCS / "security_policy.md").read_text().splitlines()
    enc = [c for c in chunks if c.section and c.section.endswith("> Encryption")]
    assert enc, [c.section for c in chunks]
    for c in chunks:
        assert c.line_start is not None and c.line_end is not None
        # the passage's first and last lines are where it says they are
        assert c.text.splitlines()[0].strip() in lines[c.line_start - 1]
        assert c.text.splitlines()[-1].strip() in lines[c.line_end - 1]
    assert all(c.section is not None and c.section.startswith("Lindenhall Health") for c in chunks)


def test_markdown_headings_inside_code_fences_do_not_open_sections(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# Top\n\nintro\n\n```bash\n# not a heading\necho hi\n```\n\n## Real\n\nbody text\n")
    _, chunks = split_document(doc)
    assert [c.section for c in chunks] == ["Top", "Top > Real"]


def test_text_and_pdf_locations() -> None:
    _, text_chunks = split_document(KB_DOCS / "api_guidelines.txt")
    assert text_chunks[0].line_start == 1 and text_chunks[0].section is None and text_chunks[0].page is None
    kind, pdf_chunks = split_document(KB_DOCS / "travel_and_expenses.pdf")
    assert kind == "pdf" and [c.page for c in pdf_chunks] == [1, 2]
    assert "180 euros" in pdf_chunks[0].text and "department head" in pdf_chunks[1].text


def test_unsupported_and_missing_files_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unsupported file type '.docx'"):
        split_document(tmp_path / "x.docx")
    with pytest.raises(UserError, match="no such file or directory"):
        add_documents([tmp_path / "missing.md"], tmp_path / "kb")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(UserError, match="not UTF-8"):
        split_document(bad)


def test_add_search_update_remove(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(KB_DOCS, docs)
    kb_path = tmp_path / "kb"
    report = add_documents([docs], kb_path)
    assert len(report.added) == 6 and report.total_chunks == report.chunks > 6
    kb = load_kb(kb_path)
    assert len(kb.chunks) == report.total_chunks and kb.vectors.shape == (len(kb.chunks), 384)
    assert np.allclose(np.linalg.norm(kb.vectors, axis=1), 1.0, atol=1e-3)

    hit = kb.search("when is the production database backed up", k=3)[0]
    assert hit.chunk.source.endswith("deployment_runbook.md") and hit.chunk.section is not None
    assert hit.chunk.section.endswith("> Backups")
    found = kb.best_quote("time of the nightly database backup")
    assert found is not None
    hit, quote = found
    assert "02:00 UTC" in quote.text and quote.line_start is not None
    line = (docs / "deployment_runbook.md").read_text().splitlines()[quote.line_start - 1]
    assert "02:00 UTC" in line
    pdf = kb.best_quote("nightly hotel limit in Europe")
    assert pdf is not None and pdf[0].chunk.page == 1 and "180 euros" in pdf[1].text

    # unchanged files are not re-indexed; a changed file replaces its passages
    again = add_documents([docs], kb_path)
    assert len(again.unchanged) == 6 and again.chunks == 0
    runbook = docs / "deployment_runbook.md"
    runbook.write_text(runbook.read_text().replace("02:00 UTC", "03:30 UTC"))
    changed = add_documents([runbook], kb_path)
    assert changed.updated == [str(runbook.resolve())]
    kb = load_kb(kb_path)
    assert len(kb.chunks) == report.total_chunks
    assert not any("02:00 UTC" in c.text for c in kb.chunks) and any("03:30 UTC" in c.text for c in kb.chunks)

    assert remove_documents([docs / "travel_and_expenses.pdf"], kb_path) == [
        str((docs / "travel_and_expenses.pdf").resolve())
    ]
    assert len(kb_sources(kb_path)) == 5
    assert not any(c.source.endswith(".pdf") for c in load_kb(kb_path).chunks)
    assert sorted(remove_documents([docs], kb_path)) == sorted(
        s for s in (str(p.resolve()) for p in docs.iterdir()) if not s.endswith(".pdf")
    )
    assert load_kb(kb_path).empty and load_kb(kb_path).search("anything") == []


def test_a_damaged_index_is_rebuilt_from_the_stored_passages(tmp_path: Path) -> None:
    kb_path = tmp_path / "kb"
    add_documents([KB_DOCS / "data_retention.md"], kb_path)
    (kb_path / "kb.index").write_bytes(b"garbage")
    (kb_path / "metadata.json").touch()
    kb = load_kb(kb_path)
    assert kb.search("how long are application logs kept")[0].chunk.section.endswith("Application logs")  # type: ignore[union-attr]


def test_default_directory_follows_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert kb_dir() == tmp_path / "coe-home" / "kb"  # conftest points COE_HOME at the test's directory
    monkeypatch.setenv("COE_KB", str(tmp_path / "elsewhere"))
    assert kb_dir() == tmp_path / "elsewhere"
    assert kb_dir(tmp_path / "given") == tmp_path / "given"


def test_cli_add_search_list_remove(tmp_path: Path) -> None:
    kb_path = tmp_path / "clikb"
    added = runner.invoke(app, ["kb", "add", str(KB_DOCS), "--kb", str(kb_path), "--json"])
    assert added.exit_code == 0, added.output
    payload = json.loads(added.stdout)
    assert len(payload["added"]) == 6 and payload["total_chunks"] > 6

    found = runner.invoke(app, ["kb", "search", "API rate limit per token", "--kb", str(kb_path), "--json", "--k", "2"])
    assert found.exit_code == 0, found.output
    results = json.loads(found.stdout)["results"]
    assert len(results) == 2 and results[0]["source"].endswith("api_guidelines.txt")
    assert results[0]["line_start"] >= 1 and "100 requests per minute" in results[0]["text"]
    assert results[0]["score"] >= results[1]["score"]

    table = runner.invoke(app, ["kb", "search", "hotel limit", "--kb", str(kb_path)])
    assert table.exit_code == 0 and "travel_and_expenses.pdf  (page 1)" in table.stdout

    listed = runner.invoke(app, ["kb", "list", "--kb", str(kb_path)])
    assert listed.exit_code == 0 and "6 documents" in listed.stdout and "pdf" in listed.stdout

    gone = runner.invoke(app, ["kb", "remove", str(KB_DOCS / "api_guidelines.txt"), "--kb", str(kb_path)])
    assert gone.exit_code == 0 and "removed" in gone.stdout
    assert "5 documents" in runner.invoke(app, ["kb", "list", "--kb", str(kb_path)]).stdout


def test_cli_errors_exit_2(tmp_path: Path) -> None:
    empty = runner.invoke(app, ["kb", "search", "anything", "--kb", str(tmp_path / "none")])
    assert empty.exit_code == 2 and "is empty" in empty.stderr
    missing = runner.invoke(app, ["kb", "add", str(tmp_path / "nope.md"), "--kb", str(tmp_path / "k")])
    assert missing.exit_code == 2 and "no such file or directory" in missing.stderr
    odd = tmp_path / "x.docx"
    odd.write_text("x")
    skipped = runner.invoke(app, ["kb", "add", str(odd), "--kb", str(tmp_path / "k")])
    assert skipped.exit_code == 2 and "unsupported file type" in skipped.stderr
    blank = runner.invoke(app, ["kb", "search", "  ", "--kb", str(tmp_path / "k")])
    assert blank.exit_code == 2
