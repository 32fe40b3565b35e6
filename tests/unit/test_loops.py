"""A looping answer is stopped while it is written (engine.slots.loop_watch), by every backend that streams, and
the slot
goes on to its next candidate as if the loop had run to its budget, only sooner."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from engine.slots.checks import repetition_check, without_code
from engine.slots.job import SlotJob
from engine.slots.loop_watch import LoopWatch, counting_loop, cut_counting, cut_loops
from engine.slots.run import SlotOutcome, run_slot
from experts.backends import ChatMessage, Generation, GenerationRequest
from experts.backends.fake import FakeBackend, FakeResponse, FakeScript
from state.context import resolve_settings
from state.framework import Deliverable, SlotSpec

LOOP = "The flu is caused by a virus that spreads in winter. "
PROSE = (
    "Colds are caused by viruses. Antibiotics act on bacteria, so they cannot cure a cold. "
    "Rest, fluids and time are what help. See a doctor if a fever lasts more than three days."
)


def fed(text: str, watch: LoopWatch | None = None) -> LoopWatch:
    """A watch fed ``text`` word by word, as a backend writes it (it stops reading once halted)."""
    watch = watch or LoopWatch()
    for word in text.split(" "):
        watch.feed(word + " ")
    return watch


def test_a_looping_answer_is_halted_with_the_reason_and_normal_prose_is_not() -> None:
    looping = fed("## 1. Colds\n" + LOOP * 40)
    assert looping.halt.is_set() and looping.reason is not None and "sentence is repeated" in looping.reason
    assert not fed(PROSE * 2).halt.is_set()  # twice is not a loop


def test_what_is_halted_fails_the_repetition_check_too() -> None:
    """The watch's lines are stricter than the check's: halting never rejects what the check would keep."""
    watch = LoopWatch()
    written: list[str] = []
    for word in ("Intro. " + LOOP * 40).split(" "):
        if watch.halt.is_set():
            break
        written.append(word + " ")
        watch.feed(word + " ")
    assert watch.halt.is_set() and len(written) < len((LOOP * 40).split(" "))
    assert not repetition_check("".join(written)).passed


def test_code_is_not_read_closed_or_still_open() -> None:
    line = "    total = total + values[index]  # add the next value\n"
    assert not fed("Here is the code:\n```python\ndef f(values):\n" + line * 12 + "```\nDone.").halt.is_set()
    assert not fed("```python\ndef f(values):\n" + line * 12).halt.is_set()  # being written
    assert without_code("Intro.\n```python\nx = 1\n```\nMore.\n```python\ny = 2\n") == "Intro.\n \nMore.\n"


def test_the_fake_backend_ends_a_halted_answer_where_it_is() -> None:
    halt = threading.Event()
    pieces: list[str] = []

    def token(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 5:
            halt.set()

    backend = FakeBackend(script=FakeScript(default=FakeResponse(text="one two three four five six seven eight")))
    request = GenerationRequest(
        messages=(ChatMessage("user", "count"),), max_tokens=50, on_token=token, halt=halt, slot_id="s"
    )
    gen = backend.generate(request)
    assert gen.finish_reason == "halted" and gen.text == "one two three four five"


@dataclass
class Streaming:
    """A backend that writes draw n's text word by word (the last text repeats), honouring ``halt``."""

    texts: list[str]
    requests: list[GenerationRequest] = field(default_factory=list)
    written: list[int] = field(default_factory=list)

    def supports_grammar(self) -> bool:
        return False

    def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        text = self.texts[min(len(self.requests), len(self.texts)) - 1]
        out: list[str] = []
        finish = "stop"
        for word in text.split(" "):
            if request.halt is not None and request.halt.is_set():
                finish = "halted"
                break
            piece = word + " "
            out.append(piece)
            if request.on_token is not None:
                request.on_token(piece)
        self.written.append(len(out))
        return Generation(text="".join(out), completion_tokens=len(out), finish_reason=finish)


