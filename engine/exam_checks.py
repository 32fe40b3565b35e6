"""Scoring an answer against an exam task's checks (the exam format: :mod:`experts.catalog.exams`).

The checks are the kinds a slot's own checks use, applied to the delivered document: required items present,
a fenced code block that is valid (Python runs in the sandbox; SQL, YAML, JSON and Bash blocks get the slot's
own check of their language, :func:`engine.slots.checks.code.block_checks`), Python asserts that hold after the
answer's code, and a number the answer states.
"""

from __future__ import annotations

from engine.slots.checks.code import block_checks
from engine.slots.checks.text import PYTHON_TAGS, SQL_TAGS, code_blocks
from engine.slots.program_of_thought import numbers_in
from engine.slots.sandbox import SandboxLimits, run_python
from experts.catalog.exams import ExamChecks

__all__ = ["exam_failures"]

_TAGS = {
    "python": PYTHON_TAGS,
    "sql": SQL_TAGS,
    "yaml": frozenset({"yaml", "yml"}),
    "json": frozenset({"json"}),
    "bash": frozenset({"bash", "sh", "shell", "zsh"}),
}
_LIMITS = SandboxLimits(timeout_s=10.0)


def exam_failures(answer: str, checks: ExamChecks, task: str = "") -> list[str]:
    """What the answer fails of ``checks``, one line each (empty: it passes).

    Args:
        answer: The delivered document.
        checks: The exam task's checks.
        task: The exam task's text (it may name the SQL dialect the slot's SQL check reads).
    """
    failures: list[str] = []
    lowered = answer.lower()
    missing = [item for item in checks.contains if item.lower() not in lowered]
    if missing:
        failures.append(f"contains: missing {', '.join(repr(m) for m in missing)}")
    if checks.any_of and not any(item.lower() in lowered for item in checks.any_of):
        failures.append(f"any_of: none of {', '.join(repr(m) for m in checks.any_of)}")
    language = checks.code or ("python" if checks.asserts else None)
    if language is not None:
        problem = _code_problem(answer, language, checks.asserts, task)
        if problem is not None:
            failures.append(f"code ({language}): {problem}")
    if checks.number is not None and not _states(answer, checks.number, checks.tolerance):
        failures.append(f"number: {checks.number:g} is not stated (within {checks.tolerance:.0%})")
    return failures


def _states(answer: str, wanted: float, tolerance: float) -> bool:
    scale = max(abs(wanted), 1e-9)
    return any(abs(value - wanted) <= tolerance * scale for value in numbers_in(answer))


def _code_problem(answer: str, language: str, asserts: list[str], task: str) -> str | None:
    """Why no block of ``language`` in the answer is valid (None: one is)."""
    tags = _TAGS[language]
    blocks = [code for tag, code in code_blocks(answer) if tag in tags and code.strip()]
    if not blocks and language == "python":
        blocks = [code for tag, code in code_blocks(answer) if tag == "" and code.strip()]
    if not blocks:
        return f"no ```{language} block in the answer"
    if language == "python":
        return _python_problem(blocks, asserts)
    problems = [p for p in (_valid(language, code, task) for code in blocks) if p is not None]
    return None if len(problems) < len(blocks) else problems[0]


def _python_problem(blocks: list[str], asserts: list[str]) -> str | None:
    code = "\n\n".join(blocks)  # the answer's code, in order: a later block may use an earlier one's function
    checks = "\n".join(asserts)
    program = f"{code}\n\n# exam asserts\n{checks}\n" if checks else code
    result = run_python({"exam.py": program}, "exam.py", limits=_LIMITS)
    if result.ok:
        return None
    if result.timed_out:
        return f"did not finish within {_LIMITS.timeout_s:g} s"
    if result.violations:
        return f"the sandbox refused: {result.violations[0]}"
    last = [line for line in result.stderr.strip().splitlines() if line.strip()]
    return (last[-1] if last else f"exit status {result.returncode}")[:300]


def _valid(language: str, code: str, task: str) -> str | None:
    """Why one block fails the slot's own check of its language (None: it passes).

    A check that could not run here (its tool is missing) is no pass for an exam.
    """
    for check in block_checks(language, code, task):
        if not check.passed and check.severity == "soft":
            continue  # a finding of style (ShellCheck's unused variable): no fault of the answer's
        if check.name == "bash.lint" and not check.passed:
            return f"shellcheck: {check.detail}"
        if not check.passed:
            return f"bash -n: {check.detail}" if language == "bash" else f"does not parse: {check.detail}"
        if check.severity == "soft":
            return f"cannot be checked here: {check.detail}"
    return None
