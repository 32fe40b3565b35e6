"""Dual-embedding routing: send a slot to the expert whose real capabilities fit it, not its keywords.

A text's net score for an expert is ``capability - lambda * exclusion + example_weight * learned``: its affinity to
the expert's capability lines, minus its overlap with the exclusion lines, plus a learned word classifier's
penalty (:class:`experts.routing.lexical.LexicalProbe`; zero for its favourite). A close call between a domain and
a task-type specialist goes to the task type (tie rule) and a low score to the generalist, both recorded.
:meth:`ExpertRouter.route_many` lets a cheap static first stage decide clear cases and sends the rest to the
encoder. How and why, with the calibration: docs/decisions/routing.md.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from experts.catalog.scopes import GENERAL_EXPERT, Catalog
from experts.catalog.sources import load_catalog
from experts.embedding.encoder import BertSentenceEncoder, Embedder
from experts.embedding.factory import get_embedder
from experts.embedding.static import StaticEmbedder
from experts.embedding.vectors import Vectors, check_vectors
from experts.routing.index import ExpertIndex, cache_dir, load_or_build_index
from state.errors import ConfigError
from state.settings import DEFAULTS, Settings

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_PARAMS",
    "ExpertRouter",
    "FastStage",
    "RouteResult",
    "RouterParams",
    "get_router",
    "routing_text",
]


@dataclass(frozen=True)
class RouterParams:
    """The scoring knobs. The defaults are calibrated; see the module docstring."""

    lam: float = DEFAULTS["routing_lambda"]
    """Exclusion penalty (lambda)."""
    threshold: float = DEFAULTS["routing_threshold"]
    """Below this net score the generalist takes the slot."""
    tie_margin: float = DEFAULTS["routing_tie_margin"]
    """Top-two gap under which a task-type specialist is preferred over a domain specialist."""
    cap_top_k: int = 2
    """Capability affinity: the mean of this many best capability-line similarities."""
    exc_top_k: int = 1
    """Exclusion affinity: the mean of this many best exclusion-line similarities."""
    head_weight: float = 0.0
    """Second look: weight of the instruction head's scores, blended in for close calls (0 turns it off)."""
    head_gap: float = 0.05
    """Second look: a text whose two best net scores are closer than this gets it."""
    example_weight: float = 1.0
    """Weight of the learned term (the probe's logits minus its favourite's, so at most 0; 0 turns it off)."""
    fast_gap: float = DEFAULTS["routing_fast_gap"]
    """Two stages: the static stage's decision stands from this top-two gap on (1 sends every text to the encoder)."""

    def __post_init__(self) -> None:
        checks = {
            "lam": 0.0 <= self.lam <= 5.0,
            "threshold": -1.0 <= self.threshold <= 1.0,
            "tie_margin": 0.0 <= self.tie_margin <= 1.0,
            "cap_top_k": self.cap_top_k >= 1,
            "exc_top_k": self.exc_top_k >= 1,
            "head_weight": 0.0 <= self.head_weight <= 1.0,
            "head_gap": 0.0 <= self.head_gap <= 1.0,
            "example_weight": 0.0 <= self.example_weight <= 1.0,
            "fast_gap": 0.0 <= self.fast_gap <= 1.0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ConfigError("router parameters", f"out of range: {getattr(self, name)!r}", field=name)

    @classmethod
    def from_settings(cls, settings: Settings) -> RouterParams:
        """The run's routing settings (lambda, threshold, tie margin, fast gap); the other knobs keep their defaults."""
        return cls(
            lam=settings.routing_lambda,
            threshold=settings.routing_threshold,
            tie_margin=settings.routing_tie_margin,
            fast_gap=settings.routing_fast_gap,
        )


DEFAULT_PARAMS = RouterParams()


@dataclass(frozen=True)
class RouteResult:
    """One routing decision with everything the ledger and the autonomous heuristics need."""

    expert: str
    score: float
    runner_up: str | None
    runner_up_score: float | None
    scores: dict[str, float]
    """Net score per expert, best first."""
    fallback: bool
    """The generalist took the slot because the best score was below the threshold."""
    rule: str | None = None
    """Which autonomous default changed the raw winner: ``tie_prefers_task_type``, ``low_confidence``."""
    raw_best: str = ""
    """The expert with the highest net score, before the rules."""
    capability: dict[str, float] = field(default_factory=dict)
    exclusion: dict[str, float] = field(default_factory=dict)
    learned: dict[str, float] = field(default_factory=dict)
    """The learned term per expert, before its weight (empty without routing examples)."""
    head: str | None = None
    """The instruction head whose scores were blended in (the second look at a close call), if any."""
    stage: str = "encoder"
    """Which vectors decided: ``static`` (the first stage, decisive) or ``encoder`` (the sentence encoder)."""

    @property
    def gap(self) -> float:
        """How far the chosen expert's score is above the runner-up's (0 without a runner-up)."""
        return self.score - self.runner_up_score if self.runner_up_score is not None else 0.0

    def to_json(self) -> dict[str, Any]:
        """The ``coe route --json`` shape (plus the rule and raw winner)."""
        data = asdict(self)
        for key in ("capability", "exclusion", "learned"):
            data.pop(key)
        return data

    def explain(self) -> str:
        """One line for the ledger: winner, runner-up and the rule applied."""
        parts = [f"{self.expert} {self.score:.3f}"]
        if self.runner_up is not None and self.runner_up_score is not None:
            parts.append(f"runner-up {self.runner_up} {self.runner_up_score:.3f}")
        if self.rule == "tie_prefers_task_type":
            parts.append(f"tie rule: task-type specialist preferred over {self.raw_best}")
        elif self.rule == "low_confidence":
            parts.append(f"low confidence: best was {self.raw_best} {self.scores[self.raw_best]:.3f}")
        if self.head is not None:
            parts.append(f"close call: second look at {self.head!r}")
        if self.stage == "static":
            parts.append("decided by the static first stage")
        return "; ".join(parts)


_HEAD_END = re.compile(
    r"\s(?:about|for|that|from|of|on|in|with|using|which|where|so)\s|[,:;?!()\u2014]|\.(?!\w)|\s[-\u2013]\s", re.I
)
"""Where an instruction's head ends: a modifier word, or punctuation (a hyphen or dot inside a word, as in
"stand-up" or "settings.py", does not end it)."""


_DRAFT_VERB = re.compile(
    r"\b(draft)(s|ed|ing)?(?=\s+(?:a|an|the|our|my|your|their|its|this|that|these|those|some|one|two|three|"
    r"four|five|\d+)\b)",
    re.I,
)


def routing_text(text: str) -> str:
    """The text as the router reads it: "draft" used as a verb reads "write".

    To draft is to write a first version of anything (an email, a talk, a schedule); the legal sense lives in the
    object (a clause, an agreement), which stays. The routing examples, where most texts that start with "Draft"
    are legal, had taught the learned term the verb as a legal word: a plan's "Draft the text message we send
    them" went to the legal expert. Read as "write", none of the held-out routing texts changes expert
    (``docs/decisions.md``).
    """
    return _DRAFT_VERB.sub(_as_write, text)


_WRITE_FORMS = {"": "write", "s": "writes", "ed": "written", "ing": "writing"}


def _as_write(match: re.Match[str]) -> str:
    word = _WRITE_FORMS[(match.group(2) or "").lower()]
    return word.capitalize() if match.group(1)[0].isupper() else word


def instruction_head(text: str) -> str | None:
    """The head of an instruction: the words before its first modifier.

    "Write a sonnet" of "Write a sonnet about a Kubernetes outage": the kind of work is usually said there; the
    subject words that make keyword traps usually come after. None when the text has no head of at least two
    words that is shorter than the text.
    """
    stripped = " ".join(text.split())
    match = _HEAD_END.search(stripped, 12)
    if match is None:
        return None
    head = stripped[: match.start()].strip()
    words = len(head.split())
    return head if 2 <= words < len(stripped.split()) else None


class FastStage:
    """The static first stage, built on first use and shared by every parameter variant of one router.

    Args:
        build: Makes the first-stage router (static embedder and its own index). It runs at most once; if it
            fails (or makes none), the failure is logged and every text goes to the encoder (the stage only saves
            time).
    """

    def __init__(self, build: Callable[[], ExpertRouter | None]) -> None:
        self._build: Callable[[], ExpertRouter | None] | None = build
        self._router: ExpertRouter | None = None
        self._lock = threading.Lock()

    def router(self) -> ExpertRouter | None:
        """The first-stage router (built on the first call), or None if it could not be built."""
        with self._lock:
            if self._build is not None:
                build, self._build = self._build, None
                try:
                    self._router = build()
                except Exception as exc:  # an optional speed-up must not stop routing; the encoder routes alone
                    logger.warning("the router's static first stage is off: %s: %s", type(exc).__name__, exc)
        return self._router


class ExpertRouter:
    """Routes texts to experts of a catalog with a cached dual-embedding index.

    Args:
        fast: The static first stage (see the module docstring); None routes every text with ``embedder``.
    """

    def __init__(
        self,
        catalog: Catalog,
        embedder: Embedder,
        index: ExpertIndex,
        params: RouterParams,
        fast: FastStage | None = None,
    ) -> None:
        if embedder.dim != index.dim or embedder.model_id != index.model_id:
            raise ConfigError(
                "expert index",
                f"built with {index.model_id} ({index.dim}-d) but the query embedder is "
                f"{embedder.model_id} ({embedder.dim}-d); the same model must embed index and query",
            )
        self.catalog = catalog
        self.embedder = embedder
        self.index = index
        self.params = params
        self.fast = fast
        self._kinds = {s.id: s.kind for s in catalog}

    @property
    def version(self) -> str:
        """The router's version: the start of its index's content hash (scope lines, examples, embedding model)."""
        return self.index.content_hash[:12]

    def with_params(self, params: RouterParams) -> ExpertRouter:
        """The same index, embedder and first stage with other scoring parameters."""
        return ExpertRouter(self.catalog, self.embedder, self.index, params, self.fast)

    def first_stage(self) -> ExpertRouter | None:
        """The static first stage with this router's parameters, or None when it is off or unavailable."""
        if self.fast is None or self.params.fast_gap >= 1.0:
            return None
        router = self.fast.router()
        return None if router is None else router.with_params(self.params)

    def route(self, text: str) -> RouteResult:
        """Route one text."""
        return self.route_many([text])[0]

    def route_many(self, texts: list[str]) -> list[RouteResult]:
        """Route a batch of texts: the static first stage, then one batched encoder embedding for the rest."""
        if not texts:
            return []
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ConfigError("route", "text to route is empty", field=f"texts[{i}]")
        texts = [routing_text(t) for t in texts]
        first = self.first_stage()
        if first is None:
            return self._route_texts(texts)
        out = first.route_many(texts)
        heads = {i: h for i, r in enumerate(out) if self.decisive(r) and (h := instruction_head(texts[i])) is not None}
        head_results = dict(zip(heads, first.route_many(list(heads.values())), strict=True)) if heads else {}
        rest = []
        for i, result in enumerate(out):
            if self.decisive(result, head_results.get(i)):
                out[i] = dataclasses.replace(result, stage="static")
            else:
                rest.append(i)
        if rest:
            for i, result in zip(rest, self._route_texts([texts[i] for i in rest]), strict=True):
                out[i] = result
        return out

    def decisive(self, first: RouteResult, head: RouteResult | None = None) -> bool:
        """Whether a first-stage result stands.

        No rule applied (no near-tie, no fallback), its top two at least ``fast_gap`` apart, and, when the text
        has an instruction head, the head routed alone by the first stage goes to the same expert: the kind of
        work is said in the head, and a bag of tokens misses it when subject words outweigh it ("Write a limerick
        about a SQL join").
        """
        return (
            first.rule is None and first.gap >= self.params.fast_gap and (head is None or head.expert == first.expert)
        )

    def _route_texts(self, texts: list[str]) -> list[RouteResult]:
        """Route with the sentence encoder (the second stage, or the only one)."""
        vectors = check_vectors(self.embedder.encode([t.strip() for t in texts]), self.index.dim, "router query")
        return self._route_embedded(vectors, texts, None)

    def route_vectors(
        self, vectors: Vectors, texts: list[str], head_vectors: Vectors | None = None
    ) -> list[RouteResult]:
        """Route already embedded texts (unit vectors of the index's dimension).

        Args:
            vectors: One row per text.
            texts: The texts themselves (the learned term reads their words).
            head_vectors: Optionally, one row per text with its instruction head's embedding, used for the
                texts that are close calls (as :meth:`route_many` does); without it, the heads are embedded.
        """
        queries = check_vectors(vectors, self.index.dim, "router query vectors")
        if len(texts) != queries.shape[0]:
            raise ConfigError("route", f"{queries.shape[0]} vectors for {len(texts)} texts", field="texts")
        if head_vectors is not None:
            head_vectors = check_vectors(head_vectors, self.index.dim, "router head vectors")
        return self._route_embedded(queries, texts, head_vectors)

    def _route_embedded(self, vectors: Vectors, texts: list[str], head_vectors: Vectors | None) -> list[RouteResult]:
        cap, exc, learned = self.affinities(vectors, texts)
        heads: dict[int, str] = {}
        if self.params.head_weight > 0:
            for row in self._close_calls(self._net(cap, exc, learned)):
                head = instruction_head(texts[row])
                if head is not None:
                    heads[row] = head
        if heads:
            rows = sorted(heads)
            if head_vectors is None:
                head_vectors = np.zeros_like(vectors)
                head_vectors[rows] = self.embedder.encode([heads[r] for r in rows])
            head_cap, head_exc, head_learned = self.affinities(head_vectors[rows], [heads[r] for r in rows])
            w = self.params.head_weight
            cap, exc = cap.copy(), exc.copy()
            cap[rows] = (1 - w) * cap[rows] + w * head_cap
            exc[rows] = (1 - w) * exc[rows] + w * head_exc
            if learned is not None and head_learned is not None:
                learned = learned.copy()
                learned[rows] = (1 - w) * learned[rows] + w * head_learned
        net = self._net(cap, exc, learned)
        return [
            self._decide(net[r], cap[r], exc[r], None if learned is None else learned[r], heads.get(r))
            for r in range(vectors.shape[0])
        ]

    def _net(self, cap: Vectors, exc: Vectors, learned: Vectors | None) -> Vectors:
        net = cap - self.params.lam * exc
        if learned is not None:
            net = net + self.params.example_weight * learned
        return net

    def _close_calls(self, net: Vectors) -> list[int]:
        if net.shape[1] < 2:
            return []
        top2 = np.sort(net, axis=1)[:, -2:]
        return [int(r) for r in np.flatnonzero(top2[:, 1] - top2[:, 0] < self.params.head_gap)]

    def affinities(self, queries: Vectors, texts: list[str]) -> tuple[Vectors, Vectors, Vectors | None]:
        """Capability affinity, exclusion affinity and the learned term per (query, expert).

        Each is an (n, experts) matrix; the learned term (read from ``texts``, one per query row) is None when
        the index has no probe.
        """
        cap = self.index.aggregate(self.index.capability, queries, self.params.cap_top_k)
        exc = self.index.aggregate(self.index.exclusion, queries, self.params.exc_top_k)
        learned = self.index.probe.logits(texts) if self.index.probe is not None else None
        return cap, exc, learned

    def _decide(
        self, net: Vectors, cap: Vectors, exc: Vectors, learned: Vectors | None, head: str | None
    ) -> RouteResult:
        ids = self.index.expert_ids
        order = np.argsort(-net, kind="stable")
        scores = {ids[i]: round(float(net[i]), 4) for i in order}
        best = ids[int(order[0])]
        chosen, rule = best, None
        if len(order) > 1:
            second = ids[int(order[1])]
            gap = float(net[order[0]] - net[order[1]])
            if gap < self.params.tie_margin and self._kinds[best] == "domain" and self._kinds[second] == "task":
                chosen, rule = second, "tie_prefers_task_type"
        fallback = False
        if scores[chosen] < self.params.threshold and chosen != GENERAL_EXPERT and GENERAL_EXPERT in scores:
            chosen, rule, fallback = GENERAL_EXPERT, "low_confidence", True
        runner_up = next((e for e in scores if e != chosen), None)
        return RouteResult(
            expert=chosen,
            score=scores[chosen],
            runner_up=runner_up,
            runner_up_score=scores[runner_up] if runner_up is not None else None,
            scores=scores,
            fallback=fallback,
            rule=rule,
            raw_best=best,
            capability={ids[i]: round(float(cap[i]), 4) for i in order},
            exclusion={ids[i]: round(float(exc[i]), 4) for i in order},
            learned={} if learned is None else {ids[i]: round(float(learned[i]), 4) for i in order},
            head=head,
        )


_routers: dict[tuple[str, str, str, str], ExpertRouter] = {}
"""Per catalog directory, routing content, embedding model and index cache directory (a router is tied to all four)."""
_routers_lock = threading.Lock()


def get_router(params: RouterParams | None = None, catalog: Catalog | None = None) -> ExpertRouter:
    """The process-wide router for the current catalog (index loaded or built on first use).

    Benched experts (a failed exam) are left out of routing (:meth:`Catalog.routable`).

    Raises:
        ConfigError: for an invalid catalog, a missing embedding model or an unusable index.
    """
    catalog = (catalog if catalog is not None else load_catalog()).routable()
    embedder = get_embedder()
    key = (str(catalog.directory), catalog.routing_hash(), embedder.model_id, str(cache_dir()))
    with _routers_lock:
        router = _routers.get(key)
        if router is None:
            index = load_or_build_index(catalog, embedder)
            router = ExpertRouter(catalog, embedder, index, DEFAULT_PARAMS, _fast_stage(catalog, embedder, index))
            _routers[key] = router
    return router if params is None or params == router.params else router.with_params(params)


FAST_STAGE_BACKENDS = ("onnx",)
"""Encoders the static table is distilled from: float encoders that embed a batch of texts like one text each
(the int8 graph quantises activations per call; sentence-transformers exposes no token-level call)."""


def _fast_stage(catalog: Catalog, embedder: Embedder, index: ExpertIndex) -> FastStage | None:
    if not isinstance(embedder, BertSentenceEncoder) or embedder.backend not in FAST_STAGE_BACKENDS:
        return None
    encoder = embedder

    def build() -> ExpertRouter:
        static = StaticEmbedder(encoder)
        # the learned term reads words, so the encoder's index already has the first stage's
        static_index = load_or_build_index(catalog, static, part="static", probe=index.probe)
        return ExpertRouter(catalog, static, static_index, DEFAULT_PARAMS)

    return FastStage(build)
