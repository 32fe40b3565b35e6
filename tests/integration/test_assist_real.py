"""The assist protocol on the real default model: a task it cannot answer from its own knowledge."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from experts.knowledge import add_documents
from tests.conftest import FIXTURES
from tests.integration.cli_proc import coe_run

# Facts only the organisation has: with the uncertainty protocol in its prompt, the default model marks them.
# (A prose deliverable: code and configuration are told to take unknown values as parameters instead.)
TASK = (
    "Write a short welcome note for our new engineer that gives the hostname of our production billing database "
    "and the name of the person on call for it this week."
)


@pytest.mark.model
def test_placeholders_of_the_real_model_are_resolved_or_listed(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    add_documents([FIXTURES / "kb"], kb)
    # This test is about assists: one answer of the model (no outline retries, no extra candidates, no escalation,
    # no completion round) keeps it short; the 1.5B drew four candidates and took ~400 s in the suite with them.
    env = {
        **os.environ,
        "COE_HOME": str(tmp_path),
        "COE_KB": str(kb),
        "COE_MAX_OUTLINE_RETRIES": "0",
        "COE_BEST_OF": "1",
        "COE_ESCALATE": "false",
        "COE_COMPLETION_SECONDS": "0",
    }
    out = coe_run("run", TASK, "--json", "--max-tokens", "256", "--no-templates", env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    doc = summary["document"]
    body, _, tail = doc.partition("\n## Unresolved")
    markers = re.findall(r"\{\{UNRESOLVED:[^{}]*?\}\}", body)
    filled = re.findall(r"\[source: [^\]]+\]", body)
    assert markers or filled, "the model wrote no assist placeholder for a task it cannot know"
    assert not re.search(r"\{\{\s*ASSIST\s*:(?:lookup|expert|user):[^{}]*\}\}", doc, re.I)  # none left as is
    assert sorted(set(markers)) == sorted(summary["unresolved"])  # every marker of the body is listed
    for marker in markers:
        assert f"- `{marker}`" in tail
    if filled:
        assert "## Assist sources" in doc
