"""Isolation between the users of one server: every call one user can make on another's thread, and its answer.

Run: ``python -m bench.bench_isolation``. Writes ``bench/results/isolation.{json,md}``. ``--quick`` is the same
run (it takes seconds; the flag exists for the benchmark tests).

``langgraph dev`` with the fake backend and an API keys file (``COE_API_KEYS_FILE``: alice and bob, of two
tenants). Alice starts a run in ``confirm`` mode, which stops at its plan question. Bob then tries, through
langgraph-sdk with his own key, every call on Alice's thread and run: read it, its state and history, list and
read its runs, search for it, start a run on it, resume it, cancel the run, update its state, copy and delete
it, and reach into her store namespace. Goal: every call on her thread and run answers what the same call on a
thread that does not exist answers (404; 409 for a copy, langgraph-api's code there), her thread absent from his
search, 403 for her store namespace, 401 without a key or with a
wrong one. Then Alice answers her question and the run completes: nothing of hers was touched. A run context
that names ``kb_path`` is refused on such a server, and a user's run looks things up in ``<kb>/users/<id>``.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from bench.common import GRAPH, ROOT, bench_parser, dev_server, md_table, run_input, write_results
from state.framework import load_framework_file

FRAMEWORK = load_framework_file(str(ROOT / "tests" / "fixtures" / "branchy.yaml"))


async def status_of(call: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    """The HTTP status a call answers with (200 when it succeeds), and its result."""
    import httpx

    try:
        return 200, await call()
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code, None


async def scenario(workdir: Path) -> dict[str, Any]:
    from langgraph_sdk import get_client

    keys = {"alice": secrets.token_urlsafe(24), "bob": secrets.token_urlsafe(24)}
    keys_file = workdir / "keys.yaml"
    keys_file.write_text(
        yaml.safe_dump(
            {
                "keys": [
                    {"key": keys["alice"], "identity": "alice", "tenant": "acme"},
                    {"key": keys["bob"], "identity": "bob", "tenant": "globex"},
                ]
            }
        ),
        encoding="utf-8",
    )
    env = {
        "COE_BACKEND": "fake",
        "COE_CHECKPOINT_URL": f"sqlite://{workdir / 'server.sqlite'}",
        "COE_API_KEYS_FILE": str(keys_file),
        "COE_KB": str(workdir / "kb"),
    }
    async with dev_server(env, workdir / "server.log", api_key=keys["alice"]) as alice:
        url = str(alice.http.client.base_url)
        bob = get_client(url=url, api_key=keys["bob"])
        nobody = get_client(url=url, api_key=None)
        stranger = get_client(url=url, api_key="not-a-key-of-this-server")
        thread = (await alice.threads.create())["thread_id"]
        first = await alice.runs.wait(thread, GRAPH, input={**run_input(FRAMEWORK), "mode": "confirm"})
        runs = await alice.runs.list(thread)
        run_id = runs[0]["run_id"]
        asked = bool((await alice.threads.get_state(thread))["interrupts"]) or bool(first.get("__interrupt__"))
        calls: dict[str, Callable[[str, str], Awaitable[Any]]] = {
            "threads.get": lambda t, r: bob.threads.get(t),
            "threads.get_state": lambda t, r: bob.threads.get_state(t),
            "threads.get_history": lambda t, r: bob.threads.get_history(t),
            "threads.update_state": lambda t, r: bob.threads.update_state(t, {"task": "hijacked"}),
            "threads.update (metadata)": lambda t, r: bob.threads.update(t, metadata={"owner": "bob"}),
            "threads.copy": lambda t, r: bob.threads.copy(t),
            "runs.list": lambda t, r: bob.runs.list(t),
            "runs.get": lambda t, r: bob.runs.get(t, r),
            "runs.join": lambda t, r: bob.runs.join(t, r),
            "runs.create (new input)": lambda t, r: bob.runs.create(t, GRAPH, input=run_input(FRAMEWORK)),
            "runs.create (resume her question)": lambda t, r: bob.runs.create(t, GRAPH, command={"resume": "approve"}),
            "runs.cancel": lambda t, r: bob.runs.cancel(t, r),
            "runs.delete": lambda t, r: bob.runs.delete(t, r),
            "threads.delete": lambda t, r: bob.threads.delete(t),
        }
        results: list[dict[str, Any]] = []
        for name, call in calls.items():
            absent, _ = await status_of(lambda call=call: call(str(uuid.uuid4()), str(uuid.uuid4())))
            status, _ = await status_of(lambda call=call: call(thread, run_id))
            results.append(
                {"call": name, "status": status, "expected": absent, "held": status == absent and status >= 400}
            )
        status, found = await status_of(lambda: bob.threads.search(limit=100))
        listed = any(t["thread_id"] == thread for t in found or [])
        results.append(
            {
                "call": "threads.search",
                "status": status,
                "expected": "200 without her thread",
                "held": status == 200 and not listed,
            }
        )
        status, _ = await status_of(lambda: bob.store.put_item(("alice", "notes"), "k", {"v": 1}))
        results.append(
            {"call": "store.put_item in her namespace", "status": status, "expected": 403, "held": status == 403}
        )
        status, _ = await status_of(lambda: bob.store.search_items(("alice",)))
        results.append(
            {"call": "store.search_items in her namespace", "status": status, "expected": 403, "held": status == 403}
        )
        for name, client in (("no key", nobody), ("unknown key", stranger)):
            status, _ = await status_of(lambda client=client: client.threads.search())
            results.append(
                {"call": f"threads.search with {name}", "status": status, "expected": 401, "held": status == 401}
            )
        status, _ = await status_of(lambda: bob.store.put_item(("bob", "notes"), "k", {"v": 1}))
        own_store = status == 200

        # Alice's thread is as she left it: she answers her question and the run completes.
        done = await alice.runs.wait(thread, GRAPH, command={"resume": "approve"})
        completed = done.get("status") == "completed"
        values = (await alice.threads.get_state(thread))["values"]
        kb_path = (values.get("settings") or {}).get("kb_path")
        refused_thread = (await alice.threads.create())["thread_id"]
        refused = await status_of(
            lambda: alice.runs.wait(
                refused_thread, GRAPH, input=run_input(FRAMEWORK), context={"kb_path": "/tmp"}, raise_error=False
            )
        )
        refused_state = (await alice.threads.get_state(refused_thread))["values"]
        await bob.http.client.aclose()
        await nobody.http.client.aclose()
        await stranger.http.client.aclose()
    return {
        "calls": results,
        "asked_before": asked,
        "her_run_completed_after": completed,
        "her_kb_path": kb_path,
        "kb_path_in_context_refused": refused_state.get("status") != "completed"
        and refused[1] is not None
        and "kb_path" in str(refused[1]),
        "own_store_namespace_allowed": own_store,
    }


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        payload = asyncio.run(scenario(Path(tmp)))
    held = sum(r["held"] for r in payload["calls"])
    md = [
        f"Cross-user calls held: **{held} of {len(payload['calls'])}**. Alice's run, stopped at its question "
        f"while Bob tried them, completed when she answered: {payload['her_run_completed_after']}. Her runs' "
        f"knowledge base: `{payload['her_kb_path']}`. A run context naming kb_path refused: "
        f"{payload['kb_path_in_context_refused']}. Bob may use his own store namespace: "
        f"{payload['own_store_namespace_allowed']}.",
        "",
        md_table(
            [
                "call (Bob on Alice's thread)",
                "status",
                "expected (a thread that does not exist; else the rule)",
                "held",
            ],
            [[r["call"], r["status"], r["expected"], "yes" if r["held"] else "NO"] for r in payload["calls"]],
        ),
    ]
    write_results("isolation", payload, "\n".join(md) + "\n", directory=args.out)
    print("\n".join(md))
    ok = held == len(payload["calls"]) and payload["her_run_completed_after"]
    return 0 if ok and payload["kb_path_in_context_refused"] else 1


if __name__ == "__main__":
    sys.exit(main())
