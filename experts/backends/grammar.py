"""GBNF grammars that hold expert output to its format: the output contract, adaptation plans, consult answers.

:func:`outline_grammar` shapes a first answer (``## Outline`` with numbered items, then exactly as many numbered
sections); its first line, a GBNF comment, is the follow-outline marker on which the llama backend switches to
:func:`sections_grammar` once the outline is written, so sections repeat the outline's numbers and titles.
:func:`fixed_outline_grammar` forces a given outline for a retry; :func:`adaptation_grammar` and
:data:`CONSULT_GRAMMAR` hold plans and consult answers. Everything is bounded, so ``max_tokens`` bounds the cost
(docs/decisions/answers.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "CONSULT_ANSWER_CHARS",
    "CONSULT_GRAMMAR",
    "FOLLOW_OUTLINE_MARKER",
    "OUTLINE_GRAMMAR",
    "adaptation_grammar",
    "fixed_outline_grammar",
    "follow_outline_bounds",
    "outline_grammar",
    "sections_grammar",
]

FOLLOW_OUTLINE_MARKER = "# coe:follow-outline"
"""First line of a grammar whose sections may be replaced by :func:`sections_grammar` once the outline is
written; it carries the text bounds for it (``max_line_chars=300 max_block_lines=4``, and for other layouts
``max_code_lines=...`` and ``code_first=python``)."""

_MAX_LABEL = 9
_MAX_CODE_LINES = 40
_NOTE_CODE_LINES = 24
_NOTE_LINE_CHARS = 240
"""Longest line of the note after a code deliverable's module (a usage line, not an essay)."""
_MAX_INDENT = 24
_LANGUAGE = re.compile(r"^[a-z0-9_+#.-]{1,20}$")


def outline_grammar(
    *,
    min_items: int = 3,
    max_items: int = 7,
    max_sub_items: int = 4,
    max_title_chars: int = 80,
    max_line_chars: int = 300,
    max_block_lines: int = 4,
    max_code_lines: int = _MAX_CODE_LINES,
    code_first: str | None = None,
    follow_outline: bool = True,
    first_title: str | None = None,
) -> str:
    """Build the GBNF grammar of the outline contract, for a first answer.

    Args:
        min_items: Fewest top-level outline items (and sections).
        max_items: Most top-level outline items (and sections); at most 9.
        max_sub_items: Most sub-items under one outline item, and most ``### k.j`` sub-sections in one
            section; at most 9. 0 allows neither (a flat outline, easier for very small models).
        max_title_chars: Longest title, in characters.
        max_line_chars: Longest line of text, in characters (a longer one is broken onto the next line).
        max_block_lines: Most non-blank lines of text under one heading (``##`` or ``###``).
        max_code_lines: Most lines in one fenced code block.
        code_first: A language (``python``, ``sql``): section 1 is then exactly one fenced code block in it and
            nothing else (the whole module of a code deliverable); None: section 1 is text like the others.
        follow_outline: Start with the :data:`FOLLOW_OUTLINE_MARKER` comment, so that a backend that
            supports it constrains the sections to the outline just written (see :func:`sections_grammar`).
        first_title: The title of outline item 1 (and so of section 1), written for the model; None: the
            model writes it.

    Returns:
        The grammar text (start rule ``root``), for llama.cpp or any GBNF consumer.

    Raises:
        ValueError: If a bound is out of range.
    """
    if not 1 <= min_items <= max_items <= _MAX_LABEL:
        raise ValueError(f"need 1 <= min_items <= max_items <= {_MAX_LABEL}, got {min_items}, {max_items}")
    if not 0 <= max_sub_items <= _MAX_LABEL:
        raise ValueError(f"max_sub_items must be 0..{_MAX_LABEL}, got {max_sub_items}")

    if code_first is not None and not _LANGUAGE.match(code_first):
        raise ValueError(f"code_first must be a language name such as python, got {code_first!r}")
    rules: list[str] = []
    if follow_outline:
        extra = "" if max_code_lines == _MAX_CODE_LINES else f" max_code_lines={max_code_lines}"
        extra += f" code_first={code_first}" if code_first else ""
        rules.append(
            f"{FOLLOW_OUTLINE_MARKER} max_line_chars={max_line_chars} max_block_lines={max_block_lines}{extra}"
        )
    given = _clean_title(first_title, max_title_chars) if first_title else ""  # "**" leaves no title to give
    rules.extend(_contract_outline_rules(min_items, max_items, max_sub_items, given))
    rules.extend(_contract_section_rules(max_items, max_sub_items, code_first))
    # Titles: no leading blank or '#', no Markdown emphasis, no leading number label ("1.1 Title", "2. x"),
    # while "3D printing" or "2024 budget" are fine.
    rules.append(f"title ::= title-start [^\\n*]{{0,{max_title_chars - 1}}}")
    rules.append("title-start ::= [^\\n\\t #*0-9] | [0-9]{1,4} [^.0-9\\n\\t*]")
    rules.extend(_text_rules(max_line_chars, max_block_lines, max_code_lines, code_first))
    return "\n".join(rules) + "\n"


