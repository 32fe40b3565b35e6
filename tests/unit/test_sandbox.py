"""The sandbox that runs generated code: no network, no writes outside its directory, no processes, limits hold."""

from __future__ import annotations

from pathlib import Path

from engine.slots.sandbox import SandboxLimits, run_python


def test_a_program_runs_and_reads_its_own_files() -> None:
    result = run_python({"main.py": "import helper\nprint(helper.VALUE)", "helper.py": "VALUE = 42"}, "main.py")
    assert result.ok and result.stdout.strip() == "42" and result.violations == []


def test_network_is_refused() -> None:
    code = (
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 5432), timeout=1)\n"
        "except PermissionError:\n    print('refused')"
    )
    result = run_python({"main.py": code}, "main.py")
    assert "refused" in result.stdout and result.violations and "network" in result.violations[0]
    assert not result.ok  # a refusal makes the run not ok even when the program caught the error


def test_writes_outside_its_directory_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "user-file.txt"
    target.write_text("keep me")
    code = f"import os\nopen('mine.txt', 'w').write('ok')\nopen({str(target)!r}, 'w').write('gone')"
    result = run_python({"main.py": code}, "main.py")
    assert target.read_text() == "keep me" and result.returncode != 0
    assert result.violations == [f"writing {str(target)!r} outside the sandbox"]
    removed = run_python({"main.py": f"import os\nos.remove({str(target)!r})"}, "main.py")
    assert target.exists() and removed.violations and "os.remove" in removed.violations[0]


def test_processes_are_refused() -> None:
    result = run_python({"main.py": "import subprocess\nsubprocess.run(['true'])"}, "main.py")
    assert result.returncode != 0 and "starting a process" in result.violations[0]


def test_time_and_memory_limits_stop_the_program() -> None:
    slow = run_python({"main.py": "while True:\n    pass"}, "main.py", limits=SandboxLimits(timeout_s=1.5))
    assert slow.timed_out and slow.returncode is None and slow.seconds < 5
    big = run_python({"main.py": "data = bytearray(3_000_000_000)"}, "main.py", limits=SandboxLimits(memory_mb=256))
    assert big.returncode != 0 and "MemoryError" in big.stderr
