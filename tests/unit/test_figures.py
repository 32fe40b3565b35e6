"""A multi-part task's figures (issue 39 item 2 and issue 40 item 3): computed once, given to every part, checked."""

from __future__ import annotations

from typing import Any

import pytest

from engine.figures import figures_constraint, left_out, read_figures, stated_otherwise, wants_figures
from state import RunStatus
from state.figures import TaskFigures
from tests.unit.plan_runs import answer, run_plan

TASK = (
    "Build the repayment model for a 250,000 loan at 4.5% a year over 25 years with monthly payments, and a memo "
    "to the borrower quoting the monthly payment and the total interest."
)
OUTPUT = "monthly_payment: 1389.58\ntotal_interest: 166874.36\nprincipal: 250000\nnumber of payments: 300"
PROGRAM = (
    "```python\nP, r, n = 250000, 0.045 / 12, 300\npay = P * r / (1 - (1 + r) ** -n)\n"
    'print(f"monthly_payment: {pay:.2f}")\nprint(f"total_interest: {pay * n - P:.2f}")\n'
    'print("principal: 250000")\nprint("number of payments: 300")\n```'
)
# The memo the model part wrote on the real models (mp-loan-model-memo, 2026-11-28), word for word.
REAL_MEMO = "To the borrower:\n\n**Monthly Payment:** $10,456.79\n\n**Total Interest Paid:** $180,000.00\n"
RIGHT_MEMO = "Your monthly payment is $1,389.58 and the total interest over the 25 years is $166,874.36."


def _figures() -> TaskFigures:
    return TaskFigures(model="m", note="", program="", output=OUTPUT, figures=read_figures(OUTPUT, TASK))


def _computed(write_script: Any, task: str, *programs: str) -> TaskFigures:
    """The figures a two-part plan of ``task`` computed, its figures programs scripted as ``programs``."""
    state = run_plan(write_script({"rules": _programs(*programs)}), task, PLAN)
    assert state.figures is not None
    return state.figures


def _programs(*texts: str) -> list[dict[str, str]]:
    """The scripted answers of the figures programs, in order: the greedy one, then the sampled ones."""
    return [{"slot": "@figures" + (f"-{n}" if n > 1 else ""), "text": text} for n, text in enumerate(texts, 1)]


def test_a_figure_with_a_unit_word_after_it_is_read() -> None:
    task = "Our bakery's fixed costs are 3,000 a month, a loaf sells for 4.00 and costs 1.50 to make."
    assert [(f.name, f.value) for f in read_figures("Break-even point: 1200.00 loaves", task)] == [
        ("break-even point", 1200.0)
    ]
    assert read_figures("Salary: 30000, Income Tax: 2000.00", task) == []  # two values on a line: no figure
    slo = "Set a 99.9% availability SLO over 30 days for our checkout API and work out the error budget."
    assert [f.name for f in read_figures("availability: 1.00\nerror budget minutes: 43.20", slo)] == [
        "error budget minutes"
    ]


def test_the_programs_lines_are_the_figures_but_those_the_task_gives() -> None:
    assert [(f.name, f.value) for f in _figures().figures] == [
        ("monthly payment", 1389.58),
        ("total interest", 166874.36),
        ("number of payments", 300.0),
    ]
    assert "monthly payment: 1,389.58" in figures_constraint(_figures())


def test_a_part_that_states_a_figure_otherwise_is_found_and_one_that_agrees_is_not() -> None:
    wrong = stated_otherwise(REAL_MEMO, _figures(), TASK)
    assert [(f.name, stated) for f, stated in wrong] == [("monthly payment", 10456.79), ("total interest", 180000.0)]
    assert stated_otherwise(RIGHT_MEMO, _figures(), TASK) == []
    wrong_count = stated_otherwise("The number of payments is 25.", _figures(), TASK)
    assert [(f.name, stated) for f, stated in wrong_count] == []  # 25 is a number the task gives
    wrong_count = stated_otherwise("The number of payments is 240.", _figures(), TASK)
    assert [(f.name, stated) for f, stated in wrong_count] == [("number of payments", 240.0)]
    code = "```python\nmonthly_payment = 99\n```\nThe loan is 250,000 at 4.5% interest."
    assert stated_otherwise(code, _figures(), TASK) == []  # code and the task's own numbers are not statements


