"""The output contract that fits a slot's deliverable: how many sections, what goes in them, how long it may be.

Every expert answers with ``## Outline``, numbered items, then matching numbered sections, but the structure
serves the deliverable (:data:`state.framework.Deliverable`), never the reverse:

* ``code``: one or two items. Section 1 is exactly one fenced code block holding the complete module (every
  import, every function in full); section 2, if any, is a short usage note or tests that use section 1's
  functions (they run after it) without defining them again. A one-function task is one code section.
* ``data``: the same with one JSON, YAML or CSV block.
* ``prose``: one to five parts sized to the work (one for a short piece, several for a long document), each with
  full paragraphs.
* ``plan``: two to seven steps or points, each a few lines or bullets.
* ``table``: one to four parts, each a Markdown table with at most a line of text.

A slot that does not declare its deliverable gets one from its expert and its text (:func:`infer_deliverable`):
the code experts deliver code in their language (but an explanation for readers who do not read code is prose),
a slot that asks for a table a table, for steps or a checklist a plan, and everything else prose. The grammar
(:meth:`Contract.grammar`) enforces the shape on backends that honour one; the parser and the checks
(:mod:`engine.slots.checks`) judge every answer against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from experts.backends.grammar import outline_grammar
from experts.routing.scoping import function_tested, function_to_complete
from state.framework import Deliverable, SlotSpec

__all__ = [
    "CONTRACTS",
    "EXPLAINS_CODE",
    "FICTION",
    "MESSAGE",
    "Contract",
    "contract_for",
    "contract_of",
    "deliverable_of",
    "infer_deliverable",
]

CODE_EXPERTS = {"python_coder": "python", "sql_specialist": "sql"}
"""Experts whose work is code, and its language."""

_DEVOPS_LANGUAGES = (
    (re.compile(r"\bdockerfile\b", re.I), "dockerfile"),
    (
        re.compile(
            r"\b(docker[- ]compose|compose file|kubernetes|k8s|manifest|helm|yaml|github actions|workflow)\b", re.I
        ),
        "yaml",
    ),
    (re.compile(r"\bterraform\b", re.I), "hcl"),
    (re.compile(r"\b(bash|shell script|shell|cron ?job|script)\b", re.I), "bash"),
)
_TABLE = re.compile(r"\b(table|matrix|side[- ]by[- ]side comparison)\b", re.I)
_PLAN = re.compile(
    r"\b(checklist|step[- ]by[- ]step|steps|plan|roadmap|timeline|runbook|procedure|to-?do list|list of|agenda)\b", re.I
)
_DATA = re.compile(r"\b(json|yaml|csv)\b", re.I)
_DATA_VERB = re.compile(r"\b(generate|produce|output|return|write|give me|create)\b[^.]{0,40}\b(json|yaml|csv)\b", re.I)
_PYTHON = re.compile(r"\b(python|def |function|class|script|module|pytest|unit tests?)\b", re.I)
_SQL = re.compile(r"\b(sql|query|queries|select|postgres|postgresql|mysql|sqlite|index(es)?|schema)\b", re.I)
_FOR_READERS = re.compile(
    r"\b(?:explain|describe|summari[sz]e|present|justify|communicate)\b[^.\n]{0,80}?\b(?:to|for)\s+"
    r"(?:the\s+|our\s+|your\s+|an?\s+)?(?:non[- ]?technical|finance|business|management|managers?|executives?|"
    r"stakeholders?|customers?|clients?|board|leadership|sales|marketing|legal|hr|patients?|parents?|beginners?)\b",
    re.I,
)
"""An explanation for readers who do not read code ("explain the change to the finance team")."""
ASKS_A_QUANTITY = re.compile(
    r"\b(?:how (?:much|many|long|far|fast|often)|calculate|compute|work out|what (?:clock )?time)\b"
    r"|\bin (?:minutes|hours|days|seconds)\b",
    re.I,
)
"""A task that asks for a quantity in so many words, whichever expert the router chose: "How long, in minutes, will
it take to download a 12.4 GB game over ... 75 Mbps?" (numeric_heldout2) went to the software architect, whose
answer divided megabytes by megabits and stated 2.81 minutes (right: 22.04), with no program to check it. "At what
clock time should it finish?" (a backup from 21:40 for 7 hours 55 minutes, numeric_heldout_rest) went to the
DevOps engineer, who stated 26:00 (right: 05:35)."""
_NAMES_CODE = re.compile(
    r"```|\b(?:functions?|scripts?|programs?|code|quer(?:y|ies)|sql|class(?:es)?|methods?|regex|api|endpoints?|"
    r"algorithms?|complexity|loops?|python|bash|shell|commands?|docker\w*|kubernetes|k8s|cron\w*|pipelines?)\b",
    re.I,
)
"""Words of a task about code: a quantity asked about code ("how long does this query take") is the code expert's."""
EXPLAINS_CODE = re.compile(
    r"\b(?:and|then)\s+(?:briefly\s+)?(?:explain|justify|describe)\s+"
    r"(?:why|how|it|them|this|that|(?:your|the|each|every)\s+(?:code|query|index|choice|choices|approach|logic|"
    r"design|steps?|line|reasoning|trade-?offs))\b",
    re.I,
)
"""A code task that asks for its own explanation ("write the index that helps it and explain why", "...and explain
how it works"): the same deliverable (the planner keeps it one part), explained in a section of its own."""
FICTION = re.compile(
    r"\b(?<!user )(?<!behind the )(?:stor(?:y|ies)|scenes?|poems?|haikus?|limericks?|sonnets?|verses?|slogans?|"
    r"taglines?|lyrics|songs?|fables?|fairy[- ]tales?|novels?|screenplays?|toasts?|jingles?)\b",
    re.I,
)
"""Creative writing ("the opening scene of a mystery novel", "five slogans for ..."; not "user stories"): its
prompt asks for invention and no placeholders (:data:`engine.prompts.UNCERTAINTY_PROTOCOL_FICTION`)."""
MESSAGE = re.compile(
    r"\b(?:write|draft|compose|prepare|send)\s+(?:me\s+)?(?:an?|the|my|our)\s+(?:[\w-]+\s+){0,3}?"
    r"(?:e-?mail|letter|message|reply|note|text)\b(?!\s+(?:template|format|parser|field)s?\b)",
    re.I,
)
"""A request for one message a person sends ("Draft a polite email to my landlord ..."): one section, the message
as it is sent. On the 0.5B the landlord email came back as four headed sections ("1: Introduction", "2: Overview
of the issue", "3: Steps to resolve the problem", "4: Contact information"), signed off twice, where the bare
1.5B wrote one email (2026-12-07; the review set's gen-email had headed sections too)."""
_EXPLANATION = re.compile(
    r"^\W*(?:(?:give|write|draft|provide|add|prepare)\s+(?:me\s+|us\s+)?)?(?:(?:an?|the|one)\s+)?"
    r"(?:(?:short|brief|plain|plain-english|one-paragraph|simple|clear)\s+)*(?:explanation|description)\b"
    r"|^\W*(?:explain|describe)\b",
    re.I,
)
"""A part that explains or describes (its first words): prose, whatever it explains ("a short explanation of how
the league table is worked out")."""
_DOCUMENTATION = re.compile(
    r"^\W*(?:(?:give|write|draft|provide|add|prepare|deliver)\s+(?:me\s+|us\s+)?)?(?:(?:an?|the|one)\s+)?"
    r"(?:(?:short|brief|plain|one-paragraph|simple|clear)\s+)*"
    r"(?:readme|usage\s+(?:section|notes?|guide|examples?)|user\s+guide|api\s+(?:description|reference))\b",
    re.I,
)
"""A part that documents the code for its readers (its first words): "a usage section with curl examples", "the API
description as a table of endpoints ...", "a README paragraph with one example". Whoever writes it, it is prose (a
table where it asks for one), with the commands and examples in blocks of their own: multipart_set5_first's link
shortener had its endpoint table and its curl lines written by the Python expert inside Python blocks, both failing
``python.parses``."""
_FILE_HEAD = re.compile(
    r"^\W*(?:(?:give|write|draft|provide|add|prepare|deliver|create)\s+(?:me\s+|us\s+)?)?(?:(?:an?|the|one|our)\s+)?"
    r"(?:(?!(?:that|which|to|from|for|with|of|reads?|loads?|parses?|script|module|function|class|program|tool|cli)\b)"
    r"[\w-]+\s+){0,3}?(?:[\w./-]*/)?[\w-]+\.(?P<ext>json|ya?ml|csv|toml|ini|conf|cfg|env|service|timer|socket)\b",
    re.I,
)
"""A part headed by the data or configuration file it is ("a flags.json in the repo", "systemd units
upload-purge.service ... and upload-purge.timer", "config /etc/upload-purge.conf ..."): written in that file's
language, whoever writes it. multipart_set5_first: the Python expert wrote flags.json as a Python dict (``True``),
which no JSON loader reads, and the DevOps expert's units were held to bash."""
_FILE_LANGUAGES: dict[str, tuple[Deliverable, str]] = {
    "json": ("data", "json"),
    "yaml": ("data", "yaml"),
    "yml": ("data", "yaml"),
    "csv": ("data", "csv"),
    "toml": ("code", "toml"),
    **dict.fromkeys(("ini", "conf", "cfg", "env", "service", "timer", "socket"), ("code", "ini")),
}
_MAKES_CODE = re.compile(
    r"\b(?:write|rewrite|create|implement|build|add|generate|refactor|fix|optimi[sz]e|propose|code)\b", re.I
)


