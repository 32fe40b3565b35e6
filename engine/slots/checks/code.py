"""Checks of code and data: Python runs in the sandbox against the task's examples; the other languages parse.

SQL parses with sqlglot in the task's dialect; YAML and JSON load; CSV rows are even; a shell script passes
``bash -n``; a Dockerfile starts with ``FROM``.

Python: it parses; no function is a stub; it defines the functions the task names; it imports (runs) in the
sandbox (:mod:`engine.slots.sandbox`); the task's examples pass. Soft: the doctests in its own docstrings and its own
tests (a tests section, which must not redefine the module's functions) pass, and ``ruff`` finds no error (pyflakes
rules). A small model's own tests are often wrong where its code is right, so they rank candidates but never reject
one.

A check fails only for the code's own faults. The module runs beside the run's own modules it may import (a
referenced code slot's, named as :func:`module_name` names it); every third-party package it imports (not the
standard library, not the run's own) that the sandbox's Python cannot import gets a stand-in, so the code that
does not need the package still runs. A failure that touched a stand-in fails no hard check: ``python.runs`` and
``python.examples`` turn soft where it is their only failure, and ``python.packages`` names the packages for the
caveat. A syntax error, a name the code never defined, or an example that fails without touching a stand-in fail
as before.
"""

from __future__ import annotations

import ast
import builtins
import configparser
import contextlib
import csv
import io
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Mapping
from typing import Any

import yaml

from engine.slots.checks.check_context import CheckContext
from engine.slots.checks.contract import STUB
from engine.slots.checks.examples import Examples, extract_examples
from engine.slots.checks.text import PYTHON_TAGS, SHELL_TAGS, code_blocks
from engine.slots.checks.usage import raising_usage, usage_blocks
from engine.slots.contracts import contract_of
from engine.slots.sandbox import SandboxLimits, run_python
from experts.routing.aspects import Aspect, object_phrase
from state.python_ast import parse_module
from state.quality import PACKAGES_CHECK, TESTS_CHECK, CheckResult
from state.result import SlotResult

_DIALECTS = (
    ("postgres", re.compile(r"\b(postgres|postgresql|psql)\b", re.I)),
    ("mysql", re.compile(r"\b(mysql|mariadb)\b", re.I)),
    ("sqlite", re.compile(r"\bsqlite\b", re.I)),
    ("tsql", re.compile(r"\b(sql server|t-sql|tsql|mssql)\b", re.I)),
    ("oracle", re.compile(r"\boracle\b", re.I)),
    ("bigquery", re.compile(r"\bbigquery\b", re.I)),
    ("snowflake", re.compile(r"\bsnowflake\b", re.I)),
)


def module_code(result: SlotResult) -> tuple[str | None, str | None]:
    """The answer's module and its tests (later blocks with asserts or test functions), if any.

    The module is section 1's code block (else the first block), and every later Python block that defines a
    function or class and holds no test: an answer that writes ``compare_versions`` in section 1 and
    ``latest_version`` in section 2 delivers one module of both (multipart_set4_first: ``python.defines`` said the
    second was not defined, and the NameError inside it, a helper nested in the first, was never run).
    """
    sections = [s for s in result.sections if s.level == 1]
    first = code_blocks(sections[0].body)[:1] if sections else []
    later = [block for s in sections[1:] for block in code_blocks(s.body)]
    if not first:
        everything = code_blocks(result.raw)
        if not everything:
            return None, None
        first, later = everything[:1], everything[1:]
    tests = [code for _, code in later if _TESTING.search(code)]
    more = [code for tag, code in later if tag in PYTHON_TAGS | {""} and _DEFINING.search(code) and code not in tests]
    return "\n\n".join([first[0][1], *more]), ("\n\n".join(tests) if tests else None)


_TESTING = re.compile(r"^\s*(assert\b|def test_)", re.M)
_DEFINING = re.compile(r"^(?:async\s+)?(?:def|class)\s+(?!test_)\w+", re.M)


ASKS_FOR_TESTS = re.compile(
    r"\b(?:write|add|include|create|generate|deliver|with|plus|like|want|need|then)\b[^.\n]{0,40}"
    r"\b(?:pytest|unit ?tests?|tests)\b(?!\s+(?:whether|if|that)\b)"
    r"|\bpytest tests\b",
    re.I,
)
"""A task that asks for tests ("now add pytest tests for it", "I'd also like pytest tests", "Plus pytest tests and
a short FAQ", "Function plus pytest tests please"); "a function that tests whether" does not. multipart_set3_first:
three of eight code-and-tests tasks, written by a helper, were delivered without tests and nothing said so."""


