"""A scripted fake expert backend for tests and benchmarks: exact texts, latencies, failures and memory use.

The script (``--fake-script``, the run context's ``fake_script`` or ``COE_FAKE_SCRIPT``; YAML or JSON) answers each
slot by rules matched on its id or title; its format is in docs/models.md ("The fake backend"). Without a script
every call gets a generated compliant answer. Delays end early when the pool stops the generation.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from experts.backends.grammar import follow_outline_bounds
from experts.backends.protocol import EitherStop, Generation, GenerationRequest
from state.errors import BackendError, ConfigError, GenerationStopped
from state.settings import Settings, process_env
from state.yaml_text import safe_load


class FakeResponse(BaseModel):
    """One scripted answer."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    delay: float = Field(default=0.0, ge=0.0, le=3600.0)
    fail: str | None = None
    grow_mb: float = Field(default=0.0, ge=0.0, le=65536.0)
    """Really allocate this much memory, evenly over ``delay`` (a run-away generation), freed at the end."""


class FakeRule(BaseModel):
    """Which slots a rule applies to, and what they get."""

    model_config = ConfigDict(extra="forbid")

    slot: str | None = None
    title: str | None = None
    text: str | None = None
    delay: float = Field(default=0.0, ge=0.0, le=3600.0)
    fail: str | None = None

    @model_validator(mode="after")
    def _check(self) -> FakeRule:
        if self.slot is None and self.title is None:
            raise ValueError("a rule needs 'slot' (an id) or 'title' (a regular expression)")
        if self.title is not None:
            try:
                re.compile(self.title)
            except re.error as exc:
                raise ValueError(f"title is not a valid regular expression: {exc}") from None
        return self

    grow_mb: float = Field(default=0.0, ge=0.0, le=65536.0)
    responses: list[FakeResponse] = Field(default_factory=list)
    first_calls: list[FakeResponse] = Field(default_factory=list)
    """Responses to the slot's first calls to this backend, whatever their attempt (e.g. before a re-queue)."""

    def response(self, attempt: int) -> FakeResponse:
        """The scripted response for this attempt (1-based); the last one repeats."""
        if self.responses:
            return self.responses[min(attempt, len(self.responses)) - 1]
        return FakeResponse(text=self.text, delay=self.delay, fail=self.fail, grow_mb=self.grow_mb)

    def matches(self, request: GenerationRequest) -> bool:
        """Whether this rule applies to the request's slot."""
        if self.slot is not None and request.slot_id != self.slot:
            return False
        return self.title is None or re.search(self.title, request.slot_title or "") is not None


class FakeModel(BaseModel):
    """What a fake model costs the pool: its footprint, and how long it takes to load."""

    model_config = ConfigDict(extra="forbid")

    memory_mb: float = Field(default=0.0, ge=0.0, le=1048576.0)
    load_delay: float = Field(default=0.0, ge=0.0, le=3600.0)


class FakeScript(BaseModel):
    """A parsed fake-backend script."""

    model_config = ConfigDict(extra="forbid")

    calls_log: str | None = None
    default: FakeResponse = Field(default_factory=FakeResponse)
    rules: list[FakeRule] = Field(default_factory=list)
    models: dict[str, FakeModel] = Field(default_factory=dict)
    """Footprints by model name (``base`` for the base model), for tests of the memory pool."""


