"""`langgraph dev` serves the graph from langgraph.json; runs and interrupts through langgraph-sdk."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from bench.common import write_server_config
from state.framework import load_framework_file
from tests.conftest import FIXTURES, read_calls
from tests.integration.cli_proc import free_port

ROOT = Path(__file__).resolve().parents[2]
TASK = "Write a Python function that checks whether a string is a palindrome"  # single expert: one slot
BRANCHY = load_framework_file(str(FIXTURES / "branchy.yaml")).model_dump(mode="json")
T = TypeVar("T")

pytestmark = pytest.mark.server


class Server:
    def __init__(self, url: str, db: Path, proc: subprocess.Popen[bytes] | None = None) -> None:
        self.url, self.db, self.proc = url, db, proc

    def run(self, scenario: Callable[[Any], Awaitable[T]]) -> T:
        from langgraph_sdk import get_client

        async def main() -> T:
            async with get_client(url=self.url) as client:
                return await scenario(client)

        return asyncio.run(main())


@contextmanager
def _serve(tmp: Path, extra_env: dict[str, str] | None = None) -> Iterator[Server]:
    """``langgraph dev`` on a free port with the fake backend (SQLite checkpoints unless ``extra_env`` says)."""
    tmp.mkdir(parents=True, exist_ok=True)
    # The dev server keeps its own state (threads, runs) in .langgraph_api under its working directory: each
    # server gets a directory and the config with absolute paths.
    config = write_server_config(tmp)
    port = free_port()
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "COE_BACKEND": "fake",
        "COE_COMPLETION_SECONDS": "0",  # the fake's template answers repeat each other (tests/conftest.py)
        "COE_HOME": str(tmp / "home"),
        "COE_CHECKPOINT_URL": f"sqlite://{tmp / 'server.sqlite'}",
        **(extra_env or {}),
    }
    log = (tmp / "server.log").open("w")
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "langgraph"),
            "dev",
            "--config",
            str(config),
            "--no-browser",
            "--no-reload",
            "--port",
            str(port),
        ],
        cwd=tmp,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    srv = Server(f"http://127.0.0.1:{port}", tmp / "server.sqlite", proc)

    async def ready(client: Any) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                await client.assistants.search()
                return
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                await asyncio.sleep(0.5)

    try:
        srv.run(ready)
        yield srv
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with _serve(tmp_path_factory.mktemp("server")) as srv:
        yield srv


def test_langgraph_dev_run_through_the_sdk(server: Server) -> None:
    async def scenario(client: Any) -> tuple[set[str], dict[str, Any]]:
        thread = await client.threads.create()
        custom: set[str] = set()
        async for part in client.runs.stream(
            thread["thread_id"], "college_of_experts", input={"task": TASK}, stream_mode=["custom"]
        ):
            if part.event == "custom":
                custom.add(part.data["event"])
        state = await client.threads.get_state(thread["thread_id"])
        return custom, state["values"]

    custom, values = server.run(scenario)
    assert {"slot_dispatched", "slot_started", "slot_done"} <= custom
    assert values["status"] == "completed"
    assert values["document"].startswith("# " + TASK)
    assert server.db.exists()  # the custom checkpointer honoured COE_CHECKPOINT_URL


def test_expert_tokens_stream_over_the_api_with_their_slot(server: Server, tmp_path: Path) -> None:
    """stream_mode messages-tuple: every slot's tokens, told apart by their metadata, add up to its answer."""
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"title": ".*", "delay": 0.4}]}))
    context = {"fake_script": str(script), "max_parallel": 2}

    async def scenario(client: Any) -> tuple[dict[tuple[str, str], str], list[str], dict[str, Any]]:
        thread = (await client.threads.create())["thread_id"]
        run_input = {"task": "Plan a small service", "options": {"framework": BRANCHY}}
        texts: dict[tuple[str, str], str] = {}
        order: list[str] = []
        async for part in client.runs.stream(
            thread, "college_of_experts", input=run_input, context=context, stream_mode=["messages-tuple"]
        ):
            if part.event == "messages":
                chunk, meta = part.data
                key = (meta["slot_id"], meta["candidate"])
                texts[key] = texts.get(key, "") + chunk["content"]
                order.append(meta["slot_id"])
        state = await client.threads.get_state(thread)
        return texts, order, dict(state["values"])

    texts, order, values = server.run(scenario)
    assert values["status"] == "completed"
    for slot_id, result in values["results"].items():
        assert texts[(slot_id, "c1")] == result["raw"]
    first_a, last_a = order.index("A"), len(order) - 1 - order[::-1].index("A")
    assert "C" in order[first_a:last_a]  # the parallel slots' tokens interleave


