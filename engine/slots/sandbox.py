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

* any network use (``socket.connect``, ``sendto``, ``getaddrinfo``, ``bind`` but to a loopback address, ...);
* writing, creating, removing, renaming or changing the mode of a file outside the directory;
* starting processes (``subprocess``, ``os.system``, ``os.exec*``, ``os.fork``, ``os.posix_spawn``, ...);
* loading C libraries through ``ctypes`` (which could call around the hook).

Each refusal is also reported on stderr and collected in :attr:`SandboxResult.violations`. Where the kernel
allows it (root, or unprivileged user namespaces), the child also gets a network namespace of its own with no
interface but loopback, so even code that slipped past the hook would find no network.

Generated code often imports a package this Python does not have (``flask`` in a web task). ``stubs`` names the
third-party packages the code imports; each one that is *not importable by the sandbox's Python* (no finder on
``sys.meta_path`` finds it) is replaced by a stand-in module (:data:`_STUBS`, written as ``_coe_stubs.py``) whose
names are permissive: a call returns another stand-in, a decorator returns the function unchanged, a stand-in can
be subclassed, names that read as exceptions are exception classes. So ``from flask import Flask, request,
jsonify`` succeeds and the code that does not need the package still runs. Each stand-in made is reported on
stderr and collected in :attr:`SandboxResult.stubbed`; ``_coe_stubs.involved(exc, files)`` tells the code under
check whether a failure touched a stand-in (the failure is then the sandbox's lack, not the code's fault).

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
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SandboxLimits", "SandboxResult", "run_python"]

VIOLATION = "COE-SANDBOX-REFUSED: "
"""Prefix of the line the audit hook writes to stderr for each refusal."""
STUBBED = "COE-SANDBOX-STUBBED: "
"""Prefix of the line written to stderr for each package replaced by a stand-in."""

_GUARD = r"""
import os, sys

# Limits first, from inside: a preexec function in the parent is not safe beside the parent's threads.
import resource

_memory, _cpu, _size = (int(v) for v in os.environ.pop("COE_SANDBOX_LIMITS").split(","))
_STUB_NAMES = [n for n in os.environ.pop("COE_SANDBOX_STUBS", "").split(",") if n]
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


def _loopback(address):
    host = address[0] if isinstance(address, tuple) and address else None
    return isinstance(host, str) and (host in ("::1", "localhost") or host.startswith("127."))


def _hook(event, args):
    if event == "socket.bind" and _loopback(args[1]):
        pass  # urllib3 (requests) binds ::1 at import to learn whether IPv6 works: no traffic leaves the machine
    elif event in _NETWORK:
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
if _STUB_NAMES:  # stand-ins for the packages this Python does not have, tried after every real finder
    import _coe_stubs


    def _stubbed(name):
        _STDERR.write(__STUBBED__ + name + "\n")
        _STDERR.flush()


    _coe_stubs.install(_STUB_NAMES, _stubbed)
import runpy

runpy.run_path(sys.argv[0], run_name="__main__")
"""


