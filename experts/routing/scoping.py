"""Scoping a task: trivial (no experts, no plan), single (one expert, one slot) or multi (a multi-slot plan).

A task is *trivial* when it is short (at most :data:`MAX_WORDS` words) and at least as close (within
:data:`MARGIN`) to the trivial-request prototypes of ``config/trivial_prototypes.yaml`` as to any template of the
library and to any expert's capabilities (cosine similarity, same embedder as routing and retrieval): "what is a
mutex?" is trivial, "write a Python function that reverses a linked list" is a coder's work. A short task that
states :data:`COMBINED_FIGURES` figures or more ("monthly payment, 250k loan, 5.5%, 25 yrs?") is not: it asks for a
calculation, which one expert's slot computes with a program and a direct answer does not.

A task that hands over one function to complete (a ``def`` whose body is only a docstring, ``pass`` or ``...``,
as in "Complete the following Python function: ...") is *single*: the deliverable is that function. So is a task
that asks for one function by its name and parameters ("Write a Python function dedupe(items) that ...").

A task whose instructions name its deliverables (:func:`experts.routing.aspects.named_deliverables`) is
*single* when they name exactly one ("Write the opening scene of a mystery novel set on a night train") and
*multi* when they name several ("Diagnose the causes, propose indexes, rewrite the query and explain the
change"), whatever the similarities say. A task that names none and asks a question ("which painkillers are safe
with warfarin, and which should he avoid?") wants one answer, and one headed by a deliverable ("Threat model
for the Stripe webhook: ...", :func:`experts.routing.aspects.headline_deliverable`) is that deliverable: both
*single*, whatever the similarities say.

Otherwise it is *single* when it reads more like one expert's capability (the router's score for the whole
task) than like any template of the library: ``expert - template >= SINGLE_MARGIN``. Within
:data:`NARROW_BAND` below that line the scope is unclear, and the autonomous default "unclear scope ->
narrower" makes it single too (recorded as the decision's ``rule``). Below the band it is *multi*: a template is
retrieved and adapted.

All numbers come from the calibration in ``bench/bench_scope.py``; the decision records the similarities it
was made on.
"""

from __future__ import annotations

import ast
import builtins
import re
import threading
from pathlib import Path

import numpy as np
import yaml

from experts.embedding.encoder import Embedder
from experts.embedding.vectors import Vectors, check_vectors
from experts.routing.aspects import headline_deliverable, kinds_apart, named_deliverables
from experts.routing.router import ExpertRouter
from experts.routing.templates import TemplateIndex
from state.errors import ConfigError
from state.paths import config_dir
from state.python_ast import parse_module
from state.scope_decision import DefaultRule, ScopeDecision, ScopeKind
from state.yaml_text import safe_load

__all__ = [
    "MARGIN",
    "MAX_WORDS",
    "NARROW_BAND",
    "SINGLE_MARGIN",
    "classify",
    "function_asked",
    "function_tested",
    "function_to_complete",
    "prototypes_path",
]

MAX_WORDS = 10
COMBINED_FIGURES = 3
"""Figures a short task states from which on it is a calculation, not a direct answer ("what's 20% of 85?" and
"convert 100 USD to euros at 0.92" state two: the direct answer's inline arithmetic computes them)."""
MARGIN = -0.05
SINGLE_MARGIN = 0.04
NARROW_BAND = 0.02

_cache: dict[tuple[str, str], Vectors] = {}
_lock = threading.Lock()


def prototypes_path() -> Path:
    """The prototype file (``config/trivial_prototypes.yaml``)."""
    return config_dir() / "trivial_prototypes.yaml"


def _prototype_vectors(embedder: Embedder, path: Path) -> Vectors:
    key = (str(path), embedder.model_id)
    with _lock:
        cached = _cache.get(key)
        if cached is None:
            try:
                data = safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                raise ConfigError(str(path), f"cannot read the trivial-request prototypes: {exc}") from exc
            lines = data.get("prototypes") if isinstance(data, dict) else None
            if not isinstance(lines, list) or not lines or not all(isinstance(x, str) and x.strip() for x in lines):
                raise ConfigError(str(path), "must have a non-empty list of strings", field="prototypes")
            cached = check_vectors(embedder.encode([str(x) for x in lines]), embedder.dim, f"{path} prototypes")
            _cache[key] = cached
        return cached