def _contract_outline_rules(min_items: int, max_items: int, max_sub_items: int, given: str) -> list[str]:
    """The root and the outline items; item 1's title is ``given`` (empty: the model writes it).

    Items 1..min_items are required, the rest nest as options, and the number of items written decides the
    number of sections that must follow.
    """
    tail = f'"\\n" sections-{max_items}'
    for n in range(max_items, min_items, -1):
        tail = f'"\\n" sections-{n - 1} | item-{n} ( {tail} )'
    required = " ".join(f"item-{k}" for k in range(1, min_items + 1))
    rules = [f'root ::= "## Outline\\n" {required} ( {tail} )']
    for k in range(1, max_items + 1):
        # Optional, correctly numbered sub-items: "   k.1 ...", then "   k.2 ...", ...
        subs = ""
        for j in range(max_sub_items, 0, -1):
            subs = f'( "   {k}.{j} " title "\\n"{f" {subs}" if subs else ""} )?'
        title = _literal(given) if k == 1 and given else "title"
        rules.append(f'item-{k} ::= "{k}. " {title} "\\n"' + (f" {subs}" if subs else ""))
    for n in range(min_items, max_items + 1):
        rules.append(f"sections-{n} ::= " + " ".join(f"section-{k}" for k in range(1, n + 1)))
    return rules


def _contract_section_rules(max_items: int, max_sub_items: int, code_first: str | None) -> list[str]:
    """The sections: each its heading, then text, sub-sections (### k.1, k.2, ... in order), or both.

    In a code deliverable, section 1 is exactly one code block and the others are short notes.
    """
    rules: list[str] = []
    for k in range(1, max_items + 1):
        lead = '"\\n" ' if k > 1 else ""
        body = f"block sub-{k}-1? | sub-{k}-1" if max_sub_items else "block"
        if code_first:  # a code deliverable: the code, then short notes (a usage line, a few tests)
            body = "code-first" if k == 1 else "note"
        rules.append(f'section-{k} ::= {lead}"## {k}. " title "\\n" ( {body} )')
        for j in range(1, max_sub_items + 1):
            after = f" sub-{k}-{j + 1}?" if j < max_sub_items else ""
            rules.append(f'sub-{k}-{j} ::= "\\n"? "### {k}.{j} " title "\\n" block{after}')
    return rules


