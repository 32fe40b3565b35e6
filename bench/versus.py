"""The harness against the bare model it runs on: what every quality benchmark shares.

A quality benchmark asks each task twice, in one process, on the same pooled model instances:

* **harness**: the compiled graph with default settings, in process, as ``coe run`` runs it
  (:func:`run_harness`); it delivers a document and, for code slots, modules (:func:`delivered_modules`);
* **bare**: the model the harness routed the task's first slot to (:attr:`HarnessRun.model`; the base model for
  a persona or a direct answer), given the task alone, greedy, with a code slot's answer budget
  (:func:`bare_generation`).

:func:`compare` is the loop around both: the fake backend in ``--quick``, ``--resume`` from a results file,
results written as the run goes (a long run keeps what it measured if it is stopped) and at the end.
:func:`versus_parser` holds the options every such benchmark takes.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from bench.common import bench_parser, earlier_results, write_results
from engine.artifacts import code_artifacts
from experts.backends import ChatMessage, Generation, GenerationRequest
from experts.pool import get_backend
from graph import build_graph, open_checkpointer
from state import Passport
from state.context import resolve_settings
from state.io import RunInput
from state.passport import RoutingDecision
from state.settings import Settings

BARE_MAX_TOKENS = 900
"""The bare model's answer budget: the harness's budget for a code slot (engine.slots.contracts)."""
QUICK_LABEL = " (QUICK: fake backend, not a measurement)"
"""What a quick run's report says after its title."""
REFERENCE_MODEL = "qwen2.5-coder-1.5b"
"""The best model installed: the reference a harness answer is compared with, asked directly."""
REFERENCE_PENALTY = 1.1
"""Qwen2.5-Coder-Instruct's own generation config: repetition_penalty 1.1 (the reference's sampling)."""


@dataclass
class HarnessRun:
    """One task through the compiled graph: the final Passport and the wall time of the whole run."""

    state: Passport
    seconds: float

    @property
    def decision(self) -> RoutingDecision | None:
        """The routing decision of the first slot (None: the task was answered directly)."""
        return next(iter(self.state.routing.values()), None)

    @property
    def model(self) -> str | None:
        """The model that served the first slot, which the bare side asks (None: the base model)."""
        return self.decision.model if self.decision is not None else None

    def drawn(self) -> tuple[int, int, int]:
        """Candidates drawn, tokens generated and tokens kept, over every slot with a quality record."""
        candidates = generated = kept = 0
        for result in self.state.results.values():
            if result.quality is not None:
                candidates += len(result.quality.candidates)
                generated += result.quality.tokens_generated
                kept += result.quality.tokens_kept
        return candidates, generated, kept


@dataclass(frozen=True)
class Sides:
    """What both sides run on: the compiled graph, the resolved settings and the run context."""

    graph: Any
    settings: Settings
    context: dict[str, Any]

    def harness(self, task: str) -> HarnessRun:
        """Run ``task`` through the graph as ``coe run`` does, in process."""
        return run_harness(self.graph, task, self.context)

    def bare(self, model: str | None, task: str) -> tuple[Generation, float]:
        """The bare model's answer to ``task`` and its wall time."""
        return bare_generation(self.settings, model, task)

    def reference(self, task: str, model: str = REFERENCE_MODEL) -> tuple[Generation, float]:
        """``model`` (the reference, by default) asked ``task`` alone at :data:`REFERENCE_PENALTY`; its wall time.

        On the fake backend (``--quick``) the base model answers: the fake has one model.
        """
        fake = self.context.get("backend") == "fake"
        return bare_generation(self.settings, None if fake else model, task, REFERENCE_PENALTY)


def run_harness(graph: Any, task: str, context: dict[str, Any]) -> HarnessRun:
    """Run ``task`` through the compiled graph (a fresh thread, checkpoints at exit) and time the whole run."""
    config = {"configurable": {"thread_id": f"versus-{uuid.uuid4()}"}}
    t0 = time.perf_counter()
    graph.invoke(RunInput(task=task).model_dump(mode="json"), config, context=context, durability="exit")
    seconds = time.perf_counter() - t0
    return HarnessRun(Passport.model_validate(graph.get_state(config).values), seconds)


