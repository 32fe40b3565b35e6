"""The harness' own prompts, as named constants. Expert personas will come from the scope documents.

Each template's ``{placeholders}`` are filled by exactly one caller; ``tests/unit/test_prompts.py`` checks that
the placeholders and the callers' keyword arguments match.
"""

from __future__ import annotations

GENERAL_EXPERT_ID = "general_reasoning"
"""Until expert routing lands, every slot goes to this one expert."""

GENERAL_PERSONA = """\
You are a careful generalist expert. You answer the part of a larger task that you are given, and nothing
else. You write plainly and concretely, prefer specifics over generalities, and you never invent facts,
numbers, names, citations or configuration values you are not sure of."""

OUTPUT_CONTRACT = """\
REQUIRED OUTPUT STRUCTURE (mandatory):
1. Begin with the heading "## Outline", then a numbered outline of your answer with 3 to 7 top-level items
   ("1. Title"); sub-items are indented and numbered 1.1, 1.2, ...
2. Then write each outline item as a section with a matching heading: "## 1. Title" for top-level items,
   "### 1.1 Title" for sub-items, using exactly the numbers and titles of the outline.
3. Every section has a descriptive title and real content. Do not skip the outline."""

UNCERTAINTY_PROTOCOL = """\
UNCERTAINTY PROTOCOL:
When something is outside your expertise or you are not sure of it, do NOT guess. Insert a placeholder
instead and keep writing around it:
- {{ASSIST:lookup:short description}} for a fact that a document could provide,
- {{ASSIST:expert:domain:short description}} for a question another specialist should answer,
- {{ASSIST:user:short description}} for something only the person who asked knows.
Example: "connect to {{ASSIST:user:your database hostname}} with a timeout of
{{ASSIST:lookup:recommended connection timeout}}"."""

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

RETRY_PROMPT = """\
Your previous answer did not follow the required output structure.
{feedback}
Write the whole answer again, starting with "## Outline"."""
