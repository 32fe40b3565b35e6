"""Do the parts of a document agree? Names one part defines and another uses, read from the kept answers' code.

Slots are written apart (in parallel, or each seeing only the parts it references), so a query can select a
column the schema part never defined, and two parts can each define the ``Book`` model differently. This module
reads the finished slots' code blocks and returns each :class:`Disagreement`: which slot should be written again,
and the facts it must use (the other part's definition, verbatim). No model is asked; ``nodes.check_parts`` sends
the slot back once.

What is compared (docs/answers.md, "Parts that agree"):

* SQL: the tables the parts create (``CREATE TABLE``, parsed with sqlglot). A table two parts create with
  different columns; a query in one part that uses a column of a table another part created, which that table does
  not have (sqlglot's ``qualify`` against the schema). A table no part creates is not judged: it may be the
  person's own.
* Python: a class or function that two parts define with different fields or parameters (``class Book`` with
  ``borrowed`` in one part and ``borrowed_by`` in the other).

* HTTP endpoints: a part most of whose endpoints (``GET /tasks`` in prose or a table, a route decorator in code)
  are not among those the first part to name two or more has (``/todos`` in the contract, ``/tasks`` and
  ``/items`` in the implementations).
* Configuration: a part whose Python code reads keys (``config["db_url"]``) that the YAML config file another
  part wrote does not have (``database_url``).
* Figures: a part that states one of the task's computed figures (:mod:`engine.figures`) with another value; and,
  for a quantity no program computed, a part that gives a named quantity (``NPV``, "the monthly payment":
  :mod:`engine.slots.checks.quantities`) another value than an earlier part gave it (a memo's payback period
  against the model part's).
* Templates: a part titled as a template defines placeholders (``{{name}}``, ``{name}``, ``[Patient Name]``); a
  part whose Python code fills placeholders (``.replace("{{name}}", ...)``, ``.format(name=...)``) must fill
  exactly those (mp-reminder-sms: the script filled ``{{appointment_name}}``, the template had ``[Recipient's
  Name]``).
* Query rows: a part whose Python code reads keys from the rows it loops over (``row["email"]``) that the one
  ``SELECT`` another part wrote does not select (the same script read ``email``, the query selected
  ``patient_name``).
* Imports: a part whose Python imports, from a module of the document (another part's, by the name the run
  delivers it under or the file name the task gives it), a name that module does not define; or imports, from a
  module no part delivers and the sandbox's Python does not have, a name like one another part defines
  (mp-uk-tax: the tests imported ``calculate_income_tax`` from ``tax_calculator``; the function part defined
  ``compute_income_tax``, and the tests ran against a stand-in).
* Tests: a part whose tests (its module's test functions, each parametrised case) fail when run against the other
  parts' modules they import, in the sandbox (not for a package the sandbox lacks).
* Examples: a part whose example line (``print(bowling_score(rolls))  # Output: 30``) calls a function another part's
  module defines, and prints something else when run against it.
* Task's functions: a function the task names with its parameters (``is_enabled(flags, name, user_id)``) that no
  part's Python defines at its top level sends the code part back (the one with such a method, else the first).
* Usage: a code part whose usage example, run with a data file another part wrote (the part titled for
  ``flags.json``), raises in its own code (:mod:`engine.slots.checks.usage`).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from engine.figures import figures_constraint, stated_otherwise
from engine.slots.checks import module_code, module_name, python_modules, tests_against, third_party_imports
from engine.slots.checks.printed import wrong_print_comments
from engine.slots.checks.quantities import Stated, same_value, stated_values
from engine.slots.checks.text import PYTHON_TAGS, SQL_TAGS, code_blocks, norm, without_closed_code
from engine.slots.checks.usage import raising_usage, usage_blocks
from engine.slots.sandbox import SandboxLimits, run_python
from experts.routing.aspects import named_functions
from state.figures import TaskFigures
from state.python_ast import parse_module
from state.result import SlotResult

__all__ = ["Disagreement", "Part", "disagreements"]

_SQL = SQL_TAGS | {"tsql", "plsql", "psql"}
_ENTRY_POINTS = frozenset({"main", "run", "cli", "app"})
"""Functions each script of a document may define for itself: two parts' ``main`` need not agree."""


@dataclass(frozen=True)
class Part:
    """One finished slot as the comparison reads it: its id, title and kept answer."""

    slot_id: str
    title: str
    result: SlotResult


@dataclass(frozen=True)
class Disagreement:
    """Two parts that do not fit: ``slot_id`` is written again with ``facts``, the definition ``source_id`` gave."""

    slot_id: str
    source_id: str
    kind: str
    """``sql.columns`` (a query uses a column the table lacks), ``sql.tables`` or ``python.names`` (two
    definitions of one name differ), ``http.endpoints`` (another API's paths), ``config.keys`` (keys the config
    file lacks), ``figures`` (a computed figure stated otherwise; ``source_id`` "figures"), ``figures.named`` (a
    named quantity another part gave another value),
    ``template.placeholders`` (placeholders filled that the template lacks, or left unfilled), ``sql.rows`` (row
    keys the query does not select), ``python.imports`` (a name imported from a part's module that it lacks, or
    from a module no part delivers), ``python.tests`` (a part's tests fail against the module they import),
    ``python.examples`` (a part's ``print(...)  # Output: y`` of another part's function prints else),
    ``python.usage`` (a code part's usage example, run with another part's data file, raises in its code),
    ``python.task_functions`` (no part defines a function the task names; ``source_id`` "task")."""
    detail: str
    """What does not fit, in one line."""
    facts: str
    """What the slot must use: the other part's definition, verbatim, with one sentence on it."""


