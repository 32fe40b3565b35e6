"""HTTP middleware of the LangGraph server: a resume that answers nothing is refused with a message.

LangGraph runs no node for a ``Command(resume=...)`` on a thread with no question waiting (a finished thread,
one that never ran) or for interrupt ids the thread does not have: the server answered 200 and did nothing, or,
on a thread that never ran, failed inside LangGraph with ``TypeError: 'NoneType' object is not iterable``. Before
a run is created on a thread (``POST /threads/{id}/runs``, ``/runs/stream``, ``/runs/wait``) with a
``command.resume``, :class:`ResumeCheck` reads the thread's state through the same server, with the caller's own
headers (so a thread the caller may not see stays a 404 from the server itself), and answers:

* 409 when no question is waiting: ``thread <id> has no question waiting for an answer``;
* 422 when ``resume`` maps interrupt ids the thread does not have (naming the ones it has), or is empty.

Everything else passes through untouched. ``langgraph.json`` names :data:`app` under ``http``; the app also serves
``POST /threads/{id}/feedback`` (:mod:`server.feedback_route`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.feedback_route import feedback_route

__all__ = ["ResumeCheck", "app", "resume_problem"]

_RUN_CREATE = re.compile(r"^/threads/([0-9a-fA-F-]{32,36})/runs(?:/stream|/wait)?/?$")
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


class ResumeCheck:
    """ASGI middleware: refuses a run that resumes nothing (see the module notes)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check a run creation with a ``command.resume``; pass everything else on."""
        match = _RUN_CREATE.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, messages = await _read_body(receive)
        try:
            payload = json.loads(body or b"{}")
        except ValueError:
            payload = None  # the server answers a bad body itself
        command = payload.get("command") if isinstance(payload, dict) else None
        if isinstance(command, dict) and "resume" in command:
            problem = await _check(scope, match.group(1), command["resume"])
            if problem is not None:
                await _answer(send, *problem)
                return
        replay = list(messages)

        async def again() -> Message:  # the body once more, then the connection's own messages (a disconnect)
            return replay.pop(0) if replay else await receive()

        await self.app(scope, again, send)


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


async def _check(scope: Scope, thread_id: str, resume: Any) -> tuple[int, str] | None:
    """Read the thread's state through this server, as the caller; None when the core should answer."""
    host, port = scope.get("server") or ("127.0.0.1", 80)
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", []) if k in _FORWARDED}
    async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=30) as client:
        response = await client.get(f"/threads/{thread_id}/state", headers=headers)
    if response.status_code != 200:
        return None  # not found, not the caller's, not readable: the server's own answer follows
    state = response.json()
    pending = [str(i.get("id")) for i in state.get("interrupts") or [] if isinstance(i, dict)]
    return resume_problem(thread_id, resume, pending)


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


app = Starlette(routes=[feedback_route], middleware=[Middleware(ResumeCheck)])
"""The server's extra HTTP app: ``POST /threads/{id}/feedback`` (:mod:`server.feedback_route`), and the resume check
on the built-in routes."""