def infer_deliverable(text: str, expert: str | None) -> tuple[Deliverable, str | None]:
    """What a slot delivers and in which language, from its expert and its text (title, description, outputs).

    Args:
        text: The slot's title, description and expected outputs (or the whole task of a one-slot run).
        expert: The expert that runs it, when known.

    Returns:
        ``(deliverable, language)``; the language is set for code and data only.
    """
    if function_to_complete(text) is not None:  # whoever runs it, the deliverable is that function
        return "code", "python"
    if _FOR_READERS.search(text) and not _MAKES_CODE.search(text):
        # a plan's part that explains the work to people who do not read code is prose, whoever writes it (a
        # slow-query plan's "Explain the change to the finance team" went to the SQL expert, and its paragraphs
        # came back inside a SQL block, written to a .sql file)
        return "prose", None
    if ASKS_A_QUANTITY.search(text) and not _MAKES_CODE.search(text) and not _NAMES_CODE.search(text):
        # a quantity asked with no code in sight is a number and its working, whoever the router chose: "How
        # long, in minutes, will it take to download a 12.4 GB file over a 75 Mbps connection?" went to the
        # Python expert, whose answer was a function with a bits-for-bytes bug and no number (2026-11-29)
        return "prose", None
    if _DOCUMENTATION.match(text):
        return ("table" if _TABLE.search(text) else "prose"), None
    if file := _FILE_HEAD.match(text):
        return _FILE_LANGUAGES[file.group("ext").lower()]
    if expert in CODE_EXPERTS:
        language = CODE_EXPERTS[expert]
        if language == "sql" and _PYTHON.search(text) and not _SQL.search(text):
            language = "python"
        return "code", language
    if expert == "devops_engineer":
        for pattern, language in _DEVOPS_LANGUAGES:
            if pattern.search(text):
                return "code", language
        return "plan", None
    data = _DATA_VERB.search(text)
    if data is not None:
        return "data", data.group(2).lower()
    if _EXPLANATION.match(text):
        # what the words explain is its subject, not its form: "Give a short explanation for the club secretary of
        # how the table is worked out" was held to a Markdown table, and drew six answers (multipart_set5_first)
        return "prose", None
    if _TABLE.search(text):
        return "table", None
    if _PLAN.search(text) and expert not in ("creative_writer", "legal_drafting"):
        return "plan", None
    return "prose", None


