"""The review set is sound: every expert is covered, rubrics are not met by the task's own words, and the
tests of each Python task pass a correct solution and fail a stub."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import bench_review
from experts.catalog import load_catalog

ITEMS = bench_review.load_tasks()
PYTHON = [i for i in ITEMS if i.get("tests")]


def test_the_set_covers_every_expert_with_prose_and_code() -> None:
    assert len(ITEMS) >= 40
    assert len({i["id"] for i in ITEMS}) == len(ITEMS)
    for expert in load_catalog().ids:
        assert sum(i["expert"] == expert for i in ITEMS) >= 3, expert
    assert {i["kind"] for i in ITEMS} >= {"code", "prose", "plan", "table"}


def test_rubric_patterns_compile_and_the_task_alone_does_not_meet_them() -> None:
    met_by_task = 0
    items = 0
    for item in ITEMS:
        assert 2 <= len(item["rubric"]) <= 6, item["id"]
        for rubric in item["rubric"]:
            pattern = re.compile(rubric["pattern"], re.I | re.M)
            items += 1
            met_by_task += bool(pattern.search(item["task"]))
    # Some items name what the task names (a reader checks the answer keeps it); most must ask for more.
    assert met_by_task / items < 0.4, f"{met_by_task} of {items} rubric items are met by the task sentence"


@pytest.mark.parametrize("item", PYTHON, ids=[i["id"] for i in PYTHON])
def test_python_tests_pass_the_reference_and_fail_a_stub(item: dict) -> None:
    assert bench_review.passes(item["reference"], item["tests"])
    name = re.search(r"def (\w+)\(", item["reference"]).group(1)  # type: ignore[union-attr]
    assert not bench_review.passes(f"def {name}(*args):\n    return None\n", item["tests"])
    assert re.search(rf"\b{name}\(", item["task"]), "the task names the function its tests call"


def test_judging_finds_degenerate_stub_duplicated_and_truncated_documents() -> None:
    item = {"rubric": [{"what": "x", "pattern": "palindrome"}]}
    loop = "The answer is the answer and it is the answer. " * 4
    same = "Same text here, long enough to count. " * 2
    bad = f"# T\n\n## 1. A\n{loop}\n```python\ndef f(:\n```\n\n## 2. B\nTODO\n\n## 3. C\n{same}\n\n## 4. D\n{same}\n"
    judged = bench_review.judge(bad, "", item, 1.0)
    assert judged.degenerate and judged.stub_sections == 1 and judged.duplicated_sections == 1
    assert judged.truncated_code and judged.rubric_met == [False]
    good = "# T\n\n## 1. A\nA palindrome reads the same both ways.\n\n```python\ndef f(s):\n    return s\n```\n"
    clean = bench_review.judge(good, "", item, 1.0)
    assert not (clean.degenerate or clean.stub_sections or clean.duplicated_sections or clean.truncated_code)
    assert clean.coverage == 1.0


def test_a_harness_document_that_misses_unflagged_is_a_confident_miss() -> None:
    item = {"rubric": [{"what": "about 2,068.81", "pattern": "2,?068\\.8"}]}
    wrong = "# T\n\n## Answer\nThe payment is $11,141.67.\n"
    flagged = wrong + "\n> **Caveat:** This part did not pass its checks (math.result: ...); review it before use.\n"
    assert not bench_review.judge(wrong, "", item, 1.0).flagged
    assert bench_review.judge(flagged, "", item, 1.0).flagged
    assert not bench_review.judge(flagged, "", item, 1.0, harness=False).flagged  # a bare reply has no caveats
    rates = bench_review._rates([bench_review.judge(d, "", item, 1.0) for d in (wrong, flagged)])
    assert rates["confident_misses"] == 1


def test_quick_mode_runs_every_side_and_writes_its_results(tmp_path: Path) -> None:
    assert bench_review.main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "review.json").read_text(encoding="utf-8"))
    summary = result["summary"]
    assert summary["tasks"] == 3 and len(result["rows"]) == 3 and summary["tasks_with_reference"] == 3
    assert {"degenerate", "rubric_coverage", "tests_passed"} <= set(summary["harness"]) & set(summary["reference"])
    assert all(row["reference"]["rubric_met"] for row in result["rows"])
    assert len(list((tmp_path / "review_documents").glob("*.reference.md"))) == 3


def test_a_results_file_from_before_the_reference_resumes(tmp_path: Path) -> None:
    bench_review.main(["--quick", "--out", str(tmp_path), "--limit", "1"])
    saved = json.loads((tmp_path / "review.json").read_text(encoding="utf-8"))
    del saved["rows"][0]["reference"]  # as a file written before the reference was asked
    (tmp_path / "old.json").write_text(json.dumps(saved), encoding="utf-8")
    assert bench_review.main(["--quick", "--out", str(tmp_path), "--resume", str(tmp_path / "old.json")]) == 0
    summary = json.loads((tmp_path / "review.json").read_text(encoding="utf-8"))["summary"]
    assert summary["tasks"] == 3 and summary["tasks_with_reference"] == 2


def test_the_numeric_sets_answers_are_not_in_its_tasks() -> None:
    items = bench_review.load_tasks(bench_review.DATA.parent / "numeric_set.yaml")
    assert len(items) >= 10 and len({i["id"] for i in items}) == len(items)
    for item in items:
        for rubric in item["rubric"]:
            assert not re.search(rubric["pattern"], item["task"], re.I | re.M), (item["id"], rubric["what"])


def test_the_rubric_reads_what_the_model_wrote_not_the_title_or_a_caveat() -> None:
    item = {"rubric": [{"what": "the probability", "pattern": r"0\.5177"}, {"what": "names dice", "pattern": "dice"}]}
    document = (
        "# Roll four dice\n\n## 1. Answer\nThe chance is about one half.\n\n"
        "> **Caveat:** the check math.result failed: the program printed 0.5177,\nno candidate stated it\n\n"
        "## Warnings\n- 0.5177\n"
    )
    assert bench_review.judge(document, "", item, 1.0).rubric_met == [False, False]
    bare = "# Four dice\nThe chance is 0.5177."
    assert bench_review.judge(bare, "", item, 1.0, harness=False).rubric_met == [True, True]  # a reply is kept whole


def test_a_numeric_answer_with_its_unit_in_latex_meets_the_item() -> None:
    items = {i["id"]: i for i in bench_review.load_tasks(bench_review.DATA.parent / "numeric_set.yaml")}
    speed = re.compile(items["num-speed"]["rubric"][0]["pattern"], re.I | re.M)
    for answer in ("60 km/h", r"\boxed{60} \text{ km/h}", r"\boxed{60 \, \text{km/h}}", "60 kilometres per hour"):
        assert speed.search(answer), answer
    assert not speed.search("600 km/h") and not speed.search("160 km")


def test_resume_keeps_a_stopped_runs_rows_and_runs_only_the_rest(tmp_path: Path) -> None:
    assert bench_review.main(["--quick", "--out", str(tmp_path)]) == 0
    first = json.loads((tmp_path / "review.json").read_text(encoding="utf-8"))
    part = first | {"rows": first["rows"][:2]}
    part["rows"][0]["harness"]["chars"] = -1  # a mark: taken over from the file, not run again
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps(part), encoding="utf-8")
    assert bench_review.main(["--quick", "--out", str(tmp_path), "--name", "whole", "--resume", str(stopped)]) == 0
    whole = json.loads((tmp_path / "whole.json").read_text(encoding="utf-8"))
    assert [r["id"] for r in whole["rows"]] == [r["id"] for r in first["rows"]]
    assert whole["rows"][0]["harness"]["chars"] == -1 and whole["rows"][2]["harness"]["chars"] > 0
    assert whole["summary"]["tasks"] == 3 and whole["summary"]["resumed_from"] == str(stopped)
    with pytest.raises(SystemExit, match="--resume .*review.md"):
        bench_review.main(["--quick", "--out", str(tmp_path), "--resume", str(tmp_path / "review.md")])


def test_an_absent_item_is_met_when_its_wrong_claim_is_not_made() -> None:
    item = {
        "rubric": [
            {"what": "no ordering", "pattern": "udp[^.]{0,40}(?:not|no)[^.]{0,30}order"},
            {"what": "no wrong claim", "pattern": "udp (?:(?!not|no )[^.]){0,40}ensures order", "absent": True},
        ]
    }
    right = "# T\n\n## Answer\nUDP does not guarantee order.\n"
    wrong = "# T\n\n## Answer\nUDP does not guarantee order. UDP ensures order of packets.\n"
    assert bench_review.judge(right, "", item, 1.0).rubric_met == [True, True]
    assert bench_review.judge(wrong, "", item, 1.0).rubric_met == [True, False]
