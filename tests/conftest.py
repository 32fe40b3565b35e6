"""Shared fixtures (isolated data directory, fake-backend scripts, a keyword embedder) and the fast loop's marks.

``python -m pytest`` runs only tests without the marks pyproject.toml deselects (``integration``, ``model``,
``postgres``, ``server``, ``slow``, ``bench``). Marks come from where a test lives (:data:`DIRECTORY_MARKS`) and
from what it uses: a test that loads a GGUF model without ``model``, connects to the test PostgreSQL without
``postgres`` or connects to a host other than this one fails, so no such test joins the fast loop unnoticed.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import socket
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from state.files import atomic_write

FIXTURES = Path(__file__).parent / "fixtures"
POSTGRES_URL = os.environ.get("COE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
TESTS = Path(__file__).parent
DIRECTORY_MARKS = {"integration": "integration", "bench": "bench"}
"""A test under ``tests/<folder>`` gets the folder's mark, so a new test there is out of the fast loop."""


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the folder it lives in (:data:`DIRECTORY_MARKS`)."""
    for item in items:
        where = item.path.relative_to(TESTS)
        if where.parts[0] in DIRECTORY_MARKS:
            item.add_marker(DIRECTORY_MARKS[where.parts[0]])


ONE_AT_A_TIME = frozenset({"model", "server"})
"""Marks of the tests that load a real model (a server loads one too). Under pytest-xdist (``-n``) they are one work
unit, which one worker runs in order while the others share every other test: two llama.cpp processes on this
machine's two cores slow each other to their timeouts. The other tests, process-heavy ones included, are spread."""
_MODEL_TESTS = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hooks: pytest without it never calls them
def pytest_configure_node(node: Any) -> None:
    """Tell each worker where to write the node ids of its model tests (:data:`ONE_AT_A_TIME`)."""
    config = node.config
    if _MODEL_TESTS not in config.stash:
        config.stash[_MODEL_TESTS] = Path(tempfile.mkdtemp(prefix="coe-pytest-models-"))
    node.workerinput["coe_model_tests"] = str(config.stash[_MODEL_TESTS])