def fixed_outline_grammar(
    outline: Sequence[tuple[str, str]],
    *,
    max_title_chars: int = 80,
    max_line_chars: int = 300,
    max_block_lines: int = 4,
) -> str:
    """Build a grammar that forces one exact outline and its matching section headings (for a retry).

    The outline is written back renumbered (1, 2, ... and 1.1, 1.2, ... in the order given), followed by a
    ``## k. Title`` section for every item and a ``### k.j Title`` sub-section for every sub-item, with the
    same titles; only the text under the headings is generated.

    Args:
        outline: ``(label, title)`` pairs in order, e.g. ``[("1", "Setup"), ("1.1", "Install"), ("2", ...)]``
            (``SlotResult.outline`` as pairs). The label's depth (``1`` or ``1.1``) decides the level; its
            numbers are not trusted. Titles are cleaned (whitespace collapsed, ``*`` and leading ``#`` dropped) and
            shortened to ``max_title_chars``.
        max_title_chars: Longest title kept, in characters.
        max_line_chars: Longest line of text, in characters.
        max_block_lines: Most non-blank lines of text under one heading.

    Returns:
        The grammar text (start rule ``root``).

    Raises:
        ValueError: If the outline is empty, does not start with a top-level item, goes deeper than two
            levels, has more than 9 items on a level, or has an empty title.
    """
    tree: list[tuple[str, list[str]]] = []
    for label, raw_title in outline:
        title = _clean_title(raw_title, max_title_chars)
        if not title:
            raise ValueError(f"outline item {label!r} has an empty title")
        depth = label.strip().rstrip(".").count(".") + 1
        if depth == 1:
            tree.append((title, []))
        elif depth == 2 and tree:
            tree[-1][1].append(title)
        else:
            raise ValueError(f"outline item {label!r}: only 1 and 1.1 levels, under a top-level item, are allowed")
    if not tree:
        raise ValueError("the outline is empty")
    if len(tree) > _MAX_LABEL or any(len(subs) > _MAX_LABEL for _, subs in tree):
        raise ValueError(f"at most {_MAX_LABEL} items on each level of the outline")

    lines = ["## Outline"]
    for k, (title, subs) in enumerate(tree, start=1):
        lines.append(f"{k}. {title}")
        lines.extend(f"   {k}.{j} {sub}" for j, sub in enumerate(subs, start=1))
    outline_text = "\n".join(lines) + "\n\n"
    rules = [f"root ::= {_literal(outline_text)} sections"]
    rules.extend(_section_rules(tree))
    rules.extend(_text_rules(max_line_chars, max_block_lines))
    return "\n".join(rules) + "\n"


def sections_grammar(
    outline_text: str,
    *,
    max_line_chars: int = 300,
    max_block_lines: int = 4,
    max_code_lines: int = _MAX_CODE_LINES,
    code_first: str | None = None,
) -> str | None:
    """Build the grammar of the sections that follow an outline written under :func:`outline_grammar`.

    Args:
        outline_text: The answer so far: ``## Outline``, the numbered items and sub-items, and the blank line
            that ends the outline.
        max_line_chars: Longest line of text, in characters.
        max_block_lines: Most non-blank lines of text under one heading.
        max_code_lines: Most lines in one fenced code block.
        code_first: Section 1 is exactly one code block in this language (see :func:`outline_grammar`).

    Returns:
        A grammar (start rule ``root``) for the rest of the answer: ``## 1. <item 1's title>`` and its text,
        a ``### 1.j`` sub-section for each of its sub-items, and so on; titles exactly as in the outline.
        None if ``outline_text`` is not an outline in that form.
    """
    lines = outline_text.rstrip("\n").split("\n")
    if not lines or lines[0] != "## Outline":
        return None
    tree: list[tuple[str, list[str]]] = []
    for line in lines[1:]:
        top, sub = _OUTLINE_ITEM.fullmatch(line), _OUTLINE_SUB.fullmatch(line)
        if top and int(top.group(1)) == len(tree) + 1:
            tree.append((top.group(2).rstrip(), []))
        elif sub and tree and int(sub.group(1)) == len(tree) and int(sub.group(2)) == len(tree[-1][1]) + 1:
            tree[-1][1].append(sub.group(3).rstrip())
        else:
            return None
    if not tree or not all(title for title, _ in tree):
        return None
    rules = [
        "root ::= sections",
        *_section_rules(tree, code_first=code_first is not None),
        *_text_rules(max_line_chars, max_block_lines, max_code_lines, code_first),
    ]
    return "\n".join(rules) + "\n"


def follow_outline_bounds(grammar: str) -> dict[str, Any] | None:
    """The text bounds carried by a grammar's follow-outline marker, or None if it has none.

    Args:
        grammar: A grammar's text.

    Returns:
        The keyword arguments for :func:`sections_grammar` the marker names (``max_line_chars``,
        ``max_block_lines``, and where set ``max_code_lines`` and ``code_first``), or None.
    """
    first, _, _ = grammar.partition("\n")
    if not first.startswith(FOLLOW_OUTLINE_MARKER + " ") and first != FOLLOW_OUTLINE_MARKER:
        return None
    bounds = dict(_BOUND.findall(first))
    out: dict[str, Any] = {
        key: int(bounds[key]) for key in ("max_line_chars", "max_block_lines", "max_code_lines") if key in bounds
    }
    if "code_first" in bounds and _LANGUAGE.match(bounds["code_first"]):
        out["code_first"] = bounds["code_first"]
    return out