_CODE = re.compile(r"```[\w+-]*\n(.*?)```", re.S)
_FIGURE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
_QUESTION = re.compile(r"\?(?:\s|$)")
"""A question mark that ends a sentence: a task that asks and names no deliverable wants one answer."""
_ASKS_FOR_WORK = re.compile(
    r"\b(?:(?:can|could|would|will) you|please(?!\s*[.!?]|\s*$)|(?<!do )(?<!would )(?<!should )(?<!will )"
    r"(?:i|we) (?:need|want|would like)|(?:i|we)'d like)\b",
    re.I,
)
"""A request inside a question ("could you write that as a story? I need a Django model ..."): work, not a
question to answer, whatever the aspect pass found. A "please" that closes a sentence ("A mitigation for each,
please.") and "do I need ...?" ask nothing more than the question."""
_ASKED_FUNCTION = re.compile(r"\b(?:function|method)\s+`?([A-Za-z_]\w*)\s*\([^()]*\)", re.I)


def function_asked(task: str) -> str | None:
    """The name of the one function a task asks for by name and parameters, or None (none, or several).

    "Write a Python function dedupe(items) that ..." asks for ``dedupe``.
    """
    names = set(_ASKED_FUNCTION.findall(task))
    return names.pop() if len(names) == 1 else None


_CODE_TEST = re.compile(r"\bassert\s+(?:not\s+)?[A-Za-z_][\w.]*\(")
"""A test that calls code: ``assert similar_elements((3, 4), (4, 5)) == (4,)``, ``assert set(f(x)) == ...``; not
the verb ("the licensor may assert claims (including ...)")."""
_PYTHON_ASKED = re.compile(
    r"\b(?:write|implement|create|build|code|make)\s+(?:me\s+)?(?:a|an)\s+python\s+"
    r"(?:function|method|class|script|program|module)\b",
    re.I,
)
_NAMED_FUNCTION_ASKED = re.compile(
    r"^\W*(?:please\s+)?(?:deliver|write|implement|create|build|code|make|add|give|define)\s+(?:me\s+|us\s+)?"
    r"(?:(?:a|an|the|one)\s+)?(?:[\w-]+\s+){0,3}?[a-z]\w*_\w*\([^()]*\)",
    re.I,
)
"""An instruction whose object is a function named with its parameters ("deliver parking_fee(minutes) in tariff.py
...", "write me a little convert_length(value, from_unit, to_unit) for our workshop app"): the router read the
subject's words ("tariff", "fee", "workshop") and sent both to prose experts (multipart_set3_pieces)."""

_MODULE_ASKED = re.compile(
    r"^\W*(?:please\s+)?(?:(?:deliver|write|implement|create|build|code|make|add|give)\s+(?:me\s+|us\s+)?"
    r"(?:(?:a|an|the|one)\s+)?(?:(?:small|little|tiny|short|new|simple)\s+)?)?[\w-]+\.py\b"
    r"(?:\s*[:\u2014-]\s*|\s+with\s+)[^.]{0,80}?\b[a-z]\w*\([^()]*\)",
    re.I,
)
"""A Python module named by its file, with a function named with its parameters ("isbn.py: is_valid_isbn(s) ->
bool and isbn10_to_13(s) -> str ...", "add ages.py with age_on(birth_date, on_date) -> int"): multipart_set5_first's
ISBN task, read by the router for its checksum words, went to the math expert, whose answer held no code."""

_ASKS_A_FUNCTION = re.compile(
    r"^\W*(?:please\s+)?(?:write|implement|create|define|code)\s+(?:me\s+)?(?:(?:a|an|one)\s+)?"
    r"(?:python\s+)?function\b",
    re.I,
)
_ASSERTION = re.compile(r"\bassert\s+[^\n]+")


def function_tested(task: str) -> str | None:
    """The name of the one function a task opens by asking for and gives tests of, or None.

    "Write a function to find the shared elements from the given two lists. Your code should pass this test:
    assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))" asks for ``similar_elements``: every
    test that parses calls that one name beside Python's builtins. A task that asks for something else first
    ("Explain ..., then write a function"), or whose tests call two functions of their own, is not one function.
    """
    if _ASKS_A_FUNCTION.search(task) is None:
        return None
    names: set[str] = set()
    for m in _ASSERTION.finditer(task):
        try:
            tree = parse_module(m.group(0).strip().rstrip(".;"))
        except SyntaxError:
            continue
        names |= {
            n.func.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id not in _BUILTINS
        }
    return names.pop() if len(names) == 1 else None


_BUILTINS = frozenset(dir(builtins))


def python_code_asked(task: str) -> bool:
    """Whether the task asks for Python code in so many words: a test, "write a Python function", a named function.

    A module named by its file with a function of it counts ("isbn.py: is_valid_isbn(s) -> bool ...").

    A named function is the object of an instruction, with its parameters ("write me a convert_length(value, ...)").
    "Write a function to find the surface area of a cylinder. Your code should pass this test: assert
    surfacearea_cylinder(10, 5) == 942.45" is code whatever its subject; "the security controls for the Python
    script that ..." names a script as context and is not.
    """
    return bool(
        _CODE_TEST.search(task)
        or _PYTHON_ASKED.search(task)
        or _NAMED_FUNCTION_ASKED.search(task)
        or _MODULE_ASKED.search(task)
    )