@dataclass(frozen=True)
class Contract:
    """The output structure of one deliverable, and the answer budget that fits it."""

    deliverable: Deliverable
    language: str | None
    min_items: int
    max_items: int
    max_sub_items: int
    max_block_lines: int
    """Most lines (or code blocks) of text under one heading."""
    max_line_chars: int
    max_code_lines: int
    max_tokens: int
    """The answer budget when neither the person nor the expert's scope sets one."""
    function: str | None = None
    """The one function the task hands over to complete (code only): the deliverable is that function."""
    explained: bool = False
    """Code whose task also asks to explain it: section 2 is that explanation, required (:data:`EXPLAINS_CODE`)."""
    fiction: bool = False
    """Prose that is creative writing (:data:`FICTION`): invented, never a placeholder."""
    message: bool = False
    """Prose that is one message a person sends (:data:`MESSAGE`): one section, the message itself."""

    @property
    def code_first(self) -> bool:
        """Section 1 is exactly one code block (code and data)."""
        return self.deliverable in ("code", "data")

    def grammar(self, first_title: str | None = None) -> str:
        """The GBNF grammar of this contract (follows the outline once written, on backends that can).

        ``first_title``: the title of the answer's first part, written for the model (a plan's slot: its own).
        """
        return outline_grammar(
            first_title=first_title,
            min_items=self.min_items,
            max_items=self.max_items,
            max_sub_items=self.max_sub_items,
            max_block_lines=self.max_block_lines,
            max_line_chars=self.max_line_chars,
            max_code_lines=self.max_code_lines,
            code_first=(self.language or "text") if self.code_first else None,
        )

    def with_language(self, language: str | None) -> Contract:
        """The same contract for another language (code and data)."""
        return replace(self, language=language)