def disagreements(
    parts: Sequence[Part], figures: TaskFigures | None = None, task: str = "", limits: SandboxLimits | None = None
) -> list[Disagreement]:
    """Every disagreement between the parts, in the parts' order (the later part of a pair is sent back).

    With the task's computed ``figures``, a part that states one of them with another value disagrees with the
    program (``figures``; :func:`engine.figures.stated_otherwise`). ``limits``: the sandbox's, for tests run
    against the other parts (the run's check timeout; the defaults when None).
    """
    limits = limits or SandboxLimits()
    beside = {p.slot_id: _modules_beside(p, parts, task) for p in parts}
    found = (
        _sql_disagreements(parts)
        + _python_disagreements(parts)
        + _task_function_disagreements(parts, task)
        + _endpoint_disagreements(parts)
        + _config_disagreements(parts)
        + _template_disagreements(parts)
        + _row_disagreements(parts)
        + _import_disagreements(parts, beside)
        + (tested := _test_disagreements(parts, beside, limits))
    )
    failing = {d.slot_id for d in tested}  # its tests' failure says it; its examples would say it again
    found += _example_disagreements([p for p in parts if p.slot_id not in failing], beside, limits)
    found += _usage_disagreements([p for p in parts if p.slot_id not in failing], beside, limits)
    if figures is not None and figures.figures:
        found += _figure_disagreements(parts, figures, task)
    found += _named_disagreements(parts, figures)
    order = {p.slot_id: at for at, p in enumerate(parts)}
    return sorted(found, key=lambda d: (order[d.slot_id], d.kind))


# ---------------------------------------------------------------- SQL


@dataclass(frozen=True)
class _Table:
    name: str
    columns: tuple[str, ...]
    ddl: str


def _sql_of(result: SlotResult) -> list[str]:
    """The SQL of a part: its SQL blocks, and the SQL strings its Python blocks run (``cursor.execute("...")``).

    A call-sheet script that created its own ``customers`` table with ``phone`` beside a schema part's
    ``phone_number``, and queried it, was never compared (multipart_set3_pieces, mp3-bike-repair-sqlite).
    """
    blocks = code_blocks(result.raw)
    return [code for language, code in blocks if language in _SQL] + [
        sql for language, code in blocks if language in PYTHON_TAGS for sql in _sql_strings(code)
    ]


_SQL_START = re.compile(r"^\s*(?:select|insert|update|delete|create|with|alter)\b", re.I)


def _sql_strings(code: str) -> list[str]:
    """The string constants of a Python module that are SQL statements (not f-strings: their text is not known)."""
    try:
        tree = parse_module(code)
    except SyntaxError:
        return []
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL_START.match(node.value)
    ]


def _statements(code: str) -> list[object]:
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        return [s for s in sqlglot.parse(code, read="postgres") if s is not None]
    except (ParseError, ValueError):
        return []  # the slot's own check (sql.parses) answers for a block that does not parse


def _tables(code: str) -> list[_Table]:
    from sqlglot import exp

    found = []
    for statement in _statements(code):
        if not isinstance(statement, exp.Create) or str(statement.args.get("kind", "")).upper() != "TABLE":
            continue
        schema = statement.this
        if not isinstance(schema, exp.Schema) or not isinstance(schema.this, exp.Table):
            continue
        columns = tuple(c.name.lower() for c in schema.expressions if isinstance(c, exp.ColumnDef))
        if columns:
            found.append(_Table(schema.this.name.lower(), columns, statement.sql(dialect="postgres", pretty=True)))
    return found


def _sql_disagreements(parts: Sequence[Part]) -> list[Disagreement]:
    created: dict[str, tuple[Part, _Table]] = {}  # the first part to create each table defines it
    out: list[Disagreement] = []
    for part in parts:
        for code in _sql_of(part.result):
            for table in _tables(code):
                first = created.get(table.name)
                if first is None:
                    created[table.name] = (part, table)
                elif first[0].slot_id != part.slot_id and set(first[1].columns) != set(table.columns):
                    out.append(_table_differs(part, first[0], first[1], table))
    for part in parts:
        schema = {name: table for name, (owner, table) in created.items() if owner.slot_id != part.slot_id}
        for code in _sql_of(part.result):
            out.extend(_query_disagreements(part, code, schema, created))
    return _once(out)


def _table_differs(part: Part, owner: Part, first: _Table, second: _Table) -> Disagreement:
    return Disagreement(
        slot_id=part.slot_id,
        source_id=owner.slot_id,
        kind="sql.tables",
        detail=f"table {first.name} has columns ({', '.join(second.columns)}) here and "
        f"({', '.join(first.columns)}) in the part {owner.title!r}",
        facts=f"The part {owner.title!r} defines table {first.name}; use it exactly as defined there, with the same "
        f"column names:\n```sql\n{first.ddl}\n```",
    )


def _query_disagreements(
    part: Part, code: str, schema: Mapping[str, _Table], created: Mapping[str, tuple[Part, _Table]]
) -> list[Disagreement]:
    from sqlglot import exp
    from sqlglot.errors import OptimizeError
    from sqlglot.optimizer.qualify import qualify
    from sqlglot.schema import MappingSchema

    out = []
    for statement in _statements(code):
        if not isinstance(statement, exp.Query | exp.Insert | exp.Update | exp.Delete):
            continue
        used = sorted({t.name.lower() for t in statement.find_all(exp.Table)} & set(schema))
        if not used:
            continue
        mapping = MappingSchema({n: {c: "TEXT" for c in schema[n].columns} for n in used}, dialect="postgres")
        try:
            qualify(statement.copy(), schema=mapping, dialect="postgres", validate_qualify_columns=True)
        except OptimizeError as exc:
            owner = created[used[0]][0]
            ddl = "\n\n".join(schema[n].ddl for n in used)
            out.append(
                Disagreement(
                    slot_id=part.slot_id,
                    source_id=owner.slot_id,
                    kind="sql.columns",
                    detail=f"{str(exc).splitlines()[0]} (tables {', '.join(used)} as the part {owner.title!r} "
                    "defines them)",
                    facts=f"The part {owner.title!r} defines the tables this part queries; use only their columns, "
                    f"spelled as there:\n```sql\n{ddl}\n```",
                )
            )
        except Exception:  # noqa: BLE001 - sqlglot's optimizer raises other types on SQL it cannot model
            continue
    return out


