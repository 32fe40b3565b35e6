"""Assemble and compile the College of Experts graph.

``build_graph`` is what embedders call; the module-level ``graph`` (no checkpointer: the LangGraph server
supplies one) is what ``langgraph.json`` points at.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from typing import Any

from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.store.base import BaseStore

from graph.routing import (
    after_adapt,
    after_check_parts,
    after_complete,
    after_confirm,
    after_execute,
    after_guard,
    after_scope,
)
from nodes import (
    adapt_template,
    aexecute_slots,
    answer_directly,
    ask_plan_fit,
    ask_user,
    assemble,
    check_parts,
    complete,
    confirm_plan,
    execute_slots,
    guard,
    refuse_input,
    route_slots,
    scope,
    select_template,
)
from state.context import RunContext
from state.errors import InputError
from state.framework import MAX_SLOTS
from state.io import RunInput, RunOutput, unknown_keys
from state.passport import AskUser, Passport, PlannedPassport

RECURSION_LIMIT = 3 * MAX_SLOTS + 30
"""Enough super-steps for the largest framework: each slot needs at most two execute_slots rounds, and the
completion round's parts one more (with a second pass through ``check_parts`` and ``complete``)."""


class CoeGraph(CompiledStateGraph[Passport, RunContext, RunInput, RunOutput]):
    """The compiled graph, refusing an input key it does not take.

    LangGraph keeps only the input schema's keys of a run's input, so ``graph.invoke({"task": ..., "mod": ...})``
    would run without the misspelt field and without a word. ``invoke`` and ``ainvoke`` go through ``stream`` and
    ``astream``, so the two are where an input mapping is checked (:func:`state.io.unknown_keys`, the same
    message the server answers with 422) before anything is written. A resume (``Command``) or ``None`` passes.
    """

    def stream(self, input: Any, *args: Any, **kwargs: Any) -> Any:
        """``CompiledStateGraph.stream`` after the input check, counted in :data:`activity` while it runs."""
        _check_input(input)
        return activity.counted(super().stream(input, *args, **kwargs))

    def astream(self, input: Any, *args: Any, **kwargs: Any) -> Any:
        """``CompiledStateGraph.astream`` after the input check (made when called, as the sync form), counted."""
        _check_input(input)
        return activity.acounted(super().astream(input, *args, **kwargs))


class RunActivity:
    """How many graph runs this process has in flight, and when the last one ended: what "idle" means here.

    The server's shadow worker (:mod:`server.shadow_worker`) answers a candidate's queued slots only while no run
    is in flight and none has been for a while, and stops its own job when one starts. Its own runs are marked
    with :data:`BACKGROUND` (a context variable the worker's task sets) and are not counted.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._last_end = time.monotonic()

    def in_flight(self) -> int:
        """Runs in flight now (background runs not counted)."""
        with self._lock:
            return self._in_flight

    def idle_seconds(self) -> float:
        """Seconds since the last counted run ended (or since start-up); 0 while one is in flight."""
        with self._lock:
            return 0.0 if self._in_flight else time.monotonic() - self._last_end

    def _change(self, step: int) -> None:
        with self._lock:
            self._in_flight += step
            self._last_end = time.monotonic()

    def counted(self, chunks: Iterator[Any]) -> Iterator[Any]:
        """``chunks`` (a run's stream), counted from its first chunk asked for to its end or close."""
        if BACKGROUND.get():
            yield from chunks
            return
        self._change(+1)
        try:
            yield from chunks
        finally:
            self._change(-1)

    async def acounted(self, chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The async form of :meth:`counted`."""
        if BACKGROUND.get():
            async for chunk in chunks:
                yield chunk
            return
        self._change(+1)
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            self._change(-1)


BACKGROUND: ContextVar[bool] = ContextVar("coe_background_run", default=False)
"""Set in a task whose graph runs are the process's own background work (shadow runs), not a user's."""
activity = RunActivity()
"""This process's graph runs (all compiled graphs of :func:`build_graph`)."""


def _check_input(given: Any) -> None:
    message = unknown_keys("input", RunInput, given)
    if message is not None:
        raise InputError("input", message.removeprefix("input: "))


def build_graph(
    checkpointer: BaseCheckpointSaver[str] | None = None,
    *,
    store: BaseStore | None = None,
    name: str = "college_of_experts",
) -> CoeGraph:
    """Build and compile the graph with the caller's checkpointer and store.

    Both are optional: the LangGraph server brings its own; without a store nothing is remembered between
    threads (:func:`graph.open_store` opens the one that goes with a checkpoint URL).
    """
    builder = StateGraph(Passport, context_schema=RunContext, input_schema=RunInput, output_schema=RunOutput)
    builder.add_node("guard", guard)
    builder.add_node("refuse_input", refuse_input)
    builder.add_node("scope", scope)
    builder.add_node("answer_directly", answer_directly)
    builder.add_node("select_template", select_template)
    builder.add_node("adapt_template", adapt_template)
    builder.add_node("ask_plan_fit", ask_plan_fit)
    builder.add_node("route_slots", route_slots)
    builder.add_node("confirm_plan", confirm_plan)
    builder.add_node("execute_slots", slots_node(), input_schema=PlannedPassport)
    builder.add_node("ask_user", ask_user, input_schema=AskUser)
    builder.add_node("check_parts", check_parts)
    builder.add_node("complete", complete)
    builder.add_node("assemble", assemble)
    builder.add_edge(START, "guard")
    builder.add_conditional_edges("guard", after_guard)
    builder.add_edge("refuse_input", END)
    builder.add_conditional_edges("scope", after_scope)
    builder.add_edge("answer_directly", END)
    builder.add_edge("select_template", "adapt_template")
    builder.add_conditional_edges("adapt_template", after_adapt)
    builder.add_edge("ask_plan_fit", "route_slots")
    builder.add_edge("route_slots", "confirm_plan")
    builder.add_conditional_edges("confirm_plan", after_confirm)
    builder.add_conditional_edges(
        "execute_slots", after_execute, ["execute_slots", "ask_user", "check_parts", "assemble"]
    )
    builder.add_conditional_edges("check_parts", after_check_parts)
    builder.add_conditional_edges("complete", after_complete)
    builder.add_edge("ask_user", "execute_slots")
    builder.add_edge("assemble", END)
    compiled = builder.compile(checkpointer=checkpointer, store=store, name=name)
    # The subclass built from the compiled graph's attributes, as ``Pregel.copy`` builds its copies.
    checked = CoeGraph(**{k: v for k, v in vars(compiled).items() if k != "__orig_class__"})
    return checked.with_config(recursion_limit=RECURSION_LIMIT)


def slots_node() -> RunnableLambda[PlannedPassport, dict[str, Any]]:
    """The execute_slots node in both forms, each given the run's runtime as a node function would be.

    The CLI and embedders run the graph synchronously; the server runs it async, where a cancelled run must stop
    its generations (docs/decisions.md, "A cancelled run stops its generations"). A plain function would get
    one form only (LangGraph runs a sync node in a thread under ``ainvoke``), so the pair is a ``RunnableLambda``
    and the runtime comes from :func:`langgraph.runtime.get_runtime`.
    """

    def run(state: PlannedPassport) -> dict[str, Any]:
        return execute_slots(state, get_runtime(RunContext))

    async def arun(state: PlannedPassport) -> dict[str, Any]:
        return await aexecute_slots(state, get_runtime(RunContext))

    return RunnableLambda(run, afunc=arun, name="execute_slots")


graph = build_graph()