def delivered_modules(state: Passport) -> str:
    """The Python modules the document delivers (every code slot's, tests left out), in order; '' when none."""
    if state.framework is None:
        return ""
    files = code_artifacts(state.framework, state.results)
    return "\n\n".join(text for name, text in files.items() if name.endswith(".py") and not name.startswith("test_"))


def bare_request(task: str, repeat_penalty: float = 1.0) -> GenerationRequest:
    """The bare model's request: the task alone as the user's message, greedy, :data:`BARE_MAX_TOKENS`."""
    return GenerationRequest(
        messages=(ChatMessage("user", task),),
        max_tokens=BARE_MAX_TOKENS,
        temperature=0.0,
        repeat_penalty=repeat_penalty,
        slot_id="bare",
    )


def bare_generation(
    settings: Settings, model: str | None, task: str, repeat_penalty: float = 1.0
) -> tuple[Generation, float]:
    """Ask the pooled ``model`` (None: the base model) the task alone; its generation and wall time."""
    backend = get_backend(settings, model)
    t0 = time.perf_counter()
    gen = backend.generate(bare_request(task, repeat_penalty))
    return gen, time.perf_counter() - t0


def thrown_away_per_kept(generated: int, kept: int) -> float:
    """Tokens generated and thrown away per kept token (0 when nothing was kept)."""
    return (generated - kept) / kept if kept else 0.0


def versus_parser(doc: str | None, name: str, ids_help: str) -> argparse.ArgumentParser:
    """:func:`bench.common.bench_parser` with the options of a harness-versus-bare benchmark."""
    parser = bench_parser(doc)
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    parser.add_argument("--ids", default="", help=ids_help)
    parser.add_argument("--name", default=name, help=f"results file name (default {name})")
    parser.add_argument(
        "--resume", type=Path, default=None, help="a results JSON of a stopped run: keep its rows, run the rest"
    )
    return parser


Item = TypeVar("Item")
Row = TypeVar("Row")


@dataclass(frozen=True)
class Benchmark(Generic[Item, Row]):
    """How one quality benchmark fills :func:`compare`'s loop.

    ``rows_key`` names the list of rows in its results file, ``saved_row`` rebuilds one (``--resume``),
    ``item_id`` and ``row_id`` match the two, ``run_one`` asks both sides one item, ``progress`` is the line
    printed after it, and ``summarise`` makes the results file's payload and Markdown.
    """

    rows_key: str
    saved_row: Callable[[dict[str, Any]], Row]
    item_id: Callable[[Item], str]
    row_id: Callable[[Row], str]
    run_one: Callable[[Sides, Item], Row]
    progress: Callable[[Row], str]
    summarise: Callable[[list[Row], argparse.Namespace], tuple[dict[str, Any], str]]
    save_every: int = 1
    preload: Sequence[str | None] = ()
    """Models loaded before the first task (not in ``--quick``), so that no task's time includes a load."""


def compare(bench: Benchmark[Item, Row], items: list[Item], args: argparse.Namespace) -> int:
    """Ask both sides every item not already in ``--resume``, writing the results as it goes and at the end."""
    context: dict[str, Any] = {"backend": "fake"} if args.quick else {}
    settings = resolve_settings(context)
    rows = earlier_results(args.resume, bench.rows_key, bench.saved_row) if args.resume else []
    done = {bench.row_id(row) for row in rows}
    todo = [item for item in items if bench.item_id(item) not in done]
    with open_checkpointer("memory") as saver:
        sides = Sides(build_graph(saver), settings, context)
        if not args.quick:
            for model in bench.preload:
                get_backend(settings, model).load()
        for n, item in enumerate(todo, 1):
            row = bench.run_one(sides, item)
            rows.append(row)
            print(f"[{n}/{len(todo)}] {bench.progress(row)}", flush=True)
            if n % bench.save_every == 0 and n < len(todo):  # a long run keeps what it measured if it is stopped
                write_results(args.name, *bench.summarise(rows, args), directory=args.out)
    payload, markdown = bench.summarise(rows, args)
    paths = write_results(args.name, payload, markdown, directory=args.out)
    print(markdown)
    print(f"wrote {paths[0]} and {paths[1]}")
    return 0