# --- internals -------------------------------------------------------------------------------------------


def _text_rules(
    max_line_chars: int, max_block_lines: int, max_code_lines: int = _MAX_CODE_LINES, code_first: str | None = None
) -> list[str]:
    if max_line_chars < 2 or max_block_lines < 1 or max_code_lines < 1:
        raise ValueError("max_line_chars must be >= 2, max_block_lines and max_code_lines >= 1")
    rest = f"[^\\n]{{0,{max_line_chars - 1}}}"
    first = (
        [
            # The first section of a code deliverable: one block in that language, at least one line, nothing else;
            # after it only a short note: at most two usage lines (240 characters each) or small code blocks.
            f'code-first ::= "```{code_first}\\n" code-line{{1,{max_code_lines}}} "```\\n"',
            'note ::= note-chunk ( "\\n"? note-chunk ){0,1}',
            "note-chunk ::= note-line | note-code",
            f'note-line ::= [ \\t]{{0,{_MAX_INDENT}}} line-start [^\\n]{{0,{_NOTE_LINE_CHARS - 1}}} "\\n"',
            f'note-code ::= "```" [a-zA-Z0-9_+.-]{{0,20}} "\\n" code-line{{0,{_NOTE_CODE_LINES}}} "```\\n"',
        ]
        if code_first
        else []
    )
    return [
        *first,
        # Text under a heading: 1..max_block_lines lines or fenced code blocks, single blank lines between
        # them (paragraphs).
        f'block ::= chunk ( "\\n"? chunk ){{0,{max_block_lines - 1}}}',
        "chunk ::= text-line | code-block",
        # A text line may not start (after any indentation) with "##", so "## " and "### " only appear through
        # the heading rules, which bounds the sections; nor with "# " and a digit, which a reader would take
        # for a numbered heading; nor with a code fence (``` or ~~~), so fences come in closed pairs. Code
        # comments ("#include", "# note") and any other text, placeholders included, are allowed.
        f'text-line ::= [ \\t]{{0,{_MAX_INDENT}}} line-start {rest} "\\n"',
        'line-start ::= [^ \\t#`~\\n] | "#" [^# \\n] | "# " [^0-9# \\n] | "`" [^`\\n] | "``" [^`\\n] '
        '| "~" [^~\\n] | "~~" [^~\\n]',
        # A fenced code block, always closed; inside it anything goes except a line starting with ```. It may be
        # indented, as under a list item ("1. Install Django:" then "   ```bash"): without that, a model that
        # wanted a command under a step wrote it as LaTeX ("\[ pip install django") or as bare lines.
        f'code-block ::= [ \\t]{{0,{_MAX_INDENT}}} "```" [a-zA-Z0-9_+.-]{{0,20}} "\\n" code-line{{0,{max_code_lines}}} '
        f'[ \\t]{{0,{_MAX_INDENT}}} "```\\n"',
        f'code-line ::= [ \\t]{{0,{_MAX_INDENT}}} ( code-start {rest} )? "\\n"',
        'code-start ::= [^ \\t`\\n] | "`" [^`\\n] | "``" [^`\\n]',
    ]


_SPACES = re.compile(r"\s+")
_OUTLINE_ITEM = re.compile(r"(\d{1,2})\. (.+)")
_OUTLINE_SUB = re.compile(r"   (\d{1,2})\.(\d{1,2}) (.+)")
_BOUND = re.compile(r"(\w+)=([\w+#.-]+)")