def test_a_second_input_on_a_thread_is_a_follow_up_turn_over_the_api(server: Server) -> None:
    async def scenario(client: Any) -> dict[str, Any]:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "college_of_experts", input={"task": TASK})
        await client.runs.wait(thread, "college_of_experts", input={"task": "Now add type hints to that function"})
        return dict((await client.threads.get_state(thread))["values"])

    values = server.run(scenario)
    [turn] = values["turns"]
    assert turn["number"] == 1 and turn["task"] == TASK and turn["status"] == "completed" and turn["results"]
    assert values["status"] == "completed" and values["document"].startswith("# Now add type hints")
    assert values["scope"]["transition"] == "same_domain"


def test_plan_approval_over_the_api(server: Server) -> None:
    """confirm mode: the typed interrupt is readable, a bad answer is refused, one Command resumes."""

    async def scenario(client: Any) -> dict[str, Any]:
        thread = (await client.threads.create())["thread_id"]
        run_input = {"task": "Plan a small service", "mode": "confirm", "options": {"framework": BRANCHY}}
        await client.runs.wait(thread, "college_of_experts", input=run_input)
        state = await client.threads.get_state(thread)
        [intr] = state["interrupts"]
        payload = intr["value"]
        assert payload["kind"] == "approve_plan" and [s["id"] for s in payload["plan"]] == ["A", "B", "C", "D"]
        assert state["next"] == ["confirm_plan"] and not state["values"].get("results")
        await client.runs.wait(thread, "college_of_experts", command={"resume": "sure"})
        state = await client.threads.get_state(thread)
        [again] = state["interrupts"]
        assert again["value"]["error"] == "unknown answer 'sure'; allowed: approve, reject, edit"
        assert not state["values"].get("results")
        await client.runs.wait(thread, "college_of_experts", command={"resume": {again["id"]: "approve"}})
        final = await client.threads.get_state(thread)
        assert final["interrupts"] == [] and final["next"] == []
        return dict(final["values"])

    values = server.run(scenario)
    assert values["status"] == "completed" and sorted(values["results"]) == ["A", "B", "C", "D"]
    assert values["approval"]["action"] == "approve" and values["approval"]["rounds"] == 2


def test_reject_over_the_api_ends_the_run(server: Server) -> None:
    async def scenario(client: Any) -> dict[str, Any]:
        thread = (await client.threads.create())["thread_id"]
        run_input = {"task": "Plan a small service", "mode": "confirm", "options": {"framework": BRANCHY}}
        await client.runs.wait(thread, "college_of_experts", input=run_input)
        out = await client.runs.wait(
            thread, "college_of_experts", command={"resume": {"action": "reject", "reason": "not now"}}
        )
        assert out["status"] == "rejected"  # the output schema: document, status, summary
        return dict((await client.threads.get_state(thread))["values"])

    values = server.run(scenario)
    assert values["status"] == "rejected" and "rejected: not now" in values["document"]


A_TEXT = (
    "## Outline\n1. Requirements\n2. Hosting\n3. Summary\n\n## 1. Requirements\nServe the API.\n\n"
    "## 2. Hosting\nDeploy to {{ASSIST:user:your production hostname}}.\n\n## 3. Summary\nDone.\n"
)
C_TEXT = (
    "## Outline\n1. Risks\n2. Mitigation\n3. Owner\n\n## 1. Risks\nOutages.\n\n## 2. Mitigation\nRetry.\n\n"
    "## 3. Owner\nThe owner is {{ASSIST:user:who owns the risk register}}.\n"
)