_PY_RUNNER = r"""
import ast, contextlib, doctest, inspect, io, json, linecache, sys

try:  # written by the sandbox when the code imports packages this Python may not have
    import _coe_stubs
except ImportError:
    _coe_stubs = None

def short(exc):
    return (type(exc).__name__ + ": " + str(exc))[:300]

def involved(exc):
    return _coe_stubs is not None and _coe_stubs.involved(exc, spec["files"])

def holds(value):
    return _coe_stubs is not None and _coe_stubs.holds(value)

def failed_assert(exc, code_name):
    # a bare assert that failed in the deepest frame running code_name: its line and what its left side was
    if not isinstance(exc, AssertionError) or str(exc):
        return None
    tb, at = exc.__traceback__, None
    while tb is not None:
        at = tb if tb.tb_frame.f_code.co_name == code_name else at
        tb = tb.tb_next
    if at is None:
        return None
    frame = at.tb_frame
    line = linecache.getline(frame.f_code.co_filename, at.tb_lineno).strip()
    try:
        check = ast.parse(line).body[0]
        compared = check.test if isinstance(check, ast.Assert) else None
        if isinstance(compared, ast.Compare) and not isinstance(compared.left, ast.Constant):
            left = ast.unparse(compared.left)
            with contextlib.redirect_stdout(io.StringIO()):
                line += " (%s is %r)" % (left, eval(left, frame.f_globals, frame.f_locals))
    except BaseException:
        pass
    return line

def source(name, text):  # tracebacks and the stand-in check read the line that failed
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    return compile(text, name, "eval" if name.startswith("<example") else "exec")

spec = json.load(open("checks.json"))
out = {"import": None, "import_stub": False, "examples": [], "own_doctests": None, "tests": None, "tests_stub": False}
try:
    with contextlib.redirect_stdout(io.StringIO()):
        import solution
except BaseException as exc:
    line = getattr(exc, "lineno", None)
    said = failed_assert(exc, "<module>")
    out["import"] = ("AssertionError: " + said) if said else short(exc) + (" (line %s)" % line if line else "")
    out["import_stub"] = involved(exc)
    print("COE-CHECKS " + json.dumps(out))
    sys.exit(0)
for alias in spec["aliases"]:  # its own tests may import it by the name the run delivers it under
    sys.modules.setdefault(alias, solution)
module_globals = dict(vars(solution))
flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

class Runner(doctest.DocTestRunner):
    stub = False  # a failure touched a stand-in of a missing package

    def report_failure(self, out, test, example, got):
        self.stub = self.stub or "stand-in for " in got
        super().report_failure(out, test, example, got)

    def report_unexpected_exception(self, out, test, example, exc_info):
        self.stub = self.stub or involved(exc_info[1])
        super().report_unexpected_exception(out, test, example, exc_info)

def run_doctest(text, name):
    test = doctest.DocTestParser().get_doctest(text, dict(module_globals), name, "task", 0)
    report = []
    runner = Runner(optionflags=flags)
    with contextlib.redirect_stdout(io.StringIO()):
        runner.run(test, out=report.append)
    lines = [ln for ln in "".join(report).splitlines() if ln.strip() and not ln.startswith("*****")]
    return runner.failures == 0, " | ".join(lines[-6:])[-300:], runner.stub

for text in spec["doctests"]:
    try:
        ok, detail, stub = run_doctest(text, "example")
    except BaseException as exc:
        ok, detail, stub = False, short(exc), involved(exc)
    out["examples"].append(
        {"ok": ok, "source": text.splitlines()[0][:120], "detail": detail if not ok else "", "stub": stub and not ok}
    )
for n, (call, value) in enumerate(spec["asserts"]):
    stub = False
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            got = eval(source("<example %d>" % n, call), dict(module_globals))
        ok = got == eval(value, {})
        stub = not ok and holds(got)
        detail = "" if ok else "%s returned %r, expected %s" % (call, got, value)
    except BaseException as exc:
        ok, detail, stub = False, short(exc), involved(exc)
    out["examples"].append({"ok": ok, "source": call[:120], "detail": detail[:300], "stub": stub})
finder = doctest.DocTestFinder(exclude_empty=True)
own = [t for t in finder.find(solution, "solution", globs=dict(module_globals)) if t.examples]
if own:
    failed = 0
    stub_failed = 0
    details = []
    for test in own:
        runner = Runner(optionflags=flags)
        report = []
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                runner.run(test, out=report.append)
        except BaseException as exc:
            report.append(short(exc))
            failed += 1
            stub_failed += involved(exc)
        failed += runner.failures
        stub_failed += runner.failures if runner.stub else 0
        if runner.failures:
            details.append(" ".join(report)[-200:])
    total = sum(len(t.examples) for t in own)
    out["own_doctests"] = {
        "failed": failed, "stub_failed": stub_failed, "total": total, "detail": " ".join(details)[:300]
    }
def cases(test):
    # the arguments of each case of a test: its pytest.mark.parametrize rows (every combination of its marks);
    # a test that needs an argument no row gives (a fixture: tmp_path, capsys) is not run: no case
    combos = [{}]
    for mark in getattr(test, "pytestmark", []):
        if getattr(mark, "name", "") != "parametrize" or len(mark.args) < 2:
            continue
        names = mark.args[0]
        names = [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else list(names)
        rows = []
        for row in mark.args[1]:
            values = row.values if hasattr(row, "values") and hasattr(row, "marks") else row  # pytest.param
            rows.append(dict(zip(names, values if len(names) > 1 or values is not row else (values,))))
        combos = [{**combo, **row} for combo in combos for row in rows]
    try:
        needs = [p.name for p in inspect.signature(test).parameters.values() if p.default is p.empty]
    except (TypeError, ValueError):
        needs = []
    return [combo for combo in combos if all(n in combo for n in needs)]

def explain(name, case, exc):
    # what failed: the test and its case, the assert's line and what its left side was
    shown = "%s(%s)" % (name, ", ".join("%s=%r" % item for item in case.items()))
    return ("%s: %s" % (shown, failed_assert(exc, name) or short(exc)))[:300]

def run_tests(namespace, skip):
    # every test function of namespace but those in skip, each case, to the first failure: the cases run,
    # what failed (None: nothing) and whether the failure touched a stand-in
    ran = 0
    for name, value in list(namespace.items()):
        if name.startswith("test_") and callable(value) and name not in skip:
            for case in cases(value):
                try:
                    value(**case)
                except BaseException as exc:
                    return ran, explain(name, case, exc), involved(exc)
                ran += 1
    return ran, None, False

if spec["tests"] or spec["module_tests"]:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            ran, failed, stub = run_tests(module_globals, ()) if spec["module_tests"] else (0, None, False)
            if spec["tests"] and failed is None:
                namespace = dict(module_globals)
                exec(source("tests.py", spec["tests"]), namespace)
                more, failed, stub = run_tests(namespace, module_globals)
                ran += more
        out["tests"] = failed or "ok"
        out["tests_stub"] = stub
        out["tests_run"] = ran
    except BaseException as exc:
        out["tests"] = short(exc)
        out["tests_stub"] = involved(exc)
print("COE-CHECKS " + json.dumps(out))
"""


