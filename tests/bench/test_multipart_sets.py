"""The multi-part task sets load as the benchmark reads them: ids unique, a task and agreement statements each, and
every numeric value kept (a time or a cron line is the reader's, not a number to find)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench import bench_multipart

SETS = sorted((Path(bench_multipart.__file__).parent / "data").glob("multipart_tasks*.yaml"))


@pytest.mark.parametrize("path", SETS, ids=[p.name for p in SETS])
def test_a_set_loads_with_its_numbers(path: Path) -> None:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))["items"]
    items = bench_multipart.load_items(path)
    assert len(items) == len(raw) >= 8 and len({i.id for i in items}) == len(items)
    for item, data in zip(items, raw, strict=True):
        assert item.task.strip() and len(data["agreement"]) >= 2, item.id
        values = (data.get("values") or {}).items()  # a true/false result is a call's, not a number to find
        numeric = {k for k, v in values if isinstance(v, int | float) and not isinstance(v, bool)}
        assert set(item.values) == numeric, item.id


def test_the_second_set_is_read_with_set() -> None:
    assert [p.name for p in SETS] == [
        "multipart_tasks.yaml",
        "multipart_tasks2.yaml",
        "multipart_tasks3.yaml",
        "multipart_tasks4.yaml",
        "multipart_tasks5.yaml",
    ]
    items = bench_multipart.load_items(SETS[1])
    assert items[0].id.startswith("mp2-") and "22:30" not in str(items)  # the times stay the reader's