def test_parallel_user_questions_over_the_api(server: Server, tmp_path: Path) -> None:
    """interactive mode: two slots ask the person at once; one answered by id, then the other."""
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"slot": "A", "text": A_TEXT}, {"slot": "C", "text": C_TEXT}]}))
    context = {"fake_script": str(script)}

    async def scenario(client: Any) -> dict[str, Any]:
        thread = (await client.threads.create())["thread_id"]
        run_input = {"task": "Plan a small service", "mode": "interactive", "options": {"framework": BRANCHY}}
        await client.runs.wait(thread, "college_of_experts", input=run_input, context=context)
        await client.runs.wait(thread, "college_of_experts", command={"resume": "approve"}, context=context)
        pending = (await client.threads.get_state(thread))["interrupts"]
        assert sorted(i["value"]["kind"] for i in pending) == ["assist_user", "assist_user"]
        by_slot = {i["value"]["questions"][0]["id"].split(".")[0]: i["id"] for i in pending}
        await client.runs.wait(thread, "college_of_experts", command={"resume": {by_slot["C"]: "ops"}}, context=context)
        [left] = (await client.threads.get_state(thread))["interrupts"]
        assert left["id"] == by_slot["A"]
        await client.runs.wait(
            thread, "college_of_experts", command={"resume": {left["id"]: "api.example.com"}}, context=context
        )
        final = await client.threads.get_state(thread)
        assert final["interrupts"] == [] and final["next"] == []
        return dict(final["values"])

    values = server.run(scenario)
    assert values["status"] == "completed"
    assert "api.example.com" in values["document"] and "The owner is ops." in values["document"]


@pytest.mark.postgres
def test_a_waiting_run_survives_a_server_restart_in_postgres(tmp_path: Path) -> None:
    """COE_CHECKPOINT_URL=postgresql://...: a run waiting for approval is answered after the server restarts."""
    from tests.conftest import POSTGRES_URL

    env = {"COE_CHECKPOINT_URL": POSTGRES_URL}
    thread_box: dict[str, str] = {}

    async def start(client: Any) -> None:
        thread = (await client.threads.create())["thread_id"]
        thread_box["id"] = thread
        run_input = {"task": "Plan a small service", "mode": "confirm", "options": {"framework": BRANCHY}}
        await client.runs.wait(thread, "college_of_experts", input=run_input)

    async def finish(client: Any) -> dict[str, Any]:
        thread = thread_box["id"]
        # this server has never seen the thread (its registry is in another directory); the checkpoints are in
        # Postgres: registering the thread id with its graph again finds the saved run, interrupt included.
        await client.threads.create(thread_id=thread, if_exists="do_nothing", graph_id="college_of_experts")
        [intr] = (await client.threads.get_state(thread))["interrupts"]
        assert intr["value"]["kind"] == "approve_plan"
        await client.runs.wait(thread, "college_of_experts", command={"resume": "approve"})
        return dict((await client.threads.get_state(thread))["values"])

    try:
        with _serve(tmp_path / "first", env) as first:
            first.run(start)
        with _serve(tmp_path / "second", env) as second:
            values = second.run(finish)
    finally:
        if "id" in thread_box:  # leave the shared test database as we found it
            from graph.persistence import open_checkpointer

            with open_checkpointer(POSTGRES_URL) as saver:
                saver.delete_thread(thread_box["id"])
    assert values["status"] == "completed" and sorted(values["results"]) == ["A", "B", "C", "D"]


@pytest.mark.postgres
def test_a_run_killed_with_its_server_resumes_on_postgres_and_no_finished_slot_runs_again(tmp_path: Path) -> None:
    """kill -9 of the server in the middle of a run; a new server on the same database finishes it."""
    from graph.persistence import open_checkpointer
    from tests.conftest import POSTGRES_URL

    calls = tmp_path / "calls.jsonl"
    script = tmp_path / "script.yaml"
    rules = [{"slot": "B", "delay": 30.0}, {"slot": "D", "delay": 0.1}]
    script.write_text(yaml.safe_dump({"calls_log": str(calls), "rules": rules}), encoding="utf-8")
    env = {"COE_CHECKPOINT_URL": POSTGRES_URL, "COE_FAKE_SCRIPT": str(script)}
    thread_box: dict[str, str] = {}

    def called() -> list[str]:
        return read_calls(calls)

    async def start(client: Any) -> None:
        thread = (await client.threads.create())["thread_id"]
        thread_box["id"] = thread
        await client.runs.create(thread, "college_of_experts", input={"task": TASK, "options": {"framework": BRANCHY}})
        deadline = time.monotonic() + 60
        while not {"A", "B", "C"} <= set(called()):  # A and C are done, B is generating
            assert time.monotonic() < deadline, called()
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)

    async def finish(client: Any) -> dict[str, Any]:
        thread = thread_box["id"]
        await client.threads.create(thread_id=thread, if_exists="do_nothing", graph_id="college_of_experts")
        await client.runs.wait(thread, "college_of_experts", input=None)
        return dict((await client.threads.get_state(thread))["values"])

    try:
        with _serve(tmp_path / "first", env) as first:
            first.run(start)
            assert first.proc is not None
            first.proc.kill()  # kill -9: no shutdown of any kind
            first.proc.wait(timeout=20)
        rules[0]["delay"] = 0.1
        script.write_text(yaml.safe_dump({"calls_log": str(calls), "rules": rules}), encoding="utf-8")
        with _serve(tmp_path / "second", env) as second:
            values = second.run(finish)
    finally:
        if "id" in thread_box:
            with open_checkpointer(POSTGRES_URL) as saver:
                saver.delete_thread(thread_box["id"])
    assert values["status"] == "completed" and sorted(values["results"]) == ["A", "B", "C", "D"]
    counts = {slot: called().count(slot) for slot in "ABCD"}
    assert counts == {"A": 1, "B": 2, "C": 1, "D": 1}, counts  # B was cut short by the kill and ran again