def code_checks(result: SlotResult, ctx: CheckContext) -> list[CheckResult]:
    """The checks of a code or data answer's module, by its language (the ones without a checker: a soft pass)."""
    language = (ctx.contract.language or "").lower()
    code, tests = module_code(result)
    if code is None or not code.strip():
        return [CheckResult(name="code.present", passed=False, detail="no code block in the answer")]
    if language in PYTHON_TAGS:
        checks = _python_checks(code, tests, ctx)
        if all(c.passed for c in checks if c.name in ("python.parses", "python.runs")):
            checks += _usage_check(result.raw, code, tests, ctx)
        return checks
    checks = block_checks(language, code, ctx.task)
    if language in ("yaml", "yml", "json") and OPENAPI_ASKED.search(ctx.asked):
        checks.append(openapi_check(code))
    if language in SHELL_TAGS:
        checks.append(shell_does_check(code, ctx.asked))
    if ctx.part_of_plan and (files := files_check(result.untitled_text(), ctx.asked)) is not None:
        checks.append(files)
    return checks


def _usage_check(raw: str, code: str, tests: str | None, ctx: CheckContext) -> list[CheckResult]:
    """``python.usage``: the answer's usage examples run against its module (:mod:`engine.slots.checks.usage`)."""
    blocks = usage_blocks(raw, code, tests)
    if not blocks:
        return []
    siblings = _siblings(ctx)
    stubs = third_party_imports([code, *blocks, *siblings.values()], set(siblings))
    beside = {f"{name}.py": text for name, text in siblings.items()}
    raised = raising_usage(code, blocks, ctx.limits, beside=beside, stubs=stubs)
    detail = f"the usage example {raised.line!r} raises {raised.error} against the answer's own code" if raised else ""
    return [CheckResult(name="python.usage", passed=raised is None, detail=detail)]


_FILE_NAME = re.compile(
    r"(?<![\w/.-])(?:[\w.-]*/)*(?P<name>[\w-]+\.(?:service|timer|socket|conf|ini|cfg|env|toml|ya?ml|json|sh|sql))\b"
)


def files_check(raw: str, asked: str) -> CheckResult | None:
    """``code.files``: a part asked for several files (in what it delivers) holds each of them, named.

    multipart_set5_rules2, mp5-upload-purge-systemd: the part asked for "systemd units upload-purge.service (...)
    and upload-purge.timer firing every 6 hours ..." gave the service alone, and nothing said the timer was
    missing. A file is there when the answer's text names it (its titles copy the ask: not them), or (a systemd
    unit) holds its section (``[Timer]``). Only the files its object names count ("a script that reads hosts.txt"
    asks for one); None when it names fewer than two.
    """
    words = asked.split()
    phrase = object_phrase(Aspect(asked, words[0])) if words else ""
    names = list(dict.fromkeys(m.group("name") for m in _FILE_NAME.finditer(phrase)))
    if len(names) < 2:
        return None
    missing = [n for n in names if n not in raw and not _holds_unit(raw, n)]
    return CheckResult(
        name="code.files",
        passed=not missing,
        detail=f"the part is asked for {', '.join(names)}; {missing[0]} is not in it: write each file in a code "
        "block of its own, its name on the line above"
        if missing
        else "",
    )


def _holds_unit(raw: str, name: str) -> bool:
    """Whether ``raw`` holds the section of the systemd unit ``name`` is (``[Timer]`` for ``x.timer``)."""
    kind = name.rsplit(".", 1)[-1]
    return kind in ("service", "timer", "socket") and f"[{kind.capitalize()}]" in raw


_SHELL_ACTIONS: tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...] = (
    (
        "delete",
        re.compile(
            r"\b(?:delet(?:e|es|ed|ing)|remov(?:e|es|ed|ing)|purg(?:e|es|ed|ing)|clean(?:s|ed|ing)? up)\b", re.I
        ),
        re.compile(r"(?:^|[\s;|&(`])(?:sudo\s+)?(?:rm|unlink|shred|rmdir)\b|-delete\b|\bprune\b|\b(?:rm|del)\s", re.M),
    ),
    (
        "compress",
        re.compile(r"\b(?:compress(?:es|ed|ing)?|gzip(?:s|ped)?|archiv(?:e|es|ed|ing)|zip(?:s|ped)?)\b", re.I),
        re.compile(r"\b(?:gzip|gunzip|tar|zip|bzip2|xz|zstd|7z|pigz|compress)\b"),
    ),
    (
        "download",
        re.compile(r"\b(?:download(?:s|ed|ing)?)\b", re.I),
        re.compile(r"\b(?:curl|wget|aria2c|scp|rsync|aws\s+s3|gsutil|rclone)\b"),
    ),
)
"""What a task asks a script to do, in so many words, and the commands that do it."""
_NOT_ASKED = re.compile(r"\b(?:not|never|without|don't|instead of)\s+(?:\w+\s+){0,2}$", re.I)
_NAMED = re.compile(r"\S*/\S*|\S*\w[.=]\w\S*|\b\w+(?:-\w+)+\b")
"""A path, a file name, a setting or a hyphenated name ("/etc/upload-purge.conf", "upload-purge.timer"): a verb
inside it asks for nothing."""