CONTRACTS: dict[Deliverable, Contract] = {
    "code": Contract("code", "python", 1, 2, 0, 3, 400, 160, 900),
    "data": Contract("data", "json", 1, 2, 0, 3, 400, 160, 800),
    "prose": Contract("prose", None, 1, 5, 3, 12, 1500, 40, 900),
    "plan": Contract("plan", None, 2, 7, 4, 12, 600, 40, 900),
    "table": Contract("table", None, 1, 4, 0, 16, 600, 40, 800),
}
"""The contract of each deliverable (code and data take the slot's language). Lines are long: a model writes a
paragraph as one line, and a grammar that breaks it mid-sentence invites it to stop there. A plan's step may hold
a list of sub-steps, each with its command: 12 lines or code blocks under one heading (8 ended a setup guide's
steps before their commands). Prose gets 12 too: of the sections in the saved documents, 169 hold exactly 8 lines
against 55 with 7 and 12 with 9, the grammar's cut (a tip-out's working stopped after "- Ana: 36 hours"); a section
that still fills its bound fails ``contract.bound``."""


def deliverable_of(spec: SlotSpec, expert: str | None) -> tuple[Deliverable, str | None]:
    """A slot's deliverable and language: the ones it declares, else the ones inferred from its expert and text."""
    text = " ".join([spec.title, spec.description, *spec.expected_outputs])
    if spec.deliverable is None:
        return infer_deliverable(text, expert)
    language = spec.language
    if language is None and spec.deliverable in ("code", "data"):
        language = infer_deliverable(text, expert)[1] or CONTRACTS[spec.deliverable].language
    return spec.deliverable, language


def contract_of(deliverable: Deliverable, language: str | None = None) -> Contract:
    """The contract of a deliverable (code and data in ``language``, else their default language)."""
    contract = CONTRACTS[deliverable]
    return contract.with_language(language or contract.language) if contract.code_first else contract


def contract_for(spec: SlotSpec, expert: str | None) -> Contract:
    """The contract of a slot: its declared deliverable and language, else the ones inferred from its text.

    A Python slot whose text hands over one function to complete, or asks for one function and gives its tests
    (:func:`~experts.routing.scoping.function_tested`), gets one item only: the code, no note (the person asked
    for that function, nothing more). A code slot whose text asks to explain the code (:data:`EXPLAINS_CODE`) gets
    two: the code, and the explanation, required.
    """
    contract = contract_of(*deliverable_of(spec, expert))
    asked = " ".join([spec.title, spec.description])
    name = None
    if contract.language == "python":
        name = function_to_complete(spec.description) or function_tested(spec.description)
    if contract.deliverable == "code" and name is not None:
        return replace(contract, max_items=1, function=name)
    if contract.deliverable == "code" and EXPLAINS_CODE.search(asked):
        return replace(contract, min_items=2, max_items=2, max_block_lines=6, max_line_chars=600, explained=True)
    if contract.deliverable == "prose" and FICTION.search(asked):
        contract = replace(contract, fiction=True)
    if contract.deliverable == "prose" and MESSAGE.search(asked):
        contract = replace(contract, max_items=1, max_sub_items=0, max_block_lines=16, message=True)
    return contract