def test_a_resume_that_answers_nothing_is_refused_with_a_message(server: Server) -> None:
    """A finished thread, a thread that never ran, an unknown interrupt id: 409 or 422 and a message, not a 200
    that does nothing (or LangGraph's TypeError); the waiting question is still answered afterwards."""
    import httpx

    async def scenario(client: Any) -> dict[str, Any]:
        async def refused(thread: str, resume: Any) -> tuple[int, str]:
            with pytest.raises(httpx.HTTPStatusError) as error:
                await client.runs.wait(thread, "college_of_experts", command={"resume": resume})
            return error.value.response.status_code, error.value.response.text

        fresh = (await client.threads.create())["thread_id"]
        done = (await client.threads.create())["thread_id"]
        await client.runs.wait(done, "college_of_experts", input={"task": TASK})
        waiting = (await client.threads.create())["thread_id"]
        await client.runs.wait(waiting, "college_of_experts", input={**_confirm_input()})
        answers = {
            "fresh": await refused(fresh, "approve"),
            "done": await refused(done, "approve"),
            "unknown id": await refused(waiting, {"ffffffffffffffffffffffffffffffff": "approve"}),
        }
        finished = await client.runs.wait(waiting, "college_of_experts", command={"resume": "approve"})
        return {"answers": answers, "finished": finished}

    out = server.run(scenario)
    assert out["answers"]["fresh"][0] == 409 and "has no question waiting" in out["answers"]["fresh"][1]
    assert out["answers"]["done"][0] == 409
    status, text = out["answers"]["unknown id"]
    assert status == 422 and "ffffffffffffffffffffffffffffffff" in text and "waiting:" in text
    assert out["finished"]["status"] == "completed"


def _confirm_input() -> dict[str, Any]:
    return {"task": "Plan a small service", "mode": "confirm", "options": {"framework": BRANCHY}}


