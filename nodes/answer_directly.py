"""Node ``answer_directly``: a trivial task is answered by the base model in one short reply, no experts.

The document is the task as its title and the answer; the summary has no slots; the ledger says the task was
answered directly and why it was judged trivial.
"""

from __future__ import annotations

import time
from typing import Any

from engine import prompts
from engine.slots.inline_arithmetic import compute
from engine.slots.streaming import generate_streamed, node_stream
from experts.backends import ChatMessage, GenerationRequest
from experts.pool import get_backend
from state.enums import RunStatus
from state.errors import BackendError, RunFailure, UserError
from state.framework import title_from_task
from state.io import RunSummary
from state.passport import GuardedPassport, LedgerEntry, utcnow

NODE = "answer_directly"
MAX_TOKENS = 200
EARLIER_CHARS = 4000
"""The most of the previous turn's document a follow-up's direct answer sees (the context is 4,096 tokens)."""


def answer_directly(state: GuardedPassport) -> dict[str, Any]:
    """Answer a trivial task in one call to the base model."""
    task = state.mission.task
    backend = get_backend(state.settings)
    t0 = time.perf_counter()
    messages: tuple[ChatMessage, ...] = (ChatMessage("system", prompts.DIRECT_SYSTEM), ChatMessage("user", task))
    if state.turns:  # a follow-up ("thanks", "what does that mean?"): the earlier exchange comes first
        last = state.turns[-1]
        earlier = last.document if len(last.document) <= EARLIER_CHARS else last.document[:EARLIER_CHARS] + " [...]"
        messages = (messages[0], ChatMessage("user", last.task), ChatMessage("assistant", earlier), messages[1])
    stream = node_stream()  # its tokens on stream_mode="messages", before arithmetic is computed
    meta = {"slot_id": NODE, "expert": "base", "model": "base model", "attempt": 1}
    request = GenerationRequest(
        messages=messages, max_tokens=MAX_TOKENS, temperature=0.0, slot_id=NODE, slot_title="Direct answer"
    )
    try:
        gen = generate_streamed(backend, request, stream, meta)
    except UserError:
        raise
    except BackendError as exc:  # reported under this node's name; the run stops here and can be resumed
        raise RunFailure(NODE, f"the base model failed to answer: {exc.message}") from exc
    except Exception as exc:  # the backend's own error type: the run stops here and can be resumed
        raise RunFailure(NODE, f"the base model failed to answer: {type(exc).__name__}: {exc}") from exc
    title = title_from_task(task)
    answer, computed = compute(gen.text.strip())  # arithmetic is computed, not trusted to the model's digits
    document = f"# {title}\n\n{answer}\n"
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
                outputs_summary=f"{len(gen.text)} chars from the base model, no experts"
                + (f"; {'; '.join(computed)}" if computed else ""),
                duration_ms=int((time.perf_counter() - t0) * 1000),
                prompt_tokens=gen.prompt_tokens,
                completion_tokens=gen.completion_tokens,
            )
        ],
    }