@pytest.hookimpl(tryfirst=True)  # before the worker reports its collection to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    """On a pytest-xdist worker: write the node ids of the tests that load a real model, for the scheduler."""
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput is None or "coe_model_tests" not in workerinput:
        return
    ids = [item.nodeid for item in session.items if any(item.get_closest_marker(m) for m in ONE_AT_A_TIME)]
    path = Path(workerinput["coe_model_tests"]) / f"{workerinput['workerid']}.json"
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(ids), encoding="utf-8"))  # whole or absent when read


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the folder of the workers' lists of model tests (the controller's, under pytest-xdist)."""
    if _MODEL_TESTS in config.stash:
        shutil.rmtree(config.stash[_MODEL_TESTS], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Spread the tests one by one (``--dist load``), but for the model tests, which are one unit.

    pytest-xdist's ``--dist loadgroup`` would group them by an ``xdist_group`` mark, through a change to the test's
    node id that pytest 9.2 no longer lets it make (pytest-xdist issue 1386): its groups are silently spread. The
    workers write their model tests' ids instead (:func:`pytest_collection_finish`), which the controller reads
    once every worker has collected, when it schedules.
    """
    if config.getvalue("dist") != "load":
        return None  # a --dist the caller chose
    from xdist.scheduler import LoadScopeScheduling

    class OneAtATime(LoadScopeScheduling):
        models: set[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.models is None:
                folder = config.stash[_MODEL_TESTS]
                self.models = {i for f in folder.glob("*.json") for i in json.loads(f.read_text(encoding="utf-8"))}
            return "model tests" if nodeid in self.models else nodeid

    return OneAtATime(config, log)


def _postgres_address(conninfo: str, **kwargs: Any) -> tuple[bool, str]:
    """Whether a PostgreSQL connection goes to this machine, and to which port."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(conninfo, **{k: v for k, v in kwargs.items() if k in ("host", "port")})
    host = str(params.get("host") or "")
    return (not host or host.startswith("/") or _local((host, 0))), str(params.get("port") or 5432)


def _local(address: Any) -> bool:
    """Whether a socket address is on this machine (a Unix socket, a loopback address or ``localhost``)."""
    if not isinstance(address, tuple):
        return True
    try:
        return ipaddress.ip_address(address[0]).is_loopback
    except ValueError:
        return address[0] == "localhost"


def _refused_for(server: tuple[bool, str], connect: Any, nodeid: str) -> Any:
    """psycopg's ``connect`` classmethod, failing the test for a connection to ``server``."""

    def guarded(cls: type, conninfo: str = "", **kwargs: Any) -> Any:
        if _postgres_address(conninfo, **kwargs) == server:
            pytest.fail(f"{nodeid} connects to PostgreSQL: mark it @pytest.mark.postgres")
        return connect(cls, conninfo, **kwargs)

    return classmethod(guarded)


@pytest.fixture(autouse=True)
def _uses_what_it_is_marked_for(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test that loads a GGUF model without the ``model`` mark, opens a connection to the test PostgreSQL
    without ``postgres``, or connects to another host (tests never reach the network); child processes are not
    watched (their tests are marked ``integration`` or ``slow``)."""
    marks = {mark.name for mark in request.node.iter_markers()}
    if "model" not in marks:
        from experts.backends.llama import LlamaBackend

        def load(self: LlamaBackend) -> None:
            pytest.fail(f"{request.node.nodeid} loads the GGUF model {self.model_path}: mark it @pytest.mark.model")

        monkeypatch.setattr(LlamaBackend, "_ensure_loaded", load)
    if "postgres" not in marks:
        import psycopg

        test_server = _postgres_address(POSTGRES_URL)
        for cls in (psycopg.Connection, psycopg.AsyncConnection):
            monkeypatch.setattr(cls, "connect", _refused_for(test_server, cls.connect.__func__, request.node.nodeid))
        monkeypatch.setattr(psycopg, "connect", psycopg.Connection.connect)
    real_socket_connect = socket.socket.connect

    def socket_connect(self: socket.socket, address: Any) -> None:
        if not _local(address):
            pytest.fail(f"{request.node.nodeid} connects to {address}: tests never reach the network")
        real_socket_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", socket_connect)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    """No test reads or writes the user's real data directory or inherits COE_* settings."""
    for key in list(os.environ):
        if key.startswith("COE_") and key not in ("COE_TEST_POSTGRES_URL", "COE_MODEL_CACHE"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("COE_HOME", str(tmp_path / "coe-home"))
    if request.node.get_closest_marker("model") is None:
        # The fake backend's default answer is one template with the slot's title put in: its parts repeat each
        # other, which the completion round reads as a gap and writes again. Tests without a real model run
        # without the round (their child processes too); its own tests (tests/unit/test_completion.py) turn it on
        # in the run context, and the tests on the real models run it as a user gets it.
        monkeypatch.setenv("COE_COMPLETION_SECONDS", "0")
    from experts.pool.breaker import breakers
    from experts.pool.health import health_checks

    breakers.reset()  # circuit breakers are process-wide: one test's failures must not trip another's expert
    health_checks.reset()  # and so are the endpoints' health checks
    yield


class KeywordEmbedder:
    """A deterministic bag of words: each word counted on one of ``dim`` axes (a hash of it), normalised.

    The fast loop's embedder for tests about what is done with vectors (staging, merging, resuming), not about
    what the model finds similar: no model file is read and a text costs microseconds.
    """

    backend = "keyword"

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.model_id = f"keyword-test:{dim}d"

    def encode(self, texts: list[str]) -> Any:
        import numpy as np

        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        vectors[:, 0] = 1e-3  # an empty text still has a direction
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                vectors[row, zlib.crc32(word.encode("utf-8")) % self.dim] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def keyword_embedder(monkeypatch: pytest.MonkeyPatch) -> KeywordEmbedder:
    """Make :class:`KeywordEmbedder` the process's embedder (``get_embedder()``, every backend) for one test.

    Only for tests whose stores live in ``tmp_path``: the expert and template indexes are cached in ``config/``.
    """
    from experts.embedding import factory
    from experts.embedding.model_files import default_model_dir

    fake = KeywordEmbedder()
    for backend in factory.EMBED_BACKENDS:
        monkeypatch.setitem(factory._embedders, (backend, str(default_model_dir())), fake)
    return fake


@pytest.fixture
def write_script(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a fake-backend script (a dict) to a file and return its path."""

    def _write(script: dict, name: str = "script.yaml") -> Path:  # type: ignore[type-arg]
        path = tmp_path / name
        path.write_text(yaml.safe_dump(script), encoding="utf-8")
        return path

    return _write


def read_calls(path: Path) -> list[str]:
    """Slot ids the fake backend was called for, from its calls log.

    Read while a run is still going, the log may end in a line the backend has
    not finished writing; only lines that end in a newline are read.
    """
    import json

    if not path.exists():
        return []
    complete = path.read_text().rpartition("\n")[0]
    return [json.loads(line)["slot"] for line in complete.splitlines() if line.strip()]