def run_whole(
    task: str, expert: str, backend: Streaming, best_of: int = 1, deliverable: Deliverable = "prose", **context: Any
) -> SlotOutcome:
    """One slot that is the whole task (prose, or Python code), run on ``backend`` under the run ``context``."""
    language = "python" if deliverable == "code" else None
    spec = SlotSpec(id="answer", title="Answer", description=task, deliverable=deliverable, language=language)
    job = SlotJob(
        spec=spec, task=task, constraints=(), expert=expert, persona="You write.", references={},
        max_tokens=900, temperature=0.0,
    )  # fmt: skip
    settings = resolve_settings({"backend": "fake", "best_of": best_of, **context}, env={})
    return run_slot(job, backend, settings, emit=lambda _: None)


def test_a_slot_stops_a_looping_candidate_early_and_draws_the_next() -> None:
    task = "Explain to a patient why antibiotics do not help a common cold."
    looping = "## Outline\n1. Colds\n\n## 1. Colds\n" + LOOP * 60
    plain = "## Why\n" + PROSE + "\n"
    backend = Streaming([looping, plain])
    outcome = run_whole(task, "medical_clinical", backend, best_of=3)
    assert outcome.result is not None and outcome.result.quality is not None
    assert backend.written[0] < len(looping.split(" ")) / 4  # stopped within the first quarter of the loop
    first, second = outcome.result.quality.candidates
    failed = {c.name: c.detail for c in first.checks if not c.passed}
    assert (failed.get("prose.repetition") or "").startswith("stopped while looping")
    assert second.prompt == "plain" and outcome.result.quality.chosen == "c2"  # the way out of a loop, as before
    assert any("it looped" in e.outputs_summary for e in outcome.ledger if e.action == "generate")


def test_the_repeats_of_a_looped_answer_are_cut_and_nothing_else() -> None:
    text = (
        "## 1. Scene\nThe night train left Zurich at ten. " + LOOP + "\n\n" + LOOP + LOOP + "\n\n"
        "```python\nprint('same line again and again here')\nprint('same line again and again here')\n```\n\n"
        + LOOP
        + "The flu is caused by a"
    )
    cut, removed = cut_loops(text)
    assert removed == 4  # three repeats and the last lap, stopped mid-sentence
    assert cut == (
        "## 1. Scene\nThe night train left Zurich at ten. " + LOOP.strip() + "\n\n"
        "```python\nprint('same line again and again here')\nprint('same line again and again here')\n```"
    )
    assert cut_loops(PROSE) == (PROSE, 0)


def test_a_slot_whose_every_candidate_loops_delivers_the_kept_one_once_with_its_caveat() -> None:
    task = "Write the opening scene of a mystery novel on a night train."
    looping = "## Outline\n1. Scene\n\n## 1. Scene\nThe night train left Zurich at ten. " + LOOP * 30
    backend = Streaming([looping])
    outcome = run_whole(task, "creative_writer", backend, best_of=2)
    assert outcome.result is not None and outcome.result.quality is not None
    assert not outcome.result.quality.passed  # still failing its check: the document says so
    assert outcome.result.body_text().count(LOOP.strip()) == 1
    assert repetition_check(outcome.result.body_text()).passed
    assert any(e.action == "cut_repeats" for e in outcome.ledger)
    assert any("fails its checks" in n.message for n in outcome.notices)
    # the caveat speaks of the text delivered: it looped and was cut; it no longer stops mid-sentence
    caveat = outcome.result.quality.caveat or ""
    assert "prose.repetition: it looped while written: " in caveat and "repeated sentence(s) were cut" in caveat
    assert "stopped while looping" not in caveat and "mid-sentence" not in caveat


