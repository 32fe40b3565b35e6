"""The fault matrix over the embedded API: bad input and context to ``graph.invoke``, one case a test.

A case holds when the input is refused with the user error that names the problem, and the thread stays
readable and usable by a good task afterwards (:mod:`tests.faults_lab`; the cases over the ``coe`` command are
in ``tests/integration/test_faults_cli.py``). ``bench/bench_faults.py`` runs the same cases for its totals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.faults_lab import PLAN, TASK, Case, Lab, Outcome


def _api(case_id: str, what: str, payload: Any, names: str, context: dict[str, Any] | None = None) -> Case:
    """``graph.invoke`` in this process on a SQLite checkpointer: a user error naming ``names``, and the thread
    still readable and usable by a good input afterwards."""

    def run(lab: Lab) -> Outcome:
        from graph import build_graph, open_checkpointer
        from state.errors import UserError

        config = {"configurable": {"thread_id": "api"}}
        ctx = {"backend": "fake", "fake_script": str(lab.script), **(context or {})}
        with open_checkpointer(lab.checkpoint) as saver:
            graph = build_graph(saver)
            try:
                graph.invoke(payload, config, context=ctx)
                code, message, user_error = "ok", "", False
            except Exception as exc:  # noqa: BLE001 - the case records whatever comes out
                code, message = type(exc).__name__, str(exc).splitlines()[0][:160]
                user_error = isinstance(exc, UserError)
            try:
                graph.get_state(config)
                readable = True
            except Exception:  # noqa: BLE001 - a thread the bad input broke
                readable = False
            try:
                out = graph.invoke({"task": TASK}, config, context={"backend": "fake", "fake_script": str(lab.script)})
                usable = out.get("status") == "completed"
            except Exception:  # noqa: BLE001 - a thread the bad input broke
                usable = False
        held = user_error and names in message and readable and usable
        return Outcome(code, message, f"readable {readable}; a good task after it completes {usable}", held)

    return Case(case_id, "api", what, run, kind="api")


def _api_cases() -> list[Case]:
    """The matrix over the embedded API, as ``bench/bench_faults.py`` counts it."""
    return [
        _api("api-task-int", "input task 123", {"task": 123}, "task"),
        _api("api-task-missing", "input without a task", {"mode": "autonomous"}, "task"),
        _api("api-task-long", "input task of 8,001 characters", {"task": "x" * 8001}, "8000"),
        _api("api-task-nul", "input task with a NUL character", {"task": "a\x00b"}, "NUL"),
        _api("api-mode", "input mode yolo", {"task": TASK, "mode": "yolo"}, "mode"),
        _api("api-options", "input options 'x'", {"task": TASK, "options": "x"}, "options"),
        _api(
            "api-options-key", "input options with an unknown key", {"task": TASK, "options": {"colour": 1}}, "colour"
        ),
        _api(
            "api-plan-expert",
            "input framework with an unknown expert",
            {"task": TASK, "options": {"framework": {**PLAN, "slots": [{**PLAN["slots"][0], "expert": "wizard"}]}}},
            "wizard",
        ),
        _api("api-backend", "context backend nope", {"task": TASK}, "nope", {"backend": "nope"}),
        _api("api-input-key", "input with an unknown key", {"task": TASK, "mod": "confirm"}, "mod"),
        _api("api-context-key", "context with an unknown key", {"task": TASK}, "colour", {"colour": 1}),
        _api("api-tokens", "context max_tokens -1", {"task": TASK}, "max_tokens", {"max_tokens": -1}),
    ]


API_CASES = _api_cases()


@pytest.mark.parametrize("case", API_CASES, ids=[c.id for c in API_CASES])
def test_the_fault_holds(case: Case, tmp_path: Path) -> None:
    outcome = case.run(Lab(tmp_path))
    assert outcome.held, f"{case.what}: {outcome}"
