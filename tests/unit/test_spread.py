"""Which standard deviation a task asks for, and a program that computes the other one (engine/spread.py)."""

from __future__ import annotations

import pytest

from engine.slots.program_of_thought import program_messages
from engine.spread import asked_spread, spread_hint, wrong_spread

STEPS = (
    "My daily step counts last week were 12, 15, 11, 19, 23, 15 and 14 thousand. What are the mean, the median and "
    "the sample standard deviation?"
)


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        (STEPS, "sample"),
        ("Compute the standard deviation (dividing by n - 1) of these six measurements: 12.4, 15.1, 9.8.", "sample"),
        ("What is the sample variance of 3, 5, 9?", "sample"),
        (
            "Treat the 30 pupils as the whole class: what is the population standard deviation of their marks?",
            "population",
        ),
        ("What is the standard deviation of 3, 5 and 9?", None),  # not said which
        ("Take a sample of 5 apples and weigh them.", None),  # no spread asked
    ],
)
def test_the_kind_of_spread_a_task_names(task: str, kind: str | None) -> None:
    assert asked_spread(task) == kind
    assert bool(spread_hint(task)) == (kind is not None)


def test_the_programs_prompt_says_which_to_use() -> None:
    [message] = program_messages(STEPS)
    assert "sample's, which divides by n - 1: use statistics.stdev" in message.content


@pytest.mark.parametrize(
    ("program", "wrong"),
    [
        # the real 1.5B's two programs for STEPS, 2026-12-08 (they agreed on 4,893.44, the document's result)
        ("import numpy as np\nx = [12, 15, 11]\nprint(np.std(x))", "np.std(x)"),
        ("import numpy\nprint(numpy.var([1, 2, 3]))", "numpy.var([1, 2, 3])"),
        ("import statistics\nprint(statistics.pstdev([1, 2, 3]))", "statistics.pstdev([1, 2, 3])"),
        ("from statistics import pstdev as sd\nprint(sd([1, 2, 3]))", "sd([1, 2, 3])"),
        ("import statistics as st\nprint(st.pstdev([1, 2, 3]))", "st.pstdev([1, 2, 3])"),
        ("import numpy as n\nprint(n.std([1, 2, 3]))", "n.std([1, 2, 3])"),
        ("import numpy as np\nprint(np.std([1, 2, 3], ddof=1))", None),
        ("import statistics\nprint(statistics.stdev([1, 2, 3]))", None),
        ("import numpy as np\nd = 1\nprint(np.std([1, 2, 3], ddof=d))", None),  # not a constant: not judged
        ("x = [1, 2, 3]\nm = sum(x) / 3\nprint((sum((v - m) ** 2 for v in x) / 3) ** 0.5)", None),  # a formula
    ],
)
def test_a_program_that_takes_the_other_spread_is_found(program: str, wrong: str | None) -> None:
    assert wrong_spread(program, STEPS) == wrong


def test_the_population_asked_finds_the_samples_function() -> None:
    task = "What is the population standard deviation of 2, 4, 4, 4, 5, 5, 7, 9?"
    assert wrong_spread("import statistics\nprint(statistics.stdev([2, 4]))", task) == "statistics.stdev([2, 4])"
    assert wrong_spread("import statistics\nprint(statistics.pstdev([2, 4]))", task) is None
    assert wrong_spread("import numpy as np\nprint(np.std([2, 4]))", task) is None


def test_a_program_that_takes_the_other_spread_gives_no_check() -> None:
    from engine.slots.program_of_thought import calculate
    from engine.slots.sandbox import SandboxLimits
    from tests.unit.scripted import Scripted

    limits = SandboxLimits(timeout_s=10)
    population = "```python\nimport statistics\nprint(statistics.pstdev([12, 15, 11, 19, 23, 15, 14]))\n```"
    done = calculate(STEPS, Scripted([population]), "coder", limits, slot_id="s")
    assert done.values == () and "but took the population's spread (statistics.pstdev(" in done.note
    sample = population.replace("pstdev", "stdev")
    done = calculate(STEPS, Scripted([sample]), "coder", limits, slot_id="s")
    assert done.values and abs(float(done.values[0]) - 4.1576) < 1e-3
