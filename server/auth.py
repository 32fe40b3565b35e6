"""Who may use the server, and whose threads they see: API keys, an owner on every thread, 404 for the rest.

``langgraph.json`` names :data:`auth`. With ``COE_API_KEYS_FILE`` unset the server is open, as a local tool is:
every request is the user ``local`` (the CLI never goes through here). With it set, the file lists the keys::

    keys:
      - key: "a long random string"      # or sha256: "<hex SHA-256 of the key>", so the file holds no secret
        identity: alice                  # letters, digits and . _ @ -; "local" is reserved
        tenant: acme                     # optional; the identity when absent

and every request must carry one, as ``x-api-key: KEY`` or ``Authorization: Bearer KEY`` (langgraph-sdk:
``get_client(url=..., api_key=KEY)``); without one the answer is 401. The file is read again when it changes, so
keys are added and revoked without a restart; a file that cannot be read or holds a bad entry stops the server
at start (a ``ConfigError`` naming it), and later keeps the last good keys with the error logged.

With keys, every thread, run, cron and assistant a user creates gets ``owner`` and ``tenant`` metadata, and every read,
search, update, run, cancel and delete is filtered by them: another user's thread answers 404, as a thread that
does not exist (its existence does not leak). The graph's own assistants are shared for reading. Store items
must sit under a namespace that starts with the user's identity. Runs of a user look things up in that user's
own knowledge base (``<kb>/users/<identity>``, see ``nodes.guard``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import multiprocessing
import os
import re
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from langgraph_sdk import Auth

from state.errors import ConfigError
from state.paths import LOCAL_USER, is_identity
from state.settings import process_env
from state.yaml_text import safe_load

__all__ = ["KEYS_ENV", "ApiKey", "auth", "load_keys"]

logger = logging.getLogger(__name__)

KEYS_ENV = "COE_API_KEYS_FILE"


@dataclass(frozen=True)
class ApiKey:
    """One key of the keys file: the SHA-256 of the key, and whose it is."""

    sha256: str
    identity: str
    tenant: str


def load_keys(path: Path) -> list[ApiKey]:
    """The keys of ``path``.

    Raises:
        ConfigError: naming the file and the entry that is wrong.
    """
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(str(path), f"cannot read the API keys file ({exc})", field=KEYS_ENV) from None
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(str(path), "needs a list 'keys' of {key or sha256, identity, tenant}", field="keys")
    keys: list[ApiKey] = []
    for number, entry in enumerate(entries):
        where = f"keys[{number}]"
        if not isinstance(entry, dict):
            raise ConfigError(str(path), "each key is a mapping with key (or sha256) and identity", field=where)
        identity, tenant = str(entry.get("identity", "")), str(entry.get("tenant") or entry.get("identity", ""))
        for name, value in (("identity", identity), ("tenant", tenant)):
            if not is_identity(value) or value == LOCAL_USER:
                raise ConfigError(
                    str(path), f"{name} {value!r}: 1-64 letters, digits, . _ @ -; not {LOCAL_USER!r}", field=where
                )
        if isinstance(entry.get("key"), str) and len(entry["key"]) >= 16:
            digest = hashlib.sha256(entry["key"].encode("utf-8")).hexdigest()
        elif isinstance(entry.get("sha256"), str) and re.fullmatch(r"[0-9a-fA-F]{64}", entry["sha256"]):
            digest = entry["sha256"].lower()
        else:
            raise ConfigError(str(path), "needs key (16 characters or more) or sha256 (64 hex digits)", field=where)
        keys.append(ApiKey(digest, identity, tenant))
    return keys


class _Keys:
    """The keys file's current keys, read again when its size or modification time changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stamp: tuple[str, int, int] | None = None
        self._keys: list[ApiKey] = []

    def current(self) -> list[ApiKey] | None:
        """The keys, or None when no keys file is configured (an open server)."""
        name = process_env(KEYS_ENV)
        if name is None:
            return None
        path = Path(name).expanduser()
        try:
            info = path.stat()
            stamp = (str(path), info.st_size, info.st_mtime_ns)
        except OSError as exc:
            if self._stamp is None:
                message = f"cannot read the API keys file ({exc.strerror})"
                raise ConfigError(str(path), message, field=KEYS_ENV) from None
            logger.error("%s: cannot read the API keys file (%s); keeping the last keys", path, exc.strerror)
            return self._keys
        with self._lock:
            if stamp != self._stamp:
                try:
                    self._keys = load_keys(path)
                except ConfigError:
                    if self._stamp is None:
                        raise
                    logger.exception("%s: the changed API keys file is not valid; keeping the last keys", path)
                self._stamp = stamp
            return self._keys


