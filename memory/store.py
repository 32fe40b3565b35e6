"""Semantic memory: facts a person gave, kept per user in LangGraph's Store, searched by meaning.

``coe memory add "we deploy on PostgreSQL 16"`` stores a fact with its source, date and (when a run gave it) the
run's id; a lookup assist (``{{ASSIST:lookup:...}}``) searches these facts before the knowledge base and fills
the value from one only above the calibrated line (``Settings.memory_threshold``, 0.48, from
``bench/bench_memory.py``), with its provenance. ``coe memory forget`` removes a fact, or every fact a run wrote.
A fact above the line is near the request's topic, not always its answer ("the rate limit of the public API" is
near "our availability target for the public API is 99.9 percent"): :func:`fact_answers` asks a model (the
bigger coder model when installed: ``Settings.memory_check_model``) whether the fact states what is asked, and
the fact fills the request only on a yes.

The store is any LangGraph ``BaseStore`` (``SqliteStore`` beside the checkpoints by default, ``PostgresStore``
with a PostgreSQL URL, the server's own store): this module uses only its ``put``/``get``/``search``/``delete``
and does not import LangGraph. Facts live under ``(<user>, "memory", "facts")``, so users never see each other's
(on a server with API keys, a user's store calls may only name namespaces that start with their identity). A fact
put through the server's store API (``client.store.put_item((user, "memory", "facts"), key, {"text": ...})``) is
embedded when first searched.
Search is the Store's where the store has a vector index on the bundled embedder
(:mod:`experts.embedding.store_index`: the in-process store, SQLite with sqlite-vec): facts are put with
``index=["text"]`` and searched with ``query=``. A store without one (PostgreSQL without pgvector, a Python whose
sqlite3 cannot load sqlite-vec, the server's) is searched by our own scan: each fact's vector is stored with it
and a query is compared with every fact of the user's namespace. Both give the same cosine score from the same
vectors, so one calibrated line holds (``docs/decisions/memory.md``); :attr:`FactMemory.searched_by` says which search a
store gets, and why.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from experts.embedding import Embedder
from experts.embedding.store_index import FIELDS, why_no_index

__all__ = [
    "MAX_FACT_CHARS",
    "SIMILAR_TASK_LINE",
    "fact_answers",
    "Episode",
    "EpisodeMemory",
    "Fact",
    "FactMemory",
    "ItemStore",
    "namespace",
]

MAX_FACT_CHARS = 2000
"""A fact is a sentence or a short paragraph, not a document (documents go to the knowledge base)."""
_SCAN = 10_000
"""The most facts one search compares (a person's facts number in the tens or hundreds)."""


class ItemStore(Protocol):
    """The part of LangGraph's ``BaseStore`` this module uses."""

    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any], index: Any = None) -> None:
        """Store ``value`` under ``namespace``/``key``."""

    def get(self, namespace: tuple[str, ...], key: str) -> Any:
        """The item under ``namespace``/``key``, or None."""

    def search(
        self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None, limit: int = 10, offset: int = 0
    ) -> list[Any]:
        """Items under ``namespace_prefix`` (each with ``.value``; nearest ``query`` first, with ``.score``)."""

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Remove the item under ``namespace``/``key``."""


def namespace(user: str) -> tuple[str, ...]:
    """The Store namespace of a user's facts: it starts with the user, as the server's store rules require."""
    return (user, "memory", "facts")


@dataclass(frozen=True)
class Fact:
    """One remembered fact and where it came from."""

    id: str
    text: str
    source: str
    """Who or what gave it: ``person`` (``coe memory add``), ``answer to slot X`` ..."""
    created_at: str
    """ISO 8601, UTC."""
    run_id: str | None = None

    def cite(self) -> str:
        """How a filled value names its source."""
        return f"memory {self.id[:8]}, {self.source}, {self.created_at[:10]}"


class FactMemory:
    """A user's facts in a Store: add, list, search by meaning, forget."""

    def __init__(self, store: ItemStore, user: str, embedder: Embedder | Callable[[], Embedder]) -> None:
        """``embedder``: the embedder, or a function that returns it (called at the first add or search)."""
        self.store = store
        self.user = user
        self._embedder = embedder
        self._no_index = why_no_index(store)
        self._indexed_all = False

    @property
    def embedder(self) -> Embedder:
        """The embedder (made at first use when a function was given)."""
        if callable(self._embedder) and not hasattr(self._embedder, "encode"):
            self._embedder = self._embedder()
        return self._embedder  # type: ignore[return-value]

    @property
    def searched_by(self) -> str:
        """Which search this store gets: its own vector index, or the project's scan and why."""
        return "the store's vector index" if self._no_index is None else f"our own scan ({self._no_index})"

    def add(self, text: str, source: str = "person", run_id: str | None = None) -> Fact:
        """Remember ``text`` (stripped; at most :data:`MAX_FACT_CHARS`)."""
        text = " ".join(text.split())
        if not text:
            raise ValueError("a fact cannot be empty")
        if len(text) > MAX_FACT_CHARS:
            raise ValueError(
                f"a fact is at most {MAX_FACT_CHARS} characters (this one is {len(text)}); "
                "put documents in the knowledge base (coe kb add)"
            )
        fact = Fact(str(uuid.uuid4()), text, source, _now(), run_id)
        vector = np.asarray(self.embedder.encode([text]), dtype=np.float32)[0]
        value = {**_plain(fact), "vector": [round(float(x), 6) for x in vector]}
        self._put(fact.id, value)
        return fact

    def _put(self, key: str, value: dict[str, Any]) -> None:
        """Put a fact: embedded by the store's index when it has one (``indexed`` marks it), else not."""
        if self._no_index is None:
            self.store.put(namespace(self.user), key, {**value, "indexed": True}, index=list(FIELDS))
        else:
            self.store.put(namespace(self.user), key, value, index=False)

    def facts(self) -> list[Fact]:
        """Every fact of the user, oldest first."""
        items = self.store.search(namespace(self.user), limit=_SCAN)
        facts = [_fact(item.key, item.value) for item in items]
        return sorted(facts, key=lambda f: f.created_at)

    def search(self, query: str, k: int = 5) -> list[tuple[Fact, float]]:
        """The ``k`` facts nearest ``query`` by cosine similarity, best first."""
        if not query.strip():
            return []
        if self._no_index is None:
            self._index_all()
            hits = self.store.search(namespace(self.user), query=query, limit=k)
            return [(_fact(h.key, h.value), round(float(h.score), 4)) for h in hits if h.score is not None]
        items = self.store.search(namespace(self.user), limit=_SCAN)
        if not items:
            return []
        missing = [i for i, item in enumerate(items) if "vector" not in item.value]
        found = np.asarray(self.embedder.encode([items[i].value["text"] for i in missing]), dtype=np.float32)
        added = dict(zip(missing, found, strict=True)) if missing else {}
        vectors = np.asarray(
            [added[i] if i in added else item.value["vector"] for i, item in enumerate(items)], dtype=np.float32
        )
        q = np.asarray(self.embedder.encode([query]), dtype=np.float32)[0]
        scores = vectors @ q
        order = np.argsort(-scores)[:k]
        return [(_fact(items[i].key, items[i].value), round(float(scores[i]), 4)) for i in order]

    def _index_all(self) -> None:
        """Put again, indexed, the facts the store holds unindexed (once per instance).

        They were written before the store had an index, or through the server's store API.
        """
        if self._indexed_all:
            return
        for item in self.store.search(namespace(self.user), limit=_SCAN):
            if not item.value.get("indexed") and "text" in item.value:
                self._put(item.key, dict(item.value))
        self._indexed_all = True

    def forget(self, fact_id: str) -> Fact | None:
        """Remove one fact by its id (or a unique prefix of it); the fact removed, or None."""
        matches = [f for f in self.facts() if f.id == fact_id or f.id.startswith(fact_id)]
        if len(matches) != 1:
            return None
        self.store.delete(namespace(self.user), matches[0].id)
        return matches[0]

    def forget_run(self, run_id: str) -> list[Fact]:
        """Remove every fact a run wrote (``run_id`` or a prefix of it); the facts removed."""
        gone = [f for f in self.facts() if f.run_id is not None and f.run_id.startswith(run_id)]
        for fact in gone:
            self.store.delete(namespace(self.user), fact.id)
        return gone


