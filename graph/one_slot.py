"""One slot, run alone through the compiled graph: how exams, shadow runs and their benchmarks ask an expert.

The slot runs as ``coe run`` runs a task with a one-slot framework (the named expert's persona, model binding,
output contract and checks), on a thread of its own; the final Passport says what it delivered.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from graph.persistence import serializer
from state.context import RunContext
from state.io import RunInput, RunOptions
from state.passport import Passport

__all__ = ["arun_one_slot", "run_one_slot", "scratch_graph"]


def scratch_graph(saver: BaseCheckpointSaver[str] | None = None) -> Any:
    """The compiled graph on ``saver`` (default: a throw-away in-memory one with the checkpoint serializer).

    Typed ``Any``: it is invoked with a plain dict input, which the compiled graph's overloads do not name.
    """
    from graph.builder import build_graph  # the compiled graph imports every node: only a lone slot needs it

    return build_graph(saver if saver is not None else InMemorySaver(serde=serializer()))


def run_one_slot(
    graph: Any,
    task: str,
    slot: dict[str, Any],
    title: str,
    *,
    source: str | None = None,
    context: RunContext | dict[str, Any] | None = None,
) -> tuple[Passport, float]:
    """Run ``slot`` (a framework slot naming its expert) for ``task`` on a new thread of ``graph``.

    Args:
        graph: From :func:`scratch_graph`.
        task: The task the run is given.
        slot: The one slot of the framework.
        title: The framework's title (the document's).
        source: The framework's source (``exam:<id>`` lets a benched expert take its exam's slot).
        context: The run's settings.

    Returns:
        The final Passport and the run's seconds.
    """
    payload, config = _one_slot_run(task, slot, title, source)
    t0 = time.perf_counter()
    graph.invoke(payload, config, context=context, durability="exit")
    seconds = round(time.perf_counter() - t0, 1)
    return Passport.model_validate(graph.get_state(config).values), seconds


async def arun_one_slot(
    graph: Any,
    task: str,
    slot: dict[str, Any],
    title: str,
    *,
    source: str | None = None,
    context: RunContext | dict[str, Any] | None = None,
) -> tuple[Passport, float]:
    """:func:`run_one_slot` on the event loop: cancelling the awaiting task stops the slot's generations."""
    payload, config = _one_slot_run(task, slot, title, source)
    t0 = time.perf_counter()
    await graph.ainvoke(payload, config, context=context, durability="exit")
    seconds = round(time.perf_counter() - t0, 1)
    return Passport.model_validate((await graph.aget_state(config)).values), seconds


def _one_slot_run(task: str, slot: dict[str, Any], title: str, source: str | None) -> tuple[dict[str, Any], Any]:
    framework = {"id": "one_slot", "title": title, "slots": [slot]}
    run_input = RunInput(task=task, options=RunOptions(framework=framework, framework_source=source))
    return run_input.model_dump(mode="json"), {"configurable": {"thread_id": f"one-slot-{uuid.uuid4()}"}}
