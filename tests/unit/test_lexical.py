"""The router's learned term: a classifier over a text's words and word pairs."""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from experts.routing import lexical
from experts.routing.lexical import BUCKETS, PROBE_BALANCE, LexicalProbe, term_counts, train_probe

EXPERTS = ["python_coder", "medical_clinical", "legal_drafting"]
TRAINING = [
    ("python_coder", "Write a Python function that parses the patient records export"),
    ("python_coder", "Write a Python script that renames the contract files by date"),
    ("python_coder", "Fix the Python parser that reads invoices"),
    ("medical_clinical", "Explain the symptoms a patient with anaemia reports"),
    ("medical_clinical", "Which dose of amoxicillin suits a child patient"),
    ("legal_drafting", "Draft a liability clause for the supply contract"),
    ("legal_drafting", "Draft the termination clause of an employment contract"),
]


def _bucket(term: str) -> int:
    return zlib.crc32(term.encode("utf-8")) % BUCKETS


def _probe() -> LexicalProbe:
    labels = np.array([EXPERTS.index(e) for e, _ in TRAINING], dtype=np.int64)
    return train_probe([t for _, t in TRAINING], labels, len(EXPERTS))


def test_terms_are_lowercased_words_and_adjacent_pairs() -> None:
    counts = term_counts("Fix settings.py. Fix it!")
    expected = ["fix", "settings.py", "fix", "it", "fix settings.py", "settings.py fix", "fix it"]
    assert counts == Counter(_bucket(t) for t in expected)
    assert term_counts("  ... 42 !") == {}


def test_the_words_that_name_the_work_outweigh_the_subject_words() -> None:
    probe = _probe()
    # "patient" and "contract" occur under several experts; "python" and "draft" under one each
    for text, want in [
        ("Write a Python tool that checks each patient record", "python_coder"),
        ("Write Python code that indexes every contract", "python_coder"),
        ("Draft a clause on patient data", "legal_drafting"),
        ("What dose suits a patient with anaemia", "medical_clinical"),
    ]:
        logits = probe.logits([text])[0]
        assert EXPERTS[int(np.argmax(logits))] == want, text
        assert logits.max() == pytest.approx(0.0) and (logits <= 1e-6).all()


def test_unseen_words_give_no_preference_and_only_lengthen_the_text() -> None:
    probe = _probe()
    assert np.array_equal(probe.scores(["zyzzyva quux"]), np.zeros((1, len(EXPERTS)), dtype=np.float32))
    plain, padded = probe.scores(["Draft a clause"])[0], probe.scores(["Draft a clause zyzzyva quux"])[0]
    assert np.argmax(plain) == np.argmax(padded) and np.abs(padded).max() < np.abs(plain).max()


def test_scores_are_per_text_and_training_is_deterministic() -> None:
    probe, again = _probe(), _probe()
    assert np.array_equal(probe.weights, again.weights) and np.array_equal(probe.buckets, again.buckets)
    texts = ["Draft a clause", "Fix the Python parser", "Explain the symptoms"]
    batch = probe.scores(texts)
    for row, text in enumerate(texts):
        assert np.allclose(batch[row], probe.scores([text])[0])