def test_a_section_that_repeats_an_earlier_one_is_cut_and_the_rest_renumbered() -> None:
    task = "Document the HTTP endpoint POST /v1/invoices for the team."
    body = "The endpoint creates an invoice from a customer id and an amount in cents, and answers 201 with its id."
    answer = (
        "## Outline\n1. Endpoint\n2. Request body\n3. Responses\n\n"
        f"## 1. Endpoint\n{body}\n\n## 2. Request body\n{body}\n\n"
        "## 3. Responses\n201 carries the new invoice's id; 422 says that amount_cents was negative.\n"
    )
    backend = Streaming([answer] * 3)
    outcome = run_whole(task, "technical_writer", backend, best_of=1)
    result = outcome.result
    assert result is not None and result.quality is not None
    assert [(s.label, s.title) for s in result.sections] == [("1", "Endpoint"), ("2", "Responses")]
    assert [(o.label, o.title) for o in result.outline] == [("1", "Endpoint"), ("2", "Responses")]
    assert result.raw.count(body) == 1 and "## 2. Responses" in result.raw
    assert result.quality.caveat is None  # what is delivered no longer repeats itself
    [entry] = [e for e in outcome.ledger if e.action == "cut_sections"]
    assert "sections 1 and 2 say the same" in entry.outputs_summary and "nothing reworded" in entry.outputs_summary
    # every candidate said it twice: the cut is of the kept one, after the choice
    assert all(not c.passed for c in result.quality.candidates[0].checks if c.name == "contract.duplicates")


def test_a_section_the_loop_cut_leaves_empty_goes_too() -> None:
    # a real checklist: after its repeated sentences were cut, "Access management" was an empty heading
    answer = (
        "## Outline\n1. Owner\n2. Access management\n3. Encryption\n\n"
        f"## 1. Owner\n{PROSE} {LOOP}\n\n## 2. Access management\n{LOOP}{LOOP}\n\n"
        "## 3. Encryption\nDisks are encrypted with keys kept in the company's vault, rotated every year.\n"
    )
    outcome = run_whole("Write an audit checklist for our access policy.", "technical_writer", Streaming([answer]))
    result = outcome.result
    assert result is not None
    assert [(s.label, s.title) for s in result.sections] == [("1", "Owner"), ("2", "Encryption")]
    assert "Access management" not in result.raw and result.raw.count(LOOP.strip()) == 1
    [entry] = [e for e in outcome.ledger if e.action == "cut_sections"]
    assert "section 2 is empty" in entry.outputs_summary


def test_the_caveat_after_a_loop_cut_names_no_duplicate_the_cut_removed() -> None:
    # two sections were alike only by the sentences the second repeated: once they are cut, the caveat must not
    # say the sections repeat each other
    said = (
        "Influenza is a virus that infects the nose and lungs. Most adults recover within one or two weeks. "
        "Fever and aching muscles come on suddenly. Children and older people fall ill more often. "
        "A yearly vaccine lowers the chance of catching it. Antibiotics do nothing against a virus. "
        "Rest and fluids help the body fight back."
    )
    answer = (
        "## Outline\n1. Cause\n2. Spread\n\n"
        f"## 1. Cause\n{said}\n\n## 2. Spread\n{said} It passes from hand to mouth in crowded rooms.\n"
    )
    outcome = run_whole("Explain the flu to a patient.", "medical_clinical", Streaming([answer]))
    result = outcome.result
    assert result is not None and result.quality is not None
    candidate = {c.name: c.passed for c in result.quality.candidates[0].checks}
    assert candidate["contract.duplicates"] is False  # as written, the two sections said the same
    kept = {c.name: c.passed for c in result.quality.checks}
    assert kept["contract.duplicates"] is True and kept["prose.repetition"] is False
    assert "contract.duplicates" not in (result.quality.caveat or "")


