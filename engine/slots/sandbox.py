"""Running generated code where it cannot touch the person's files or the network.

A subprocess in a temporary directory, with time, memory and file-size limits. :func:`run_python` writes the
given files into a fresh temporary directory and runs one of them with this Python (``-I``: no user site, no
``PYTHON*`` variables), with an empty environment, that directory as its working directory and home, and these
limits:

* wall time (``timeout_s``; the process group is killed) and CPU time (the same, plus one second);
* address space (``memory_mb``): an allocation past it raises ``MemoryError`` in the child;
* size of any file it writes (``max_file_mb``), and at most 64 open files.

The limits are set by the child itself before the code runs (``setrlimit`` from a ``preexec_fn`` is not safe in
a parent that runs threads, as the harness does).

Inside, a ``sys.addaudithook`` hook (installed before the code runs; Python offers no way to remove one) refuses,
with ``PermissionError``:

* any network use (``socket.connect``, ``bind``, ``sendto``, ``getaddrinfo``, ...);
* writing, creating, removing, renaming or changing the mode of a file outside the directory;
* starting processes (``subprocess``, ``os.system``, ``os.exec*``, ``os.fork``, ``os.posix_spawn``, ...);
* loading C libraries through ``ctypes`` (which could call around the hook).

Each refusal is also reported on stderr and collected in :attr:`SandboxResult.violations`. Where the kernel
allows it (root, or unprivileged user namespaces), the child also gets a network namespace of its own with no
interface but loopback, so even code that slipped past the hook would find no network.

This keeps honest mistakes (a test that deletes files, an endless loop, a download) away from the person's
machine. It is not a security boundary against code written to escape it; generated code is never run outside
it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SandboxLimits", "SandboxResult", "run_python"]

VIOLATION = "COE-SANDBOX-REFUSED: "
"""Prefix of the line the audit hook writes to stderr for each refusal."""

_GUARD = r"""
import os, sys

# Limits first, from inside: a preexec function in the parent is not safe beside the parent's threads.
import resource

_memory, _cpu, _size = (int(v) for v in os.environ.pop("COE_SANDBOX_LIMITS").split(","))
resource.setrlimit(resource.RLIMIT_AS, (_memory, _memory))
resource.setrlimit(resource.RLIMIT_CPU, (_cpu, _cpu + 1))
resource.setrlimit(resource.RLIMIT_FSIZE, (_size, _size))
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
try:  # a network namespace of its own (no interface but loopback), where the kernel allows it
    import ctypes, ctypes.util

    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if _libc.unshare(0x40000000) != 0:  # CLONE_NEWNET (root)
        _libc.unshare(0x10000000 | 0x40000000)  # CLONE_NEWUSER | CLONE_NEWNET (unprivileged)
except Exception:
    pass

_ROOT = os.path.realpath(os.getcwd())
_STDERR = sys.__stderr__
_PREFIX = __PREFIX__
_NETWORK = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
            "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo"}
_PROCESSES = {"subprocess.Popen", "os.system", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn",
              "os.startfile", "pty.spawn", "os.kill", "os.killpg"}
_PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
                "os.symlink", "os.truncate", "os.utime", "shutil.rmtree", "shutil.move", "shutil.copyfile",
                "shutil.copytree", "os.replace", "os.removexattr", "os.setxattr"}


def _inside(path):
    try:
        if isinstance(path, int):
            return True
        real = os.path.realpath(os.fsdecode(path))
    except Exception:
        return False
    return real == _ROOT or real.startswith(_ROOT + os.sep) or real == os.devnull


def _refuse(what):
    try:
        _STDERR.write(_PREFIX + what + "\n")
        _STDERR.flush()
    except Exception:
        pass
    raise PermissionError("coe sandbox: " + what + " is not allowed")


def _hook(event, args):
    if event in _NETWORK:
        _refuse("network access (" + event + ")")
    elif event in _PROCESSES or event.startswith("os.exec") or event.startswith("os.spawn"):
        _refuse("starting a process (" + event + ")")
    elif event == "ctypes.dlopen":
        _refuse("loading a C library through ctypes")
    elif event == "open":
        path, mode, flags = args[0], args[1], args[2]
        writing = (mode is not None and any(c in str(mode) for c in "wax+")) or (
            mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        )
        if writing and not _inside(path):
            shown = path if isinstance(path, int) else os.fsdecode(path)
            _refuse("writing " + repr(shown) + " outside the sandbox")
    elif event in _PATH_EVENTS:
        for path in args[:2]:
            if isinstance(path, (str, bytes, os.PathLike)) and not _inside(path):
                _refuse(event + " on " + repr(os.fsdecode(path)) + " outside the sandbox")


sys.addaudithook(_hook)
sys.argv = sys.argv[1:]
sys.path.insert(0, _ROOT)
import runpy

runpy.run_path(sys.argv[0], run_name="__main__")
"""


@dataclass(frozen=True)
class SandboxLimits:
    """How long and how much a sandboxed run may take."""

    timeout_s: float = 10.0
    memory_mb: int = 512
    max_file_mb: int = 16


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed run did."""

    returncode: int | None
    """The exit status (negative: killed by that signal); None when it was stopped at the time limit."""
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    violations: list[str] = field(default_factory=list)
    """What the sandbox refused (network, writes outside, processes), in order."""

    @property
    def ok(self) -> bool:
        """The program ran to the end with status 0 and nothing was refused."""
        return self.returncode == 0 and not self.timed_out and not self.violations


def run_python(
    files: dict[str, str], main: str, *, limits: SandboxLimits | None = None, args: tuple[str, ...] = ()
) -> SandboxResult:
    """Write ``files`` (relative name -> text) into a new temporary directory and run ``main`` there.

    Args:
        files: The files the program may import and read; ``main`` must be one of them.
        main: The file to run as ``__main__``.
        limits: Time, memory and file-size limits (defaults: 10 s, 512 MB, 16 MB).
        args: Command-line arguments for the program.

    Returns:
        The outcome; output is cut at 64 KB per stream.
    """
    limits = limits or SandboxLimits()
    if main not in files:
        raise ValueError(f"{main!r} is not one of the files given")
    with tempfile.TemporaryDirectory(prefix="coe-sandbox-") as tmp:
        root = Path(tmp)
        for name, text in files.items():
            path = (root / name).resolve()
            if root.resolve() not in path.parents:
                raise ValueError(f"file name {name!r} leaves the sandbox directory")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        guard = root / "_coe_guard.py"
        guard.write_text(_GUARD.replace("__PREFIX__", repr(VIOLATION)), encoding="utf-8")
        env = {
            "HOME": tmp,
            "TMPDIR": tmp,
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "COE_SANDBOX_LIMITS": ",".join(
                str(v)
                for v in (
                    limits.memory_mb * 1024 * 1024,
                    int(limits.timeout_s) + 1,
                    limits.max_file_mb * 1024 * 1024,
                )
            ),
        }
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-I", str(guard), main, *args],
            cwd=tmp,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        seconds = time.perf_counter() - started
    stdout = out.decode("utf-8", "replace")[:65536]
    stderr = err.decode("utf-8", "replace")[:65536]
    violations = [line[len(VIOLATION) :] for line in stderr.splitlines() if line.startswith(VIOLATION)]
    return SandboxResult(
        None if timed_out else proc.returncode, stdout, stderr, timed_out, round(seconds, 3), violations
    )