def _reloader_pid() -> int | None:
    """The pid of ``langgraph dev``'s reloader when this process is the server it started, else None.

    ``langgraph dev`` (auto-reload on, its default) serves from a child process that uvicorn's reloader spawns and
    then only watches files: it never notices that its child died, and would stay alive serving nothing.
    """
    parent = multiprocessing.parent_process()
    if parent is None or parent.pid is None:
        return None
    try:
        cmdline = Path(f"/proc/{parent.pid}/cmdline").read_bytes()
    except OSError:  # not Linux, or already gone
        return None
    return parent.pid if b"langgraph" in cmdline or b"uvicorn" in cmdline else None


def _check_at_start(keys: _Keys) -> None:
    """Stop the whole server, exit status non-zero with the message, when the keys file is bad at start.

    The message goes to standard error as one line. Under the reloader, the reloader is killed too (SIGKILL: it
    holds nothing but the listening socket, and a SIGTERM would make ``langgraph dev`` exit 0 as if stopped by
    hand); without it (``--no-reload``, ``langgraph up``) this process exits 1.
    """
    try:
        keys.current()
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}; the server stops\n")
        sys.stderr.flush()
        reloader = _reloader_pid()
        if reloader is not None:
            os.kill(reloader, signal.SIGKILL)
        raise SystemExit(1) from None


_KEYS = _Keys()
_check_at_start(_KEYS)  # a bad keys file stops the server at start, not at its first request

auth = Auth()


def _presented(headers: dict[bytes, bytes]) -> str | None:
    key = headers.get(b"x-api-key")
    if key:
        return key.decode("utf-8", "replace").strip()
    bearer = headers.get(b"authorization", b"").decode("utf-8", "replace").strip()
    return bearer[7:].strip() if bearer[:7].lower() == "bearer " else None


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> Auth.types.MinimalUserDict:
    """The user a request's key belongs to (401 without a known key); ``local`` on an open server."""
    keys = _KEYS.current()
    if keys is None:
        return {"identity": LOCAL_USER, "tenant": LOCAL_USER}  # type: ignore[typeddict-unknown-key]
    presented = _presented(headers)
    if not presented:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="an API key is required: send it as x-api-key or Authorization: Bearer"
        )
    digest = hashlib.sha256(presented.encode("utf-8")).hexdigest()
    for key in keys:
        if hmac.compare_digest(digest, key.sha256):
            return {"identity": key.identity, "tenant": key.tenant}  # type: ignore[typeddict-unknown-key]
    raise Auth.exceptions.HTTPException(status_code=401, detail="unknown API key")


def _owner(ctx: Auth.types.AuthContext) -> dict[str, str]:
    try:
        tenant = str(ctx.user["tenant"])
    except (KeyError, TypeError):
        tenant = ctx.user.identity
    return {"owner": ctx.user.identity, "tenant": tenant}


@auth.on
async def owned(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """Threads, runs and crons: created with the user's owner and tenant, found only by them.

    An open server (no keys file) filters nothing: its one user, LangGraph Studio included, sees every thread.
    """
    if _KEYS.current() is None:
        return None
    owner = _owner(ctx)
    if isinstance(value, dict):
        metadata = value.setdefault("metadata", {})
        if isinstance(metadata, dict):
            metadata.update(owner)
    return owner


@auth.on.assistants
async def assistants(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """The graph's assistants are everyone's to read and run; those a user makes are the user's."""
    if ctx.action in ("read", "search"):
        return None
    return await owned(ctx, value)


@auth.on.store()
async def store(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Store items live under a namespace that starts with the user's identity (on a server with keys)."""
    if _KEYS.current() is None:
        return
    namespace = tuple(value.get("namespace") or ()) if isinstance(value, dict) else ()
    if not namespace or namespace[0] != ctx.user.identity:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail=f"store namespaces of this user start with {ctx.user.identity!r}"
        )
