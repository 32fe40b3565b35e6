"""Every check of one answer, by what it delivers, and its measured signals."""

from __future__ import annotations

import re

from engine.slots.checks.check_context import CheckContext
from engine.slots.checks.code import code_checks, loop_check
from engine.slots.checks.contract import contract_checks, copied_share
from engine.slots.checks.prose import (
    about_itself_check,
    command_examples_check,
    message_days_check,
    repetition_check,
    speaks_as_ai_check,
    table_check,
    table_rows_check,
)
from engine.slots.checks.quantities import one_value_check
from engine.slots.checks.text import WORD, norm, prose_unfenced, split_sentences, without_closed_code
from state.quality import CheckResult
from state.result import SlotResult

HEDGES = re.compile(
    r"\b(i am not sure|i'm not sure|not certain|i think|i believe|might be|may be|could be|probably|possibly|"
    r"it depends|as an ai|i cannot|i can't|consult (a|an|your) (professional|lawyer|doctor|expert))\b",
    re.I,
)


def check_answer(result: SlotResult, ctx: CheckContext) -> tuple[list[CheckResult], dict[str, float]]:
    """Every check of one answer, and its measured signals."""
    checks = contract_checks(result, ctx)
    kind = ctx.contract.deliverable
    if kind in ("code", "data"):
        checks += code_checks(result, ctx)
    elif kind == "table":
        checks.append(table_check(result))
    body = result.body_text()
    if kind in ("prose", "plan", "table"):
        checks.append(repetition_check(prose_unfenced(body), ctx.task))
        checks.append(speaks_as_ai_check(without_closed_code(body)))
        checks.append(about_itself_check(body))
    else:  # the note beside the code is read too: a looping note is as degenerate as looping prose
        checks.append(repetition_check(without_closed_code(body), ctx.task))
    checks.append(loop_check(body))  # and the code itself, in an answer of any kind
    checks.append(table_rows_check(body))  # and its tables, whatever it delivers
    checks.append(one_value_check(body))  # and its prose's figures: one value for each named quantity
    if (examples := command_examples_check(result.untitled_text(), ctx.asked or ctx.task)) is not None:
        checks.append(examples)  # "a usage section with curl examples" shows curl lines
    if ctx.contract.message and not ctx.part_of_plan:  # a message says the days its task names
        checks.append(message_days_check(body, ctx.asked or ctx.task))
    return checks, signals_of(result, ctx)


def signals_of(result: SlotResult, ctx: CheckContext) -> dict[str, float]:
    """Measured, not judged: words, sentences, the distinct-sentence ratio, hedges, copying of references."""
    text = result.body_text()
    sentences = [norm(s) for s in split_sentences(without_closed_code(text)) if len(s.split()) >= 3]
    return {
        "words": float(len(WORD.findall(text))),
        "sentences": float(len(sentences)),
        "distinct_sentences": round(len(set(sentences)) / len(sentences), 3) if sentences else 1.0,
        "hedges": float(len(HEDGES.findall(without_closed_code(text)))),
        "copied_from_references": round(copied_share(text, ctx.references), 3),
    }
