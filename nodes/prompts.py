"""The harness' own prompts, as named constants. Expert personas come from the scope documents (experts.catalog).

Each template's ``{placeholders}`` are filled by exactly one caller; ``tests/unit/test_prompts.py`` checks that
the placeholders and the callers' keyword arguments match.
"""

from __future__ import annotations

OUTPUT_CONTRACT = """\
REQUIRED OUTPUT STRUCTURE (mandatory):
1. First write the line "## Outline". Under it, write 3 to 5 numbered lines ("1. ", "2. ", ...), each with a
   short title that you choose and that names one part of your answer. Indented sub-items numbered 1.1, 1.2
   are allowed only where a part really has sub-parts.
2. Then write one section per outline line: a heading made of "## ", the same number with a period, and the
   same title; then a short paragraph of content. A sub-item gets a "### " heading with its number (1.1).
3. Never skip the outline, never put it or a section heading inside a code block, and write nothing after
   the last section."""

UNCERTAINTY_PROTOCOL = """\
UNCERTAINTY PROTOCOL:
When something is outside your expertise or you are not sure of it, do NOT guess. Insert a placeholder
instead and keep writing around it:
- {{ASSIST:lookup:short description}} for a fact that a document could provide,
- {{ASSIST:expert:domain:short description}} for a question another specialist should answer,
- {{ASSIST:user:short description}} for something only the person who asked knows.
Example: "connect to {{ASSIST:user:your database hostname}} with a timeout of
{{ASSIST:lookup:recommended connection timeout}}"."""

CONSULT_PROTOCOL = """\
Answer in one line that starts with "ANSWER: " and holds at most two sentences with the fact asked for. Write
only what you are sure of. If you do not know it, or it depends on the person's own systems or organisation,
write only the word UNKNOWN. If a part of the answer belongs to another field, write
{{ASSIST:expert:domain:short description}} or {{ASSIST:lookup:short description}} in its place instead of
guessing."""

CONSULT_SYSTEM = """\
{persona}

A colleague, the {asker} expert, is writing a document and asks you one short question in your field.
{consult_protocol}"""

CONSULT_PROMPT = """\
Question ({domain}): {question}

Answer now with "ANSWER: ..." or UNKNOWN."""

SYSTEM_PROMPT = """\
{persona}

{output_contract}

{uncertainty_protocol}"""

SLOT_PROMPT = """\
The overall task (for context only; answer only your part):
{task}

Your part: {title}
{description}
{expected_outputs}{constraints}{references}
Write your part now, following the required output structure."""

EXPECTED_OUTPUTS_BLOCK = "\nYour answer must include:\n{items}\n"

CONSTRAINTS_BLOCK = "\nConstraints that apply to the whole task:\n{items}\n"

REFERENCES_BLOCK = """
Finished work you may use (read-only; do not repeat it, build on it):
{items}
"""

REFERENCE_ITEM = """\
--- {title} ({view}) ---
{content}
--- end of {title} ---"""

DIRECT_SYSTEM = """\
You answer short, simple requests directly: a greeting, a definition, a conversion, a quick fact. Answer in one
to three sentences. If you are not sure of a fact, say so instead of guessing."""

ADAPT_SYSTEM = """\
You plan work. You adapt a plan template to a user's task by editing it, and you answer with JSON only.
Operations: KEEP a slot; REMOVE a slot the task does not need; MODIFY a slot's title and description so they
name the task's specifics; ADD a slot the task needs that the template lacks (with its expert and the
template slots it depends on); REORDER the slots. Keep what fits: a good adaptation changes few slots, at
most {max_ops} operations."""

ADAPT_PROMPT = """\
The task:
{task}

The template "{title}" ({pattern}); it may have {min_slots} to {max_slots} slots:
{slots}

Experts you may give an added slot: {experts}

Titles and descriptions you write must use the words of this task (its subject, names, numbers), not the
template's generic wording. Use only the slot ids listed above.

Answer with the JSON object for this task."""

ADAPT_SLOT_LINE = "- slot {id}: {title}. {description} [{expert}{deps}]"

ADAPT_RETRY = """\
That plan cannot be used:
{errors}

Answer again with a corrected JSON object."""

RETRY_PROMPT = """\
{feedback}

{output_contract}

Write the whole answer again, starting with "## Outline"."""