def _plain(fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "text": fact.text,
        "source": fact.source,
        "created_at": fact.created_at,
        "run_id": fact.run_id,
    }


def _fact(key: str, value: dict[str, Any]) -> Fact:
    return Fact(
        key,
        str(value["text"]),
        str(value.get("source", "store API")),
        str(value.get("created_at", "")),
        value.get("run_id"),
    )


# --- episodic memory -----------------------------------------------------------------------------------------------

SIMILAR_TASK_LINE = 0.85
"""Least similarity of two tasks for an earlier run's outcome to bear on a new plan (set by hand: a paraphrase of
the same request scores about 0.9 with the bundled embedder, two requests of one kind about 0.6-0.8)."""


@dataclass(frozen=True)
class Episode:
    """What one finished run did and how it went (an after-action record)."""

    run_id: str
    thread_id: str
    task: str
    status: str
    """completed, partial or failed."""
    template: str | None
    """The library template the plan came from (None: a given, one-slot or aspect-built plan)."""
    slots: list[dict[str, Any]]
    """Each slot: ``id``, ``title``, ``expert``, ``passed`` (its checks; None when it did not finish)."""
    seconds: float
    approval: str | None
    """What the person answered about the plan (approve / edit), if asked."""
    created_at: str
    feedback: tuple[dict[str, Any], ...] = ()
    """What the person said about the result later (``coe feedback``): ``verdict`` (good or bad), ``slot``,
    ``expert``, ``note``, ``at``."""

    @property
    def worked(self) -> bool:
        """Completed with every slot's checks passed, and the person never called the whole result bad."""
        bad = any(f.get("verdict") == "bad" and not f.get("slot") and not f.get("expert") for f in self.feedback)
        return self.status == "completed" and all(s.get("passed") is not False for s in self.slots) and not bad


