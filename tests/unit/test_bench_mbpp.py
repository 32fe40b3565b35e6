"""The MBPP bench's scoring: every assert of the problem, in the sandbox."""

from __future__ import annotations

from bench.bench_mbpp import message, passes

PROBLEM = {
    "task_id": 4,
    "prompt": "Write a function to find the n largest integers from a given list of numbers.",
    "test_imports": [],
    "test_list": [
        "assert heap_queue_largest([25, 35, 22, 85], 2) == [85, 35]",
        "assert heap_queue_largest([1, 2, 3], 1) == [3]",
    ],
}


def test_an_answer_passes_only_when_every_assert_holds() -> None:
    good = "import heapq\n\ndef heap_queue_largest(nums, n):\n    return heapq.nlargest(n, nums)\n"
    assert passes(PROBLEM, good) == (True, "")
    missing_import = "def heap_queue_largest(nums, n):\n    return heapq.nlargest(n, nums)\n"
    ok, error = passes(PROBLEM, missing_import)
    assert not ok and "NameError" in error
    first_only = "def heap_queue_largest(nums, n):\n    return [85, 35]\n"
    assert not passes(PROBLEM, first_only)[0]  # the hidden asserts count too
    assert message(PROBLEM).endswith("Your code should pass this test: " + PROBLEM["test_list"][0])