def shell_does_check(code: str, asked: str) -> CheckResult:
    r"""``bash.does``: a script asked to delete, compress or download runs a command that does it.

    2026-12-07, through ``coe run`` ("a bash script that deletes files older than 7 days in /var/log/myapp and
    logs the name of each file it deleted"; the DevOps expert on the 0.5B): the kept script compared a date
    string with ``-lt`` and echoed "Deleted file: ..." for each file, and deleted nothing; it parsed, and
    ShellCheck found nothing to say. The bare 1.5B ran ``find ... -mtime +7 -exec rm -f {} \;``.
    """
    script = "\n".join(line.split(" #", 1)[0] for line in code.splitlines() if not line.lstrip().startswith("#"))
    # multipart_set5_first, mp5-upload-purge-systemd: the config file's part and the systemd units' part were held
    # to "purge" in "/etc/upload-purge.conf" and "upload-purge.service", and sent back (a false failure)
    asked = _NAMED.sub(" ", asked)
    for action, verb, command in _SHELL_ACTIONS:
        asked_for = [m for m in verb.finditer(asked) if not _NOT_ASKED.search(asked[: m.start()])]
        if asked_for and command.search(script) is None:
            return CheckResult(
                name="bash.does",
                passed=False,
                detail=f"the task asks the script to {action} ({asked_for[0].group(0)!r}), and no command in it "
                f"does: write the command that does it",
            )
    return CheckResult(name="bash.does", passed=True)


HTTP_METHODS = frozenset("get put post delete options head patch trace".split())
PATH_ITEM_KEYS = HTTP_METHODS | {"parameters", "summary", "description", "servers", "$ref"}


def openapi_document(code: str) -> bool:
    """Whether ``code`` is an OpenAPI (or Swagger) document a portal could load.

    It parses, names its version and has paths whose operations are HTTP methods, each with its responses (the
    specification requires them). Seen on the 1.5B: a block with ``openapi: 3.0.0`` whose paths had a
    ``complete:`` method and code fences inside, cut off after them.
    """
    try:
        doc = yaml.safe_load(code)
    except yaml.YAMLError:
        return False
    if not isinstance(doc, dict) or not ({"openapi", "swagger"} & set(doc)) or not isinstance(doc.get("paths"), dict):
        return False
    items = list(doc["paths"].values())
    if not items or not all(isinstance(i, dict) and i and set(i) <= PATH_ITEM_KEYS for i in items):
        return False
    operations = [op for item in items for method, op in item.items() if method in HTTP_METHODS]
    return bool(operations) and all(isinstance(op, dict) and op.get("responses") for op in operations)


OPENAPI_ASKED = re.compile(r"\b(?:openapi|swagger)\b", re.I)


def openapi_check(code: str) -> CheckResult:
    """``openapi.loads``: the YAML or JSON block of a part asked for an OpenAPI document is one a portal loads."""
    ok = openapi_document(code)
    detail = "" if ok else "not an OpenAPI document that loads (openapi, paths of HTTP methods, each with responses)"
    return CheckResult(name="openapi.loads", passed=ok, detail=detail)


LOOP_REPEATS = 4
"""A group of one to three lines written this many times in a row in a code block is a loop, not code."""


def loop_check(text: str) -> CheckResult:
    """``code.loops``: no code block of the answer repeats a group of lines :data:`LOOP_REPEATS` times in a row.

    Prose has its repetition check; code had none, and parse, lint and a sandbox without the package pass a loop.
    Seen on the 0.5B (mp-event-contract): a Kafka consumer that was one pair of import lines written eleven times,
    under "Not fully checked (kafka is not installed)".
    """
    for _, code in code_blocks(text):
        found = _looping(code)
        if found is not None:
            times, group = found
            return CheckResult(
                name="code.loops", passed=False, detail=f"{group[:80]!r} is written {times} times in a row"
            )
    return CheckResult(name="code.loops", passed=True)


def _looping(code: str) -> tuple[int, str] | None:
    lines = [line.strip() for line in code.splitlines() if line.strip()]
    for size in (1, 2, 3):
        for start in range(len(lines) - size * LOOP_REPEATS + 1):
            group = lines[start : start + size]
            if sum(len(line) for line in group) < 8:  # closing brackets, "end", "fi": a language's own shape
                continue
            times = 1
            while lines[start + times * size : start + (times + 1) * size] == group:
                times += 1
            if times >= LOOP_REPEATS:
                return times, " / ".join(group)
    return None