def _section_rules(tree: Sequence[tuple[str, Sequence[str]]], *, code_first: bool = False) -> list[str]:
    """``sections`` and one rule per section, with literal headings for these titles and sub-titles."""
    rules = ["sections ::= " + " ".join(f"section-{k}" for k in range(1, len(tree) + 1))]
    for k, (title, subs) in enumerate(tree, start=1):
        heading = _literal(("\n" if k > 1 else "") + f"## {k}. {title}\n")
        if code_first:  # a code deliverable: the code, then short notes (a usage line, a few tests)
            rules.append(f"section-{k} ::= {heading} " + ("code-first" if k == 1 else "note"))
            continue
        parts = [f'"\\n"? {_literal(f"### {k}.{j} {sub}" + chr(10))} block' for j, sub in enumerate(subs, start=1)]
        # With sub-sections, the text before the first one is optional.
        rules.append(f"section-{k} ::= {heading} " + (f"block? {' '.join(parts)}" if parts else "block"))
    return rules


def _clean_title(title: str, max_chars: int) -> str:
    cleaned = _SPACES.sub(" ", title.replace("*", "")).strip().lstrip("#").strip()
    return cleaned[:max_chars].rstrip()


def _literal(text: str) -> str:
    """A GBNF string literal for ``text``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


OUTLINE_GRAMMAR: str = outline_grammar()
"""The default outline grammar: 3-7 items and sections, up to 4 sub-items (and sub-sections) each, at most 4
lines of text (or code blocks) under a heading, and the follow-outline marker.

Short blocks are deliberate: with Qwen2.5-Coder-0.5B and a 600-token budget, 8 lines a block let the first
sections eat the budget (answers cut off before the last section); 4 lines kept them complete."""


def adaptation_grammar(slot_ids: list[str], expert_ids: list[str], max_ops: int = 8) -> str:
    """GBNF for a template adaptation plan (see :mod:`state.adaptation`): slot and expert ids as alternatives.

    The shape is ``{"operations": [op, ...], "rationale": "..."}`` with every string bounded, so a small model
    cannot name a slot or expert that does not exist, nor run away inside a string.
    """

    def alternatives(values: list[str]) -> str:
        return " | ".join('"\\"' + v + '\\""' for v in values)

    last = max(len(slot_ids) - 1, 0)
    return f"""\
root ::= "{{" sp "\\"operations\\":" sp "[" sp ops? sp "]," sp "\\"rationale\\":" sp text200 sp "}}"
ops ::= op ("," sp op){{0,{max_ops - 1}}}
op ::= keep | remove | modify | add | reorder
opkey ::= "{{" sp "\\"op\\":" sp
slotkv ::= "\\"slot\\":" sp slot
titlekv ::= "\\"title\\":" sp text60
desckv ::= "\\"description\\":" sp text200
expertkv ::= "\\"expert\\":" sp expert
depskv ::= "\\"deps\\":" sp "[" (slot ("," sp slot){{0,2}})? "]"
keep ::= opkey "\\"KEEP\\"," sp slotkv sp "}}"
remove ::= opkey "\\"REMOVE\\"," sp slotkv sp "}}"
modify ::= opkey "\\"MODIFY\\"," sp slotkv "," sp titlekv "," sp desckv sp "}}"
add ::= opkey "\\"ADD\\"," sp "\\"id\\":" sp newid "," sp titlekv "," sp desckv "," sp expertkv "," sp depskv sp "}}"
reorder ::= opkey "\\"REORDER\\"," sp "\\"order\\":" sp "[" slot ("," sp slot){{0,{last}}} "]" sp "}}"
slot ::= {alternatives(slot_ids)}
expert ::= {alternatives(expert_ids)}
newid ::= "\\"" [a-z] [a-z0-9_]{{1,30}} "\\""
text60 ::= "\\"" char{{1,60}} "\\""
text200 ::= "\\"" char{{1,200}} "\\""
char ::= [^"\\\\\\n] | "\\\\" ["\\\\/nt]
sp ::= " "?
"""


CONSULT_ANSWER_CHARS = 400
"""Longest answer line a consulted expert may write (about two sentences)."""

CONSULT_GRAMMAR = f"""\
root ::= answer | unknown
answer ::= "ANSWER: " [^ \\n] [^\\n]{{0,{CONSULT_ANSWER_CHARS - 1}}}
unknown ::= "UNKNOWN"
"""
"""A consulted expert's answer: ``ANSWER: ...`` on one line, or UNKNOWN. The line may carry ``{{ASSIST:...}}``
placeholders (any character but a newline is allowed), so a consulted expert can still say what it does not
know instead of guessing."""