class EpisodeMemory:
    """A user's after-action records in a Store: written when a run finishes, read when a similar task is planned."""

    def __init__(self, store: ItemStore, user: str, embedder: Embedder | Callable[[], Embedder]) -> None:
        self.facts = FactMemory(store, user, embedder)  # the same store, user and embedder
        self.namespace = (user, "memory", "episodes")

    def record(self, episode: Episode) -> None:
        """Store ``episode`` (keyed by its run: a run recorded again replaces its record)."""
        vector = np.asarray(self.facts.embedder.encode([episode.task]), dtype=np.float32)[0]
        value = {**episode.__dict__, "feedback": list(episode.feedback), "vector": [round(float(x), 6) for x in vector]}
        self.facts.store.put(self.namespace, episode.run_id, value, index=False)

    def episodes(self) -> list[Episode]:
        """Every record, oldest first."""
        items = self.facts.store.search(self.namespace, limit=_SCAN)
        return sorted((_episode(item.value) for item in items), key=lambda e: e.created_at)

    def similar(self, task: str, line: float = SIMILAR_TASK_LINE) -> list[tuple[Episode, float]]:
        """Earlier runs whose task is at least ``line`` similar to ``task``, most similar first."""
        items = self.facts.store.search(self.namespace, limit=_SCAN)
        if not items:
            return []
        vectors = np.asarray([item.value["vector"] for item in items], dtype=np.float32)
        scores = vectors @ np.asarray(self.facts.embedder.encode([task]), dtype=np.float32)[0]
        found = [(_episode(items[i].value), round(float(scores[i]), 4)) for i in np.argsort(-scores)]
        return [(e, s) for e, s in found if s >= line]

    def add_feedback(self, run_id: str, verdict: str, slot: str | None, expert: str | None, note: str) -> Episode:
        """Add the person's verdict on a run (or one of its slots or experts) to its record; the record."""
        matches = [e for e in self.episodes() if e.run_id == run_id]
        if not matches:
            raise KeyError(run_id)
        episode = matches[0]
        entry = {"verdict": verdict, "slot": slot, "expert": expert, "note": note, "at": _now()}
        updated = Episode(**{**episode.__dict__, "feedback": (*episode.feedback, entry)})
        self.record(updated)
        return updated

    def forget_run(self, run_id: str) -> bool:
        """Remove a run's record (``run_id`` or a unique prefix of it); whether there was one."""
        matches = [e.run_id for e in self.episodes() if e.run_id.startswith(run_id)]
        if len(matches) != 1:
            return False
        self.facts.store.delete(self.namespace, matches[0])
        return True


def _episode(value: dict[str, Any]) -> Episode:
    fields = {k: value[k] for k in Episode.__dataclass_fields__ if k in value}
    return Episode(**{**fields, "feedback": tuple(value.get("feedback") or ())})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


CHECK_SYSTEM = "You check whether a remembered fact answers a request for information. Answer only yes or no."
CHECK_GRAMMAR = 'root ::= "yes" | "no"'


def fact_answers(backend: ExpertBackend, request: str, fact: str) -> bool | None:
    """Whether ``fact`` states what ``request`` asks for, as ``backend`` reads them (None: no yes or no came back).

    One greedy token under a yes/no grammar. Measured on ``bench/data/memory_facts.yaml`` (41 requests whose best
    fact is at least 0.40 similar): Qwen2.5-Coder-1.5B said yes to all 30 right facts and no to 7 of 11 wrong
    ones; the 0.5B base model said yes to every one, so it is never asked (``bench/results/memory.md``).
    """
    answer = (
        backend.generate(
            GenerationRequest(
                messages=(
                    ChatMessage("system", CHECK_SYSTEM),
                    ChatMessage(
                        "user",
                        f"Request: {request}\nFact: {fact}\nDoes the fact state the information the request asks for?",
                    ),
                ),
                max_tokens=2,
                temperature=0.0,
                grammar=CHECK_GRAMMAR,
                slot_id="memory-check",
            )
        )
        .text.strip()
        .lower()
    )
    return True if answer.startswith("yes") else False if answer.startswith("no") else None
