"""The background reader that warms the page cache while llama.cpp loads a model."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from experts.backends.prefetch import Prefetch


def test_reads_the_whole_file_in_chunks(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(bytes(range(256)) * 4099)  # not a multiple of the chunk size
    with Prefetch(path, chunk_bytes=4096) as prefetch:
        deadline = time.monotonic() + 10
        while not prefetch.done and time.monotonic() < deadline:  # a load lasts longer than this read
            time.sleep(0.01)
    assert prefetch.error is None
    assert prefetch.bytes_read == path.stat().st_size


def test_leaving_the_block_stops_the_reader_and_waits_for_it(tmp_path: Path) -> None:
    path = tmp_path / "big.gguf"
    with path.open("wb") as fh:
        fh.truncate(256 * 1024 * 1024)  # sparse: reads are fast but take many chunks of 4 KiB
    with Prefetch(path, chunk_bytes=4096) as prefetch:
        pass
    assert prefetch.done
    assert not prefetch._thread.is_alive()
    assert prefetch.bytes_read < path.stat().st_size


def test_a_missing_file_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "missing.gguf"
    with caplog.at_level(logging.DEBUG, logger="experts.backends.prefetch"), Prefetch(path) as prefetch:
        pass
    assert isinstance(prefetch.error, FileNotFoundError)
    assert prefetch.bytes_read == 0
    assert "missing.gguf" in caplog.text


def test_chunk_size_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="chunk_bytes"):
        Prefetch(tmp_path / "model.gguf", chunk_bytes=0)
