"""The router's learned term: a linear classifier over a text's words and word pairs (TF-IDF, hashed).

A sentence embedding mixes the kind of work and its subject into one vector, and a classifier over it learns
both: "patient", "contract" and "invoice" pull a text towards the medical, legal and finance experts whatever the
text asks for. Over words, the routing examples (most of them keyword traps) teach the classifier which words
name the work ("draft", "clause", "limerick", "manifest", "migration", "refactor") and leave the subject words,
which occur in every expert's examples, with little weight. Measured in ``bench/bench_routing.py``; see
``docs/decisions/routing.md``.

Features: lower-cased words (``[a-z][a-z0-9+#.-]*``) and adjacent word pairs, hashed (CRC-32, 2**20 buckets),
counted sublinearly (``log(1 + count)``), weighted by inverse document frequency over the training texts, and
normalised to unit length. Only buckets seen in training carry weight, so only those are kept.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from experts.embedding.vectors import Vectors

__all__ = ["BUCKETS", "PROBE_BALANCE", "PROBE_KIND", "PROBE_RIDGE", "LexicalProbe", "term_counts", "train_probe"]

BUCKETS = 1 << 20
"""Hash buckets for terms: far more than the training texts' terms, so collisions are rare."""
PROBE_RIDGE = 1.0
"""L2 penalty of the least-squares fit (the bench measures the probe with it; see ``bench/bench_routing.py``)."""
PROBE_BALANCE = 0.5
"""A text's weight is its expert's text count to the power ``-PROBE_BALANCE`` (0: every text alike; 1: every
expert alike). Chosen on development data at 42 experts (5-fold cross-validation over the calibration texts, the
42-expert development set and the added experts' examples): 0 gives 0.921 on the shipped experts' texts and
0.905 on the development set, 0.5 gives 0.910 and 0.937, 1 gives 0.892 and 0.944; 0.5 has the best mean. At the
twelve shipped experts 0.5 changes nothing (cross-validated 0.9395 either way)."""
PROBE_KIND = f"lexical-ridge:{PROBE_RIDGE}:balance-{PROBE_BALANCE}"
"""What the index's content hash records of the probe: a change of its fit rebuilds the cached indexes."""
_WORD = re.compile(r"[a-z][a-z0-9+#.\-]*")


def term_counts(text: str) -> Counter[int]:
    """The text's terms (words and adjacent word pairs) as hash buckets with their counts."""
    words = [w.rstrip(".-") for w in _WORD.findall(text.lower())]
    words = [w for w in words if w]
    terms = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
    return Counter(zlib.crc32(t.encode("utf-8")) % BUCKETS for t in terms)


