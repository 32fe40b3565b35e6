"""The server's checkpointers: a rolled-back run's checkpoints go, other runs' stay; prune keeps the newest."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from operator import add
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from graph.persistence import open_async_checkpointer
from graph.savers import ServerPostgresSaver, ServerSqliteSaver
from tests.conftest import POSTGRES_URL


class Steps(TypedDict):
    seen: Annotated[list[str], add]


def _counter() -> StateGraph[Steps, None, Steps, Steps]:
    builder = StateGraph(Steps)
    builder.add_node("one", lambda s: {"seen": ["one"]})
    builder.add_node("two", lambda s: {"seen": ["two"]})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", END)
    return builder


async def _history(graph: Any, thread: str) -> list[dict[str, Any]]:
    return [s.metadata async for s in graph.aget_state_history({"configurable": {"thread_id": thread}})]


def _in(url: str, scenario: Callable[[Any, Any], Awaitable[None]]) -> None:
    async def main() -> None:
        async with open_async_checkpointer(url) as saver:
            await scenario(saver, _counter().compile(checkpointer=saver))

    asyncio.run(main())


def _config(thread: str, run: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "metadata": {"run_id": run}}


async def _rollback_keeps_the_other_runs(saver: Any, graph: Any) -> None:
    thread, other = f"t-{uuid.uuid4()}", f"o-{uuid.uuid4()}"
    await graph.ainvoke({"seen": ["a"]}, _config(thread, "run-1"))
    await graph.ainvoke({"seen": ["b"]}, _config(thread, "run-2"))
    await graph.ainvoke({"seen": ["c"]}, _config(other, "run-2-elsewhere"))
    before = await _history(graph, thread)
    assert {m["run_id"] for m in before} == {"run-1", "run-2"}
    await saver.adelete_for_runs(["run-2"])
    after = await _history(graph, thread)
    assert after and {m["run_id"] for m in after} == {"run-1"}
    assert len(after) == sum(m["run_id"] == "run-1" for m in before)
    state = await graph.aget_state({"configurable": {"thread_id": thread}})
    assert state.values["seen"] == ["a", "one", "two"]  # the thread is back where run-1 left it
    assert len(await _history(graph, other)) == 4  # another thread's run is untouched
    await graph.ainvoke({"seen": ["d"]}, _config(thread, "run-3"))  # and the thread goes on
    state = await graph.aget_state({"configurable": {"thread_id": thread}})
    assert state.values["seen"] == ["a", "one", "two", "d", "one", "two"]
    await saver.adelete_for_runs([])
    with pytest.raises(TypeError, match="not a str"):
        await saver.adelete_for_runs("run-1")
    await saver.adelete_thread(thread)
    await saver.adelete_thread(other)


def test_sqlite_rollback_deletes_only_that_runs_checkpoints(tmp_path: Path) -> None:
    async def scenario(saver: Any, graph: Any) -> None:
        assert isinstance(saver, ServerSqliteSaver)
        await _rollback_keeps_the_other_runs(saver, graph)

    _in(f"sqlite://{tmp_path / 'c.sqlite'}", scenario)


@pytest.mark.postgres
def test_postgres_rollback_deletes_only_that_runs_checkpoints_and_values() -> None:
    async def scenario(saver: Any, graph: Any) -> None:
        assert isinstance(saver, ServerPostgresSaver)
        await _rollback_keeps_the_other_runs(saver, graph)

    _in(POSTGRES_URL, scenario)


def test_sqlite_prune_keeps_the_newest_checkpoint_or_deletes_all(tmp_path: Path) -> None:
    async def scenario(saver: Any, graph: Any) -> None:
        await graph.ainvoke({"seen": ["a"]}, _config("kept", "r1"))
        await graph.ainvoke({"seen": ["b"]}, _config("kept", "r2"))
        await graph.ainvoke({"seen": ["c"]}, _config("gone", "r3"))
        await graph.ainvoke({"seen": ["d"]}, _config("untouched", "r4"))
        latest = await graph.aget_state({"configurable": {"thread_id": "kept"}})
        await saver.aprune(["kept"], strategy="keep_latest")
        assert len(await _history(graph, "kept")) == 1
        assert (await graph.aget_state({"configurable": {"thread_id": "kept"}})).values == latest.values
        await saver.aprune(["gone"], strategy="delete_all")
        assert await _history(graph, "gone") == []
        assert len(await _history(graph, "untouched")) == 4
        with pytest.raises(ValueError, match="unknown prune strategy 'some'"):
            await saver.aprune(["kept"], strategy="some")

    _in(f"sqlite://{tmp_path / 'c.sqlite'}", scenario)
