"""Node ``answer_directly``: a trivial task is answered in one short reply by the generalist's model, no experts.

The model is the one the catalog's default expert (``general_reasoning``) runs on: the 1.5B where it is
installed, else the base model. On 20 explanations (``python -m bench.bench_direct --name direct_facts``) the
0.5B stated 0.573 of the facts a right answer states ("why do we have seasons?": "the natural cycles of the Earth's
rotation"), the 1.5B 0.741, at a median 4.0 s against 2.1 s (docs/models.md).

The document is the task as its title and the answer; the summary has no slots; the ledger says the task was
answered directly and why it was judged trivial. A request for a value ("what is 72 degrees Fahrenheit in
Celsius?") is held to a program the code model writes (:mod:`engine.direct_answer`), whose working the document
shows.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from engine import prompts
from engine.direct_answer import CheckedAnswer, check_direct_answer, wants_program
from engine.slots.inline_arithmetic import compute
from engine.slots.sandbox import SandboxLimits
from engine.slots.streaming import Listeners, generate_streamed, node_stream
from experts.backends import ChatMessage, ExpertBackend, GenerationRequest
from experts.catalog import Binding, escalation_binding, load_catalog, resolve_binding
from experts.pool import get_backend
from state.enums import RunStatus
from state.errors import BackendError, RunFailure, UserError
from state.framework import title_from_task
from state.io import RunSummary
from state.passport import GuardedPassport, LedgerEntry, utcnow
from state.settings import Settings

logger = logging.getLogger(__name__)

NODE = "answer_directly"
MAX_TOKENS = 200
EARLIER_CHARS = 4000
"""The most of the previous turn's document a follow-up's direct answer sees (the context is 4,096 tokens)."""


def answer_directly(state: GuardedPassport) -> dict[str, Any]:
    """Answer a trivial task in one call to the generalist's model."""
    task = state.mission.task
    answering = _answering(state.settings)
    backend = get_backend(state.settings, answering.model)
    t0 = time.perf_counter()
    messages: tuple[ChatMessage, ...] = (ChatMessage("system", prompts.DIRECT_SYSTEM), ChatMessage("user", task))
    if state.turns:  # a follow-up ("thanks", "what does that mean?"): the earlier exchange comes first
        last = state.turns[-1]
        earlier = last.document if len(last.document) <= EARLIER_CHARS else last.document[:EARLIER_CHARS] + " [...]"
        messages = (messages[0], ChatMessage("user", last.task), ChatMessage("assistant", earlier), messages[1])
    stream = node_stream()  # its tokens on stream_mode="messages", before arithmetic is computed
    meta = {"slot_id": NODE, "expert": "direct answer", "model": answering.model or "base model", "attempt": 1}
    request = GenerationRequest(
        messages=messages, max_tokens=MAX_TOKENS, temperature=0.0, slot_id=NODE, slot_title="Direct answer"
    )
    try:
        gen = generate_streamed(backend, request, stream, meta)
    except UserError:
        raise
    except BackendError as exc:  # reported under this node's name; the run stops here and can be resumed
        raise RunFailure(NODE, f"the {answering.label} failed to answer: {exc.message}") from exc
    except Exception as exc:  # the backend's own error type: the run stops here and can be resumed
        raise RunFailure(NODE, f"the {answering.label} failed to answer: {type(exc).__name__}: {exc}") from exc
    title = title_from_task(task)
    answer, computed = compute(gen.text.strip())  # arithmetic is computed, not trusted to the model's digits
    checked = _checked(state.settings, task, answer, backend, messages, stream, meta)
    document = f"# {title}\n\n{checked.text}\n"
    summary = RunSummary(
        thread_id=state.run.thread_id,
        run_id=state.run.run_id,
        status=RunStatus.COMPLETED,
        title=title,
        framework_source="direct answer (trivial task)",
        slots=[],
    )
    reason = state.scope.reason if state.scope is not None else "trivial task"
    return {
        "document": document,
        "summary": summary,
        "status": RunStatus.COMPLETED,
        "updated_at": utcnow(),
        "ledger": [
            LedgerEntry(
                agent="router",
                action="answer_directly",
                inputs_summary=f"trivial task: {reason}",
                outputs_summary=f"{len(gen.text)} chars from the {answering.label}, no experts"
                + (f"; {'; '.join(computed)}" if computed else ""),
                duration_ms=int((time.perf_counter() - t0) * 1000),
                prompt_tokens=gen.prompt_tokens,
                completion_tokens=gen.completion_tokens,
            ),
            *checked.ledger,
        ],
    }


def _answering(settings: Settings) -> Binding:
    """The model that answers directly: the default expert's (a missing one the base model, whatever its scope)."""
    catalog = load_catalog()
    binding = resolve_binding(settings, catalog.get(catalog.default_expert))
    return Binding(None, "faux-fallback", binding.problem) if binding.fatal else binding


def _checked(
    settings: Settings,
    task: str,
    answer: str,
    backend: ExpertBackend,
    messages: tuple[ChatMessage, ...],
    stream: Listeners | None,
    meta: dict[str, Any],
) -> CheckedAnswer:
    """The answer held to programs when the task asks for a value, else as it is (:mod:`engine.direct_answer`).

    The programs are written by the biggest installed code model (as a slot's are), else by the base model. A
    backend that fails while they are written leaves the answer unchecked, said in the log and the ledger.
    """
    if not settings.calculate or not wants_program(task):
        return CheckedAnswer(answer)
    bigger = escalation_binding(settings, load_catalog(), None)
    model = bigger.model if bigger is not None and bigger.model is not None else None
    programs = get_backend(settings, model) if model is not None else backend

    def tell(value: str) -> str:
        system = ChatMessage("system", f"{prompts.DIRECT_SYSTEM}\n\n{prompts.DIRECT_TOLD.format(value=value)}")
        request = GenerationRequest(
            messages=(system, *messages[1:]),
            max_tokens=MAX_TOKENS,
            temperature=0.0,
            slot_id=NODE,
            slot_title="Direct answer",
        )
        told = generate_streamed(backend, request, stream, {**meta, "attempt": 2})
        return compute(told.text.strip())[0]

    try:
        return check_direct_answer(
            task,
            answer,
            programs=programs,
            model=model or "the base model",
            limits=SandboxLimits(timeout_s=settings.check_timeout_s),
            tell=tell,
            slot_id=NODE,
        )
    except UserError:
        raise
    except Exception as exc:  # a backend's own error type: the answer goes out unchecked, and says so in the ledger
        logger.warning("the direct answer's program could not be written: %s: %s", type(exc).__name__, exc)
        note = LedgerEntry(
            agent="harness",
            action="calculate",
            slot_id=NODE,
            outputs_summary=f"no program: {type(exc).__name__}: {exc}"[:500],
        )
        return CheckedAnswer(answer, ledger=[note])
