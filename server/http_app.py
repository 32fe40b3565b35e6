"""HTTP middleware of the LangGraph server: runs that would lose or ignore something are refused with a message.

LangGraph runs no node for a ``Command(resume=...)`` on a thread with no question waiting (a finished thread,
one that never ran) or for interrupt ids the thread does not have: the server answered 200 and did nothing, or,
on a thread that never ran, failed inside LangGraph with ``TypeError: 'NoneType' object is not iterable``. A new
``input`` on a thread that waits for an answer started a new run and dropped the question without a word. And
the server filters a run's ``context`` down to the context schema's keys, and LangGraph keeps only the input
schema's keys, so a typo (``max_token``) or an extra input field was ignored. Before a run is created
(``POST /threads/{id}/runs``, ``/runs/stream``, ``/runs/wait``, the stateless ``/runs...`` and the crons),
:class:`RunCheck` answers:

* 422 when ``context`` or ``input`` holds a key the graph does not take (naming it and the allowed ones);
* 409 when a thread run's ``command.resume`` finds no question waiting: ``thread <id> has no question waiting
  for an answer``; 422 when ``resume`` maps interrupt ids the thread does not have (naming the ones it has), or is
  empty;
* 409 when a thread run's ``input`` arrives while the thread waits for an answer, or while its last run stopped
  half-way (killed, cancelled, failed in a step, held at a breakpoint) and no run is in flight, unless the input
  says ``options.abandon: true`` (then the run starts, and the guard records the abandoned run).

The thread's state is read through the same server, with the caller's own headers (so a thread the caller may not
see stays a 404 from the server itself). Everything else passes through untouched.

:class:`KeyRequired` closes ``/docs``, ``/openapi.json``, ``/info`` and ``/metrics`` on a server with API keys
(401 without a known key, as every other route); ``/ok`` and ``/`` stay open for health checks
(docs/security.md). ``langgraph.json`` names :data:`app` under ``http``; the app also serves
``POST /threads/{id}/feedback`` (:mod:`server.feedback_route`), and its lifespan runs the shadow worker
(:mod:`server.shadow_worker`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.auth import authenticate
from server.feedback_route import feedback_route
from server.shadow_worker import lifespan
from state.context import RunContext
from state.io import RunInput, unknown_keys

__all__ = ["KeyRequired", "RunCheck", "app", "input_problem", "resume_problem", "stopped_problem", "waiting_problem"]

_RUN_CREATE = re.compile(r"^/threads/([0-9a-fA-F-]{32,36})/runs(?:/stream|/wait)?/?$")
_STATELESS_RUN = re.compile(r"^(?:/threads/[0-9a-fA-F-]{32,36})?/runs(?:/stream|/wait|/crons)?/?$")
META_PATHS = frozenset({"/docs", "/openapi.json", "/info", "/metrics"})
"""Routes that say how the server is built, not whose data it holds: closed with the rest on a server with keys."""
_INTERRUPT_ID = re.compile(r"^[0-9a-f]{32}$")
_FORWARDED = (b"x-api-key", b"authorization", b"cookie")


def resume_problem(thread_id: str, resume: Any, pending: list[str]) -> tuple[int, str] | None:
    """(status, message) when ``resume`` answers nothing on a thread whose waiting interrupt ids are ``pending``."""
    if not pending:
        return 409, (
            f"thread {thread_id} has no question waiting for an answer: nothing to resume "
            "(send an input to start a run)"
        )
    if resume is None or resume == "" or resume == {}:
        return 422, "command.resume is empty: send the answer (text, or a map from interrupt id to answer)"
    if isinstance(resume, dict) and all(isinstance(k, str) and _INTERRUPT_ID.match(k) for k in resume):
        unknown = sorted(k for k in resume if k not in pending)
        if unknown:
            return 422, (
                f"command.resume names interrupt ids this thread does not have: {', '.join(unknown)}; "
                f"waiting: {', '.join(pending)}"
            )
    return None


def input_problem(payload: dict[str, Any]) -> tuple[int, str] | None:
    """(422, message) when a run request's ``context`` or ``input`` holds a key the graph does not take."""
    for name, schema in (("context", RunContext), ("input", RunInput)):
        message = unknown_keys(name, schema, payload.get(name))
        if message is not None:
            return 422, message
    return None


def waiting_problem(thread_id: str, run_input: Any, waiting: list[tuple[str, str]]) -> tuple[int, str] | None:
    """(409, message) when a new ``input`` would drop the questions ``waiting`` (interrupt id, kind) of a thread.

    ``options.abandon: true`` in the input starts it anyway (the guard records the run it abandons).
    """
    if not waiting or run_input is None or _abandons(run_input):
        return None
    pending = ", ".join(f"{kind} ({intr_id})" for intr_id, kind in waiting)
    return 409, (
        f"thread {thread_id} is waiting for an answer ({pending}): a new input would drop the question. Answer it "
        'with command={"resume": ...} (coe resume), or send the input with options.abandon: true to abandon '
        "the waiting run"
    )