def load_script(path: str) -> FakeScript:
    """Load and validate a fake-backend script file; errors name the file and field."""
    try:
        data: Any = safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(path, "fake script file not found", field="fake_script") from None
    except OSError as exc:
        raise ConfigError(path, f"cannot read the fake script: {exc.strerror or exc}", field="fake_script") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not a UTF-8 text file (byte {exc.start})", field="fake_script") from None
    except yaml.YAMLError as exc:
        raise ConfigError(path, f"not valid YAML/JSON: {exc}") from None
    try:
        return FakeScript.model_validate(data or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(path, first["msg"], field=".".join(str(p) for p in first["loc"])) from None


def compliant_answer(title: str, grammar: str | None = None) -> str:
    """A deterministic answer about ``title`` that follows the output contract and passes the harness' checks.

    When the request's grammar asks for code first (a code deliverable), the answer is one small complete module in
    that language; otherwise it is prose with three sections.
    """
    language = (follow_outline_bounds(grammar) or {}).get("code_first") if grammar else None
    if language is not None:
        return (
            "## Outline\n"
            f"1. {title} module\n\n"
            f"## 1. {title} module\n"
            f"```{language}\n{_CODE.get(language, _CODE['text'])}```\n"
        )
    return (
        "## Outline\n"
        f"1. Scope of {title}\n"
        "2. Approach\n"
        "   2.1 Key steps\n"
        "3. Summary\n\n"
        f"## 1. Scope of {title}\n"
        f"This part covers {title}: what it includes, what it leaves out, and the assumptions it rests on.\n\n"
        "## 2. Approach\n"
        f"The approach to {title} takes the requirements one at a time and records each decision with its reason.\n\n"
        "### 2.1 Key steps\n"
        f"- First, gather the inputs of {title} and confirm them with the people who own them.\n"
        f"- Second, write {title} down and check it against the inputs.\n\n"
        "## 3. Summary\n"
        f"{title} is covered in full here, with its scope, the approach taken and the key steps written down.\n"
    )


_CODE = {
    "python": 'def answer() -> str:\n    """Return the answer."""\n    return "done"\n',
    "sql": "SELECT 1 AS answer;\n",
    "bash": "#!/usr/bin/env bash\nset -euo pipefail\necho done\n",
    "yaml": "answer: done\n",
    "json": '{"answer": "done"}\n',
    "dockerfile": 'FROM python:3.11-slim\nCMD ["python", "-c", "print(\'done\')"]\n',
    "text": "done\n",
}
"""The module of a fake code answer, by language: small, complete and passing the checks."""


@dataclass
class FakeBackend:
    """The scripted backend. Thread-safe; sleeps release the GIL so parallel slots overlap in time."""

    script: FakeScript
    calls_log: str | None = None
    model: str | None = None
    """The model this backend stands in for (None: the base model); logged with every call."""
    name: str = "fake"

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._calls: dict[str | None, int] = {}
        self._loaded = False
        self._spec = self.script.models.get(self.model or "base", FakeModel())

    @property
    def loaded(self) -> bool:
        """Whether the (pretend) model is loaded."""
        return self._loaded

    def footprint_bytes(self) -> int:
        """The scripted footprint of this model (``models.<name>.memory_mb``; 0 when not scripted)."""
        return int(self._spec.memory_mb * 1024 * 1024)

    def load(self) -> None:
        """Pretend to load: sleep the scripted ``load_delay``."""
        if not self._loaded:
            time.sleep(self._spec.load_delay)
            self._loaded = True

    def unload(self) -> None:
        """Pretend to unload; clear a stop request."""
        self._loaded = False
        self._stop.clear()

    def cancel(self) -> None:
        """Cut the current delay short; the generation raises GenerationStopped."""
        self._stop.set()

    @classmethod
    def from_settings(cls, settings: Settings) -> FakeBackend:
        """Create the backend from the run's settings (script file optional)."""
        script = load_script(settings.fake_script) if settings.fake_script else FakeScript()
        log = script.calls_log or process_env("COE_FAKE_CALLS_LOG")
        return cls(script=script, calls_log=log, model=settings.model_path)

    def supports_grammar(self) -> bool:
        """The fake takes a grammar: its generated answer has the grammar's shape; scripted texts stay as written."""
        return True

    def generate(self, request: GenerationRequest) -> Generation:
        """Answer as scripted for the request's slot and attempt."""
        rule = next((r for r in self.script.rules if r.matches(request)), None)
        with self._lock:
            call = self._calls[request.slot_id] = self._calls.get(request.slot_id, 0) + 1
        if rule is not None and call <= len(rule.first_calls):
            response = rule.first_calls[call - 1]
        else:
            response = rule.response(request.attempt) if rule is not None else self.script.default
        self._log_call(request)
        start = time.perf_counter()
        text = (
            response.text
            if response.text is not None
            else compliant_answer(request.slot_title or "the task", request.grammar)
        )
        streamed = request.on_token is not None and response.fail is None and not response.grow_mb
        if streamed:
            ended = self._stream(response, request, text)
        else:
            ended = ("time", "") if self._wait(response, request) else None
        if ended is not None and ended[0] == "time":
            return Generation(text="", seconds=time.perf_counter() - start, finish_reason="time", model="fake")
        if ended is not None:  # halted by the caller: what was written stays
            return Generation(
                text=ended[1],
                completion_tokens=len(ended[1].split()),
                seconds=time.perf_counter() - start,
                finish_reason="halted",
                model="fake",
            )
        if response.fail is not None:
            raise BackendError(f"fake backend: {response.fail}", slot_id=request.slot_id)
        if request.on_token is not None and not streamed:
            request.on_token(text)
        prompt_words = sum(len(m.content.split()) for m in request.messages)
        return Generation(
            text=text,
            prompt_tokens=prompt_words,
            completion_tokens=len(text.split()),
            seconds=time.perf_counter() - start,
            model="fake",
        )

    def _stream(self, response: FakeResponse, request: GenerationRequest, text: str) -> tuple[str, str] | None:
        """Hand ``text`` to ``request.on_token`` word by word, spread over the scripted delay; stops as ``_wait``.

        Returns ``("time", ...)`` when the request's time limit ended the answer (what was sent stays sent),
        ``("halted", the text sent)`` when the request's ``halt`` was set, else None.
        """
        assert request.on_token is not None
        pieces = re.findall(r"\s*\S+|\s+", text) or [text]
        step = response.delay / len(pieces)
        stop = EitherStop(self._stop, request.cancel)
        spent = 0.0
        sent: list[str] = []
        for piece in pieces:
            if request.halt is not None and request.halt.is_set():
                return "halted", "".join(sent)
            if request.time_limit is not None and spent + step > request.time_limit:
                if stop.wait(max(0.0, request.time_limit - spent)):
                    self._stopped(request)
                return "time", "".join(sent)
            if stop.wait(step) if step else stop.is_set():
                self._stopped(request)
            spent += step
            request.on_token(piece)
            sent.append(piece)
        return None

    def _stopped(self, request: GenerationRequest) -> NoReturn:
        if self._stop.is_set():
            raise GenerationStopped(
                "fake backend: generation stopped by the model pool", "stopped", slot_id=request.slot_id
            )
        raise GenerationStopped(
            "fake backend: generation stopped, its run was cancelled", "cancelled", slot_id=request.slot_id
        )

    def _wait(self, response: FakeResponse, request: GenerationRequest) -> bool:
        """Sleep the delay (allocating ``grow_mb`` along the way, freed at the end) unless stopped.

        Returns True when the request's time limit ended the wait before the delay did.
        """
        held: list[mmap.mmap] = []  # anonymous maps: returned to the system when closed, unlike heap memory
        steps = max(1, int(response.grow_mb // 8)) if response.grow_mb else 1
        delay = response.delay
        timed_out = request.time_limit is not None and delay > request.time_limit
        if timed_out:
            delay = request.time_limit or 0.0
        stop = EitherStop(self._stop, request.cancel)
        try:
            for _ in range(steps):
                if stop.wait(delay / steps) if delay else stop.is_set():
                    self._stopped(request)
                if response.grow_mb:
                    size = int(response.grow_mb * 1024 * 1024 / steps)
                    block = mmap.mmap(-1, size)
                    block.write(b"\x01" * size)  # touch every page: resident, as a real allocation would be
                    held.append(block)
        finally:
            for block in held:
                block.close()
        return timed_out

    def _log_call(self, request: GenerationRequest) -> None:
        if not self.calls_log:
            return
        line = json.dumps(
            {
                "slot": request.slot_id,
                "attempt": request.attempt,
                "model": self.model,
                "max_tokens": request.max_tokens,
                "temperature": request.temperature,
                "system": request.messages[0].content if request.messages else "",
                "user": "\n\n".join(m.content for m in request.messages[1:] if m.role != "system")
                if request.messages and request.messages[0].role == "system"
                else "\n\n".join(m.content for m in request.messages),
                "pid": os.getpid(),
                "t": time.time(),
            }
        )
        # One write() on an O_APPEND descriptor: the lines of two processes never interleave. A reader may still
        # find the last line half written while it is copied in; tests read only the lines that end in a newline.
        with self._lock:
            fd = os.open(self.calls_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (line + "\n").encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