def test_inconsistent_arrays_are_refused() -> None:
    probe = _probe()
    with pytest.raises(ValueError, match="3 texts for 2 labels"):
        train_probe(["a b", "c d", "e f"], np.array([0, 1]), 2)
    with pytest.raises(ValueError, match="disagree"):
        replace(probe, buckets=probe.buckets[:-1])
    with pytest.raises(ValueError, match="disagree"):
        replace(probe, layers=np.array([0, 0, 1]))  # a layer the probe has no IDF for
    with pytest.raises(ValueError, match="disagree"):
        replace(probe, layers=np.zeros(2, dtype=np.int64))
    weights = probe.weights.copy()
    weights[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        replace(probe, weights=weights)
    with pytest.raises(ValueError, match="outside"):
        train_probe(["a b", "c d"], np.array([0, 1]), 2, base=[0, 2])


def test_the_sparse_fit_is_the_dense_weighted_ridge_solution() -> None:
    probe = _probe()
    texts = [t for _, t in TRAINING]
    x = np.zeros((len(texts), probe.buckets.size))
    for row, text in enumerate(texts):
        counts = term_counts(text)
        cols = np.searchsorted(probe.buckets, list(counts))
        values = np.log1p(list(counts.values())) * probe.idf[0, cols]
        x[row, cols] = values / np.linalg.norm(values)
    labels = [EXPERTS.index(e) for e, _ in TRAINING]
    targets = np.eye(len(EXPERTS))[labels] - 1.0 / len(EXPERTS)
    # the weighted ridge in its primal form: argmin sum_i w_i |x_i B - y_i|^2 + |B|^2, w_i = n_expert ** -balance
    weight = np.bincount(labels)[labels] ** -PROBE_BALANCE
    weight *= len(texts) / weight.sum()
    dense = np.linalg.solve(x.T @ (weight[:, None] * x) + np.eye(x.shape[1]), x.T @ (weight[:, None] * targets))
    assert np.allclose(probe.weights, dense, atol=1e-5)


ADDED = [
    ("rust_coder", "Write a Rust function that parses the patient records export"),
    ("rust_coder", "Fix the borrow checker error in this Rust crate"),
    ("rust_coder", "Port the Python parser to idiomatic Rust with cargo"),
]


def test_added_experts_never_move_the_base_experts_columns() -> None:
    base_only = _probe()
    experts = [*EXPERTS, "rust_coder"]
    rows = TRAINING + ADDED
    labels = np.array([experts.index(e) for e, _ in rows], dtype=np.int64)
    grown = train_probe([t for _, t in rows], labels, len(experts), base=range(len(EXPERTS)))
    assert grown.layers.tolist() == [0, 0, 0, 1] and len(grown.unseen_idf) == 2
    texts = ["Draft a clause on patient data", "Write a Rust crate that parses invoices", "zyzzyva", "Fix it"]
    # the base experts score every text exactly as the probe fitted on their texts alone does
    assert np.allclose(grown.scores(texts)[:, :3], base_only.scores(texts), atol=1e-6)
    # the added expert is fitted over every text, so it takes its own work and leaves the base experts theirs
    for text, want in [
        ("Write a Rust function that checks each patient record", "rust_coder"),
        ("Fix the cargo build of the Rust parser", "rust_coder"),
        ("Write a Python tool that checks each patient record", "python_coder"),
        ("Draft a clause on patient data", "legal_drafting"),
    ]:
        assert experts[int(np.argmax(grown.logits([text])[0]))] == want, text
    # one layer when there is nothing to keep apart: no base, one base expert, or every expert in it
    for base in [(), [0], range(len(experts))]:
        flat = train_probe([t for _, t in rows], labels, len(experts), base=base)
        assert flat.layers.tolist() == [0, 0, 0, 0] and len(flat.unseen_idf) == 1
    # and fitted in one layer, the added expert's texts move the base experts' columns
    assert not np.allclose(flat.scores(texts)[:, :3], base_only.scores(texts), atol=1e-3)


def test_the_base_layer_is_fitted_once_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    experts = [*EXPERTS, "rust_coder"]
    rows = TRAINING + ADDED
    labels = np.array([experts.index(e) for e, _ in rows], dtype=np.int64)
    fits: list[int] = []
    real = lexical._fit

    def counting(texts: list[str], *args: Any) -> Any:
        fits.append(len(texts))
        return real(texts, *args)

    monkeypatch.setattr(lexical, "_fit", counting)
    first = train_probe([t for _, t in rows], labels, len(experts), base=range(3), cache=tmp_path)
    (saved,) = tmp_path.glob("probe-base-*.npz")
    assert fits == [len(rows), len(TRAINING)]
    again = train_probe([t for _, t in rows], labels, len(experts), base=range(3), cache=tmp_path)
    assert fits == [len(rows), len(TRAINING), len(rows)]  # the added layer alone
    assert np.array_equal(again.weights, first.weights) and again.unseen_idf == first.unseen_idf
    # other base texts are another fit; a damaged file is fitted again and replaced
    train_probe([t for _, t in rows][1:], labels[1:], len(experts), base=range(3), cache=tmp_path)
    assert len(list(tmp_path.glob("probe-base-*.npz"))) == 2
    for path in tmp_path.glob("probe-base-*.npz"):
        path.write_bytes(b"not an archive")
    fits.clear()
    mended = train_probe([t for _, t in rows], labels, len(experts), base=range(3), cache=tmp_path)
    assert fits == [len(rows), len(TRAINING)] and np.array_equal(mended.weights, first.weights)
    assert saved.read_bytes()[:2] == b"PK"