@dataclass(frozen=True)
class LexicalProbe:
    """A ridge-regression classifier over TF-IDF term features: one weight row per term seen in training."""

    buckets: npt.NDArray[np.int64]
    """(terms,): the hash buckets seen in training, sorted."""
    idf: Vectors
    """(terms,): each bucket's inverse document frequency."""
    unseen_idf: float
    """The inverse document frequency of a term not seen in training (it counts in a text's length only)."""
    weights: Vectors
    """(terms, experts)."""

    def __post_init__(self) -> None:
        n = self.buckets.shape[0]
        if self.buckets.ndim != 1 or self.idf.shape != (n,) or self.weights.ndim != 2 or self.weights.shape[0] != n:
            raise ValueError(
                f"probe arrays disagree: buckets {self.buckets.shape}, idf {self.idf.shape}, "
                f"weights {self.weights.shape}"
            )
        if not (np.isfinite(self.idf).all() and np.isfinite(self.weights).all() and math.isfinite(self.unseen_idf)):
            raise ValueError("the probe has a NaN or infinite weight")

    @property
    def experts(self) -> int:
        """How many experts the probe scores."""
        return int(self.weights.shape[1])

    def scores(self, texts: Sequence[str]) -> Vectors:
        """Per (text, expert): the classifier's raw score."""
        out = np.zeros((len(texts), self.experts), dtype=np.float32)
        for row, text in enumerate(texts):
            counts = term_counts(text)
            if not counts:
                continue
            keys = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
            tf = np.log1p(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
            pos = np.minimum(np.searchsorted(self.buckets, keys), self.buckets.shape[0] - 1)
            seen = self.buckets[pos] == keys
            values = tf * np.where(seen, self.idf[pos], self.unseen_idf)
            norm = float(np.linalg.norm(values))
            if norm > 0 and seen.any():
                out[row] = (values[seen] / norm) @ self.weights[pos[seen]]
        return out

    def logits(self, texts: Sequence[str]) -> Vectors:
        """Per (text, expert): the expert's score minus the best expert's score, so 0 for the probe's favourite.

        Only differences between experts matter for the choice; anchoring at the favourite makes the learned term
        a penalty (like the exclusion term), so the router's net score keeps its scale (``cap - lambda * exc``
        for the expert the probe prefers), which the scope decision and the low-confidence threshold compare.
        """
        z = self.scores(texts)
        out: Vectors = (z - z.max(axis=1, keepdims=True)).astype(np.float32)
        return out


def train_probe(
    texts: Sequence[str], labels: npt.NDArray[np.int64], n_experts: int, ridge: float = PROBE_RIDGE
) -> LexicalProbe:
    """Fit the probe on texts and their experts' positions (ridge regression onto centred one-hot labels).

    Solved in its dual form (one texts x texts system: there are fewer texts than terms); deterministic. The
    features are sparse (tens of terms a text among tens of thousands), so the texts' Gram matrix is summed term
    by term over the pairs of texts that share it, never as a dense texts x terms product.

    Classes are partly balanced: each text weighs ``1 / sqrt(its expert's number of texts)`` (the weighted
    ridge's dual puts ``ridge / weight`` on the diagonal), so an expert a user adds with twenty lines and eight
    examples is not outweighed by a shipped one trained on a hundred and more (:data:`PROBE_BALANCE`; the
    measure is in docs/decisions/routing.md).
    """
    n = len(texts)
    if n != labels.shape[0] or not n:
        raise ValueError(f"{n} texts for {labels.shape[0]} labels")
    counts = [term_counts(t) for t in texts]
    buckets = np.array(sorted({b for c in counts for b in c}), dtype=np.int64)
    rows = np.repeat(np.arange(n), [len(c) for c in counts])
    cols = np.searchsorted(buckets, np.fromiter((b for c in counts for b in c), dtype=np.int64, count=rows.size))
    tf = np.log1p(np.fromiter((k for c in counts for k in c.values()), dtype=np.float64, count=rows.size))
    idf = np.log((n + 1) / (np.bincount(cols, minlength=buckets.size) + 1)) + 1.0
    values = tf * idf[cols]
    norms = np.sqrt(np.bincount(rows, weights=values**2, minlength=n))
    values /= norms[rows]
    # Gram matrix: for every term, every pair of texts that has it
    order = np.argsort(cols, kind="stable")
    r, v = rows[order], values[order]
    starts = np.flatnonzero(np.r_[True, cols[order][1:] != cols[order][:-1]])
    sizes = np.diff(np.r_[starts, order.size])
    group_size = np.repeat(sizes, sizes)
    left = np.repeat(np.arange(order.size), group_size)
    right = np.repeat(np.repeat(starts, sizes), group_size) + (
        np.arange(left.size) - np.repeat(np.cumsum(group_size) - group_size, group_size)
    )
    gram = np.bincount(r[left] * n + r[right], weights=v[left] * v[right], minlength=n * n).reshape(n, n)
    targets = np.eye(n_experts)[labels] - 1.0 / n_experts
    per_class = np.bincount(labels, minlength=n_experts).astype(np.float64)
    weight = per_class[labels] ** -PROBE_BALANCE
    weight *= n / weight.sum()  # mean weight 1: the ridge keeps its scale
    dual = np.linalg.solve(gram + ridge * np.diag(1.0 / weight), targets)
    weights = np.stack(
        [np.bincount(cols, weights=values * dual[rows, k], minlength=buckets.size) for k in range(n_experts)], axis=1
    )
    return LexicalProbe(
        buckets=buckets,
        idf=idf.astype(np.float32),
        unseen_idf=float(np.log(n + 1) + 1.0),
        weights=weights.astype(np.float32),
    )