@pytest.mark.parametrize(
    ("run_input", "context", "message"),
    [
        ({"task": "  "}, {}, "task: is empty; describe what you want done"),
        ({"task": 123}, {}, "task: must be a string, got int"),
        ({"task": TASK, "mode": "yolo"}, {}, "mode: unknown mode 'yolo'; allowed: interactive, confirm, autonomous"),
        ({"task": TASK}, {"backend": "nope"}, "unknown backend 'nope'; allowed: llama, fake, remote"),
        ({"task": TASK}, {"max_tokens": 5}, "run context: max_tokens: Input should be greater than or equal to 16"),
    ],
)
def test_a_user_error_reaches_the_client_and_the_thread_stays_usable(
    server: Server, run_input: dict[str, Any], context: dict[str, Any], message: str
) -> None:
    async def scenario(client: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        thread = await client.threads.create()
        tid = thread["thread_id"]
        failed = await client.runs.wait(tid, "college_of_experts", input=run_input, context=context, raise_error=False)
        state = await client.threads.get_state(tid)
        good = await client.runs.wait(tid, "college_of_experts", input={"task": TASK})
        return failed, state, good

    failed, state, good = server.run(scenario)
    assert message in json.dumps(failed), failed
    assert "An internal error occurred" not in json.dumps(failed)
    assert isinstance(state["values"], dict)  # readable after the refusal
    assert good["status"] == "completed"


@pytest.mark.parametrize("strategy", ["reject", "interrupt", "rollback", "enqueue"])
def test_each_multitask_strategy_over_the_api(server: Server, tmp_path: Path, strategy: str) -> None:
    """A second input on a busy thread under each strategy; the server goes on serving other threads.

    ``rollback`` deletes the first run's checkpoints through the checkpointer's ``adelete_for_runs`` (the server
    answered 500 and stalled every later run before it existed).
    """
    from langgraph_sdk.errors import ConflictError, NotFoundError

    script = tmp_path / "slow.yaml"
    script.write_text(yaml.safe_dump({"default": {"delay": 2.0}}))
    slow = {"fake_script": str(script)}
    other = "Write a Python function that reverses a list"

    async def scenario(client: Any) -> tuple[dict[str, Any], dict[str, Any], set[str], str, dict[str, Any]]:
        thread = (await client.threads.create())["thread_id"]
        first = await client.runs.create(thread, "college_of_experts", input={"task": TASK}, context=slow)
        deadline = time.monotonic() + 60
        while (await client.runs.get(thread, first["run_id"]))["status"] != "running":
            assert time.monotonic() < deadline, "the first run never started"
            await asyncio.sleep(0.1)
        runs = {"first": first}
        if strategy == "reject":
            with pytest.raises(ConflictError):
                await client.runs.create(
                    thread, "college_of_experts", input={"task": other}, multitask_strategy=strategy
                )
            await client.runs.join(thread, first["run_id"])
        else:
            runs["second"] = await client.runs.create(
                thread, "college_of_experts", input={"task": other}, multitask_strategy=strategy
            )
            await asyncio.wait_for(client.runs.join(thread, runs["second"]["run_id"]), 120)
        statuses: dict[str, Any] = {}
        for name, run in runs.items():
            try:
                statuses[name] = (await client.runs.get(thread, run["run_id"]))["status"]
            except NotFoundError:
                statuses[name] = "deleted"
        state = await client.threads.get_state(thread)
        history = await client.threads.get_history(thread, limit=200)
        run_ids = {h["metadata"].get("run_id") for h in history}
        elsewhere = await client.threads.create()
        later = await asyncio.wait_for(
            client.runs.wait(elsewhere["thread_id"], "college_of_experts", input={"task": TASK}), 120
        )
        return statuses, state["values"], run_ids, first["run_id"], later

    statuses, values, run_ids, first_id, later = server.run(scenario)
    expected = {
        "reject": {"first": "success"},
        "interrupt": {"first": "interrupted", "second": "success"},
        "rollback": {"first": "deleted", "second": "success"},
        "enqueue": {"first": "success", "second": "success"},
    }[strategy]
    assert statuses == expected
    assert values["status"] == "completed"
    assert values["task"] == (TASK if strategy == "reject" else other)
    if strategy == "rollback":
        assert first_id not in run_ids  # none of its checkpoints are left
    elif strategy != "interrupt":  # (interrupted at once, a run may not have saved a checkpoint yet)
        assert first_id in run_ids
    assert later["status"] == "completed"  # the server was not stalled


def test_feedback_over_the_api_teaches_the_routing_of_the_next_run(server: Server) -> None:
    import httpx

    misrouted = "Explain to the finance team why the report query is now faster."
    framework = {
        "id": "fix",
        "title": "Fix the report",
        "slots": [{"id": "S", "title": "Explain", "description": misrouted}],
    }
    run_input = {"task": "Fix the report", "options": {"framework": framework}}

    async def scenario(client: Any) -> tuple[list[Any], dict[str, Any], str]:
        first = (await client.threads.create())["thread_id"]
        await client.runs.wait(first, "college_of_experts", input=run_input)
        problems = []
        for body in ({"verdict": "meh"}, {"verdict": "bad", "slot": "Z"}, {"verdict": "good", "when": "now"}):
            try:
                await client.http.post(f"/threads/{first}/feedback", json=body)
            except httpx.HTTPStatusError as exc:
                problems.append((exc.response.status_code, exc.response.json()))
        try:
            await client.http.post("/threads/00000000-0000-0000-0000-000000000000/feedback", json={"verdict": "good"})
        except httpx.HTTPStatusError as exc:
            problems.append((exc.response.status_code, None))
        answer = await client.http.post(
            f"/threads/{first}/feedback", json={"verdict": "bad", "slot": "S", "route_to": "technical_writer"}
        )
        second = (await client.threads.create())["thread_id"]
        await client.runs.wait(second, "college_of_experts", input=run_input)
        values = dict((await client.threads.get_state(second))["values"])
        before = dict((await client.threads.get_state(first))["values"])["routing"]["S"]["expert"]
        return problems, {"answer": answer, "values": values}, before

    problems, got, before = server.run(scenario)
    assert [p[0] for p in problems] == [422, 422, 422, 404]
    assert problems[0][1]["field"] == "verdict" and problems[1][1]["field"] == "slot"
    assert "unknown field(s) when" in problems[2][1]["detail"]
    answer = got["answer"]
    assert before == "sql_specialist" and answer["lesson"]["kept"] and answer["lesson"]["expert"] == "technical_writer"
    assert got["values"]["routing"]["S"]["expert"] == "technical_writer"


def test_an_expert_added_to_the_servers_catalog_serves_the_next_run_without_a_restart(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experts.catalog import add_expert, remove_expert
    from tests.unit.test_expert_sources import expert_dir

    text = "Fix the borrow checker error in my Rust function that pushes to a vector while iterating over it."
    framework = {"id": "rust", "title": "Rust fix", "slots": [{"id": "S", "title": "Fix", "description": text}]}

    async def routed(client: Any) -> dict[str, Any]:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "college_of_experts", input={"task": text, "options": {"framework": framework}})
        return dict((await client.threads.get_state(thread))["values"])["routing"]["S"]

    before = server.run(routed)
    monkeypatch.setenv("COE_HOME", str(server.db.parent / "home"))  # the operator's catalog: the server's COE_HOME
    add_expert(expert_dir(tmp_path))
    try:
        after = server.run(routed)
    finally:
        remove_expert("rust_developer")
    assert before["expert"] != "rust_developer"
    assert after["expert"] == "rust_developer" and after["version"] == "1.0"
    assert server.run(routed)["expert"] == before["expert"]  # removed: the next run routes as before


def test_the_servers_idle_worker_answers_a_candidates_share_of_live_slots(tmp_path: Path) -> None:
    from experts.catalog import add_expert
    from experts.catalog.shadow_queue import pending, set_share
    from experts.catalog.versions import add_candidate, shadow_tally
    from tests.unit.test_expert_sources import RUST_SCOPE, expert_dir

    text = "Fix the borrow checker error in my Rust function that pushes to a vector while iterating over it."
    framework = {"id": "rust", "title": "Rust fix", "slots": [{"id": "S", "title": "Fix", "description": text}]}
    home = tmp_path / "srv" / "home"
    with _serve(tmp_path / "srv", {"COE_SHADOW_IDLE_SECONDS": "1"}) as srv:
        os.environ["COE_HOME"], saved = str(home), os.environ.get("COE_HOME")
        try:
            add_expert(expert_dir(tmp_path / "v1"))
            add_candidate(expert_dir(tmp_path / "v2", {**RUST_SCOPE, "version": "2.0"}))
            set_share("rust_developer", "2.0", 1.0)

            async def run(client: Any) -> dict[str, Any]:
                thread = (await client.threads.create())["thread_id"]
                await client.runs.wait(
                    thread, "college_of_experts", input={"task": text, "options": {"framework": framework}}
                )
                return dict((await client.threads.get_state(thread))["values"])

            values = srv.run(run)
            deadline = time.monotonic() + 60
            while (pending() or not shadow_tally("rust_developer", "2.0")["slots"]) and time.monotonic() < deadline:
                time.sleep(0.5)
            tally = shadow_tally("rust_developer", "2.0")
        finally:
            if saved is None:
                os.environ.pop("COE_HOME")
            else:
                os.environ["COE_HOME"] = saved
    assert values["routing"]["S"]["expert"] == "rust_developer" and values["routing"]["S"]["version"] == "1.0"
    assert "Shadow of" not in values["document"]  # the candidate's answer never reaches the user's document
    assert tally["slots"] == 1, (srv.db.parent / "server.log").read_text()[-3000:]