def stopped_problem(thread_id: str, run_input: Any, state: dict[str, Any]) -> tuple[int, str] | None:
    """(409, message) when a new ``input`` would drop a run of an idle thread that stopped half-way.

    Killed with its server, cancelled, failed in a step, or held at a breakpoint: LangGraph would start the new
    input from the start and drop the steps still to run (``coe run`` refuses the same). Not checked while a run is
    in flight (the caller reads the thread's status): that is the multitask strategy's case. ``options.abandon:
    true`` starts it anyway (the guard records the run it abandons).
    """
    if run_input is None or not _stopped(state) or _abandons(run_input):
        return None
    steps = ", ".join(str(n) for n in state.get("next") or [])
    return 409, (
        f"thread {thread_id} has a run that stopped half-way (next: {steps}): a new input would drop it. Finish it "
        "by sending input null (coe resume), or send the input with options.abandon: true to abandon that run"
    )


def _stopped(state: dict[str, Any]) -> bool:
    """The thread's last run has steps still to run, past the guard, and no question waiting."""
    steps = [str(n) for n in state.get("next") or []]
    values = state.get("values")
    if not isinstance(values, dict):
        values = {}
    if not steps or steps == ["guard"] or state.get("interrupts"):
        return False  # over, or nothing done yet (an input the guard raised on: a retry loses nothing)
    return values.get("refused") is None and values.get("status") != "rejected"


def _abandons(run_input: Any) -> bool:
    options = run_input.get("options") if isinstance(run_input, dict) else None
    return isinstance(options, dict) and options.get("abandon") is True


class RunCheck:
    """ASGI middleware: refuses a run that resumes nothing, drops a waiting question or ignores a key."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check a run creation (see the module notes); pass everything else on."""
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope.get("method") != "POST" or not _STATELESS_RUN.match(path):
            await self.app(scope, receive, send)
            return
        body, messages = await _read_body(receive)
        try:
            payload = json.loads(body or b"{}")
        except ValueError:
            payload = None  # the server answers a bad body itself
        problem = await _problem(scope, path, payload) if isinstance(payload, dict) else None
        if problem is not None:
            await _answer(send, *problem)
            return
        replay = list(messages)

        async def again() -> Message:  # the body once more, then the connection's own messages (a disconnect)
            return replay.pop(0) if replay else await receive()

        await self.app(scope, again, send)


async def _problem(scope: Scope, path: str, payload: dict[str, Any]) -> tuple[int, str] | None:
    problem = input_problem(payload)
    match = _RUN_CREATE.match(path)
    if problem is not None or match is None:
        return problem
    command = payload.get("command")
    if isinstance(command, dict) and "resume" in command:
        state = await _thread_state(scope, match.group(1))
        return None if state is None else resume_problem(match.group(1), command["resume"], list(_waiting(state)))
    if payload.get("input") is not None:
        state = await _thread_state(scope, match.group(1))
        if state is None:
            return None
        waiting = waiting_problem(match.group(1), payload["input"], list(_waiting(state).items()))
        if waiting is not None or not _stopped(state):
            return waiting
        thread = await _read(scope, f"/threads/{match.group(1)}")
        busy = thread is None or thread.get("status") == "busy"
        return None if busy else stopped_problem(match.group(1), payload["input"], state)
    return None


class KeyRequired:
    """ASGI middleware: on a server with API keys, :data:`META_PATHS` answer 401 without a known key."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate a request for a meta route as every protected route is; pass everything else on."""
        if scope["type"] == "http" and scope.get("path", "").rstrip("/") in META_PATHS:
            from langgraph_sdk import Auth

            try:
                await authenticate(dict(scope.get("headers", [])))
            except Auth.exceptions.HTTPException as exc:
                await _answer(send, exc.status_code, str(exc.detail))
                return
        await self.app(scope, receive, send)


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    messages: list[Message] = []
    chunks: list[bytes] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks), messages


async def _thread_state(scope: Scope, thread_id: str) -> dict[str, Any] | None:
    """The thread's state read through this server, as the caller; None when the core should answer."""
    return await _read(scope, f"/threads/{thread_id}/state")


async def _read(scope: Scope, path: str) -> dict[str, Any] | None:
    """GET ``path`` of this server with the caller's own headers; None unless it answers 200 with an object."""
    host, port = scope.get("server") or ("127.0.0.1", 80)
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", []) if k in _FORWARDED}
    async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=30) as client:
        response = await client.get(path, headers=headers)
    if response.status_code != 200:
        return None  # not found, not the caller's, not readable: the server's own answer follows
    found = response.json()
    return found if isinstance(found, dict) else None


def _waiting(state: dict[str, Any]) -> dict[str, str]:
    """The thread's pending interrupts: id -> kind (approve_plan, clarify, assist_user, ...)."""
    found: dict[str, str] = {}
    for intr in state.get("interrupts") or []:
        if isinstance(intr, dict):
            value = intr.get("value")
            found[str(intr.get("id"))] = str(value.get("kind", "?")) if isinstance(value, dict) else "?"
    return found


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


app = Starlette(routes=[feedback_route], middleware=[Middleware(KeyRequired), Middleware(RunCheck)], lifespan=lifespan)
"""The server's extra HTTP app: ``POST /threads/{id}/feedback`` (:mod:`server.feedback_route`), the run checks on
the built-in routes, the key on the meta routes, and the shadow worker for the server's life
(:mod:`server.shadow_worker`)."""