# ---------------------------------------------------------------- Python


@dataclass(frozen=True)
class _Definition:
    name: str
    shape: tuple[str, ...]
    """A class's fields (annotated names, ``__init__`` parameters) or a function's parameters."""
    source: str


def _definitions(code: str) -> list[_Definition]:
    try:
        tree = parse_module(code)
    except SyntaxError:
        return []
    out = []
    for node in tree.body:
        if node_name(node).startswith(("_", "test")):
            continue
        if isinstance(node, ast.ClassDef):
            fields = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
            init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
            if init is not None:
                fields += [a.arg for a in init.args.args[1:] + init.args.kwonlyargs]
            out.append(_Definition(node.name, tuple(dict.fromkeys(fields)), ast.get_source_segment(code, node) or ""))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name not in _ENTRY_POINTS:
            params = tuple(a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs)
            out.append(_Definition(node.name, params, ast.get_source_segment(code, node) or ""))
    return out


def _task_function_disagreements(parts: Sequence[Part], task: str) -> list[Disagreement]:
    """The code part that should define a function the task names with its parameters, when no part does.

    A plan from a template gives its slots the template's words, and the one from the aspects may lose a later
    sentence's names (mp5-feature-flags: a class whose methods took other parameters than the task's
    ``is_enabled(flags, name, user_id)``). A function no part defines at the top level of its Python sends back
    the part that defines it as a method, else the first Python code part that defines any function.
    """
    signatures = named_functions(task)
    if not signatures:
        return []
    coders = [p for p in parts if _python_code(p)]
    trees = {
        p.slot_id: _trees([c for language, c in code_blocks(p.result.raw) if language in PYTHON_TAGS]) for p in coders
    }
    top = {
        n.name
        for ts in trees.values()
        for t in ts
        for n in t.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    missing = [name for name in signatures if name not in top]
    if not missing:
        return []

    def defines(part: Part, name: str | None) -> bool:
        return any(
            isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and (name is None or n.name == name)
            for t in trees[part.slot_id]
            for n in ast.walk(t)
        )

    owner = next((p for p in coders for name in missing if defines(p, name)), None)
    owner = owner or next((p for p in coders if defines(p, None) and not _only_tests(trees[p.slot_id])), None)
    if owner is None:
        return []
    named = ", ".join(signatures[name] for name in missing)
    return [
        Disagreement(
            slot_id=owner.slot_id,
            source_id="task",
            kind="python.task_functions",
            detail=f"no part defines the task's function{'s' if len(missing) > 1 else ''} {named}",
            facts=f"The task names {named}: define {'each' if len(missing) > 1 else 'it'} as a function of the "
            "module (not a method), with exactly these parameters.",
        )
    ]


def _only_tests(trees: Sequence[ast.Module]) -> bool:
    """Whether every function the blocks define is a test (``test_...``)."""
    names = [n.name for t in trees for n in ast.walk(t) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return bool(names) and all(name.startswith("test") for name in names)


def node_name(node: ast.stmt) -> str:
    """The name a top-level class or function statement defines ("" for any other statement)."""
    return node.name if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) else ""


def _python_disagreements(parts: Sequence[Part]) -> list[Disagreement]:
    defined: dict[str, tuple[Part, _Definition]] = {}
    out = []
    for part in parts:
        for language, code in code_blocks(part.result.raw):
            if language not in PYTHON_TAGS:
                continue
            for definition in _definitions(code):
                first = defined.get(definition.name)
                if first is None:
                    defined[definition.name] = (part, definition)
                elif first[0].slot_id != part.slot_id and set(first[1].shape) != set(definition.shape):
                    out.append(_python_differs(part, first[0], first[1], definition))
                elif (
                    first[0].slot_id != part.slot_id
                    and _body(first[1].source) != _body(definition.source)
                    and 2 * _statements_in(first[1].source) > _statements_in(definition.source)
                ):  # a fuller writing of an earlier sketch (a design part's "return item") is that sketch's code
                    out.append(_python_again(part, first[0], first[1]))
    return _once(out)


def _body(source: str) -> str:
    """A definition's code without its comments, docstrings and layout (two copies of one class compare equal)."""
    try:
        tree = parse_module(source)
    except SyntaxError:
        return " ".join(source.split())
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            node.body = node.body[1:] or [ast.Pass()]  # its docstring
    return ast.dump(tree)


def _statements_in(source: str) -> int:
    """How many statements a definition holds (its size, to tell a sketch from its implementation)."""
    try:
        return sum(isinstance(n, ast.stmt) for n in ast.walk(parse_module(source)))
    except SyntaxError:
        return len(source.splitlines())


def _python_again(part: Part, owner: Part, first: _Definition) -> Disagreement:
    """A part that defines another part's class or function again, with the same shape and other code."""
    return Disagreement(
        slot_id=part.slot_id,
        source_id=owner.slot_id,
        kind="python.names",
        detail=f"defines {first.name} again, with other code than the part {owner.title!r}",
        facts=f"The part {owner.title!r} defines {first.name}; do not define it again: use it as defined there "
        f"(do your own part with it):\n```python\n{first.source}\n```",
    )


def _python_differs(part: Part, owner: Part, first: _Definition, second: _Definition) -> Disagreement:
    what = "fields" if first.source.lstrip().startswith("class") else "parameters"
    return Disagreement(
        slot_id=part.slot_id,
        source_id=owner.slot_id,
        kind="python.names",
        detail=f"{first.name} has {what} ({', '.join(second.shape)}) here and ({', '.join(first.shape)}) in the "
        f"part {owner.title!r}",
        facts=f"The part {owner.title!r} defines {first.name}; use it with the same {what}, as defined there (do not "
        f"define it differently):\n```python\n{first.source}\n```",
    )


# ---------------------------------------------------------------- HTTP endpoints

_METHOD_PATH = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE)\s+`?(/[\w{}<>:./-]*)")
_ROUTE = re.compile(r"@\w+\.(get|post|put|patch|delete|route)\(\s*[\"'](/[^\"']*)[\"']", re.I)
_PARAM = re.compile(r"\{[^}/]*\}|<[^>/]*>|:\w+")


def _endpoints(text: str) -> dict[str, list[str]]:
    """The HTTP endpoints ``text`` names, by normalised path: each as written (``PUT /todos/{id}``).

    Read from prose and tables (``GET /todos``) and from route decorators in code (``@app.get("/todos")``).
    """
    found: dict[str, list[str]] = {}
    for method, path in _METHOD_PATH.findall(text):
        _add(found, path, f"{method} {path}")
    for method, path in _ROUTE.findall(text):
        _add(found, path, f"{method.upper()} {path}" if method.lower() != "route" else path)
    found.pop("/", None)
    return found


def _add(found: dict[str, list[str]], path: str, written: str) -> None:
    forms = found.setdefault(_path(path), [])
    if written not in forms:
        forms.append(written)


def _path(path: str) -> str:
    return _PARAM.sub("{}", path.rstrip("/").lower()) or "/"


def _endpoint_disagreements(parts: Sequence[Part]) -> list[Disagreement]:
    """A part whose endpoints the first part to name endpoints (two or more) does not have."""
    owner: Part | None = None
    defined: dict[str, list[str]] = {}
    out = []
    for part in parts:
        named = _endpoints(part.result.raw)
        if owner is None:
            if len(named) >= 2:
                owner, defined = part, named
            continue
        extra = [forms[0] for path, forms in named.items() if path not in defined]
        if named and len(extra) * 2 > len(named):  # most of its endpoints are not the owner's: another API
            listed = [w for forms in defined.values() for w in forms]
            out.append(
                Disagreement(
                    slot_id=part.slot_id,
                    source_id=owner.slot_id,
                    kind="http.endpoints",
                    detail=f"endpoints {', '.join(extra[:6])} are not in the part {owner.title!r}, which has "
                    f"{', '.join(listed[:6])}",
                    facts=f"The part {owner.title!r} defines the API's endpoints; use exactly these methods and "
                    "paths:\n" + "\n".join(f"  - {w}" for w in listed),
                )
            )
    return out


# ---------------------------------------------------------------- configuration keys

_YAML = ("yaml", "yml")
_READ_KEY = re.compile(r"\b\w*(?:conf|cfg|settings)\w*(?:\[\s*[\"'](\w+)[\"']\s*\]|\.get\(\s*[\"'](\w+)[\"'])", re.I)
"""A key read from a configuration object: ``config["db_url"]``, ``cfg.get('retries')``."""


def _config_keys(result: SlotResult) -> tuple[set[str], str] | None:
    """The keys (top level and nested) of the answer's first YAML mapping, and the block; None without one."""
    import yaml

    for language, code in code_blocks(result.raw):
        if language not in _YAML:
            continue
        try:
            data = yaml.safe_load(code)
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and len(data) >= 2:
            return _keys(data), code.strip()
    return None


def _keys(data: object) -> set[str]:
    if isinstance(data, dict):
        return {str(k) for k in data} | {k for v in data.values() for k in _keys(v)}
    if isinstance(data, list):
        return {k for v in data for k in _keys(v)}
    return set()


def _config_disagreements(parts: Sequence[Part]) -> list[Disagreement]:
    """A part whose code reads configuration keys that the config file another part wrote does not have."""
    owner = next(((p, found) for p in parts if (found := _config_keys(p.result)) is not None), None)
    if owner is None:
        return []
    part_of, (keys, block) = owner

    def judge(part: Part) -> Disagreement | None:
        read = sorted({a or b for a, b in _READ_KEY.findall(_python_of(part.result))})
        missing = [k for k in read if k not in keys]
        if not missing:
            return None
        return Disagreement(
            slot_id=part.slot_id,
            source_id=part_of.slot_id,
            kind="config.keys",
            detail=f"reads {', '.join(missing)}, which the config file of the part {part_of.title!r} does "
            f"not have (it has {', '.join(sorted(keys)[:8])})",
            facts=f"The part {part_of.title!r} wrote the config file; read exactly its keys:\n```yaml\n{block}\n```",
        )

    return _against(part_of, parts, judge)


def _against(owner: Part, parts: Sequence[Part], judge: Callable[[Part], Disagreement | None]) -> list[Disagreement]:
    """What ``judge`` finds in each part but ``owner`` (the config file, template or query the others must fit)."""
    return [found for part in parts if part.slot_id != owner.slot_id and (found := judge(part)) is not None]


def _python_code(part: Part) -> bool:
    """Whether the part's deliverable is Python code (its kept answer's contract)."""
    quality = part.result.quality
    return quality is not None and quality.deliverable == "code" and (quality.language or "").lower() in PYTHON_TAGS


def _python_of(result: SlotResult) -> str:
    """The Python code blocks of an answer, joined."""
    return "\n".join(c for language, c in code_blocks(result.raw) if language in PYTHON_TAGS)


# ---------------------------------------------------------------- templates and the rows that fill them

_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}|(?<![{\w])\{([A-Za-z_]\w*)\}(?!\})|\[([A-Z][\w' ]{1,40})\](?!\()")
"""``{{name}}``, ``{name}`` or ``[Patient Name]`` (not a Markdown link's text)."""
_ROW_SOURCES = re.compile(r"fetch(?:all|many|one)|execute|iterrows|itertuples|read_sql|DictReader|query|rows|results")
"""What a loop's iterable is called or calls when its items are the rows of a query."""


def _name(placeholder: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", placeholder.lower()).strip("_")


def _placeholders(text: str) -> dict[str, str]:
    """The placeholders ``text`` holds, by normalised name: each as written."""
    found: dict[str, str] = {}
    for match in _PLACEHOLDER.finditer(text):
        found.setdefault(_name(next(g for g in match.groups() if g)), match.group(0))
    return found


def _template_of(result: SlotResult) -> dict[str, str]:
    """A template part's placeholders: in its prose and its non-code blocks (Python and SQL left out)."""
    blocks = "\n".join(c for language, c in code_blocks(result.raw) if language not in PYTHON_TAGS | _SQL)
    return _placeholders(without_closed_code(result.raw) + "\n" + blocks)


def _filled(code: str) -> dict[str, str]:
    """The placeholders Python code fills (``.replace``'s first argument; ``.format`` or ``.render`` keywords)."""
    try:
        tree = parse_module(code)
    except SyntaxError:
        return {}
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        method = node.func.attr
        if method == "replace" and node.args and isinstance(node.args[0], ast.Constant):
            found.update(_placeholders(str(node.args[0].value)))
        elif method in ("format", "substitute", "safe_substitute", "render"):
            found.update({_name(k.arg): f"{{{k.arg}}}" for k in node.keywords if k.arg is not None})
    return found


def _template_disagreements(parts: Sequence[Part]) -> list[Disagreement]:
    """A part whose code fills placeholders the template part does not have, or leaves some of its unfilled."""
    owner = next(
        ((p, found) for p in parts if "template" in p.title.lower() and (found := _template_of(p.result))), None
    )
    if owner is None:
        return []
    template, defined = owner

    def judge(part: Part) -> Disagreement | None:
        filled = _filled(_python_of(part.result))
        extra = [w for n, w in filled.items() if n not in defined]
        unfilled = [w for n, w in defined.items() if n not in filled]
        if not filled or not (extra or unfilled):  # code that fills nothing is not filling this template
            return None
        said = "; ".join(
            s
            for s in (
                f"fills {', '.join(extra)}, which the template does not have" if extra else "",
                f"leaves {', '.join(unfilled)} unfilled" if unfilled else "",
            )
            if s
        )
        return Disagreement(
            slot_id=part.slot_id,
            source_id=template.slot_id,
            kind="template.placeholders",
            detail=f"{said} (the part {template.title!r})",
            facts=f"The part {template.title!r} is the template; fill exactly its placeholders, written as there: "
            f"{', '.join(defined.values())}.",
        )

    return _against(template, parts, judge)


def _selected(parts: Sequence[Part]) -> tuple[Part, list[str], str] | None:
    """The one part whose SQL has one ``SELECT`` naming its columns: (part, the columns it selects, the query)."""
    from sqlglot import exp

    found = []
    for part in parts:
        for code in _sql_of(part.result):
            for statement in _statements(code):
                if isinstance(statement, exp.Select):
                    columns = [c.alias_or_name.lower() for c in statement.selects]
                    if columns and not any(
                        isinstance(c, exp.Star) or (isinstance(c, exp.Column) and isinstance(c.this, exp.Star)) or not n
                        for c, n in zip(statement.selects, columns, strict=True)
                    ):
                        found.append((part, columns, code.strip()))
    return found[0] if len(found) == 1 else None


def _row_keys(code: str) -> list[str]:
    """The string keys Python code reads from the items of loops over a query's rows (``for row in rows``)."""
    try:
        tree = parse_module(code)
    except SyntaxError:
        return []
    keys: dict[str, tuple[int, int]] = {}  # each key at its first place in the code
    for loop in ast.walk(tree):
        if not isinstance(loop, ast.For) or not _ROW_SOURCES.search(ast.unparse(loop.iter)):
            continue
        targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id in names
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                at = (node.lineno, node.col_offset)
                key = node.slice.value.lower()
                keys[key] = min(keys.get(key, at), at)
    return sorted(keys, key=lambda k: keys[k])


def _row_disagreements(parts: Sequence[Part]) -> list[Disagreement]:
    """A part whose code reads row keys that the document's one query does not select."""
    owner = _selected(parts)
    if owner is None:
        return []
    query_part, columns, query = owner

    def judge(part: Part) -> Disagreement | None:
        missing = [k for k in _row_keys(_python_of(part.result)) if k not in columns]
        if not missing:
            return None
        return Disagreement(
            slot_id=part.slot_id,
            source_id=query_part.slot_id,
            kind="sql.rows",
            detail=f"reads {', '.join(missing)} from each row, which the query of the part {query_part.title!r} "
            f"does not select (it selects {', '.join(columns)})",
            facts=f"The part {query_part.title!r} wrote the query; its rows have exactly these columns: "
            f"{', '.join(columns)}. Read only these:\n```sql\n{query}\n```",
        )

    return _against(query_part, parts, judge)


# ---------------------------------------------------------------- imports between parts


def _modules_beside(part: Part, parts: Sequence[Part], task: str) -> tuple[dict[str, str], dict[str, Part]]:
    """The other parts' Python modules, by the names the run delivers them under, and the part of each."""
    others = [p for p in parts if p.slot_id != part.slot_id]
    modules = python_modules({p.slot_id: p.result for p in others}, task)
    return modules, {name: _owner(others, code) for name, code in modules.items()}


Beside = Mapping[str, tuple[dict[str, str], dict[str, Part]]]
"""Per part: the other parts' modules and the part of each (:func:`_modules_beside`)."""


def _import_disagreements(parts: Sequence[Part], beside: Beside) -> list[Disagreement]:
    """A part that imports what the document's modules do not define, or a like name from a module no part has."""
    out = []
    for part in parts:
        modules, owners = beside[part.slot_id]
        if not modules:
            continue
        defined = {name: _top_level_names(code) for name, code in modules.items()}
        blocks = [code for language, code in code_blocks(part.result.raw) if language in PYTHON_TAGS]
        own = {name for code in blocks for name in _top_level_names(code, imported=False)}
        for module, names in _imports_from(blocks).items():
            if module in modules:
                lacking = [n for n in names if n not in defined[module] and n != "*"]
                if lacking:
                    out.append(_lacks(part, owners[module], module, lacking, defined[module]))
            elif _foreign(module):
                like = [
                    (n, module_of, d)
                    for n in names
                    if n not in own
                    for module_of, found in defined.items()
                    for d in found
                    if n == d or _alike(n, d)
                ]
                if like:
                    out.append(_misplaced(part, module, like, owners))
    return _once(out)


def _test_disagreements(parts: Sequence[Part], beside: Beside, limits: SandboxLimits) -> list[Disagreement]:
    """A code part whose tests, run against the other parts' modules it imports, fail (not for a missing package)."""
    out = []
    for part in parts:
        if not _python_code(part):
            continue
        modules, owners = beside[part.slot_id]
        blocks = [code for language, code in code_blocks(part.result.raw) if language in PYTHON_TAGS]
        used = [m for m in _imported_modules(blocks) if m in modules]
        if not used:
            continue
        ran = tests_against(part.result, modules, module_name(part.slot_id), limits)
        if ran.passed or "not installed in the sandbox" in ran.detail:
            continue
        owner = owners[used[0]]
        out.append(
            Disagreement(
                slot_id=part.slot_id,
                source_id=owner.slot_id,
                kind="python.tests",
                detail=f"its tests fail against the part {owner.title!r}: {ran.detail}",
                facts=f"These tests were run against the part {owner.title!r} (the module {used[0]}) and failed: "
                f"{ran.detail}. Its code:\n```python\n{modules[used[0]].strip()}\n```\nWork out each expected "
                "value from the task itself, not from this code: expect what the code returns where that is right, "
                "and keep the right value where the code returns another.",
            )
        )
    return out


def _example_disagreements(parts: Sequence[Part], beside: Beside, limits: SandboxLimits) -> list[Disagreement]:
    """A part whose example (``print(f(x))  # Output: y``) of another part's function prints else against it.

    multipart_set5_first: the bowling README's ``print(bowling_score(rolls))  # Output: 30`` was never run against
    the implementation part. Only calls of a function another part's module defines and this part does not; the
    part's blocks run after ``from <module> import <names>`` with the modules beside them
    (:func:`engine.slots.checks.printed.wrong_print_comments`).
    """
    out = []
    for part in parts:
        modules, owners = beside[part.slot_id]
        raw = _UNTAGGED.sub(_python_if_parses, part.result.raw)
        blocks = [code for language, code in code_blocks(raw) if language in PYTHON_TAGS]
        if not modules or not blocks:
            continue
        own = {name for code in blocks for name in _top_level_names(code, imported=False)}
        called = {
            n.func.id
            for tree in _trees(blocks)
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id not in own
        }
        taken = {
            module: sorted(called & set(_top_level_names(code, imported=False))) for module, code in modules.items()
        }
        taken = {module: names for module, names in taken.items() if names}
        if not taken:
            continue
        prefix = "\n".join(f"from {module} import {', '.join(names)}" for module, names in taken.items())
        wrong = wrong_print_comments([f"```python\n{prefix}\n```", raw], limits, modules)
        module = next(iter(taken))
        owner = owners[module]
        if wrong:
            lines = "\n".join(f"{w.line.strip()}  -> prints {w.printed}" for w in wrong)
            detail = f"its example {wrong[0].line.strip()!r} prints {wrong[0].printed} against the part "
            detail += f"{owner.title!r}, not {wrong[0].claimed}"
            said = f"These example lines were run against the part {owner.title!r} (the module {module}) and print "
            said += f"something else than their comments say:\n```text\n{lines}\n```"
            ask = "Show what this code gives for each example."
        elif raised := _raises_in(prefix, blocks, taken, modules, limits):
            detail = f"its example raises {raised} in the part {owner.title!r}"
            said = f"This part's example, run against the part {owner.title!r} (the module {module}), raises {raised}."
            ask = "Give an example the task's rules allow, and show what this code gives for it."
        else:
            continue
        facts = f"{said}\nIts code:\n```python\n{modules[module].strip()}\n```\n{ask}"
        out.append(Disagreement(part.slot_id, owner.slot_id, "python.examples", detail, facts))
    return out


def _raises_in(
    prefix: str,
    blocks: Sequence[str],
    taken: Mapping[str, list[str]],
    modules: Mapping[str, str],
    limits: SandboxLimits,
) -> str | None:
    """The exception the part's example blocks raise inside another part's module (its last line), or None.

    Only an exception whose traceback passes through that module's file: the example called the function and the
    function refused it (the bowling README's ten rolls, "two rolls in one frame cannot total more than 10"). An
    example that fails on its own (a name it never defined, a file it reads) says nothing about the other part.
    """
    calling = [code for code in blocks if any(re.search(rf"\b{n}\s*\(", code) for ns in taken.values() for n in ns)]
    if not calling:
        return None
    program = "\n".join([prefix, *calling])
    try:
        parse_module(program)
    except (SyntaxError, ValueError):
        return None
    files = {f"{name}.py": code for name, code in modules.items()}
    ran = run_python({**files, "example.py": program}, "example.py", limits=limits)
    if ran.ok or ran.timed_out or ran.violations:
        return None
    if not any(f'{name}.py", line' in ran.stderr for name in taken):
        return None
    last = ran.stderr.strip().splitlines()[-1] if ran.stderr.strip() else ""
    return last if re.match(r"^\w+(?:Error|Exception)\b", last) else None


_DATA_FILE = re.compile(r"(?<![\w/.-])([\w-]+\.(json|ya?ml|csv|toml|ini|cfg|conf|env|txt))\b", re.I)
_DATA_TAGS = {
    "json": {"json"},
    "yaml": {"yaml", "yml"},
    "yml": {"yaml", "yml"},
    "csv": {"csv", "", "text"},
    "toml": {"toml"},
    "txt": {"", "text", "txt"},
}
"""The fence tags a data file's block may carry, by its extension (ini, cfg, conf, env: ``ini`` or none)."""


def _data_files(part: Part) -> dict[str, str]:
    """The data files a part writes: a file its title names (flags.json), as its first block of that format."""
    found: dict[str, str] = {}
    for name, extension in _DATA_FILE.findall(part.title):
        tags = _DATA_TAGS.get(extension.lower(), {"ini", "", "text", "conf", "cfg", "env"})
        block = next((code for language, code in code_blocks(part.result.raw) if language in tags), None)
        if block is not None:
            found.setdefault(name, block)
    return found


def _usage_disagreements(parts: Sequence[Part], beside: Beside, limits: SandboxLimits) -> list[Disagreement]:
    """A code part whose usage example, run with the data files other parts wrote, raises in its own code.

    mp5-feature-flags (multipart_set5_rules3): ``Flags('flags.json')`` then ``flags.is_enabled('new_checkout',
    'u-1001')``; alone the example stopped at the missing file (which ``python.usage`` leaves: a file the reader
    supplies), beside the data part's flags.json it raises the ``TypeError`` a reader gets (its ``is_enabled``
    takes ``flags`` as well). Only examples that name such a file: without one the slot's own check has run them.
    """
    files = {p.slot_id: _data_files(p) for p in parts}
    out = []
    for part in parts:
        if not _python_code(part):
            continue
        given = {name: text for p in parts if p.slot_id != part.slot_id for name, text in files[p.slot_id].items()}
        module, tests = module_code(part.result)
        if not given or not module:
            continue
        blocks = usage_blocks(part.result.raw, module, tests)
        # a title's first word is capitalised ("Flags.json in the repo"): the file goes by the example's spelling
        named = {m.group(0): name for name in given for b in blocks for m in re.finditer(re.escape(name), b, re.I)}
        blocks = [b for b in blocks if any(n in b for n in named)]
        if not blocks:
            continue
        modules, _ = beside[part.slot_id]
        python = {f"{name}.py": code for name, code in modules.items()}
        data = {spelt: given[name] for spelt, name in named.items()}
        stubs = third_party_imports([module, *blocks, *modules.values()], set(modules))
        raised = raising_usage(module, blocks, limits, beside={**python, **data}, stubs=stubs)
        if raised is None:
            continue
        used = next(iter(named))
        owner = next(p for p in parts if named[used] in files[p.slot_id])
        detail = f"its usage example {raised.line!r}, run with {used} of the part {owner.title!r}, "
        detail += f"raises {raised.error}"
        facts = (
            f"This part's usage example was run against its own code, with the file {used} that the part "
            f"{owner.title!r} wrote beside it, and the line {raised.line!r} raises {raised.error}. Make the code and "
            "its example agree: call each function with the parameters it is defined with, as the task names them."
        )
        out.append(Disagreement(part.slot_id, owner.slot_id, "python.usage", detail, facts))
    return out


_UNTAGGED = re.compile(r"(?m)^([ \t]*)```[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.S)
"""A fenced block with no language: a README's example often is (the bowling README's was)."""