def function_to_complete(task: str) -> str | None:
    """The name of the one function the task hands over to complete, or None.

    That function's body is only a docstring, ``pass`` or ``...``; other functions given in full are helpers.
    The code is the task's first fenced block, else the task from its first ``def`` or ``import`` line.
    """
    block = _CODE.search(task)
    if block is not None:
        code = block.group(1)
    else:
        start = re.search(r"^(from \w|import \w|def \w)", task, re.M)
        if start is None:
            return None
        code = task[start.start() :]
    try:
        tree = parse_module(code)
    except SyntaxError:
        return None
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    stubs = [f.name for f in functions if all(_empty(statement) for statement in f.body)]
    return stubs[0] if len(stubs) == 1 else None


def _empty(statement: ast.stmt) -> bool:
    """A statement that does nothing: a docstring or other bare constant (``...``), or ``pass``."""
    return isinstance(statement, ast.Pass) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
    )


def classify(
    task: str,
    embedder: Embedder,
    templates: TemplateIndex | None,
    router: ExpertRouter,
    *,
    max_words: int = MAX_WORDS,
    margin: float = MARGIN,
    single_margin: float = SINGLE_MARGIN,
    narrow_band: float = NARROW_BAND,
    path: Path | None = None,
) -> ScopeDecision:
    """Decide how much planning ``task`` needs; the decision says on which similarities."""
    words = len(task.split())
    vector = embedder.encode([task])
    trivial = float(np.max(_prototype_vectors(embedder, path or prototypes_path()) @ vector[0]))
    template = templates.search_vectors(vector, 1)[0][0].similarity if templates is not None else 0.0
    best = router.route_vectors(vector, [task])[0]
    expert, fit = best.raw_best, best.scores[best.raw_best]
    rule: DefaultRule | None = None
    kind: ScopeKind
    stub = function_to_complete(task)
    asked = function_asked(task)
    if stub is not None:
        kind, reason = "single", f"the task hands over one function to complete ({stub}): one expert's work"
    elif asked is not None:
        kind, reason = "single", f"the task asks for one function ({asked}): one expert's work"
    elif words <= max_words and trivial >= max(template, fit) + margin:
        kind = "trivial"
        reason = (
            f"closer to a trivial request ({trivial:.3f}) than to any template ({template:.3f}) "
            f"or expert ({expert} {fit:.3f})"
        )
        if (figures := len(_FIGURE.findall(task))) >= COMBINED_FIGURES:
            kind, reason = (
                "single",
                f"a calculation from {figures} stated figures: one expert's slot, computed ({reason})",
            )
    elif fit - template >= single_margin:
        kind, reason = "single", f"one expert's work: {expert} fits at {fit:.3f}, the best template at {template:.3f}"
    elif fit - template >= single_margin - narrow_band:
        kind, rule = "single", "unclear_scope_narrower"
        reason = (
            f"unclear scope ({expert} fits at {fit:.3f}, the best template at {template:.3f}): "
            "the narrower reading, one expert"
        )
    else:
        kind = "multi"
        reason = f"a plan: the best template fits at {template:.3f}, the best single expert ({expert}) at {fit:.3f}"
    # a function asked for by name is one expert's work, unless the task names other deliverables beside it
    # (mp-slugify: "...slugify(title)...; pytest tests for it; and a README section")
    named = named_deliverables(task) if stub is None and kind != "trivial" else []
    if len(named) == 1 and kind == "multi":
        kind, rule = "single", None
        reason = f"the task names one deliverable ({named[0].text!r}): one expert's work (similarity: {reason})"
    elif not named and kind == "multi" and (headline := headline_deliverable(task)) is not None:
        kind, rule = "single", None
        reason = f"the task is headed by one deliverable ({headline!r}) and names no other: one expert's work"
    elif not named and kind == "multi" and _QUESTION.search(task) and not _ASKS_FOR_WORK.search(task):
        kind, rule = "single", None
        reason = f"the task asks a question and names no deliverables: one answer (similarity: {reason})"
    elif len(named) >= 2 and kind == "single":
        kind, rule = "multi", None
        listed = "; ".join(a.text for a in named)
        reason = f"the task names {len(named)} deliverables ({listed}): a plan (similarity: {reason})"
    apart = kinds_apart(named) if kind == "multi" and len(named) >= 2 else None
    if apart is not None:
        reason = f"{reason}; a plan however it reads: {apart}"
    return ScopeDecision(
        firm=apart is not None,
        kind=kind,
        words=words,
        trivial_similarity=round(trivial, 4),
        template_similarity=template,
        expert_similarity=round(fit, 4),
        expert=expert,
        rule=rule,
        reason=reason,
    )
