"""The unit conversions a task needs, and programs that write none of them (engine/units.py)."""

from __future__ import annotations

import pytest

from engine.units import Conversion, conversion_hint, conversions, percent_hint, percent_unscaled, unconverted

SERVER = (
    "Our server room runs 14 machines drawing 350 W each, around the clock. We're thinking of consolidating onto 9 "
    "machines at 420 W each. Using 720 hours a month and 0.28 per kWh, work out the monthly energy and cost."
)


def test_watts_priced_per_kwh_need_a_conversion_by_a_thousand() -> None:
    assert conversions(SERVER) == [Conversion("W", "kWh", 1000.0, (350.0, 420.0))]
    hint = conversion_hint(conversions(SERVER))
    assert "350, 420 in W" in hint and "1 kWh is 1,000 W" in hint


@pytest.mark.parametrize(
    ("task", "given", "named", "factor"),
    [
        # GSM8K train sample problems (development data)
        (
            "It takes a dog groomer 10 minutes to dry a dog. How many hours does it take him to dry 15 dogs?",
            "min",
            "h",
            60,
        ),
        (
            "Rose had 10 kilograms of rice. She cooked 9/10 kilograms. How many grams of rice did she have left?",
            "kg",
            "g",
            1000,
        ),
        ("Parking is free for the first 30 minutes, then 1.50 per hour or part of it.", "min", "h", 60),
        ("Each photo is 500 MB and storage costs 0.02 per GB a month.", "MB", "GB", 1000),
        ("The pump moves 250 ml a second; how many litres in an hour?", "ml", "l", 1000),
        ("A 2.5kg bag at 3.20 per kg", None, None, None),  # one unit: nothing to convert
    ],
)
def test_a_number_in_one_unit_against_a_rate_or_result_in_another(
    task: str, given: str | None, named: str | None, factor: float | None
) -> None:
    found = [(c.given, c.named, c.factor) for c in conversions(task)]
    assert found == ([] if given is None else [(given, named, factor)])


@pytest.mark.parametrize(
    "task",
    [
        "Compute the monthly payment on a 300,000 dollar mortgage at 6% annual interest over 30 years.",
        "In the 1990s prices rose 3% an hour.",  # no seconds
        "A 5 M budget spread over 12 months; how much a month?",  # M is a million
        "Write 3 paragraphs in a m style.",
        # GSM8K train sample: a map's own scale relates the two lengths
        "On a road map, 1/4 inch represents 8 miles of actual road distance. The towns are 3 3/8 inches apart on the "
        "map. How many miles apart are the actual towns?",
    ],
)
def test_tasks_without_two_units_of_one_kind_need_none(task: str) -> None:
    assert conversions(task) == []


def test_a_dose_by_weight_converts_the_weight_not_the_dose() -> None:
    """A dose by weight is a ratio of two masses, not a conversion between them (numeric_heldout3, nh3-dose-weight);
    the weight in pounds goes to the ratio's kilograms."""
    task = "Child weighs 42 lb. Paracetamol single dose ordered at 15 mg/kg. Use 1 lb = 0.453592 kg. The dose in mg?"
    [found] = conversions(task)
    assert (found.given, found.named, round(found.factor, 5)) == ("lb", "kg", 2.20462)
    assert unconverted("weight = 42 * 0.453592\nprint(weight * 15)", [found]) == []
    assert unconverted("print(42 * 15)", [found]) == [found]


def test_miles_and_kilometres_convert_with_the_factor_as_programs_round_it() -> None:
    """A marathon's pace and speed on the real 1.5B, 2026-12-08: two programs divided 42.195 km by the hours and
    printed 11.15 "mph" (6.93 is right), and the document gave it as the result; miles were no unit here."""
    task = "I ran a marathon (42.195 km) in 3 hours 47 minutes. What was my average speed in miles per hour?"
    found = conversions(task)
    assert [(c.given, c.named) for c in found] == [("km", "mile"), ("min", "h")]
    assert "1 mile is 1.60934 km" in conversion_hint(found)
    assert unconverted("h = 3 + 47 / 60\nprint(42.195 / h)", found) == found[:1]
    for factor in ("1.609", "0.621371", "0.6214"):
        assert unconverted(f"h = 3 + 47 / 60\nprint(42.195 * {factor} / h)", found) == []


def test_a_program_that_writes_the_factor_or_a_converted_value_converts() -> None:
    found = conversions(SERVER)
    assert unconverted("cost = 14 * 350 * 720 * 0.28\nprint(cost)", found) == found
    assert unconverted("cost = 14 * 350 * 720 / 1000 * 0.28\nprint(cost)", found) == []
    assert unconverted("cost = 14 * 350 * 720 * 1e-3 * 0.28\nprint(cost)", found) == []
    assert unconverted("cost = 14 * 0.35 * 720 * 0.28\nprint(cost)", found) == []
    data = conversions("Each photo is 500 MB and storage costs 0.02 per GB a month.")
    assert unconverted("print(500 / 1024 * 0.02)", data) == []  # a GB of 1,024 MB converts too
    assert unconverted("print(500 * 0.02)", data) == data


def test_a_ratio_of_two_masses_still_leaves_a_third_to_convert() -> None:
    found = {(c.given, c.named) for c in conversions("Dose 15 mg/kg for a cat of 2000 g. The dose in mg?")}
    assert ("g", "kg") in found and ("mg", "kg") not in found and ("kg", "mg") not in found


CAR_LOAN = (
    "Quick one - the dealership is offering finance on a used car. I'd borrow £18,500 and repay it over 5 years in "
    "60 equal monthly instalments at 7.9% APR, treated as 7.9%/12 interest per month. What is the instalment?"
)
# the real 1.5B's two programs for CAR_LOAN (numeric_heldout4, 2026-12-08): they agreed on 12,179.17 a month
LOAN_IN_PERCENT = (
    "loan_amount = 18500\nmonthly_interest_rate = 7.9 / 12  # in decimal\nnum_months = 5 * 12\n"
    "m = loan_amount * (monthly_interest_rate * (1 + monthly_interest_rate) ** num_months) / "
    "((1 + monthly_interest_rate) ** num_months - 1)\nprint(m)\n"
)


@pytest.mark.parametrize(
    ("program", "unscaled"),
    [
        (LOAN_IN_PERCENT, 7.9),
        (LOAN_IN_PERCENT.replace("7.9 / 12", "7.9 / 100 / 12"), None),
        (LOAN_IN_PERCENT.replace("7.9 / 12", "0.079 / 12"), None),
        (LOAN_IN_PERCENT.replace("7.9 / 12", "7.9 / 1200"), None),
        ("print(18500 * 7.9)", None),  # nothing grows by it: not judged
    ],
)
def test_a_percentage_grown_by_as_its_number_is_found(program: str, unscaled: float | None) -> None:
    assert percent_unscaled(program, CAR_LOAN) == unscaled


def test_a_task_with_a_percentage_tells_the_program_the_fraction() -> None:
    assert percent_hint(CAR_LOAN) == "\n\nPercentages: use them as fractions in the arithmetic (7.9% is 0.079)."
    assert percent_hint("Add 100% of the base.") == ""  # 100% is the whole, not a rate
    assert percent_unscaled("print(5.0 - 4.2)", "The rate went from 4.2% to 5.0%: by how many points?") is None