_STUBS = r'''
"""Stand-ins for the packages the sandbox's Python does not have (written by engine.slots.sandbox)."""
import importlib.abc
import importlib.machinery
import linecache
import os
import re
import sys
import types

_NAMES = set()
_MADE = []
_STAR = []
_REPORT = None
_ATTRIBUTES = {}
_EXCEPTION = re.compile(
    r"(Error|Exception|Warning|Exit|Timeout|Abort|NotFound|BadRequest|Unauthorized|Forbidden|Conflict|"
    r"MethodNotAllowed)$"
)
MARK = "stand-in for "


class MissingPackageStub:
    """Any name of a package the sandbox does not have: calls, attributes and items give more stand-ins."""

    _coe_name = "stub"

    def __init__(self, *args, **kwargs):
        for key, value in kwargs.items():  # a subclass built with fields (a model) keeps them
            try:
                setattr(self, key, value)
            except Exception:
                pass

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _attribute(self._coe_name + "." + name, name)

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], MissingPackageStub):
            return args[0]  # a decorator (@app.route(...), @login_required) leaves the function as it is
        return _make(self._coe_name + "()")

    def __mro_entries__(self, bases):
        return (MissingPackageStub,)

    def __instancecheck__(self, obj):
        return False

    def __subclasscheck__(self, cls):
        return False

    def _more(self, *args):
        return _make(self._coe_name + "(...)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _more
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __neg__ = __pos__ = _more
    __and__ = __rand__ = __or__ = __ror__ = __invert__ = __lt__ = __le__ = __gt__ = __ge__ = _more
    __getitem__ = _more

    def __setitem__(self, key, value):
        pass

    def __delitem__(self, key):
        pass

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __contains__(self, item):
        return False

    def __bool__(self):
        return True

    def __int__(self):
        return 0

    __index__ = __int__

    def __float__(self):
        return 0.0

    def __repr__(self):
        return "<" + MARK + self._coe_name + ">"

    __str__ = __repr__

    def __format__(self, spec):
        return repr(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    def __await__(self):
        return self
        yield


def _make(name):
    stub = object.__new__(MissingPackageStub)
    object.__setattr__(stub, "_coe_name", name)
    return stub


def _attribute(qualified, name):
    """The same stand-in for the same name; an exception class where the name reads as one (except X: works)."""
    if qualified not in _ATTRIBUTES:
        if _EXCEPTION.search(name):
            _ATTRIBUTES[qualified] = type(name, (Exception,), {"__module__": qualified.rpartition(".")[0]})
        else:
            _ATTRIBUTES[qualified] = _make(qualified)
    return _ATTRIBUTES[qualified]


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name == "__all__":  # from package import *: its names cannot be known
            _STAR.append(self.__name__)
            return []
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _attribute(self.__name__ + "." + name, name)


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        top = module.__name__.partition(".")[0]
        if top not in _MADE:
            _MADE.append(top)
            if _REPORT is not None:
                _REPORT(top)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] not in _NAMES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


def install(names, report=None):
    """Stand-ins for ``names`` (top-level packages), found only where no real finder finds the package."""
    global _REPORT
    _NAMES.update(names)
    _REPORT = report
    sys.meta_path.append(_Finder())


def holds(value):
    """The value is a stand-in, a stand-in module or class, or a container holding one (one level deep)."""
    if _is_stub(value):
        return True
    if isinstance(value, dict):
        value = list(value.values())[:50]
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_is_stub(v) for v in list(value)[:50])
    return False


def _is_stub(value):
    if isinstance(value, (MissingPackageStub, _StubModule)):
        return True
    if isinstance(value, type):
        return issubclass(value, MissingPackageStub) or any(value is v for v in _ATTRIBUTES.values())
    return False


def involved(exc, files=()):
    """Whether a failure touched a stand-in: the sandbox's lack, not the code's own fault.

    Never for a name the code did not define (NameError: unless it star-imported a stand-in) or a syntax error.
    Otherwise: a stand-in raised it, its message or arguments show one, or a frame of the code under check
    (``files``: file names; ``<doctest ...>`` and ``<example ...>`` code) held one: a function frame in any local,
    module-level code in a name on the failing line. The exception it was raised from is read the same way.
    """
    if isinstance(exc, NameError):
        return bool(_STAR)
    seen = set()
    while exc is not None and id(exc) not in seen and not isinstance(exc, (NameError, SyntaxError)):
        seen.add(id(exc))
        if _touched(exc, files):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _touched(exc, files):
    text = str(exc)
    if MissingPackageStub.__name__ in text or MARK in text or any(holds(a) for a in exc.args):
        return True
    tb = exc.__traceback__
    while tb is not None:
        frame, filename = tb.tb_frame, tb.tb_frame.f_code.co_filename
        if filename == __file__:
            return True
        inline = filename.startswith(("<doctest", "<example"))
        if inline or os.path.basename(filename) in files:
            # a name on the failing line that holds a stand-in (module globals always hold some, so only the
            # line's own names count: ``assert weekly_pay(45, 10) == 475.0`` in a test function), or any local
            line = linecache.getline(filename, tb.tb_lineno)
            scope = {**frame.f_globals, **frame.f_locals}
            if any(holds(scope.get(word)) for word in re.findall(r"[A-Za-z_]\w*", line)):
                return True
            if not inline and frame.f_code.co_name != "<module>" and any(holds(v) for v in frame.f_locals.values()):
                return True
        tb = tb.tb_next
    return False
'''
"""The stand-in module (``_coe_stubs.py`` in the sandbox): see the module's docstring."""


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
    stubbed: list[str] = field(default_factory=list)
    """The packages of ``stubs`` this Python does not have, replaced by stand-ins as the code imported them."""

    @property
    def ok(self) -> bool:
        """The program ran to the end with status 0 and nothing was refused."""
        return self.returncode == 0 and not self.timed_out and not self.violations


def run_python(
    files: dict[str, str],
    main: str,
    *,
    limits: SandboxLimits | None = None,
    args: tuple[str, ...] = (),
    stubs: Collection[str] = (),
) -> SandboxResult:
    """Write ``files`` (relative name -> text) into a new temporary directory and run ``main`` there.

    Args:
        files: The files the program may import and read; ``main`` must be one of them.
        main: The file to run as ``__main__``.
        limits: Time, memory and file-size limits (defaults: 10 s, 512 MB, 16 MB).
        args: Command-line arguments for the program.
        stubs: Top-level package names the program imports: those this Python cannot import get stand-ins
            (``_coe_stubs`` is then importable too, for :func:`involved`-style questions from the program).

    Returns:
        The outcome; output is cut at 64 KB per stream.
    """
    limits = limits or SandboxLimits()
    if main not in files:
        raise ValueError(f"{main!r} is not one of the files given")
    bad = [name for name in stubs if not name.isidentifier()]
    if bad:
        raise ValueError(f"stub name {bad[0]!r} is not a package name")
    with tempfile.TemporaryDirectory(prefix="coe-sandbox-") as tmp:
        guard = _write_files(Path(tmp), files, stubs)
        env = _environment(tmp, limits, stubs)
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
    stubbed = [line[len(STUBBED) :] for line in stderr.splitlines() if line.startswith(STUBBED)]
    return SandboxResult(
        None if timed_out else proc.returncode, stdout, stderr, timed_out, round(seconds, 3), violations, stubbed
    )


def _write_files(root: Path, files: dict[str, str], stubs: Collection[str]) -> Path:
    """Write the program's files, the guard that runs it (returned) and, when asked for, the stand-ins."""
    for name, text in files.items():
        path = (root / name).resolve()
        if root.resolve() not in path.parents:
            raise ValueError(f"file name {name!r} leaves the sandbox directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    guard = root / "_coe_guard.py"
    guard.write_text(
        _GUARD.replace("__PREFIX__", repr(VIOLATION)).replace("__STUBBED__", repr(STUBBED)), encoding="utf-8"
    )
    if stubs:
        (root / "_coe_stubs.py").write_text(_STUBS, encoding="utf-8")
    return guard


def _environment(tmp: str, limits: SandboxLimits, stubs: Collection[str]) -> dict[str, str]:
    """The program's whole environment: nothing of ours leaks in; the limits and stand-ins the guard applies."""
    return {
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
        "COE_SANDBOX_STUBS": ",".join(sorted(set(stubs))),
    }
