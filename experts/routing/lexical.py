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

Two layers when the catalog has grown: the *base* experts (the ones shipped with the catalog) are fitted among
themselves on their own texts alone, and every expert added later is fitted over all texts, the base experts'
included. Adding or removing an added expert then never moves a base expert's column, so routing among the base
experts stays what was calibrated, and an added expert takes a text only where its own column wins.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import re
import zipfile
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from experts.embedding.vectors import Vectors
from state.files import atomic_write

logger = logging.getLogger(__name__)

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
PROBE_KIND = f"lexical-ridge:{PROBE_RIDGE}:balance-{PROBE_BALANCE}:base-layer"
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
    """A ridge-regression classifier over TF-IDF term features: one weight row per term seen in training.

    Each expert is scored in its layer's feature space (its layer's IDF and text norm): a term its layer never
    saw counts, as an unseen term, in the text's length only, and carries no weight.
    """

    buckets: npt.NDArray[np.int64]
    """(terms,): the hash buckets seen in training (any layer), sorted."""
    idf: Vectors
    """(layers, terms): each bucket's inverse document frequency in each layer (a layer's unseen IDF where the
    layer never saw the bucket)."""
    unseen_idf: tuple[float, ...]
    """Per layer: the inverse document frequency of a term it did not see (it counts in a text's length only)."""
    weights: Vectors
    """(terms, experts); zero where the expert's layer never saw the term."""
    layers: npt.NDArray[np.int64]
    """(experts,): the layer each expert is scored in (0: the base experts, or every expert in a one-layer probe)."""

    def __post_init__(self) -> None:
        n, k = self.buckets.shape[0], len(self.unseen_idf)
        shapes_agree = (
            self.buckets.ndim == 1
            and self.idf.shape == (k, n)
            and self.weights.ndim == 2
            and self.weights.shape[0] == n
            and self.layers.shape == (self.weights.shape[1],)
        )
        if not shapes_agree or not ((self.layers >= 0) & (self.layers < k)).all():
            raise ValueError(
                f"probe arrays disagree: buckets {self.buckets.shape}, idf {self.idf.shape}, "
                f"weights {self.weights.shape}, layers {self.layers.shape} of {k}"
            )
        finite = np.isfinite(self.idf).all() and np.isfinite(self.weights).all()
        if not (finite and all(math.isfinite(u) for u in self.unseen_idf)):
            raise ValueError("the probe has a NaN or infinite weight")

    @property
    def experts(self) -> int:
        """How many experts the probe scores."""
        return int(self.weights.shape[1])

    def scores(self, texts: Sequence[str]) -> Vectors:
        """Per (text, expert): the classifier's raw score."""
        out = np.zeros((len(texts), self.experts), dtype=np.float32)
        columns = [np.flatnonzero(self.layers == layer) for layer in range(len(self.unseen_idf))]
        for row, text in enumerate(texts):
            counts = term_counts(text)
            if not counts:
                continue
            keys = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
            tf = np.log1p(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
            pos = np.minimum(np.searchsorted(self.buckets, keys), self.buckets.shape[0] - 1)
            seen = self.buckets[pos] == keys
            if not seen.any():
                continue
            for layer, cols in enumerate(columns):
                values = tf * np.where(seen, self.idf[layer, pos], self.unseen_idf[layer])
                norm = float(np.linalg.norm(values))
                if norm > 0 and cols.size:
                    out[row, cols] = (values[seen] / norm) @ self.weights[pos[seen]][:, cols]
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
    texts: Sequence[str],
    labels: npt.NDArray[np.int64],
    n_experts: int,
    ridge: float = PROBE_RIDGE,
    base: Sequence[int] = (),
    cache: Path | None = None,
) -> LexicalProbe:
    """Fit the probe on texts and their experts' positions (ridge regression onto centred one-hot labels).

    Solved in its dual form (one texts x texts system: there are fewer texts than terms); deterministic. The
    features are sparse (tens of terms a text among tens of thousands), so the texts' Gram matrix is summed term
    by term over the pairs of texts that share it, never as a dense texts x terms product.

    Classes are partly balanced: each text weighs ``1 / sqrt(its expert's number of texts)`` (the weighted
    ridge's dual puts ``ridge / weight`` on the diagonal), so an expert a user adds with twenty lines and eight
    examples is not outweighed by a shipped one trained on a hundred and more (:data:`PROBE_BALANCE`; the
    measure is in docs/decisions/routing.md).

    ``base``: the positions of the base experts (the catalog's shipped ones). When there are at least two of them
    and at least one other expert, the base experts are fitted among themselves on their own texts (layer 0) and
    the others over every text (layer 1), so experts added or removed later never move a base expert's column.
    ``cache``: a directory where the base layer's fit is kept by its content (its texts, labels and fit), so adding
    or removing an added expert fits the added layer alone.
    """
    n = len(texts)
    if n != labels.shape[0] or not n:
        raise ValueError(f"{n} texts for {labels.shape[0]} labels")
    chosen = sorted({int(b) for b in base})
    if any(not 0 <= b < n_experts for b in chosen):
        raise ValueError(f"base experts {chosen} outside 0..{n_experts - 1}")
    everyone = _fit(texts, labels, n_experts, ridge)
    if len(chosen) < 2 or len(chosen) == n_experts:
        buckets, idf, unseen, weights = everyone
        return LexicalProbe(
            buckets=buckets,
            idf=idf[None, :].astype(np.float32),
            unseen_idf=(unseen,),
            weights=weights.astype(np.float32),
            layers=np.zeros(n_experts, dtype=np.int64),
        )
    in_base = np.isin(labels, chosen)
    position = {expert: k for k, expert in enumerate(chosen)}
    base_labels = np.array([position[int(label)] for label in labels[in_base]], dtype=np.int64)
    base_texts = [t for t, keep in zip(texts, in_base, strict=True) if keep]
    fitted = _cached_fit(base_texts, base_labels, len(chosen), ridge, cache)
    layers = np.ones(n_experts, dtype=np.int64)
    layers[chosen] = 0
    buckets = np.union1d(fitted[0], everyone[0])
    idf = np.empty((2, buckets.size), dtype=np.float64)
    weights = np.zeros((buckets.size, n_experts), dtype=np.float64)
    for layer, (own, own_idf, own_unseen, own_weights) in enumerate((fitted, everyone)):
        rows = np.searchsorted(buckets, own)
        idf[layer] = own_unseen
        idf[layer, rows] = own_idf
        cols = np.flatnonzero(layers == layer)
        weights[np.ix_(rows, cols)] = own_weights if layer == 0 else own_weights[:, cols]
    return LexicalProbe(
        buckets=buckets,
        idf=idf.astype(np.float32),
        unseen_idf=(fitted[2], everyone[2]),
        weights=weights.astype(np.float32),
        layers=layers,
    )