def _python_if_parses(block: re.Match[str]) -> str:
    """The block tagged as Python when it parses as Python with a call in it, else as it was."""
    try:
        tree = parse_module(block.group(2))
    except (SyntaxError, ValueError):
        return block.group(0)
    if not any(isinstance(n, ast.Call) for n in ast.walk(tree)):
        return block.group(0)
    return f"{block.group(1)}```python\n{block.group(2)}{block.group(1)}```"


def _imported_modules(blocks: Sequence[str]) -> list[str]:
    """The top-level modules the blocks import: those of ``from m import ...`` first, then of ``import m``."""
    taken: dict[str, None] = {}
    plain: dict[str, None] = {}
    for tree in _trees(blocks):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                taken[node.module.partition(".")[0]] = None
            elif isinstance(node, ast.Import):
                plain.update({a.name.partition(".")[0]: None for a in node.names})
    return list({**taken, **plain})


def _trees(blocks: Sequence[str]) -> list[ast.Module]:
    """The blocks that parse, parsed (the slot's own check, ``python.parses``, answers for the others)."""
    trees = []
    for code in blocks:
        try:
            trees.append(parse_module(code))
        except SyntaxError:
            continue
    return trees


def _owner(parts: Sequence[Part], code: str) -> Part:
    """The part whose delivered module is ``code``."""
    return next(p for p in parts if module_code(p.result)[0] == code)


