"""The router's learned term: a classifier over a text's words and word pairs."""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import pytest

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
        LexicalProbe(buckets=probe.buckets[:-1], idf=probe.idf, unseen_idf=probe.unseen_idf, weights=probe.weights)
    weights = probe.weights.copy()
    weights[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        LexicalProbe(buckets=probe.buckets, idf=probe.idf, unseen_idf=probe.unseen_idf, weights=weights)


def test_the_sparse_fit_is_the_dense_weighted_ridge_solution() -> None:
    probe = _probe()
    texts = [t for _, t in TRAINING]
    x = np.zeros((len(texts), probe.buckets.size))
    for row, text in enumerate(texts):
        counts = term_counts(text)
        cols = np.searchsorted(probe.buckets, list(counts))
        values = np.log1p(list(counts.values())) * probe.idf[cols]
        x[row, cols] = values / np.linalg.norm(values)
    labels = [EXPERTS.index(e) for e, _ in TRAINING]
    targets = np.eye(len(EXPERTS))[labels] - 1.0 / len(EXPERTS)
    # the weighted ridge in its primal form: argmin sum_i w_i |x_i B - y_i|^2 + |B|^2, w_i = n_expert ** -balance
    weight = np.bincount(labels)[labels] ** -PROBE_BALANCE
    weight *= len(texts) / weight.sum()
    dense = np.linalg.solve(x.T @ (weight[:, None] * x) + np.eye(x.shape[1]), x.T @ (weight[:, None] * targets))
    assert np.allclose(probe.weights, dense, atol=1e-5)