Fit = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], float, npt.NDArray[np.float64]]
"""One layer's fit: its buckets, their IDF, the unseen IDF and the (terms, experts) weights."""


def _cached_fit(
    texts: Sequence[str], labels: npt.NDArray[np.int64], n_experts: int, ridge: float, cache: Path | None
) -> Fit:
    """:func:`_fit`, read from ``cache/probe-base-<sha256 of its inputs>.npz`` when an earlier build wrote it.

    A file that cannot be read or whose arrays do not fit together is fitted again and replaced.
    """
    if cache is None:
        return _fit(texts, labels, n_experts, ridge)
    payload = json.dumps([PROBE_KIND, BUCKETS, ridge, n_experts, list(texts), labels.tolist()], ensure_ascii=False)
    path = cache / f"probe-base-{hashlib.sha256(payload.encode('utf-8')).hexdigest()}.npz"
    try:
        with np.load(path, allow_pickle=False) as saved:
            fit = (saved["buckets"], saved["idf"], float(saved["unseen"]), saved["weights"])
        if fit[1].shape == fit[0].shape and fit[3].shape == (fit[0].size, n_experts) and np.isfinite(fit[3]).all():
            return fit
        logger.warning("learned term cache %s does not fit its catalog; fitting again", path)
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        logger.warning("learned term cache %s cannot be read (%s); fitting again", path, exc)
    fit = _fit(texts, labels, n_experts, ridge)

    def save(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            np.savez(handle, buckets=fit[0], idf=fit[1], unseen=np.float64(fit[2]), weights=fit[3])

    with contextlib.suppress(OSError):
        atomic_write(path, save)
    return fit


def _fit(texts: Sequence[str], labels: npt.NDArray[np.int64], n_experts: int, ridge: float) -> Fit:
    """One layer's fit (:data:`Fit`): ridge regression onto centred one-hot labels, partly class-balanced."""
    n = len(texts)
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
    ).astype(np.float64, copy=False)
    return buckets, idf, float(np.log(n + 1) + 1.0), weights