def block_checks(language: str, code: str, task: str) -> list[CheckResult]:
    """The checks of one block of a data or script language.

    SQL in the task's dialect, YAML, JSON, CSV, shell and Dockerfile; a language without a checker, or a checker
    that is not installed, gets a soft pass that says so.
    """
    if language == "sql":
        return [_sql_check(code, task)]
    if language in ("yaml", "yml"):
        return [_load_check("yaml.parses", lambda: list(yaml.safe_load_all(code)))]
    if language == "json":
        return [_load_check("json.parses", lambda: json.loads(code))]
    if language == "csv":
        return [_csv_check(code)]
    if language == "toml":
        return [_load_check("toml.parses", lambda: tomllib.loads(code))]
    if language in ("ini", "conf", "systemd"):
        return [_load_check("ini.parses", lambda: _ini(code))]
    if language in ("bash", "sh", "shell"):
        parses = _bash_check(code)
        return [parses, _shellcheck(code)] if parses.passed else [parses]
    if language == "dockerfile":
        first = next((ln.strip() for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
        ok = first.upper().startswith(("FROM", "ARG"))
        return [CheckResult(name="dockerfile.from", passed=ok, detail="" if ok else f"starts with {first[:40]!r}")]
    return [CheckResult(name="code.checked", passed=True, severity="soft", detail=f"no checker for {language!r}")]


def _python_checks(code: str, tests: str | None, ctx: CheckContext) -> list[CheckResult]:
    """What is known without running the module, then what its run in the sandbox shows, then the linter."""
    try:
        tree = parse_module(code)
    except SyntaxError as exc:
        return [CheckResult(name="python.parses", passed=False, detail=f"line {exc.lineno}: {exc.msg}")]
    examples = extract_examples(ctx.task)
    asks = ctx.asked if ctx.part_of_plan and ctx.asked else ctx.task  # what this answer must deliver
    named = examples.named if asks == ctx.task else extract_examples(asks).named
    # a one-part answer delivers the module the task names; a part of a plan, or tests asked for alone, may import it
    if ctx.part_of_plan or _TESTS_ASKED.match(ctx.task):
        owned = _module_names(tree)
    else:
        owned = _own_names(tree)
    static = _static_checks(tree, code, tests, asks, examples, named, owned)
    checks = [CheckResult(name="python.parses", passed=True), *static]
    return [*checks, *_sandbox_checks(code, tests, ctx, examples), *_lint_checks(code)]


def _static_checks(
    tree: ast.Module,
    code: str,
    tests: str | None,
    task: str,
    examples: Examples,
    named: tuple[str, ...],
    owned: set[str],
) -> list[CheckResult]:
    """The module is complete, defines the task's functions; its tests use it; there are tests if the task asks.

    ``task`` is what the answer must deliver (a part of a plan: its own description) and ``named`` the functions
    its words name, which must be among ``owned``; ``examples`` are the whole task's.
    """
    stubs = _stub_functions(tree)
    checks = [
        CheckResult(
            name="python.complete",
            passed=not stubs and not STUB.search(code),
            detail=(f"function {stubs[0]} has no body" if stubs else "placeholder text in the code")
            if stubs or STUB.search(code)
            else "",
        )
    ]
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    missing = [f for f in examples.functions if f not in defined]
    missing += [f for f in named if f not in examples.functions and f not in owned]
    if examples.functions or named:
        checks.append(
            CheckResult(
                name="python.defines",
                passed=not missing,
                detail=(
                    f"the task's function {missing[0]} is only a method here: write it as a function of the module"
                    if missing and missing[0] in defined
                    else f"the task's function {missing[0]} is not defined"
                    if missing
                    else ""
                ),
            )
        )
    if contradiction := _contradicting_asserts(tree, tests):
        checks.append(CheckResult(name="python.tests_agree", passed=False, detail=contradiction))
    if tests is not None:
        redefined = _redefined(tests, defined)
        checks.append(
            CheckResult(
                name="python.tests_use_module",
                passed=not redefined,
                detail=f"the tests define {redefined[0]} again instead of using section 1's" if redefined else "",
            )
        )
    if ASKS_FOR_TESTS.search(task):
        given = tests is not None or bool(re.search(r"^\s*(?:def test_\w+|assert\b)", code, re.M))
        checks.append(
            CheckResult(
                name="python.tests_given",
                passed=given,
                detail="" if given else "the task asks for tests and the answer has none (write them: def test_...)",
            )
        )
    return checks


def _contradicting_asserts(tree: ast.Module, tests: str | None) -> str:
    """Two asserts that expect one call on the same constants to give two values (no code passes both), or "".

    multipart_set4_after, mp4-overtime-pay: ``assert weekly_pay(45, 10) == 475.0`` and, the next line,
    ``assert weekly_pay(45, 10) == 525.0``: the tests part passed every check of its own.
    """
    trees = [tree]
    if tests is not None:
        with contextlib.suppress(SyntaxError):
            trees.append(parse_module(tests))
    expected: dict[str, object] = {}
    for node in (n for t in trees for n in ast.walk(t)):
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            continue
        left, ops, rights = node.test.left, node.test.ops, node.test.comparators
        if not (isinstance(left, ast.Call) and len(ops) == 1 and isinstance(ops[0], ast.Eq)):
            continue
        # a plain function on constants only: a method (``cart.add(1)``) or a call with no arguments
        # (``next_id()``) may answer differently each time
        if not isinstance(left.func, ast.Name) or not left.args or left.keywords:
            continue
        if not all(isinstance(a, ast.Constant) for a in left.args):
            continue
        try:
            value = ast.literal_eval(rights[0])
        except ValueError:
            continue
        call = ast.unparse(left)
        if call in expected and expected[call] != value:
            return f"the tests expect {call} to be both {expected[call]!r} and {value!r}: no code passes both"
        expected.setdefault(call, value)
    return ""


def _sandbox_checks(code: str, tests: str | None, ctx: CheckContext, examples: Examples) -> list[CheckResult]:
    """The module run in the sandbox: it imports, the task's examples pass; soft: its own doctests and tests.

    The run's own modules it may import are written beside it; the third-party packages it imports that the
    sandbox's Python does not have get stand-ins (:func:`engine.slots.sandbox.run_python`), and a failure that
    touched one is the sandbox's lack: it fails no hard check (:func:`_lacking`).
    """
    siblings = _siblings(ctx)
    aliases = [ctx.module] if ctx.module and ctx.module not in siblings and _importable(ctx.module) else []
    module_tests = _defines_tests(code)
    spec = {
        "doctests": list(examples.doctests),
        "asserts": [list(pair) for pair in examples.asserts],
        "tests": tests or "",
        "module_tests": module_tests,
        "files": ["solution.py", "tests.py", *(f"{name}.py" for name in siblings)],
        "aliases": aliases,
    }
    files = {
        **{f"{name}.py": text for name, text in siblings.items()},
        "solution.py": code,
        "checks.json": json.dumps(spec),
        "run_checks.py": _PY_RUNNER,
    }
    imported = third_party_imports([code, tests or "", *siblings.values()], {*siblings, *aliases})
    ran = run_python(files, "run_checks.py", limits=ctx.limits, stubs=imported)
    report = _report(ran.stdout)
    if report is None:
        why = "timed out" if ran.timed_out else (ran.violations[0] if ran.violations else ran.stderr.strip()[-200:])
        return [CheckResult(name="python.runs", passed=False, detail=f"the checks could not run: {why}")]
    missing = _missing(ran.stubbed)
    checks = [_runs_check(report, ran.violations, missing)]
    if report["examples"]:
        checks.append(_examples_check(report["examples"], missing))
    if report["own_doctests"]:
        checks.append(_own_doctests_check(report["own_doctests"], missing))
    if (tests is not None or module_tests) and report["tests"] is not None:  # None: the module did not import
        # a failure that touched a missing package's stand-in is the sandbox's lack, not the code's fault: the
        # check passes and says where the tests stopped; the packages check's caveat says what was not checked
        lacking = bool(report["tests_stub"] and missing)
        detail = "" if report["tests"] == "ok" else report["tests"]
        if lacking:
            detail = f"{missing} {_is_are(ran.stubbed)} not installed in the sandbox: the tests stopped at {detail}"
        checks.append(
            CheckResult(name=TESTS_CHECK, severity="soft", passed=report["tests"] == "ok" or lacking, detail=detail)
        )
    if missing:
        checks.append(_lacking(ran.stubbed))
    return checks


def _defines_tests(code: str) -> bool:
    """Whether a module defines test functions at its top level (a tests part's module: its tests are run too)."""
    return bool(re.search(r"^(?:async\s+)?def test_\w+", code, re.M))


def tests_against(result: SlotResult, modules: Mapping[str, str], module: str, limits: SandboxLimits) -> CheckResult:
    """The tests of an answer's module (its own test functions and its tests section) run beside ``modules``.

    ``check_parts`` runs a tests part against the document's other modules with this, whether or not its slot
    referenced them (:mod:`engine.agreement`). ``python.tests`` passes when every case ran and held.
    """
    code, tests = module_code(result)
    if code is None:
        return CheckResult(name=TESTS_CHECK, severity="soft", passed=True, detail="no code")
    ctx = CheckContext(task="", contract=contract_of("code", "python"), limits=limits, modules=modules, module=module)
    checks = {c.name: c for c in _sandbox_checks(code, tests, ctx, Examples())}
    runs = checks.get("python.runs")
    if runs is not None and own_asserts_failed(runs):  # its top-level asserts ran on import
        return CheckResult(name=TESTS_CHECK, severity="soft", passed=False, detail=runs.detail)
    return checks.get("python.tests") or CheckResult(name=TESTS_CHECK, severity="soft", passed=True, detail="")


def own_asserts_failed(check: CheckResult) -> bool:
    """Whether a failed ``python.runs`` is the module's own top-level asserts failing on import.

    The runner writes ``AssertionError: <the assert's line> (<its left side> is <value>)`` for them.
    """
    return check.name == "python.runs" and not check.passed and check.detail.startswith("AssertionError: ")


def _own_doctests_check(own: dict[str, Any], missing: str) -> CheckResult:
    """The doctests of its own docstrings pass (soft); the detail says how many failures touched a stand-in."""
    needs = f" ({own['stub_failed']} need {missing})" if missing and own["stub_failed"] else ""
    return CheckResult(
        name="python.own_doctests",
        severity="soft",
        passed=own["failed"] == 0,
        score=max(0.0, 1 - own["failed"] / max(own["total"], 1)),
        detail="" if own["failed"] == 0 else f"{own['failed']} of {own['total']} fail{needs}: {own['detail']}",
    )


def _runs_check(report: dict[str, Any], violations: list[str], missing: str) -> CheckResult:
    """It imports; a failure that touched a missing package's stand-in is soft (the sandbox's lack, not a fault)."""
    failure = report["import"]
    if failure is not None and missing and report["import_stub"]:
        return CheckResult(
            name="python.runs", severity="soft", passed=False, detail=f"it needs {missing} to import: {failure}"
        )
    return CheckResult(
        name="python.runs",
        passed=failure is None and not violations,
        detail=failure or (f"refused: {violations[0]}" if violations else ""),
    )


def _examples_check(results: list[dict[str, Any]], missing: str) -> CheckResult:
    """The task's examples pass; those that failed only by touching a missing package's stand-in are not counted.

    If every example failed that way, the check is soft: nothing of the code's own could be run against them.
    """
    excused = [r for r in results if not r["ok"] and r.get("stub") and missing]
    counted = [r for r in results if r not in excused]
    passed = sum(1 for r in counted if r["ok"])
    first_bad = next((r for r in counted if not r["ok"]), None) or (excused[0] if excused else None)
    detail = f"{passed} of {len(counted)} examples pass" if counted else f"no example runs without {missing}"
    if excused and counted:
        detail += f" ({len(excused)} more need {missing})"
    if first_bad:
        detail += f"; {first_bad['source']}: {first_bad['detail']}"
    return CheckResult(
        name="python.examples",
        severity="hard" if counted else "soft",
        passed=bool(counted) and passed == len(counted),
        score=passed / len(counted) if counted else 0.0,
        detail=detail,
    )


def _lacking(names: list[str]) -> CheckResult:
    """What the sandbox could not check: soft and passed (nothing is wrong with the code); the caveat names it."""
    them = "it" if len(names) == 1 else "them"
    return CheckResult(
        name=PACKAGES_CHECK,
        severity="soft",
        passed=True,
        detail=f"{_missing(names)} {_is_are(names)} not installed in the sandbox: checked parse, lint and the code "
        f"that does not need {them}",
    )


def _missing(names: list[str]) -> str:
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


def _is_are(names: list[str]) -> str:
    return "are" if len(names) > 1 else "is"


def third_party_imports(sources: list[str], own: set[str]) -> list[str]:
    """The top-level packages ``sources`` import that are neither the standard library nor the run's own modules.

    Every ``import`` and ``from ... import`` anywhere in the code (inside functions too); relative imports are the
    code's own. Whether one is *missing* is for the sandbox's Python to say (:func:`engine.slots.sandbox.run_python`).
    """
    names: set[str] = set()
    for text in sources:
        try:
            tree = parse_module(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.partition(".")[0])
    return sorted(n for n in names if n not in sys.stdlib_module_names and n not in own and n not in _RESERVED)


_RESERVED = frozenset({"solution", "run_checks", "checks", "tests", "_coe_guard", "_coe_stubs"})
"""Names of the sandbox's own files: never a sibling module or a stand-in."""


def _importable(name: str) -> bool:
    return name.isidentifier() and name not in sys.stdlib_module_names and name not in _RESERVED


def _siblings(ctx: CheckContext) -> dict[str, str]:
    """The run's other modules this answer may import, by name; one that would hide a standard module is left out."""
    return {name: text for name, text in ctx.modules.items() if _importable(name) and name != ctx.module}


def module_name(slot_id: str) -> str:
    """The name a slot's module is delivered under (``coe run --out-dir``) and imported by: its id, as a name."""
    return re.sub(r"\W+", "_", slot_id).strip("_").lower() or "module"


def python_modules(references: Mapping[str, SlotResult], task: str = "") -> dict[str, str]:
    """The Python modules of referenced code slots, by the name each is delivered under (:func:`module_name`).

    A module the task names as a file ("a Python function verify_signature(...) in webhooks.py") is there under
    that name too, when one referenced module defines a name the task gives (or only one is referenced): the
    tests part imported ``from webhooks import verify_signature``, and ran against nothing (multipart_set2_first).
    """
    modules: dict[str, str] = {}
    for slot_id, result in references.items():
        quality = result.quality
        if quality is None or quality.deliverable != "code" or (quality.language or "").lower() not in PYTHON_TAGS:
            continue
        code, _ = module_code(result)
        if code is not None:
            modules[module_name(slot_id)] = code
    named = [m for m in dict.fromkeys(_TASK_FILE.findall(task)) if m not in modules]
    for name in named if modules else []:
        defining = [code for code in modules.values() if _defines_a_name_of(code, task)]
        chosen = defining if len(defining) == 1 else list(modules.values()) if len(modules) == 1 else []
        if chosen:
            modules[name] = chosen[0]
    return modules


_TASK_FILE = re.compile(r"\b([A-Za-z_]\w*)\.py\b")
"""A Python file the task names ("in webhooks.py")."""


def _defines_a_name_of(code: str, task: str) -> bool:
    """Whether ``code`` defines, at its top level, a function or class whose name the task says."""
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError):
        return False
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return any(isinstance(n, kinds) and re.search(rf"\b{re.escape(n.name)}\b", task) for n in tree.body)


def _report(stdout: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        if line.startswith("COE-CHECKS "):
            try:
                data = json.loads(line[len("COE-CHECKS ") :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _module_names(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level or imports, and the names its test functions call.

    A function the task names in its words ("Need cart_total(lines, code=None) in cart.py") is the module's own: a
    method of the same name on a class the task did not ask for is not it (mp3-cart-discounts: a ``Cart`` class);
    a tests-only answer that imports or calls it has it.
    """
    names = _own_names(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name.startswith("test"):
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _own_names(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level, not those it imports or its tests call.

    An answer of one part delivers the module itself: multipart_set5_first's bill splitter came back as pytest tests
    alone, importing ``split_bill`` and ``add_tip`` from a module nobody wrote, and ``python.defines`` passed it.
    """
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


_TESTS_ASKED = re.compile(
    r"^\W*(?:please\s+)?(?:write|add|create|give|generate)\s+(?:me\s+|us\s+)?(?:some\s+|the\s+)?"
    r"(?:pytest\s+|unit\s+)?tests?\b",
    re.I,
)
"""A task that opens by asking for tests ("Write pytest tests for cart_total(lines) in cart.py"): the module is
the person's, and the tests import it."""


def _stub_functions(tree: ast.Module) -> list[str]:
    """Functions whose body is only a docstring, ``pass``, ``...`` or ``raise NotImplementedError``."""
    stubs = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = list(node.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
            body = body[1:]
        trivial = all(
            isinstance(s, ast.Pass)
            or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is Ellipsis)
            or (isinstance(s, ast.Raise) and "NotImplementedError" in ast.unparse(s))
            for s in body
        )
        if trivial:
            stubs.append(node.name)
    return stubs


def _redefined(tests: str, defined: set[str]) -> list[str]:
    try:
        tree = parse_module(tests)
    except SyntaxError:
        return []
    return [
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in defined
    ]


def _lint_checks(code: str) -> list[CheckResult]:
    """``ruff check`` with the pyflakes rules (soft), and a standard module used and never imported (hard).

    multipart_set5_first: a feature-flags module called ``zlib.crc32`` with no ``import zlib``, a NameError on
    the first user outside the allow list; the lint said so softly, and the part was kept. A name of a standard
    module is never a function of an earlier section.
    """
    lint, found = _lint(code)
    modules = sorted(
        {
            m.group(1)
            for f in found
            if f.get("code") == "F821"
            and (m := re.match(r"Undefined name `(\w+)`", str(f.get("message", ""))))
            and m.group(1) in sys.stdlib_module_names
        }
    )
    if not modules:
        return [lint]
    unimported = CheckResult(
        name="python.unimported",
        passed=False,
        detail=f"the code uses {modules[0]} and never imports it (import {modules[0]})",
    )
    return [lint, unimported]


def unimported_modules(code: str) -> list[str]:
    """The standard modules ``code`` uses as ``module.name`` and never binds (no import, assignment or parameter).

    What ``python.unimported`` fails, read without ruff: the feature-flags module called ``zlib.crc32`` with no
    ``import zlib`` in all the candidates of two runs. Empty when the code does not parse.
    """
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError):
        return []
    bound: set[str] = set()
    used: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).partition(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if isinstance(node.value.ctx, ast.Load) and node.value.id in sys.stdlib_module_names:
                used[node.value.id] = None
    return [name for name in used if name not in bound and not hasattr(builtins, name)]


def _lint(code: str) -> tuple[CheckResult, list[dict[str, object]]]:
    """``ruff check`` with the pyflakes rules (undefined names, unused imports...), soft, and its findings."""
    if shutil.which("ruff") is None and not _ruff_module():
        return CheckResult(name="python.lint", passed=True, severity="soft", detail="ruff is not installed"), []
    try:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "check",
                "--select",
                "F,E9",
                "--output-format",
                "json",
                "--no-cache",
                "--stdin-filename",
                "solution.py",
                "-",
            ],
            input=code,
            capture_output=True,
            text=True,
            timeout=20,
        )
        found = json.loads(out.stdout or "[]")
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return CheckResult(name="python.lint", passed=True, severity="soft", detail=f"ruff did not run: {exc}"), []
    if not found:
        return CheckResult(name="python.lint", passed=True, severity="soft"), []
    first = found[0]
    where = first.get("location", {}).get("row", "?")
    lint = CheckResult(
        name="python.lint",
        passed=False,
        severity="soft",
        detail=f"{len(found)} finding(s); line {where}: {first.get('code')} {first.get('message')}",
    )
    return lint, found


def _ruff_module() -> bool:
    import importlib.util

    return importlib.util.find_spec("ruff") is not None


def _sql_check(code: str, task: str) -> CheckResult:
    try:
        import sqlglot
        from sqlglot.errors import ParseError
    except ImportError:
        return CheckResult(name="sql.parses", passed=True, severity="soft", detail="sqlglot is not installed")
    dialect = next((name for name, pattern in _DIALECTS if pattern.search(task)), None)
    try:
        statements = [s for s in sqlglot.parse(code, read=dialect) if s is not None]
    except (ParseError, ValueError) as exc:
        return CheckResult(name="sql.parses", passed=False, detail=f"{dialect or 'generic'} SQL: {_parse_error(exc)}")
    if not statements:
        return CheckResult(name="sql.parses", passed=False, detail="no SQL statement")
    return CheckResult(name="sql.parses", passed=True, detail=f"{len(statements)} statement(s), {dialect or 'generic'}")


def _parse_error(exc: Exception) -> str:
    """The parser's error in one line of plain text (sqlglot's message underlines with terminal codes)."""
    errors = getattr(exc, "errors", None)
    if errors:
        first = errors[0]
        near = f" (near {first['highlight']!r})" if first.get("highlight") else ""
        return f"{first.get('description')} at line {first.get('line')}, column {first.get('col')}{near}"[:200]
    return " ".join(_ANSI.sub("", str(exc)).split())[:200]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _load_check(name: str, load: object) -> CheckResult:
    try:
        load()  # type: ignore[operator]
    except Exception as exc:  # any parser error is the check's finding
        return CheckResult(name=name, passed=False, detail=str(exc)[:200])
    return CheckResult(name=name, passed=True)


def _ini(code: str) -> None:
    """Read ``code`` as an INI file (systemd units included); KEY=VALUE lines with no section are one section."""
    sectioned = re.match(r"\s*(?:[#;].*\n\s*)*\[", code) is not None
    parser = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#", ";"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(code if sectioned else f"[file]\n{code}")
    except configparser.Error as exc:
        if sectioned:
            raise
        # the lines as the answer numbers them, not after the section this added
        raise ValueError(re.sub(r"\[line\s+(\d+)\]", lambda m: f"[line {int(m.group(1)) - 1}]", str(exc))) from exc


def _csv_check(code: str) -> CheckResult:
    rows = [r for r in csv.reader(io.StringIO(code.strip())) if r]
    widths = {len(r) for r in rows}
    ok = len(rows) >= 2 and len(widths) == 1
    detail = "" if ok else f"{len(rows)} rows with {sorted(widths)} columns"
    return CheckResult(name="csv.parses", passed=ok, detail=detail)


UNSET_VARIABLE = "SC2154"
"""ShellCheck's "referenced but not assigned" (lower-case names only: upper-case ones may come from the
environment): the review set's backup script named its file ``$DATE-$database_name.sql`` and read the name from
``$1``, so every backup was ``2026-12-07-.sql`` (four runs, every check passed)."""


def _shellcheck(code: str) -> CheckResult:
    """``bash.lint``: ShellCheck's warnings and errors; a variable used that the script never sets fails it (hard).

    Other findings (an unused variable, ``cd`` without ``|| exit``) are soft: the script may still do its work.
    """
    found = shutil.which("shellcheck") or shutil.which("shellcheck", path=sysconfig.get_path("scripts"))
    if found is None:
        return CheckResult(name="bash.lint", passed=True, severity="soft", detail="shellcheck is not installed")
    script = code if code.startswith("#!") else "#!/bin/bash\n" + code
    try:
        out = subprocess.run(
            [found, "--severity=warning", "--format=json1", "-"],
            input=script,
            capture_output=True,
            text=True,
            timeout=20,
        )
        comments = json.loads(out.stdout or "{}").get("comments", [])
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return CheckResult(name="bash.lint", passed=True, severity="soft", detail=f"shellcheck did not run: {exc}")
    if not comments:
        return CheckResult(name="bash.lint", passed=True)
    unset = [c for c in comments if f"SC{c.get('code')}" == UNSET_VARIABLE]
    first = (unset or comments)[0]
    return CheckResult(
        name="bash.lint",
        passed=False,
        severity="hard" if unset else "soft",
        detail=f"{len(comments)} finding(s); SC{first.get('code')}: {first.get('message')}",
    )


def _bash_check(code: str) -> CheckResult:
    bash = shutil.which("bash")
    if bash is None:
        return CheckResult(name="bash.parses", passed=True, severity="soft", detail="bash is not installed")
    try:
        out = subprocess.run([bash, "-n"], input=code, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return CheckResult(name="bash.parses", passed=True, severity="soft", detail=f"bash -n did not run: {exc}")
    return CheckResult(name="bash.parses", passed=out.returncode == 0, detail=out.stderr.strip()[:200])