def test_figures_are_wanted_for_a_task_with_numbers_and_a_quantity_whoever_writes_it() -> None:
    assert wants_figures(TASK)
    assert not wants_figures("Write a memo and a script about our loan")
    # multipart_new8: the legal expert's agreement gave no fee, the DevOps runbook 99.9% of 30 days as 41760 minutes
    assert wants_figures(
        "Draft a consulting agreement for 12 days of work at 800 a day plus 20% VAT, payable within 30 days of "
        "invoice, and a plain-language summary of it for the client."
    )
    assert wants_figures(
        "Set a 99.9% availability SLO over 30 days for our checkout API, write the Prometheus alerting rules that "
        "fire on fast error-budget burn, and write the on-call runbook for those alerts."
    )


PLAN = {
    "id": "loan",
    "title": "Loan",
    "slots": [
        {"id": "model", "title": "Repayment model", "description": "Build the model.", "expert": "finance_analyst"},
        {"id": "memo", "title": "Memo", "description": "Write the memo.", "expert": "general_reasoning"},
    ],
}


def test_the_run_computes_the_figures_once_gives_them_to_every_part_and_sends_a_wrong_memo_back(
    write_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = write_script(
        {
            "rules": [
                *_programs(PROGRAM, PROGRAM.replace("pay * n - P", "n * pay - P")),
                {"slot": "model", "text": answer("Model", RIGHT_MEMO)},
                {
                    "slot": "memo",
                    "first_calls": [{"text": answer("Memo", REAL_MEMO)}],
                    "text": answer("Memo", RIGHT_MEMO),
                },
            ]
        }
    )
    prompts: list[str] = []
    state = run_plan(script, TASK, PLAN, monkeypatch, "memo", prompts)

    assert state.status == RunStatus.COMPLETED
    assert state.figures is not None and [f.value for f in state.figures.figures] == [1389.58, 166874.36, 300.0]
    actions = [(e.action, e.slot_id) for e in state.ledger if e.action in ("calculate_figures", "send_back")]
    assert actions == [("calculate_figures", None), ("send_back", "memo")]  # computed once, the memo sent back
    assert len(prompts) == 2 and all("monthly payment: 1,389.58" in p for p in prompts)
    doc = state.document or ""
    assert "$10,456.79" not in doc and "$1,389.58" in doc
    assert "## Computed figures" in doc and "- monthly payment: **1,389.58**" in doc and "P * r / (1 - (1 + r)" in doc
    assert "Two programs by one model can share a mistake" in doc  # seen: both NPV programs discounted from year 0
    assert "parts disagree" not in doc


def test_figures_a_second_program_does_not_print_are_not_given_to_the_parts(write_script: Any) -> None:
    """The 1.5B's greedy program on the real models: principal / months, 833.33 a month (simple interest)."""
    naive = PROGRAM.replace("pay = P * r / (1 - (1 + r) ** -n)", "pay = P / n")
    script = write_script(
        {
            "rules": [
                *_programs(naive, PROGRAM),
                {"slot": "memo", "text": answer("Memo", REAL_MEMO)},
            ]
        }
    )
    state = run_plan(script, TASK, PLAN)
    assert state.figures is not None and [f.value for f in state.figures.figures] == [300.0]  # only the count agrees
    assert [f.value for f in state.figures.unconfirmed] == [833.33, 0.0, 1389.58, 166874.36]
    assert state.figures.note.startswith("2 program(s) ran; 1 figure(s) printed by two; program 3: the answer held no")
    doc = state.document or ""
    assert "monthly payment: **" not in doc and "only one program printed them" in doc
    assert "monthly payment (833.33)" in doc


def test_a_third_program_settles_a_figure_the_first_two_disagree_on(write_script: Any) -> None:
    """The real models' pattern: a right greedy payment, a sampled one on the yearly rate, a third right again."""
    yearly = PROGRAM.replace("0.045 / 12", "0.045")
    script = write_script({"rules": _programs(PROGRAM, yearly, PROGRAM.replace("pay * n - P", "n * pay - P"))})
    state = run_plan(script, TASK, PLAN)
    assert state.figures is not None and [f.value for f in state.figures.figures] == [1389.58, 166874.36, 300.0]
    assert len(state.figures.more_programs) == 2 and state.figures.note.startswith("3 program(s) ran; 3 figure(s)")


def test_two_sampled_programs_do_not_outvote_the_greedy_one_and_the_program_shown_printed_what_is_given(
    write_script: Any,
) -> None:
    """multipart_new8, the bakery: greedy 1,200 loaves (right), two sampled programs 2,000 (3,000 / 1.50)."""
    task = "Our bakery's fixed costs are 3,000 a month, a loaf sells for 4.00 and costs 1.50: compute the break-even."

    def program(loaves: str, margin: str) -> str:
        given = "fixed, price, cost = 3000, 4.00, 1.50\n"  # a program that uses none of the task's numbers is not used
        return f'```python\n{given}print("break-even loaves: {loaves}")\nprint("contribution per loaf: {margin}")\n```'

    script = write_script({"rules": _programs(program("1200", "2.5"), program("2000", "2.5"), program("2000", "2.5"))})
    state = run_plan(script, task, PLAN)
    assert state.figures is not None and [(f.name, f.value) for f in state.figures.figures] == [
        ("contribution per loaf", 2.5)
    ]
    assert sorted(f.value for f in state.figures.unconfirmed) == [1200.0, 2000.0]
    assert "outvoting the greedy program" in state.figures.note
    # the loan's pattern stands: the greedy program and a third outvote a sampled second (the test above)


def test_a_document_whose_programs_confirmed_no_figure_says_so(write_script: Any) -> None:
    """multipart_set2_first: lease and lesson documents with figures computed and none agreed said nothing of it."""
    task = "Our bakery's fixed costs are 3,000 a month, a loaf sells for 4.00 and costs 1.50: compute the break-even."
    given = "fixed, price, cost = 3000, 4.00, 1.50\n"
    script = write_script(
        {
            "rules": _programs(
                f'```python\n{given}print("break-even loaves: 1200")\n```',
                f'```python\n{given}print("break-even loaves: 2000")\n```',
                f'```python\n{given}print("break-even loaves: 2000")\n```',
            )
        }
    )
    state = run_plan(script, task, PLAN)
    assert state.figures is not None and state.figures.figures == []
    doc = state.document or ""
    assert "## Computed figures" in doc and "No figure could be confirmed" in doc
    assert "break-even loaves (1,200.00), break-even loaves (2,000.00)" in doc and "Check every number" in doc


def test_a_document_whose_program_gave_no_figure_says_its_numbers_are_unchecked(write_script: Any) -> None:
    """multipart_set4_first, mp4-new-hire-prorata: no program printed a figure and the document said nothing of it."""
    task = "Our bakery's fixed costs are 3,000 a month, a loaf sells for 4.00 and costs 1.50: compute the break-even."
    script = write_script({"rules": _programs('```python\nprint("we need to sell enough loaves")\n```')})
    state = run_plan(script, task, PLAN)
    assert state.figures is not None and state.figures.figures == state.figures.unconfirmed == []
    doc = state.document or ""
    assert "## Computed figures\n\nNo figure was computed: the program" in doc
    assert "no figure in 'we need to sell enough loaves" in doc and "check every one before relying on it" in doc
    assert 'print("we need to sell enough loaves")' in doc  # the program shown, as a computed figure's is


def test_a_failed_first_program_is_drawn_again_and_two_failures_end_it(write_script: Any) -> None:
    """mp4-new-hire-prorata: the greedy program subtracted two date strings, and no other program was drawn."""
    task = "Our bakery's fixed costs are 3,000 a month, a loaf sells for 4.00 and costs 1.50: compute the break-even."
    given = "fixed, price, cost = 3000, 4.00, 1.50\n"
    failed = '```python\nprint("2026-09-30" - "2026-09-14")\n```'
    good = f'```python\n{given}print("break-even loaves: 1200")\n```'
    state = run_plan(write_script({"rules": _programs(failed, good, good)}), task, PLAN)
    assert state.figures is not None and [(f.name, f.value) for f in state.figures.figures] == [
        ("break-even loaves", 1200.0)
    ]
    assert "program 1: the program failed: TypeError: unsupported operand" in state.figures.note
    state = run_plan(write_script({"rules": _programs(failed, failed, good)}), task, PLAN)
    assert state.figures is not None and state.figures.figures == state.figures.unconfirmed == []
    assert state.figures.note.count("the program failed: TypeError") == 2  # the third was not drawn
    assert "the program failed: TypeError: unsupported operand type(s) for -: 'str' and 'str'" in (state.document or "")


SERVER_TASK = (
    "Our server room runs 14 machines drawing 350 W each, around the clock. We're thinking of consolidating onto 9 "
    "machines at 420 W each. Using 720 hours a month and 0.28 per kWh, work out the monthly energy and cost before "
    "and after, and the saving per month and per year (12 months). Then write a short memo to our finance lead "
    "quoting those figures."
)
ONE_MACHINE = (  # multipart_set3_first, mp3-server-consolidation: both programs priced one machine, in W·h
    "```python\npower_per_machine = 350\nnew_power_per_machine = 420\nhours_per_month = 720\ncost_per_kwh = 0.28\n"
    "initial_cost = power_per_machine * hours_per_month * cost_per_kwh\n"
    "new_cost = new_power_per_machine * hours_per_month * cost_per_kwh\n"
    'print(f"initial cost: {initial_cost:.2f}")\nprint(f"new cost: {new_cost:.2f}")\n'
    'print(f"annual saving: {(initial_cost - new_cost) * 12:.2f}")\n```'
)
FOURTEEN = (
    "```python\nbefore = 14 * 350 * 720 / 1000\nafter = 9 * 420 * 720 / 1000\nrate = 0.28\n"
    'print(f"cost before: {before * rate:.2f}")\nprint(f"cost after: {after * rate:.2f}")\n'
    'print(f"saving per year: {(before - after) * rate * 12:.2f}")\n```'
)


def test_a_program_that_leaves_out_numbers_the_task_gives_confirms_nothing(write_script: Any) -> None:
    """Two programs that priced one machine agreed, and every part was told "initial cost 70,560"."""
    assert left_out(ONE_MACHINE, SERVER_TASK) == [14.0, 9.0]
    assert left_out(FOURTEEN, SERVER_TASK) == []
    assert left_out(PROGRAM, TASK) == [25.0]  # 300 months for 25 years: one restated number is allowed
    figures = _computed(write_script, SERVER_TASK, ONE_MACHINE, ONE_MACHINE)
    assert figures.figures == []
    assert figures.note.startswith("program 1 left out 14, 9 of the task's numbers: not used")
    assert [f.name for f in figures.unconfirmed] == ["initial cost", "new cost", "annual saving"]
    figures = _computed(write_script, SERVER_TASK, ONE_MACHINE, FOURTEEN, FOURTEEN.replace("/ 1000", "* 0.001"))
    assert [(f.name, f.value) for f in figures.figures] == [
        ("cost before", 987.84),
        ("cost after", 762.05),
        ("saving per year", 2709.5),
    ]


def test_a_task_whose_parts_are_all_code_wants_no_figures() -> None:
    """multipart_set5_rules2: an org chart's queries ("how many direct reports they have") and a purge script's units
    ("prints how many it deleted") drew figures programs that failed ("no such column: depth") and a "Computed
    figures" section telling the reader to check every number."""
    org = (
        "Quick one for PostgreSQL: our org chart lives in a single employees table (id, name, manager_id). I need the "
        "CREATE TABLE and INSERTs for this sample: 1 Helen CEO; 2 Marcus (manager 1). Then two queries: (a) everyone "
        "who reports to a given manager, shown for Marcus (id 2); (b) each person with at least one direct report "
        "and how many direct reports they have."
    )
    assert not wants_figures(org)
    memo = org.replace("Then two queries:", "Then a memo to HR on the headcount, and two queries:")
    assert wants_figures(memo)  # a part that is no code may quote the figures
    tool = (  # multipart_set5_rules3, mp5-colstats-cli: a tool and its README, its example run the tool's to print
        "I'd like a small command-line tool, standard library only:\n1. colstats.py using argparse\n2. it prints "
        'count, sum, min, max and mean of the named column\n3. a README "Usage" section with an example run on '
        "this file:\n\ndate,store,sales\n2026-12-01,North,120.50\n2026-12-01,South,98.00\n"
    )
    assert not wants_figures(tool)
    # what an aspect delivers is its object, not a word after it ("... for their next tests" is no test)
    sample = "How many visitors per variant do we need at 4% and 5%? Show the working so they can redo it for tests."
    assert wants_figures(sample)


def test_numbers_without_a_quantity_to_work_out_want_no_figures() -> None:
    task = "Write the design doc and a 2-page summary of our 3 services for the team."
    assert not wants_figures(task)
    tariff = (  # multipart_tasks3, mp3-parking-tariff: the numbers are the function's rules
        "Our car park tariff: the first 30 minutes are free; after that it's 2.50 per started hour of the whole stay "
        "(61 minutes counts as two hours), capped at 18.00. Stays over 24 hours aren't allowed. I want "
        "parking_fee(minutes) in tariff.py returning the fee, pytest tests that cover the edges, and the wording for "
        "the tariff sign at the entrance."
    )
    assert not wants_figures(tariff)
    assert wants_figures(tariff.replace("parking_fee(minutes) in tariff.py", "a function in tariff.py"))
    rise = (
        "Model the effect of raising our plan from 40 to 46 a month for our 1,200 subscribers, assuming 5% of them "
        "cancel because of it, and write the email to the CEO that recommends it with the figures."
    )
    assert wants_figures(rise)  # on the real models: 40 "subscribers"


# multipart_set3_server (2026-12-01): both programs counted the machines and multiplied watts by hours by the price per
# kWh; they agreed on a monthly cost of 987,840.00 and every part was told it (right: 987.84)
IN_WATT_HOURS = (
    "```python\nmachines_before = 14\nwatts_before = 350\nmachines_after = 9\nwatts_after = 420\n"
    "hours_per_month = 720\ncost_per_kwh = 0.28\n"
    "cost_before = machines_before * watts_before * hours_per_month * cost_per_kwh\n"
    "cost_after = machines_after * watts_after * hours_per_month * cost_per_kwh\n"
    'print(f"cost before: {cost_before:.2f}")\nprint(f"cost after: {cost_after:.2f}")\n'
    'print(f"saving per year: {(cost_before - cost_after) * 12:.2f}")\n```'
)
IN_KILOWATTS = FOURTEEN.replace("14 * 350 * 720 / 1000", "14 * 0.35 * 720").replace(
    "9 * 420 * 720 / 1000", "9 * 0.42 * 720"
)


def test_programs_that_multiply_watts_by_a_price_per_kwh_confirm_nothing(write_script: Any) -> None:
    assert left_out(IN_KILOWATTS, SERVER_TASK) == []  # 0.35 is the task's 350 W, written in kW
    figures = _computed(write_script, SERVER_TASK, IN_WATT_HOURS, IN_WATT_HOURS)
    assert figures.figures == []
    assert "program 1 used W with kWh unconverted: not used" in figures.note
    figures = _computed(write_script, SERVER_TASK, IN_WATT_HOURS, FOURTEEN, IN_KILOWATTS)
    assert [(f.name, f.value) for f in figures.figures] == [
        ("cost before", 987.84),
        ("cost after", 762.05),
        ("saving per year", 2709.5),
    ]


SOLAR_TASK = (
    "We had a quote last week for solar panels on our roof at 7,800 installed; the installer reckons they'll generate "
    "about 4,200 kWh a year, and we think we'll use 60% of that ourselves, which saves us our 0.30 per kWh tariff, "
    "and export the other 40% at 0.08 per kWh. Could you work out how much that saves us a year, the simple payback "
    "period in years, and how far ahead we'd be after 10 years (keeping prices and output flat), and then write a "
    "short, friendly email to my partner summarising it with those figures?"
)
SOLAR_WRONG = (  # multipart_set4_first, mp4-solar-payback: two programs printed this, and the email stated it
    "```python\ninstalled_cost = 7800\ninstalled_kwh = 4200\nusage_percentage = 0.60\nexport_rate = 0.08\n"
    "tariff_per_kwh = 0.30\nyears = 10\n"
    "annual_savings = (installed_kwh * (1 - usage_percentage)) * export_rate - installed_cost\n"
    "simple_payback_period = installed_cost / annual_savings\nfuture_savings = annual_savings * years\n"
    'print(f"Annual savings: {annual_savings:.2f} kWh")\n'
    'print(f"Simple payback period: {simple_payback_period:.2f} years")\n'
    'print(f"Future savings after 10 years: {future_savings:.2f} kWh")\n```'
)
SOLAR_RIGHT = (
    "```python\ncost, kwh, own, tariff, export = 7800, 4200, 0.60, 0.30, 0.08\nyears = 10\n"
    "saving = kwh * own * tariff + kwh * (1 - own) * export\n"
    'print(f"annual saving: {saving:.2f}")\nprint(f"payback years: {cost / saving:.2f}")\n'
    'print(f"ahead after 10 years: {saving * years - cost:.2f}")\n```'
)


def test_programs_that_print_a_negative_payback_period_confirm_nothing(write_script: Any) -> None:
    figures = _computed(write_script, SOLAR_TASK, SOLAR_WRONG, SOLAR_WRONG)
    assert figures.figures == []
    assert figures.note.startswith("program 1 printed simple payback period -1.02, which cannot be negative: not used")
    figures = _computed(
        write_script, SOLAR_TASK, SOLAR_WRONG, SOLAR_RIGHT, SOLAR_RIGHT.replace("saving * years", "years * saving")
    )
    assert [(f.name, f.value) for f in figures.figures] == [
        ("annual saving", 890.4),
        ("payback years", 8.76),
        ("ahead after 10 years", 1104.0),
    ]


GALA_TASK = (
    "We sold 220 tickets at 35.00 each, all by card, and the card processor charges 1.4% of the ticket money plus "
    "0.20 per ticket. The venue cost 2,150.00 and the caterer charged 18.50 per guest for all 220 guests. The "
    "auction raised 3,480.00 and the raffle 612.50. Could you work out the net amount raised and the net per guest, "
    "and then write a warm thank-you email to the volunteers that quotes those figures?"
)
GALA_WRONG = (  # multipart_set5_first, mp5-charity-gala: two programs printed 19,660.30, and the email quoted it
    "```python\ntickets_sold = 220\nticket_price = 35.00\nfee_rate = 0.014\nfee_per_ticket = 0.20\n"
    "venue_cost = 2150.00\ncaterer_cost_per_guest = 18.50\nauction_raised = 3480.00\nraffle_raised = 612.50\n"
    "total_ticket_revenue = tickets_sold * ticket_price\n"
    "total_card_processor_fees = total_ticket_revenue * fee_rate + total_ticket_revenue * fee_per_ticket\n"
    "total_caterer_cost = caterer_cost_per_guest * tickets_sold\n"
    "total_raised_before_matching = total_ticket_revenue + total_card_processor_fees + venue_cost + "
    "total_caterer_cost + auction_raised + raffle_raised\nnet_amount_raised = total_raised_before_matching\n"
    'print(f"Net amount raised: {net_amount_raised:.2f}")\n'
    'print(f"Net per guest: {net_amount_raised / tickets_sold:.2f}")\n```'
)
GALA_RIGHT = (
    "```python\ntickets, price, rate, per_ticket = 220, 35.00, 0.014, 0.20\nvenue, catering = 2150.00, 18.50\n"
    "auction, raffle = 3480.00, 612.50\nincome = tickets * price + auction + raffle\n"
    "costs = tickets * price * rate + tickets * per_ticket + venue + catering * tickets\nnet = income - costs\n"
    'print(f"net amount raised: {net:.2f}")\nprint(f"net per guest: {net / tickets:.2f}")\n```'
)


def test_programs_that_add_every_cost_into_a_net_amount_confirm_nothing(write_script: Any) -> None:
    from engine.figures import costs_added

    assert costs_added(GALA_WRONG.strip("`").removeprefix("python\n")) == (
        "total_card_processor_fees",
        "total_raised_before_matching",
    )
    assert costs_added("old_cost = 100\nnew_cost = 60\nnet_saving = old_cost - new_cost\n") is None
    assert costs_added("total_cost = 90 + 10\nbalance_due = total_cost - 20\n") is None
    figures = _computed(write_script, GALA_TASK, GALA_WRONG, GALA_WRONG)
    assert figures.figures == []
    assert "program 1 added total_card_processor_fees into total_raised_before_matching: not used" in figures.note
    figures = _computed(
        write_script, GALA_TASK, GALA_WRONG, GALA_RIGHT, GALA_RIGHT.replace("income - costs", "-costs + income")
    )
    assert [(f.name, f.value) for f in figures.figures] == [
        ("net amount raised", 5420.7),
        ("net per guest", 24.64),
    ]


def test_programs_that_take_the_population_spread_where_the_sample_is_asked_confirm_nothing(write_script: Any) -> None:
    task = (
        "Scores of the pilot group: 72, 68, 81, 77 and 70. Work out the mean and the sample standard deviation, and "
        "write a short note to the team with both figures."
    )
    population = "```python\nimport statistics\nx = [72, 68, 81, 77, 70]\nprint(f'sd: {statistics.pstdev(x):.4f}')\n```"
    figures = _computed(write_script, task, population, population)
    assert figures.figures == []
    assert "program 1 took the population's spread (statistics.pstdev(x)): not used" in figures.note
    sample = population.replace("pstdev", "stdev")
    figures = _computed(write_script, task, sample, sample)
    assert [(f.name, f.value) for f in figures.figures] == [("sd", 5.3198)]