def test_prose_is_drawn_under_the_repeat_penalty_and_code_without_it() -> None:
    prose_backend = Streaming(["## Why\n" + PROSE + "\n"])
    run_whole("Explain why the sky is blue.", "general_reasoning", prose_backend, best_of=1)
    assert {r.repeat_penalty for r in prose_backend.requests} == {1.1}

    code_backend = Streaming(["## Outline\n1. Code\n\n## 1. Code\n```python\ndef add(a, b):\n    return a + b\n```\n"])
    run_whole("Write add(a, b).", "python_coder", code_backend, deliverable="code")
    assert {r.repeat_penalty for r in code_backend.requests} == {1.0}

    off = Streaming(["## Why\n" + PROSE + "\n"])
    run_whole("Explain why.", "general_reasoning", off, repeat_penalty=1.0)
    assert {r.repeat_penalty for r in off.requests} == {1.0}


def test_a_looped_table_keeps_each_row_once_and_drops_the_row_it_was_stopped_in() -> None:
    table = (
        "| API | REST | gRPC |\n| --- | --- | --- |\n| Speed | Fast | Faster |\n"
        + "| Roadmap | High | Low |\n" * 5
        + "| Roadmap Roadblocks | High"
    )
    cut, removed = cut_loops(table)
    assert cut == "| API | REST | gRPC |\n| --- | --- | --- |\n| Speed | Fast | Faster |\n| Roadmap | High | Low |"
    assert removed == 5
    plain = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |"  # a table that did not loop is left as it is
    assert cut_loops(plain) == (plain, 0)


def test_the_repeat_penalty_processor_follows_llama_cpps_rule() -> None:
    import numpy as np

    from experts.backends.llama_mask import RepeatPenalty

    scores = np.array([2.0, -2.0, 1.0, 4.0], dtype=np.single)
    out = RepeatPenalty(2.0)(np.array([0, 1, 1], dtype=np.intc), scores)
    assert out.tolist() == [1.0, -4.0, 1.0, 4.0]  # each recent token once: positive halved, negative doubled
    assert scores.tolist() == [2.0, -2.0, 1.0, 4.0]  # the input is left as it was
    assert RepeatPenalty(2.0, last_n=1)(np.array([0, 3], dtype=np.intc), scores).tolist() == [2.0, -2.0, 1.0, 2.0]


def test_a_phrase_of_the_task_restated_at_each_step_is_not_a_loop() -> None:
    # the review set's dice problem answered by the bare prompt (review_reference_decode): a right, complete answer
    # that names what each step computes in the question's words was read as degenerate
    task = "What is the probability of getting at least one six in four rolls of a fair die? Show the steps."
    answer = (
        "To find the probability of getting at least one six in four rolls of a fair die, we can use the co"
        'mplementary probability approach. The complementary event to "getting at least one six" is "not ge'
        'tting any sixes in four rolls." We will first calculate the probability of not getting any sixes a'
        "nd then subtract this from 1.\n"
        "\n"
        "1. **Calculate the probability of not getting any sixes in four rolls:**\n"
        "   - A fair die has 6 faces, with 5 of them being non-sixes.\n"
        "   - The probability of rolling a non-six on a single roll is \\(\\frac{5}{6}\\).\n"
        "   - Since the rolls are independent, the probability of not getting any six in four rolls is \\(\\"
        "left(\\frac{5}{6}\\right)^4\\).\n"
        "\n"
        "2. **Calculate \\(\\left(\\frac{5}{6}\\right)^4\\):**\n"
        "   \\[\n"
        "   \\left(\\frac{5}{6}\\right)^4 = \\frac{5 \\times 5 \\times 5 \\times 5}{6 \\times 6 \\times 6 \\"
        "times 6} = \\frac{625}{1296}\n"
        "   \\]\n"
        "\n"
        "3. **Calculate the probability of getting at least one six in four rolls:**\n"
        "   - The probability of getting at least one six is the complement of the probability of not getti"
        "ng any six.\n"
        "   \\[\n"
        "   1 - \\left(\\frac{625}{1296}\\right) = \\frac{1296 - 625}{1296} = \\frac{671}{1296}\n"
        "   \\]\n"
        "\n"
        "Therefore, the probability of getting at least one six in four rolls of a fair die is \\(\\boxed{\\"
        "frac{671}{1296}}\\)."
    )
    assert not repetition_check(answer).passed
    assert repetition_check(answer, task).passed
    looping = "The cache keeps the most recent entries in memory for later. " * 3
    assert not repetition_check(looping, task).passed  # a loop of its own words still fails


