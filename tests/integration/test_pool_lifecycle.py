"""The model pool as a user meets it: `coe experts status` beside a running `coe run`, Ctrl+C during a real
generation (stops it, keeps the checkpoint, resumes), and ten runs in one process without memory growth."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.integration.cli_proc import coe, coe_env, coe_run, wait_while_running
from tests.scopes import persona_scopes

pytestmark = pytest.mark.slow


def _status(home: Path) -> list[dict]:  # type: ignore[type-arg]
    """The pool snapshots published under ``home`` (what `coe experts status` reads)."""
    found = []
    for path in (home / "pool").glob("*.json"):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return found


def test_experts_status_shows_what_a_running_coe_run_holds_and_forgets_it_after_exit(tmp_path: Path) -> None:
    framework = tmp_path / "fw.yaml"
    framework.write_text(
        yaml.safe_dump(
            {
                "id": "status",
                "title": "Status",
                "slots": [
                    {"id": "code", "title": "Code", "description": "Write it.", "expert": "python_coder"},
                    {"id": "notes", "title": "Notes", "description": "Explain.", "expert": "general_reasoning"},
                ],
            }
        )
    )
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                # Long enough for two `coe experts status` processes on a busy 2-core machine.
                "default": {"delay": 10.0},
                "models": {"base": {"memory_mb": 120}, "qwen2.5-coder-1.5b": {"memory_mb": 200}},
            }
        )
    )
    home = tmp_path / "home"
    scopes = persona_scopes(tmp_path, "general_reasoning")  # the notes on the base model, the code on the 1.5B
    env = coe_env(home, script, COE_PROFILE="cpu", COE_EXPERT_SCOPES=str(scopes))
    proc = coe("run", "A tool", "--framework", str(framework), "--memory-limit", "1524", "--json", env=env)
    try:
        wait_while_running(
            proc,
            lambda: any(sum(m["in_use"] for m in p["models"]) == 2 for p in _status(home)),
            60,
            "both models in use",
        )
        shown = coe_run("experts", "status", "--json", env=env)
        assert shown.returncode == 0, shown.stderr
        payload = json.loads(shown.stdout)
        assert payload["budget"]["profile"] == "cpu" and payload["budget"]["overhead_mb"] == 1024
        (running,) = payload["processes"]
        assert running["pid"] == proc.pid and running["budget_mb"] == 500 and running["reserved_mb"] == 320
        models = {m["model"]: m for m in running["models"]}
        assert models["fake:qwen2.5-coder-1.5b"]["state"] == "loaded" and models["fake:base"]["in_use"] == 1
        assert "python_coder" in running["breakers"] or running["breakers"] == {}
        table = coe_run("experts", "status", env=env)
        assert f"pid {proc.pid}" in table.stdout and "fake:qwen2.5-coder-1.5b" in table.stdout
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
    after = coe_run("experts", "status", "--json", env=env)
    assert json.loads(after.stdout)["processes"] == []
    assert "no running coe process" in coe_run("experts", "status", env=env).stdout


def test_a_memory_limit_below_the_overhead_is_refused_before_anything_runs(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("{}")
    env = coe_env(tmp_path / "home", script, COE_PROFILE="cpu")
    out = coe_run("run", "Write a haiku about memory", "--memory-limit", "900", env=env)
    assert out.returncode == 2
    assert "memory_limit_mb: 900 MB leaves nothing for the models" in out.stderr
    assert not (tmp_path / "home" / "checkpoints.sqlite").exists()


@pytest.mark.model
def test_ctrl_c_stops_a_real_generation_at_once_keeps_the_checkpoint_and_the_run_resumes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COE_") or k == "COE_MODEL_CACHE"}
    env["COE_HOME"] = str(home)
    env["COE_MAX_OUTLINE_RETRIES"] = "0"  # one attempt: without the grammar the answer's structure may be off
    # the resumed run keeps its first answer: this test is about stopping and resuming, not about candidates
    env |= {"COE_BEST_OF": "1", "COE_ESCALATE": "false", "COE_COMPLETION_SECONDS": "0"}
    thread = str(uuid.uuid4())
    # creative_writer (on the 1.5B since the review set chose it, about 8-12 tokens/s here): 250 tokens take
    # 20-30 s after the prompt.
    task = "Write a long short story about a lighthouse keeper and a storm"
    args = ("--no-templates", "--no-grammar", "--max-tokens", "250", "--thread-id", thread, "--json")
    proc = coe("run", task, *args, env=env)
    try:
        wait_while_running(
            proc,
            lambda: any(m["in_use"] for p in _status(home) for m in p["models"]),
            300,
            "the model generating",
        )
        time.sleep(2.0)  # reading the prompt or generating: llama.cpp's abort callback stops either at once
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        stopped_in = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert f"interrupted; resume with: coe resume {thread}" in err
    # Stopped at once, not after the rest of the prompt or the answer.
    assert stopped_in < 10, f"took {stopped_in:.1f} s to stop"
    assert _status(home) == []  # the process let go of its models and removed its status on exit
    resumed = coe_run("resume", thread, "--json", env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "completed" and [s["status"] for s in summary["slots"]] == ["done"]


@pytest.mark.model
def test_ten_runs_in_one_process_do_not_grow_memory_beyond_the_loaded_model(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from experts.pool.pooled import clear_backends
    from experts.pool.process_memory import process_rss_bytes
    from experts.pool.residency import pool
    from graph import build_graph
    from graph.persistence import serializer
    from state import Passport
    from state.io import RunInput

    clear_backends()
    graph = build_graph(InMemorySaver(serde=serializer()))
    # One slot per run on the base model (true experts off, so every run uses the same loaded model).
    context = {
        "backend": "llama",
        "use_templates": False,
        "true_experts": False,
        "max_tokens": 16,
        "max_outline_retries": 0,
        "best_of": 1,  # one answer a run: this test is about memory across runs, not about candidates
        "escalate": False,
    }
    rss: list[int] = []
    for i in range(10):
        config = {"configurable": {"thread_id": f"soak-{i}"}}
        graph.invoke(RunInput(task=f"Describe river number {i} in one sentence"), config, context=context)
        state = Passport.model_validate(graph.get_state(config).values)
        assert state.status is not None and state.status.value in ("completed", "partial")
        rss.append(process_rss_bytes())
    (model,) = [m for m in pool().status()["models"] if m["loads"]]
    assert model["loads"] == 1 and model["hits"] >= 9  # loaded by the first run, found loaded by the nine others
    growth_mib = (rss[-1] - rss[2]) / 2**20
    assert growth_mib < 40, f"memory grew {growth_mib:.0f} MiB over runs 3-10: {[r >> 20 for r in rss]}"
    clear_backends()
