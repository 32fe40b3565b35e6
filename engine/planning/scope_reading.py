"""A second reading of a task's scope: is a task read as a plan ONE piece of work or SEVERAL (issue 40).

The deterministic pass (:func:`experts.routing.classify`) reads a plan wherever it finds two deliverables or the
similarities say so; on phrasings its rules were not written from it splits single deliverables (planning
held-out sets 4-9: 0.61-0.92 of them one slot). Where it reads a plan, the planner model is asked one word under
a grammar, after sixteen labelled requests (``config/scope_examples.yaml``) given as earlier turns of the chat;
ONE makes the task one expert's work, SEVERAL (or no usable answer) keeps the plan. Both must say "plan" for a
plan: measured on planning_heldout8 and planning_heldout9 before it was built, single deliverables kept as one
slot rose from 65 to 71 of 76 and the plans read as one slot from 14 to 16 of 48
(docs/decisions/planning.md, "A second reading by the planner model").

The system message and the labelled turns are the same for every task: they are sent as the request's shared
prefix (in ChatML, the template of every bundled model), so the llama.cpp backend reads them once and keeps
their state on disk; with another chat template the prompt is read whole, which is slower and gives the same
answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml

from experts.backends.protocol import ChatMessage, ExpertBackend, GenerationRequest
from state.errors import BackendError, ConfigError, GenerationStopped
from state.paths import config_dir
from state.scope_decision import ScopeDecision
from state.yaml_text import safe_load

__all__ = ["GRAMMAR", "SLOT_ID", "ScopeReading", "examples_path", "read_scope", "reading_messages", "second_reading"]

SLOT_ID = "scope"
GRAMMAR = 'root ::= "ONE" | "SEVERAL"'
READING_SECONDS = 40.0
"""The reading's time limit: the first one in a fresh model cache reads ~950 tokens (~25 s on 2 cores)."""

SYSTEM = (
    "You decide how many separate pieces of work a request asks for. A piece of work is something the person "
    "receives as its own answer: a document, a program, a query, a configuration file, a message. Everything else "
    "in the request only describes a piece of work: the input or data, the context, the audience, the requirements, "
    "what it must contain (sections, points, examples, items, checks), and questions it answers. Answer SEVERAL "
    "only when the request asks for two or more things that would each be delivered separately; answer ONE when it "
    "asks for one thing, however many requirements it lists. Labelled examples come first."
)


@dataclass(frozen=True)
class ScopeReading:
    """What the planner model said: ``one``, ``several``, or ``none`` (no usable answer, with why).

    ``detail`` also says when the model was asked a second time.
    """

    answer: Literal["one", "several", "none"]
    seconds: float
    detail: str = ""


def examples_path() -> Path:
    """The labelled requests (``config/scope_examples.yaml``)."""
    return config_dir() / "scope_examples.yaml"


@lru_cache(maxsize=4)
def _examples(path: Path) -> tuple[tuple[str, str], ...]:
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
        rows = tuple((str(e["request"]), str(e["answer"])) for e in data["examples"])
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise ConfigError(str(path), f"a list of {{request, answer}} entries is needed ({exc})", "examples") from exc
    bad = [answer for _, answer in rows if answer not in ("ONE", "SEVERAL")]
    if bad or not rows:
        raise ConfigError(str(path), f"must be ONE or SEVERAL (found {bad or 'no examples'})", "examples[].answer")
    return rows


def _question(request: str) -> str:
    return f"Request: <<<{request}>>>\nONE or SEVERAL?"


def reading_messages(task: str, path: Path | None = None) -> tuple[tuple[ChatMessage, ...], str]:
    """The chat of the reading and its shared prefix (the system message and the labelled turns, in ChatML)."""
    messages = [ChatMessage("system", SYSTEM)]
    for request, answer in _examples(path or examples_path()):
        messages += [ChatMessage("user", _question(request)), ChatMessage("assistant", answer)]
    rendered = "<|im_end|>\n".join(
        m.content if i == 0 else f"<|im_start|>{m.role}\n{m.content}" for i, m in enumerate(messages)
    )
    return (*messages, ChatMessage("user", _question(task))), rendered


def read_scope(task: str, backend: ExpertBackend, *, time_limit: float = READING_SECONDS) -> ScopeReading:
    """Ask ``backend`` whether ``task`` is ONE piece of work or SEVERAL; ``none`` when it gives no such answer.

    Raises:
        GenerationStopped: If the run was stopped while the model read.
    """
    messages, shared = reading_messages(task)
    request = GenerationRequest(
        messages=messages,
        max_tokens=4,
        grammar=GRAMMAR,
        slot_id=SLOT_ID,
        slot_title="Read the task's scope",
        time_limit=time_limit,
        shared_prefix=shared,
    )
    start = time.perf_counter()
    again = ""
    try:
        gen = backend.generate(request)
        if not gen.text.strip() and gen.finish_reason == "time":
            # The limit passed while the prompt was read (the labelled turns, the first time in a fresh model
            # cache on a slow machine: 45 s seen on 2 busy cores); they are kept read now, so the one word costs
            # a second or two: asked once more rather than losing the reading that was paid for.
            gen = backend.generate(request)
            again = f"asked again after the time limit ({time_limit:.0f} s) passed while the request was read"
    except GenerationStopped:
        raise
    except BackendError as exc:
        return ScopeReading("none", time.perf_counter() - start, f"the planner model failed: {exc}")
    seconds = time.perf_counter() - start
    word = gen.text.strip().upper()
    if word in ("ONE", "SEVERAL"):
        return ScopeReading("one" if word == "ONE" else "several", seconds, again)
    said = f"the planner model answered {gen.text.strip()[:60]!r}, not ONE or SEVERAL"
    return ScopeReading("none", seconds, f"{said} ({again})" if again else said)


def second_reading(decision: ScopeDecision, reading: ScopeReading, model: str) -> ScopeDecision:
    """The scope once the planner model has read a plan: one expert's work when it reads ONE, else unchanged."""
    if decision.kind != "multi" or reading.answer != "one":
        return decision
    return decision.model_copy(
        update={
            "kind": "single",
            "rule": "planner_reads_one",
            "reason": f"the planner model ({model}) reads one piece of work ({decision.reason})",
        }
    )