MERGE = (
    "def merge_ranges(ranges):\n"
    "    out = []\n"
    "    for start, end in sorted(ranges):\n"
    "        if out and start <= out[-1][1]:\n"
    "            out[-1] = (out[-1][0], max(out[-1][1], end))\n"
    "        else:\n"
    "            out.append((start, end))\n"
    "    return out\n"
)
COUNTING = "".join(
    f'    assert merge_ranges([(1, 5), (5, {n})]) == [(1, {n})], "Test case {n - 1} failed"\n' for n in range(6, 30)
)
"""multipart_set5_rules4, mp5-merge-ranges: each of the tests part's three candidates counted to the token limit."""
GROWING = "".join(
    "    assert merge_ranges([" + ", ".join(f"({k}, {k})" for k in range(1, n + 1)) + "]) == [(1, 1)]\n"
    for n in range(3, 12)
)
"""multipart_set5_rules2: the same part grew one list an item a line."""


def test_a_code_block_that_counts_on_or_grows_a_list_is_found_and_cut_after_its_first_lines() -> None:
    tests = "```python\nfrom ranges import merge_ranges\n\ndef test_merge_ranges():\n"
    for run in (COUNTING, GROWING):
        found = counting_loop(tests + run)
        assert found is not None and found[1] == run.splitlines()[0].strip()
        cut = cut_counting("## 1. Tests\n" + tests + run[:-40])  # the answer as it was stopped, mid-line
        assert cut is not None and cut[0].endswith(run.splitlines()[2] + "\n```\n")
    # cases that vary, a short run, a table of values and one line written again are not counting
    roman = "".join(f'    assert to_roman({n}) == "{r}"\n' for n, r in [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV")])
    varied = "".join(f"    assert add({a}, {b}) == {a + b}\n" for a, b in [(1, 2), (5, 5), (0, 0), (-1, 1), (9, 3)])
    assert counting_loop(tests + roman * 3 + varied * 2) is None
    assert counting_loop(tests + "".join(COUNTING.splitlines(keepends=True)[:7])) is None
    assert counting_loop(tests + "".join(GROWING.splitlines(keepends=True)[:5])) is None
    assert counting_loop("Rows 1 to 30:\n" + COUNTING.replace("assert", "note")) is None  # prose is not code


def test_a_candidate_that_counts_on_is_stopped_cut_and_checked_as_cut() -> None:
    task = "Write merge_ranges(ranges) in ranges.py and pytest tests for it."
    answer = f"## Outline\n1. Code and tests\n\n## 1. Code and tests\n```python\n{MERGE}\ndef test_merge_ranges():\n"
    backend = Streaming([answer + COUNTING * 3])
    outcome = run_whole(task, "python_coder", backend, deliverable="code")
    assert outcome.result is not None and outcome.result.quality is not None
    assert backend.written[0] < len((answer + COUNTING * 3).split(" ")) / 3  # stopped soon after the run began
    kept = outcome.result.raw
    assert kept.rstrip().endswith(COUNTING.splitlines()[2] + "\n```") and "Test case 8" not in kept
    checks = {c.name: c for c in outcome.result.quality.candidates[0].checks}
    assert checks["code.counting"].severity == "soft" and not checks["code.counting"].passed
    assert checks["python.parses"].passed and "prose.repetition" not in {n for n, c in checks.items() if not c.passed}
