"""``POST /threads/{thread_id}/feedback`` on the LangGraph server: ``coe feedback`` over the HTTP API.

Body (JSON): ``verdict`` (good or bad, required), and optionally ``slot``, ``expert``, ``route_to`` and ``note``,
as the CLI's arguments (:func:`memory.feedback.give_feedback`). The route reads the thread's state and writes the
run's after-action record and routing lessons through the same server, with the caller's own headers: a thread the
caller may not see stays the server's 404, and the store's rules (a user's namespaces start with their identity)
apply to every item it writes. Answers: 200 with what was recorded (and the routing lesson, kept or refused, with
its reason); 422 naming the field that is wrong; 409 when the thread has no finished run.

langgraph-sdk has no method for a route of ours: ``client.http.post(f"/threads/{id}/feedback", json={...})``.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import httpx
from langgraph_sdk import get_sync_client
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from experts.embedding import get_embedder
from memory.feedback import give_feedback
from state.errors import ConfigError, InputError
from state.passport import Passport

__all__ = ["FIELDS", "SdkStore", "feedback_route"]

FIELDS = ("verdict", "slot", "expert", "route_to", "note")
FORWARDED = ("x-api-key", "authorization", "cookie")
"""The caller's credentials, passed on to the server's own endpoints."""


class SdkStore:
    """The server's store as :class:`memory.store.ItemStore`, through langgraph-sdk's store client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any], index: Any = None) -> None:
        """Store ``value`` (never indexed by the server: our search embeds on its own)."""
        self.client.put_item(list(namespace), key=key, value=value, index=False)

    def get(self, namespace: tuple[str, ...], key: str) -> Any:
        """The item, or None."""
        try:
            item = self.client.get_item(list(namespace), key=key)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 404:
                return None
            raise
        return None if item is None else SimpleNamespace(key=item["key"], value=item["value"])

    def search(
        self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None, limit: int = 10, offset: int = 0
    ) -> list[Any]:
        """Items under the prefix, in pages the server accepts (nearest ``query`` first when one is given)."""
        found: list[Any] = []
        while len(found) < limit:
            page = min(_PAGE, limit - len(found))
            prefix, at = list(namespace_prefix), offset + len(found)
            items = self.client.search_items(prefix, query=query, limit=page, offset=at)["items"]
            found += [SimpleNamespace(key=i["key"], value=i["value"], score=i.get("score")) for i in items]
            if len(items) < page:
                break
        return found

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Remove the item."""
        self.client.delete_item(list(namespace), key=key)


_PAGE = 1000
"""The most items the server returns for one search."""


async def feedback(request: Request) -> JSONResponse:
    """Record a verdict on the thread's latest run (see the module notes)."""
    thread_id = request.path_params["thread_id"]
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError:
        return _problem(422, 'the body is not JSON: send {"verdict": "good" or "bad", ...}')
    if not isinstance(body, dict):
        return _problem(422, "the body must be a JSON object with a verdict")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        return _problem(422, f"unknown field(s) {', '.join(unknown)}; the fields are {', '.join(FIELDS)}")
    for name in FIELDS:
        if body.get(name) is not None and not isinstance(body[name], str):
            return _problem(422, f"{name}: must be a string", name)
    if "verdict" not in body:
        return _problem(422, "verdict: required (good or bad)", "verdict")
    headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
    host, port = request.scope.get("server") or ("127.0.0.1", 80)
    base = f"http://{host}:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        response = await client.get(f"/threads/{thread_id}/state", headers=headers)
    if response.status_code != 200:
        return JSONResponse(response.json(), status_code=response.status_code)
    try:
        state = Passport.model_validate(response.json().get("values") or {})
    except ValidationError:
        return _problem(409, f"thread {thread_id} holds no run of this graph")

    def record() -> dict[str, Any]:
        # The SDK sends x-api-key itself (it refuses it among the headers): the caller's key goes as api_key, and
        # None never falls back to the server's own environment (LANGGRAPH_API_KEY, LANGSMITH_API_KEY).
        others = {k: v for k, v in headers.items() if k.lower() != "x-api-key"}
        key = next((v for k, v in headers.items() if k.lower() == "x-api-key"), None)
        store = SdkStore(get_sync_client(url=base, api_key=key, headers=others).store)
        outcome = give_feedback(
            state, store, get_embedder, body["verdict"], body.get("slot"), body.get("expert"),
            body.get("route_to"), body.get("note") or "",
        )  # fmt: skip
        return {**outcome.to_json(), "message": "\n".join(outcome.lines())}

    try:
        answer = await asyncio.to_thread(record)
    except InputError as exc:
        return _problem(422, str(exc), exc.field)
    except ConfigError as exc:
        return _problem(409, str(exc))
    return JSONResponse(answer)


def _problem(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"detail": message, **({"field": field} if field else {})}, status_code=status)


feedback_route = Route("/threads/{thread_id}/feedback", feedback, methods=["POST"])
