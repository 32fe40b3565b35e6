"""Checkpoints written by earlier versions still read back: moved classes and removed fields."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from graph.persistence import serializer
from state.context import resolve_settings
from state.passport import RunInfo, SlotState
from state.settings import Settings


def test_settings_saved_under_its_old_module_read_back_as_settings(caplog: pytest.LogCaptureFixture) -> None:
    settings = resolve_settings({"backend": "fake", "max_tokens": 123}, env={})
    old_module = Settings.__module__
    Settings.__module__ = "state.passport"  # where the class lived when such checkpoints were written
    try:
        kind, data = serializer().dumps_typed({"settings": settings})
    finally:
        Settings.__module__ = old_module
    with caplog.at_level(logging.WARNING):
        loaded = serializer().loads_typed((kind, data))
    assert isinstance(loaded["settings"], Settings) and loaded["settings"].max_tokens == 123
    assert not [r for r in caplog.records if "Blocked" in r.getMessage()]


def test_removed_fields_of_old_checkpoints_are_dropped() -> None:
    run = RunInfo.model_validate(
        {"thread_id": "t", "run_id": "r", "created_at": datetime.now(UTC), "tenant": "default", "limits": {}}
    )
    assert run.thread_id == "t" and not hasattr(run, "tenant")
    slot = SlotState.model_validate({"status": "done", "dispatch_token": "abc"})
    assert slot.status == "done" and not hasattr(slot, "dispatch_token")
    with pytest.raises(ValueError, match="colour"):
        SlotState.model_validate({"status": "done", "colour": "red"})  # other unknown fields are still refused
