"""Node ``answer_directly``: a trivial task is answered by the base model in one short reply, no experts.

The document is the task as its title and the answer; the summary has no slots; the ledger says the task was
answered directly and why it was judged trivial.
"""

from __future__ import annotations

import time
from typing import Any

from experts.pool import ChatMessage, GenerationRequest, get_backend
from nodes import prompts
from state.enums import RunStatus
from state.errors import CoeError, RunFailure
from state.framework import fallback_framework
from state.io import RunSummary
from state.passport import LedgerEntry, Passport, utcnow

NODE = "answer_directly"
MAX_TOKENS = 200


def answer_directly(state: Passport) -> dict[str, Any]:
    """Answer a trivial task in one call to the base model."""
    if state.mission is None or state.settings is None or state.run is None:
        raise RunFailure(NODE, "the mission, settings and run identity must be set by guard first")
    task = state.mission.task
    backend = get_backend(state.settings)
    t0 = time.perf_counter()
    request = GenerationRequest(
        messages=(ChatMessage("system", prompts.DIRECT_SYSTEM), ChatMessage("user", task)),
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        slot_id=NODE,
        slot_title="Direct answer",
    )
    try:
        gen = backend.generate(request)
    except CoeError:
        raise
    except Exception as exc:  # the backend's own error type: the run stops here and can be resumed
        raise RunFailure(NODE, f"the base model failed to answer: {type(exc).__name__}: {exc}") from exc
    title = fallback_framework(task).title
    document = f"# {title}\n\n{gen.text.strip()}\n"
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
                outputs_summary=f"{len(gen.text)} chars from the base model, no experts",
                duration_ms=int((time.perf_counter() - t0) * 1000),
                prompt_tokens=gen.prompt_tokens,
                completion_tokens=gen.completion_tokens,
            )
        ],
    }
