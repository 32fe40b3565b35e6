"""Automated checks of a slot's answer, by what it delivers (the seed's "automated rewards").

Every answer gets the contract checks (:mod:`.contract`): it follows the output structure, it was not cut off, no
section is a stub, a duplicate or a copy of the task's title, it does not leak the prompt (its delimiters, its
example placeholders) and it does not copy the slots it references instead of doing its own part. Then, by
deliverable:

* **code** (:mod:`.code`) in Python: it parses; no function is a stub; it defines the functions the task names; it
  imports (runs) in the sandbox; the task's examples (:mod:`.examples`: ``>>>`` doctests, ``f(x) == y`` lines)
  pass. It runs beside the run's own modules it imports (a referenced code slot's, by its slot's name); a
  third-party package the sandbox's Python cannot import gets a stand-in, and a failure that touched one fails no
  hard check (``python.packages`` names the package, and the caveat says what was not checked). Soft: the doctests
  in its own docstrings and its own tests pass, and ``ruff`` finds no error. SQL parses
  with sqlglot in the task's dialect; YAML and JSON load; a shell script passes ``bash -n``; a Dockerfile starts
  with ``FROM``.
* **data**: the block parses as its language.
* The text beside code or data (the usage note) must not repeat itself either.
* Any answer: every Markdown table row has its header's cells, and no named quantity is given two values
  (:mod:`.quantities`: ``NPV = ... = -52.58`` and then "the NPV is -236.88").
* **prose**, **plan** and **table** (:mod:`.prose`): no degenerate repetition (a sentence three times, a line
  repeated in a run, a phrase looping); the answer does not speak as an AI model ("As an AI language model, I
  ...") instead of doing the work; hedges are counted as a signal.
* **table**: it holds a Markdown table.

Generated code only ever runs in :mod:`engine.slots.sandbox`. A hard check failing means the answer is wrong or unusable
as delivered; a soft one that it could be better. :func:`check_answer` (:mod:`.answer`) returns the checks and the
measured signals; :mod:`engine.slots.selection` turns them into a score.
"""

from engine.slots.checks.answer import check_answer, signals_of
from engine.slots.checks.check_context import CheckContext
from engine.slots.checks.code import (
    module_code,
    module_name,
    own_asserts_failed,
    python_modules,
    tests_against,
    third_party_imports,
)
from engine.slots.checks.contract import STUB, copies_task, duplicates_check, repeated_sections
from engine.slots.checks.examples import Examples, extract_examples
from engine.slots.checks.prose import (
    cut_unfinished_end,
    ending_check,
    repeated_line,
    repetition_check,
    repetition_found,
)
from engine.slots.checks.text import code_blocks, sentence_key, without_code

__all__ = [
    "STUB",
    "CheckContext",
    "Examples",
    "check_answer",
    "code_blocks",
    "copies_task",
    "cut_unfinished_end",
    "duplicates_check",
    "ending_check",
    "extract_examples",
    "module_code",
    "module_name",
    "python_modules",
    "repeated_sections",
    "repeated_line",
    "repetition_check",
    "repetition_found",
    "sentence_key",
    "signals_of",
    "own_asserts_failed",
    "tests_against",
    "third_party_imports",
    "without_code",
]