def _top_level_names(code: str, imported: bool = True) -> dict[str, str]:
    """The names a module defines at its top level, each with its signature line.

    Functions, classes and assignments; with ``imported``, the names it imports too.
    """
    try:
        tree = parse_module(code)
    except SyntaxError:
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = f"def {node.name}({ast.unparse(node.args)})"
        elif isinstance(node, ast.ClassDef):
            found[node.name] = f"class {node.name}"
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update({t.id: t.id for t in targets if isinstance(t, ast.Name)})
        elif imported and isinstance(node, ast.Import | ast.ImportFrom):
            found.update({(a.asname or a.name).partition(".")[0]: a.name for a in node.names})
    return found


def _imports_from(blocks: Sequence[str]) -> dict[str, list[str]]:
    """The names the ``from module import ...`` of the blocks take, by top-level module (relative ones left out)."""
    found: dict[str, list[str]] = {}
    for tree in _trees(blocks):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = found.setdefault(node.module.partition(".")[0], [])
                names.extend(a.name for a in node.names if a.name not in names)
    return found


def _foreign(module: str) -> bool:
    """A module neither the standard library nor installed where the checks run (the sandbox's Python)."""
    if module in sys.stdlib_module_names:
        return False
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _words(name: str) -> set[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return {w for w in spaced.lower().split("_") if w}


def _alike(imported: str, defined: str) -> bool:
    """Two names that share two words or more, at least half of the longer's words.

    ``calculate_income_tax`` and ``compute_income_tax`` are alike; one word alone (``Flask``) is never enough.
    """
    a, b = _words(imported), _words(defined)
    shared = a & b
    return len(shared) >= 2 and 2 * len(shared) >= max(len(a), len(b))


def _lacks(part: Part, owner: Part, module: str, lacking: list[str], defined: Mapping[str, str]) -> Disagreement:
    listed = [s for n, s in defined.items() if not n.startswith("_")]
    return Disagreement(
        slot_id=part.slot_id,
        source_id=owner.slot_id,
        kind="python.imports",
        detail=f"imports {', '.join(lacking)} from {module}, the part {owner.title!r}, which does not define "
        f"{'it' if len(lacking) == 1 else 'them'}",
        facts=f"The part {owner.title!r} is the module {module}; it defines only these names, so import and use "
        f"these:\n```python\n" + "\n".join(listed) + "\n```",
    )


def _misplaced(part: Part, module: str, like: list[tuple[str, str, str]], owners: Mapping[str, Part]) -> Disagreement:
    imported, module_of, name = like[0]
    owner = owners[module_of]
    said = f"{name} from {module_of}" if name == imported else f"{name} (not {imported}) from {module_of}"
    return Disagreement(
        slot_id=part.slot_id,
        source_id=owner.slot_id,
        kind="python.imports",
        detail=f"imports {imported} from {module}, which no part delivers; the part {owner.title!r} defines {name}",
        facts=f"The part {owner.title!r} is the module {module_of} of this document; it is not {module}. Import "
        f"{said}: `from {module_of} import {name}`, and use it by that name.",
    )


# ---------------------------------------------------------------- figures


def _figure_disagreements(parts: Sequence[Part], figures: TaskFigures, task: str) -> list[Disagreement]:
    out = []
    for part in parts:
        wrong = stated_otherwise(part.result.raw, figures, task)
        if wrong:
            said = ", ".join(f"{f.name} {stated:,.2f} (computed {f.value:,.2f})" for f, stated in wrong)
            out.append(
                Disagreement(
                    slot_id=part.slot_id,
                    source_id="figures",
                    kind="figures",
                    detail=f"states {said}",
                    facts=figures_constraint(figures),
                )
            )
    return out


def _named_disagreements(parts: Sequence[Part], figures: TaskFigures | None) -> list[Disagreement]:
    """A part that gives a named quantity another value than the first part to give it one.

    A quantity a program computed for the task is left to :func:`_figure_disagreements`: the program, not the
    first part, says what its value is.
    """
    computed = {w for f in (figures.figures if figures is not None else []) for w in norm(f.name).split()}
    first: dict[tuple[str, str], tuple[Part, Stated]] = {}
    out = []
    for part in parts:
        for stated in stated_values(part.result.raw):
            if set(stated.name.split()) <= computed:
                continue
            owner, given = first.setdefault((stated.name, stated.unit), (part, stated))
            if owner.slot_id != part.slot_id and not same_value(given, stated):
                out.append(
                    Disagreement(
                        slot_id=part.slot_id,
                        source_id=owner.slot_id,
                        kind="figures.named",
                        detail=f"gives the {stated.label} as {stated.shown} where part {owner.slot_id} gives "
                        f"{given.shown}",
                        facts=f'The part "{owner.title}" gives the {given.label} as {given.shown} '
                        f'("{given.line[:160]}"): state the same value.',
                    )
                )
    return _once(out)


def _once(found: list[Disagreement]) -> list[Disagreement]:
    """One disagreement per (slot, kind, detail): a block repeated in an answer is one finding."""
    seen: dict[tuple[str, str, str], Disagreement] = {}
    for d in found:
        seen.setdefault((d.slot_id, d.kind, d.detail), d)
    return list(seen.values())
