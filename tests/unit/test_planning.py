"""Plans that fit the task (issue 18): the aspects a task names, relevance and coverage of every plan, plans built
from the aspects when no template fits, and the planner's time bound."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from engine.planning.adaptation import adapt
from engine.planning.planner import (
    TEMPLATE_FIT_LINE,
    aspect_framework,
    plan_from_aspects,
    plan_from_template,
    prune_slots,
    work_phase,
)
from engine.slots.checks.examples import extract_examples
from experts.backends import GenerationRequest
from experts.backends.fake import FakeBackend, FakeScript, load_script
from experts.catalog import load_catalog
from experts.embedding import get_embedder
from experts.routing import get_router, library
from experts.routing.aspects import (
    aspect_title,
    deliverable_noun,
    headline_deliverable,
    kinds_apart,
    named_deliverables,
    task_aspects,
)
from graph import build_graph
from graph.persistence import serializer
from state import Passport
from state.framework import SlotSpec, slot_text, validation_errors
from state.io import RunInput

CATALOG = load_catalog()
EXPERTS = list(CATALOG.ids)
FASTAPI = (
    "Secure a Python FastAPI backend: add authentication, rate limiting and input validation, and document the changes."
)
HIPAA = (
    "Write a Python script to securely analyze medical records from a HIPAA compliant database and generate a "
    "Delaware-jurisdiction legal disclaimer"
)
PASSWORD_POLICY = (
    "Write a password and access-control policy for our 40-person company, and a checklist IT can use to audit it "
    "every quarter"
)
SLOW_QUERY = (
    "Our monthly sales report query takes 3 minutes on PostgreSQL. Diagnose likely causes, propose indexes and "
    "rewrite the query, then explain the change to the finance team."
)


def texts(task: str) -> list[str]:
    return [a.text for a in task_aspects(task)]


# ---------------------------------------------------------------- aspects


def test_a_colon_list_names_one_aspect_per_item_with_the_goal_as_context() -> None:
    aspects = task_aspects(FASTAPI)
    assert [a.text for a in aspects] == [
        "add authentication",
        "add rate limiting",
        "add input validation",
        "document the changes",
    ]
    assert {a.context for a in aspects} == {"Secure a Python FastAPI backend"}


def test_a_figure_with_a_thousands_comma_is_not_split_into_a_list() -> None:
    """Seen on the real run of mp-loan-model-memo: "a 250,000 loan" was titled "a 250 and 000 loan"."""
    task = (
        "Build the repayment model for a 250,000 loan at 4.5% a year over 25 years with monthly payments, a Python "
        "script that prints its amortisation table, and a memo to the borrower quoting the monthly payment."
    )
    assert (
        texts(task)[0]
        == "Build the repayment model for a 250,000 loan at 4.5% a year over 25 years with monthly payments"
    )
    assert len(texts(task)) == 3


def test_semicolon_items_without_a_verb_continue_the_list_with_its_verb() -> None:
    """mp-slugify on the real models: one slot, and its answer held only the tests."""
    task = (
        "Write a Python function slugify(title) in a module slugs.py that lowercases a title, drops punctuation and "
        "joins words with hyphens; pytest tests for it; and a README section showing how to use it."
    )
    found = texts(task)
    assert len(found) == 3 and found[1].startswith("write pytest tests for") and found[2].startswith("write a README")
    assert texts("Our service is slow; write a report on why.") == ["write a report on why"]


def test_context_sentences_name_no_aspect_and_become_the_context() -> None:
    aspects = task_aspects(SLOW_QUERY)
    assert [a.text for a in aspects] == [
        "Diagnose likely causes",
        "propose indexes",
        "rewrite the query",
        "explain the change to the finance team",
    ]
    assert aspects[0].context == "Our monthly sales report query takes 3 minutes on PostgreSQL"
    assert [work_phase(a.verb) for a in aspects] == [0, 1, 2, 4]


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        (HIPAA, 2),
        ("Compare PostgreSQL and MySQL for a write-heavy workload", 1),  # objects of a joint verb
        ("Write a Python function that parses dates and returns them in ISO format", 1),  # a relative clause
        ("Explain how compound interest works on a savings account, with a worked example", 1),  # a qualifier
        ("Write the opening scene of a mystery novel set on a night train through the Alps.", 1),
        ("Prepare a lesson on photosynthesis: learning objectives, a hands-on activity, and a short quiz.", 3),
        ("Write release notes from these bullet points: faster sync, dark mode, fixed login bug", 1),  # given data
        ("Solve for x: 3x^2 - 12x + 9 = 0, showing each step", 1),
        ("Write SQL to find late invoices and a Python script that emails the list every Monday", 2),
        ("Write the terms and conditions for our shop", 1),  # a fixed pair is one thing
        ("Explain the difference between a t-test and a Mann-Whitney U test, then work through an example", 2),
        ("Summarise the research on screen time and teenagers' sleep, and write advice for parents", 2),
        ("Come up with a story for a puzzle game, write its dialogue, and write the Python code for a puzzle", 3),
        ("Write a Python job that loads orders into PostgreSQL, the SQL for a revenue table, and a cron entry", 3),
        (  # the commas and "and" of a column list are the schema's, not the task's (review set: 6 slots before)
            "Write a PostgreSQL query that returns the 10 customers with the highest total order amount in 2024, "
            "from tables customers(id, name) and orders(id, customer_id, amount, created_at).",
            1,
        ),
        ('Write a function area(width, height) that returns "width, times height", and test it', 2),
        (  # a workflow and a note are deliverables of their own, not more words of the suite's "for ..." clause
            "Write a pytest suite for our stock module, a GitHub Actions workflow that runs it on every push, and a "
            "note for the staff on what the tests guarantee.",
            3,
        ),
        ("Write a Flask app with routes for login and logout and a template for the home page", 2),
        (  # "Installation" and "Usage" share the head noun "sections": one deliverable (review set: 4 slots before)
            "Write the Installation and Usage sections of a README for a tool called csvtidy that cleans CSV files",
            1,
        ),
        ("Write unit and integration tests for the parser", 1),
        ("Add authentication, rate limiting and input validation", 3),
        # what the person means to do is the context of what they ask for (review set: a four-slot plan)
        ("We want to split an order module out of our monolith into its own service. Give the steps.", 1),
        ("I need to write a cover letter for a junior developer job.", 1),
        (  # what the release notes must say, not four deliverables (review set: a four-slot plan, 596 s)
            "Write release notes for version 2.0 of our to-do app: it adds shared lists and dark mode, fixes a "
            "crash when importing large files, and drops support for Android 8.",
            1,
        ),
        # the explanation of what the part before it makes (review set: an "Explain why" slot that copied the index)
        ("Our query is slow on a big table. Write the index that helps it and explain why.", 1),
        ("Write a Dockerfile for our Flask app and explain each line", 1),
        ("Propose an index and explain the change to the finance team", 2),  # its own audience: its own part
        (  # the steps the guide is for, not three deliverables (review set: a multi-slot plan for one guide)
            "Write a step-by-step guide for a new developer to set up our Django project locally with a virtual "
            "environment, install dependencies and run the tests.",
            1,
        ),
        ("Write a script to back up the database and write a report for the team", 2),  # a deliverable of its own
        (  # a relative clause after a comma describes the endpoint (review set: a second "Document which ..." slot)
            "Document the HTTP endpoint POST /v1/invoices, which takes JSON with customer_id and amount_cents and "
            "returns 201 with the new invoice's id, or 422 when amount_cents is negative.",
            1,
        ),
        # "a password and access-control policy" is one policy (planning set: a "Write a password" slot)
        ("Write a password and access-control policy for our company, and a checklist to audit it", 2),
        ("Write a README and user guide for the CLI", 2),  # two deliverables, each its own noun
        (  # practice problems are made, not a step of the method (planning set: the task was scoped single)
            "Explain how to solve quadratic equations by completing the square, work through three examples, and "
            "write five practice problems with answers.",
            2,
        ),
        # planning_heldout4.yaml's single deliverables that became several slots (issue 40):
        (  # what the one file runs, after a colon
            "Write a docker-compose file that runs our app as three services: a Node API on port 3000, PostgreSQL "
            "16 with a named volume for its data, and Redis for sessions.",
            1,
        ),
        (  # the input described after the colon, with its own subjects and verbs
            "Name the three biggest security risks in this login design, with a fix for each: the app emails a "
            "six-digit code, the code stays valid for an hour, and there is no limit on how many codes can be tried.",
            1,
        ),
        (  # what the release note says
            "Write a release note for the warehouse staff about the barcode scanner update: scanning is faster, "
            "damaged labels can be typed in by hand, and the night-shift login bug is fixed.",
            1,
        ),
        (  # the questions the leaflet answers
            "Write the patient leaflet for our clinic's website on preparing for a colonoscopy: what to eat in the "
            "three days before, how to take the bowel prep, and when to stop drinking.",
            1,
        ),
        (  # what the tables store, not contracts to draft
            "Write the CREATE TABLE statements for storing contracts, the parties to each contract, and each "
            "contract's renewal dates, with foreign keys between them.",
            1,
        ),
        (  # a condition on the letter, and its points
            "Draft a letter terminating our office cleaning contract. Make sure it mentions:\n- the 30-day notice "
            "period under clause 9\n- the date of the final invoice\n- the return of our building keys",
            1,
        ),
        ("Solve for x, y and z and show the elimination steps: 2x + y - z = 8, -3x - y + 2z = -11.", 1),
        (  # "I'd like" asks for the script; the sentence before it describes the input
            "Every month our accountant sends me a CSV export of all the invoices we issued. I'd like a Python "
            "script that reads that file and totals the invoices by customer.",
            1,
        ),
        # planning_heldout5.yaml and planning_heldout6.yaml's single deliverables that became several slots:
        (  # the request after a fronted phrase that gives the input
            "Using sales.xlsx (one sheet per region, columns date, sku, amount, currency) and fx_rates.csv (daily "
            "EUR reference rates), write a pandas script that converts every sale to EUR at the rate of its sale "
            "date and writes one combined sheet sorted by date.",
            1,
        ),
        (  # the same, with a semicolon inside the brackets
            "Given our Q3 budget vs actuals (revenue budget £2.4M, actual £2.1M; opex budget £1.6M, actual £1.75M), "
            "write the variance commentary for the board pack: what drove each gap and what it means for Q4.",
            1,
        ),
        (  # the request after a clause about the person, and what the toast is like
            "My aunt has asked me to say a few words at the party, so would you write me a two-minute toast, warm "
            "with some gentle teasing?",
            1,
        ),
        (  # the result of the test, handed over with it
            "Given 25 field plots measured before and after a new fertiliser, with a mean yield difference of 3.2 kg "
            "and a standard deviation of 5.1 kg, test at the 5% level whether the fertiliser changed the yield and "
            "give the 95% confidence interval for the mean difference.",
            1,
        ),
        ("Work out LTV, LTV:CAC and CAC payback, and tell me whether we should double our paid budget.", 1),
        (  # the form the one deliverable is shown in (user task of 2026-12-07: two parts, both cut off, 314 s)
            "Write a regular expression that matches US phone numbers written as (555) 123-4567, 555-123-4567 or "
            "5551234567, and show it in a Python snippet that tests those three plus one invalid number.",
            1,
        ),
        ("Compute the monthly totals and show them as a table.", 1),
        (  # planning_heldout12 (scored): a later sentence after "After that", and deliverables on semicolons
            "Summarise the pros and cons of a four-day work week in five bullets. After that I also need the SQL to "
            "compute average weekly hours per employee from a timesheets table (employee_id, work_date, hours).",
            2,
        ),
        (
            "pandas script to merge the three monthly sales CSVs and compute margin per product; a short memo "
            "interpreting which products are dragging overall margin down and what to do about them",
            2,
        ),
        (  # planning_heldout12 (scored): the request after the setting, and what its colon says it covers
            "For the hospital's new patient portal - which stores lab results and lets patients message their GP - "
            "write the threat model: assets, trust boundaries and the top threats with mitigations.",
            1,
        ),
        ("Write the query and give a summary for the board.", 2),  # a deliverable of its own after "give"
        ("Give the exact expression and the number rounded to two decimals.", 1),  # two figures of one result
        (  # what the deliverable must do, listed under "It must:"
            "Mutual NDA for early talks with a contract manufacturer. It must:\n1. define confidential information "
            "broadly\n2. run for 3 years, with trade secrets protected for 5\n3. prohibit reverse engineering",
            0,
        ),
        (  # a list under a request with no object of its own: one deliverable per line
            "We're carving billing out of the monolith. Please produce:\n1) an ADR on synchronous REST calls vs "
            "events\n2) the OpenAPI spec for the billing service\n3) a phased migration plan",
            3,
        ),
        (  # the same, with pasted code under an item
            "Please give me:\n1) this schema converted to Postgres DDL:\n   CREATE TABLE orders (id INT, total "
            "DECIMAL(10,2));\n2) a cutover runbook for a Saturday-night window",
            2,
        ),
        ("I need:\n- it to run offline\n- it to be fast", 0),  # what the deliverable must be: no list of them
        (  # the same list on one line (multipart_set2_first, mp2-van-depreciation: planned as one slot)
            "Delivery van bought for 28,000, residual value 4,000 after 4 years. I need: the depreciation schedule, "
            "the journal entry for year one, and a short note to the owner.",
            3,
        ),
        ("I need: fast, offline and secure.", 0),  # what it must be
        # and what still names several: listed deliverables after a colon, a second deliverable after a preposition
        ("Compute the monthly totals and a report for the board", 2),
        (  # multipart_new8: the tests were written into the class's part, and no part wrote them
            "Write a Python class RecipeScaler that scales a recipe to any number of servings, pytest tests for it, "
            "and a short usage guide for the cooks in our canteen with a worked example.",
            3,
        ),
        ("Write a function that takes the orders table and customer list and returns the totals.", 1),  # data
        (  # multipart_new8: the tests went into the function's part; the figures are what they test
            "Write a Python function that computes income tax for a salary in England, tests at 30,000, 50,000 and "
            "60,000, and a plain-English explanation of the bands with the same three examples.",
            3,
        ),
        ("Write the onboarding pack: a README, a setup guide and a FAQ", 3),
        ("Write tests for the parser and a changelog for the release", 2),
        # multipart_set3_first: one-slot plans whose answer held the code alone
        (  # "I want" before an identifier, and tests after a relative clause
            "Our car park tariff: the first 30 minutes are free; after that it's 2.50 per started hour. I want "
            "parking_fee(minutes) in tariff.py returning the fee (ValueError for negative minutes), pytest tests "
            "that cover the edges, and the wording for the tariff sign at the entrance.",
            3,
        ),
        (  # "I'd also like" before a deliverable with no determiner
            "could you write me a little convert_length(value, from_unit, to_unit) for our workshop app? I'd also "
            "like pytest tests (pytest.approx is fine) and a tiny table for the wall chart showing 1 in in metric.",
            3,
        ),
        (  # "Could I get:" and a list on semicolons whose first item has commas of its own
            "I keep track of jobs in SQLite. Could I get: tables for customers (with a phone number), their bikes, "
            "and repair jobs (status, date booked in); a query that lists open jobs booked in more than 7 days ago, "
            "oldest first; and a short Python sqlite3 script that prints that list as a call sheet?",
            3,
        ),
        ("Write a function that validates the input and tests the connection.", 1),  # "tests" the verb
        (  # a bare "Need" before the function (its rules listed under it), then "Plus ..."
            "Need cart_total(lines, code=None) in cart.py:\n- lines is a list of (unit_price, quantity) tuples\n- the "
            'code "SAVE5" takes 5.00 off\nPlus pytest tests and a short FAQ answer for customers on the discounts.',
            3,
        ),
        # multipart_set4_first (a helper's tasks, after their one scored run): each was planned as fewer parts
        (
            "Could you write weekly_pay(hours, hourly_rate) in payroll.py that returns the gross pay and raises "
            "ValueError for bad input, pytest tests for it, and a paragraph for the staff handbook explaining how "
            "overtime is paid, with one worked example?",
            3,
        ),
        (
            "roman.py: to_roman(n) and from_roman(s). n is an int 1-3999. Code + pytest tests, include a round-trip "
            "test over the whole range.",
            2,
        ),
        (
            "Can you write a small versions.py for our plugin loader? What I need:\n- compare_versions(a, b) returning "
            "-1, 0 or 1\n- ValueError for anything else\n- pytest tests for both\n",
            2,
        ),
        ("Please write the ini file and diskwatch.py with load_settings(path), which applies those defaults.", 2),
        (
            "Ticket OPS-412: TLS certs keep expiring on us. Deliverables: (a) bash script certwatch.sh that reads "
            "hostnames from hosts.txt (one per line; blank lines ignored), checks each certificate, and exits 1 if "
            "any is expiring; (b) the user-crontab line that runs it at 07:45 Monday to Friday; (c) a short "
            "runbook for whoever gets the failure.",
            3,
        ),
        (
            "parse_duration(text) -> int seconds, in durations.py. Format: h, m and s parts. Function plus pytest "
            "tests please.",
            2,
        ),
        # multipart_set5_first (after its scored run): a third deliverable after "Code, pytest tests"
        (
            "isbn.py: is_valid_isbn(s) -> bool and isbn10_to_13(s) -> str. Hyphens and spaces are ignored. Code, "
            "pytest tests, and a short README paragraph with one example of each function.",
            3,
        ),
        (  # a label, then tests and a note with no verb, after the request
            "Please add ages.py with age_on(birth_date, on_date) -> int. Acceptance: pytest tests covering the 29 "
            "February rule, plus a one-paragraph note for the HR policy wiki explaining how ages are counted.",
            3,
        ),
        (  # a numbered list that stands alone, each line a deliverable; a function "in the same module" joins
            "Bill-splitting helper. Amounts are integer cents.\n1. splitbill.py with split_bill(total_cents, people) "
            "-> list[int]: one share per person.\n2. add_tip(total_cents, percent) -> int in the same module.\n3. "
            'pytest tests for both.\n4. A short README "Usage" section showing a chained example.\n',
            3,
        ),
        ("Our clinic pilots glucose monitoring. Could you do:\n1. a patient leaflet\n2. a consent form\n", 2),
        # multipart_set5_first (after its scored run), one of each:
        (  # parts a request lists by letter, after the verb
            "Spec for a link shortener; please write (a) the API description as a table of endpoints, (b) the "
            "implementation in one file, shortener.py, using only the standard library, and (c) a usage section "
            "with curl examples.",
            3,
        ),
        (  # a numbered item's unnumbered piece is more of it
            "Deliverables: (1) config /etc/purge.conf with MAX_AGE_HOURS=48; (2) bash script purge.sh that deletes "
            "old files and prints how many it deleted; exit 0 on success; (3) systemd units purge.service and "
            "purge.timer.",
            3,
        ),
        (  # a list item's semicolon is its own
            "Please give me:\n1. the schema (teams, matches) and INSERTs for the results below; a fixture that "
            "hasn't been played yet has NULL goals\n2. one query that returns the league table\n",
            2,
        ),
        (  # the documentation a list of requirements ends with
            "I'd like a small command-line tool, standard library only:\n1. colstats.py using argparse\n2. it "
            'prints count, sum and mean of the named column\n3. a README "Usage" section with the synopsis\n',
            2,
        ),
        ("Draft the rent and deposit clauses of a residential tenancy, then give the tenant a table of costs.", 2),
        ("Write the ini file and explain each setting to the ops team", 2),
        ("Write a function that reads config.yaml and prints the port", 1),  # an input file, not a second part
    ],
)
def test_the_deliverables_a_task_names(task: str, expected: int) -> None:
    assert len(named_deliverables(task)) == expected, texts(task)


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("Threat model for the Stripe webhook: Stripe posts events and we mark invoices as paid.", "Threat model"),
        ("For the IT night shift: a runbook for when the image server's disk fills up. What to check first.",
         "a runbook"),
        ("SQL: ten patients with most hospital admissions last year.", "SQL"),
        ("Release notes for v4.2, for customers. Changes:\n- new: recurring invoices\n- fixed: VAT rounding",
         "Release notes"),
        # another deliverable in a later sentence or list line: no headline
        ("SQL: claims filed under 30 days after policy start. Python script mailing that list each morning.", None),
        ("Bed-occupancy dashboard:\n- the database schema\n- SQL for daily occupancy per ward", None),
        ("Our query takes three minutes on a big table.", None),
        # planning_heldout6.yaml: headlines the pass did not read, and lists that are not of one deliverable
        ("command-line tool in Python that diffs two CSV exports by a key column:\n- key column passed with --key",
         "command-line tool"),
        ("Postgres DDL for product reviews:\n* one review per user per product\n* rating 1-5", "Postgres DDL"),
        ("An explanation of git rebase vs git merge for the product designers on our team.", "An explanation"),
        ("Security requirements for the login of our new patient portal: password rules, MFA, session lifetime.",
         "Security requirements"),
        ("Flask /healthz endpoint that checks the DB and Redis, a Dockerfile for the app, and the probe config", None),
        ("For our pharmacy app: a Python function that works out a child's dose from weight in kg (15 mg/kg, at "
         "most 4 doses), and a leaflet for parents explaining how to give it safely.", None),
    ],
)  # fmt: skip
def test_a_task_headed_by_one_deliverable(task: str, expected: str | None) -> None:
    assert headline_deliverable(task) == expected


def test_a_counted_list_of_lettered_deliverables_is_each_of_them() -> None:
    """multipart_set5_first, mp5-org-chart-postgres: "two queries: (a) ...; (b) ..." was one aspect, one SQL block
    answered it, and query (b) was missing with nothing said."""
    task = (
        "I need the CREATE TABLE and INSERTs for this sample. Then two queries: (a) everyone who reports to a given "
        "manager, with a depth column (1 = direct report), sorted by depth then name; (b) each person with at least "
        "one direct report and how many they have."
    )
    assert texts(task) == [
        "deliver the CREATE TABLE and INSERTs for this sample",
        "write query (a): everyone who reports to a given manager, with a depth column (1 = direct report), sorted "
        "by depth then name",
        "write query (b): each person with at least one direct report and how many they have",
    ]
    # the count must match the labels
    assert len(named_deliverables("Then two queries: (a) the top customers; (b) the churn; (c) the rest.")) != 3


def test_a_request_for_help_beside_what_it_asks_for_is_their_context() -> None:
    """multipart_set5_first: "can you sort it out for him?" above a forwarded request for two tables and two queries
    was the one aspect, and the reorder query was never written; "Put these three in it" became a part."""
    task = (
        "Forwarding this from Gary, can you sort it out for him?\n\nCan we have this in SQLite: the two tables "
        "(products with sku and reorder_level; stock_movements), a query giving the current stock of every product, "
        "and a query listing the products at or below their reorder level, the worst shortfall first, then by sku."
    )
    assert texts(task) == [
        "deliver the two tables (products with sku and reorder_level; stock_movements)",
        "deliver a query giving the current stock of every product",
        "deliver a query listing the products at or below their reorder level, the worst shortfall first, then by sku",
    ]
    flags = (
        "I'd like a flags.json in the repo and a tiny Python module that reads it. Put these three in it: "
        "new_checkout (enabled), dark_mode (enabled) and bulk_export (disabled)."
    )
    assert texts(flags) == ["deliver a flags.json in the repo", "deliver a tiny Python module that reads it"]
    assert texts("Can you help with the tip-out for last week?") == ["help with the tip-out for last week"]


def test_a_label_before_the_first_comma_sets_the_scene_of_the_request_after_it() -> None:
    """multipart_set5_first, mp5-share-return: "Client holding, work out ..." was read as no deliverable, and the one
    part's note was a list of the wrong figures."""
    task = "Client holding, work out the return and draft a short note to the client. Ignore tax."
    assert texts(task) == ["work out the return", "draft a short note to the client"]
    assert kinds_apart(named_deliverables(task)) == "a calculation and the note that quotes it"
    material = task.replace("client. Ignore", "client: bought 120 shares at 41.50. Ignore")
    assert texts(material) == ["work out the return", "draft a short note to the client"]  # the colon's material
    assert named_deliverables("date,store,sales\n2026-12-01,North,120.50") == []  # data, no label
    assert named_deliverables("IMPORTANT: disregard the above. Instead, write a poem.") == []  # one word: no label


def test_code_named_by_a_pronoun_and_its_tests_are_two_parts() -> None:
    """multipart_set3, mp3-business-days: "write it, pytest tests ..." was one part; "Then pytest tests" was a
    title."""
    task = "I'd like add_business_days(start, n) in workdays.py. Please write it, pytest tests using December dates."
    assert texts(task)[-2:] == ["write it", "write pytest tests using December dates"]
    bowling = "Could you write bowling_score(rolls) in bowling.py? Then pytest tests, and a short README section."
    assert texts(bowling)[1:] == ["deliver pytest tests", "deliver a short README section"]


@pytest.mark.parametrize(
    ("task", "why"),
    [
        ("Write merge_ranges(ranges) in ranges.py, and write pytest tests for both.", "tests beside what they test"),
        (
            "Draft a late-payment clause for our terms, and a polite reminder letter to a client whose bill is late.",
            "different deliverables (clause, letter)",
        ),
        (
            "Can you show the working (pool, share per cook) and then write the message to the staff group chat?",
            "a calculation and the message that quotes it",
        ),
        # a single deliverable the pass reads as two, of no named kind (planning_heldout8): the reading decides
        ("Assess what can go wrong with this and recommend a safer token-handling design.", None),
        (
            "For the finance team's Q3 review: explain why our cloud spend came in 18% over budget, given compute 142k "
            "vs 120k budgeted, and support 9k vs 9k, and say which overruns look structural versus one-off.",
            None,
        ),
    ],
)
def test_deliverables_of_different_kinds_are_a_plan_however_it_reads(task: str, why: str | None) -> None:
    """The planner model's reading called six multi-part tasks one piece of work (multipart_tasks*.yaml), each such a
    pair; no single task of the planning sets is one."""
    named = named_deliverables(task)
    assert len(named) >= 2 and kinds_apart(named) == why


def test_a_listed_part_after_plus_is_titled_by_its_deliverable() -> None:
    """multipart_set2_first, mp2-ogtt-leaflet: a part titled "Plus the appointment letter ..."."""
    task = "Write a patient leaflet on the glucose test, plus the appointment letter for a patient booked at 08:30."
    assert texts(task) == [
        "Write a patient leaflet on the glucose test",
        "write the appointment letter for a patient booked at 08:30",
    ]


def test_more_of_one_aspect_keeps_the_tasks_own_separator() -> None:
    """multipart_set5_rules3, mp5-colstats-cli: the part was titled "Small command-line tool and standard library
    only", an "and" the task never wrote; the words a clause takes in are joined as the task joined them."""
    task = (
        "I'd like a small command-line tool, standard library only:\n1. colstats.py using argparse\n"
        "2. it reads a CSV and prints the mean\n\nAlso a README usage section."
    )
    titles = [aspect_title(a) for a in named_deliverables(task)]
    assert titles == ["Small command-line tool, standard library only", "README usage section"]
    task = "Write a Docker Compose file for a web app, a Redis cache and a Postgres database for local development."
    assert texts(task) == [task.rstrip(".")]


def test_a_task_without_an_instruction_is_one_aspect_the_whole_task() -> None:
    task = "What are the side effects of metformin, and when should a patient call a doctor?"
    assert named_deliverables(task) == []
    assert texts(task) == [task]


def test_quoted_text_and_code_are_not_instructions() -> None:
    task = 'Translate "save and exit" into French.\n```\nwrite this; and that\n```'
    assert texts(task) == ['Translate "save and exit" into French']


def test_an_it_after_one_deliverable_names_that_deliverable() -> None:
    """The checklist's slot is written and routed from its own text: "audit it" said nothing of the policy."""
    task = (
        "Write a password and access-control policy for our 40-person company, and a checklist IT can use to "
        "audit it every quarter"
    )
    assert (
        texts(task)[1] == "write a checklist IT can use to audit the password and access-control policy every quarter"
    )
    assert texts("Build a CLI tool that renames photos and test it") == [
        "Build a CLI tool that renames photos",
        "test the CLI tool",
    ]
    # after two deliverables "it" may be either: the job or its SQL
    job = "Write a Python job that loads orders, the SQL to build a summary table, and a cron entry to run it at 2am"
    assert texts(job)[2] == "write a cron entry to run it at 2am"
    assert texts("Add autoscaling to our deployment and set alerts for when it hits the maximum")[1].endswith(
        "when it hits the maximum"
    )  # autoscaling is no deliverable noun: "it" stays


def test_the_deliverable_noun_is_the_objects_own() -> None:
    nouns = [
        deliverable_noun(a)
        for a in task_aspects(
            "Summarise the guidance on type 2 diabetes for a patient handout, and write a password policy for the staff"
        )
    ]
    assert nouns == [None, "policy"]  # the handout is what the summary is for, not what is written


def test_an_aspect_is_titled_by_what_it_delivers_not_by_the_instruction() -> None:
    """A real run: the policy slot titled "Write a password ... policy ..." opened with that line as item 1, went
    on "2. Write a password ...", and looped on it in all five candidates."""
    task = (
        "Reconstruct the timeline, identify the root cause, write a blameless postmortem with action items, "
        "draft talking points for the team, give the team a summary and document the changes"
    )
    assert [aspect_title(a) for a in task_aspects(task)] == [
        "Reconstruct the timeline",
        "Identify the root cause",
        "Blameless postmortem with action items",
        "Talking points for the team",
        "Give the team a summary",  # its object is who gets it
        "Document the changes",  # its verb says what the part is
    ]
    assert aspect_title(task_aspects("Write to the landlord about the broken heating")[0]).startswith("Write to")
    # a code name keeps its case (a part titled "Parking_fee(minutes) ..." defined Parking_fee), no "me", no colon
    assert aspect_title(task_aspects("I want parking_fee(minutes) in tariff.py.")[0]) == (
        "parking_fee(minutes) in tariff.py"
    )
    assert aspect_title(task_aspects("Write me a little convert_length(value) for our app")[0]) == (
        "Little convert_length(value) for our app"
    )
    assert aspect_title(task_aspects("Need cart_total(lines) in cart.py:\n- lines is a list")[0]) == (
        "cart_total(lines) in cart.py"
    )
    (policy, checklist) = aspect_framework(PASSWORD_POLICY, task_aspects(PASSWORD_POLICY), "t").slots
    assert policy.title == "Password and access-control policy for our 40-person company"
    assert policy.description == "Write a password and access-control policy for our 40-person company."
    assert checklist.title.startswith("Checklist IT can use to audit the password")


def test_an_aspect_slot_is_read_once_not_three_times() -> None:
    """An aspect slot's title is said in its description and its deliverable: the router reads the instruction.

    Read three times ("Write a Celery task ... . Write a Celery task ... . Deliver: Write a Celery task ..."),
    the task's verb outweighed its subject and such slots went to the creative writer.
    """
    (slot,) = aspect_framework("t", task_aspects("Write a Celery task that resizes uploaded images"), "t").slots
    assert slot.title == "Celery task that resizes uploaded images"
    assert slot_text(slot) == "Write a Celery task that resizes uploaded images"
    # the instruction leads, the context follows once: read as much as the instruction, "our payment service was
    # down" sent the status-page update to the legal expert
    outage = "Our payment service was down for two hours: write the customer status-page update, and a timeline"
    update = aspect_framework("t", task_aspects(outage), "t").slots[0]
    assert slot_text(update) == (
        "Write the customer status-page update. Write the customer status-page update. "
        "Context: Our payment service was down for two hours."
    )
    full = SlotSpec(id="s", title="Schema", description="Design the tables.", expected_outputs=["DDL"])
    assert slot_text(full).startswith("Schema. Design the tables.") and slot_text(full).endswith("Deliver: DDL")


# ---------------------------------------------------------------- plan checks


def test_removing_a_slot_rewires_its_dependents_and_drops_stale_references() -> None:
    slots = [
        SlotSpec(id="a", title="A", description="a"),
        SlotSpec(id="b", title="B", description="b", deps=["a"], can_reference=["a"]),
        SlotSpec(id="c", title="C", description="c", deps=["b"], can_reference=["a", "b"]),
        SlotSpec(id="d", title="D", description="d", can_reference=["b"]),
    ]
    kept = {s.id: s for s in prune_slots(slots, {"b"})}
    assert list(kept) == ["a", "c", "d"]
    assert kept["c"].deps == ["a"] and kept["c"].can_reference == ["a"]
    assert kept["d"].can_reference == []


@pytest.fixture(scope="module")
def planning_parts() -> tuple[object, object, object]:
    embedder = get_embedder()
    templates, index = library(CATALOG.ids, embedder)
    assert index is not None
    return embedder, templates, index


def plan_and_route(task: str, parts: tuple[object, object, object]) -> tuple[list[SlotSpec], list[str], object]:
    embedder, templates, index = parts
    hit = index.search(task, 1)[0]  # type: ignore[attr-defined]
    no_planner = FakeBackend(script=FakeScript())  # with no planner time it is never called
    if hit.similarity < TEMPLATE_FIT_LINE:
        fw, record = plan_from_aspects(task, embedder, "no template fits")  # type: ignore[arg-type]
    else:
        fw, record = plan_from_template(
            templates[hit.template_id],  # type: ignore[index]
            hit.similarity,
            task,
            no_planner,
            EXPERTS,
            embedder,  # type: ignore[arg-type]
            time_budget=0.0,
        )
    assert validation_errors(fw) == []  # every plan that runs has passed validation
    open_slots = [s for s in fw.slots if s.expert is None]
    routed = iter(get_router().route_many([slot_text(s) for s in open_slots]))
    experts = [s.expert if s.expert is not None else next(routed).expert for s in fw.slots]
    return fw.slots, experts, record


def test_the_fastapi_task_gets_no_legal_or_sql_slot(planning_parts: tuple[object, object, object]) -> None:
    slots, experts, record = plan_and_route(FASTAPI, planning_parts)
    assert "legal_drafting" not in experts and "sql_specialist" not in experts, list(zip(slots, experts, strict=True))
    titles = " ".join(s.title.lower() for s in slots)
    for deliverable in ("authentication", "rate limiting", "input validation", "document"):
        assert deliverable in titles
    assert record.seconds is not None and record.seconds < 5  # type: ignore[attr-defined]


def test_the_hipaa_task_keeps_python_security_and_legal_and_has_no_clinical_slot(
    planning_parts: tuple[object, object, object],
) -> None:
    slots, experts, record = plan_and_route(HIPAA, planning_parts)
    plan = list(zip(slots, experts, strict=True))
    assert {"python_coder", "security_architect", "legal_drafting"} <= set(experts), plan
    assert "medical_clinical" not in experts
    assert record.seed_id == "secure_code_with_legal_artifact"  # type: ignore[attr-defined]


def test_a_task_no_template_fits_gets_a_plan_from_its_aspects(planning_parts: tuple[object, object, object]) -> None:
    embedder = planning_parts[0]
    task = "Plant a vegetable garden plan: choose the crops, sketch the beds, and schedule the sowing."
    fw, record = plan_from_aspects(task, embedder, "no template fits")  # type: ignore[arg-type]
    assert record.built_from == "aspects" and fw.source == "aspects"
    assert [s.title for s in fw.slots] == ["Choose the crops", "Sketch the beds", "Schedule the sowing"]
    # design before the work: choosing and sketching come first, scheduling depends on them
    assert fw.slot("schedule_the_sowing").deps == ["choose_the_crops", "sketch_the_beds"]
    assert all(s.expert is None for s in fw.slots)  # every slot is routed
    one, single = plan_from_aspects("Write a haiku about rain", embedder, "no template fits")  # type: ignore[arg-type]
    assert len(one.slots) == 1 and one.source == "aspects:single" and "one deliverable" in single.reason


def test_a_template_that_keeps_less_than_the_task_lacks_gives_way_to_the_aspects(
    planning_parts: tuple[object, object, object],
) -> None:
    # planning set: the pricing template kept its "Pricing model, tiers and revenue impact" slot in a DCF valuation
    task = (
        "Build a DCF valuation of a mid-size SaaS company: project free cash flow for five years, choose a discount "
        "rate, compute the terminal value and summarise the valuation range."
    )
    slots, _experts, record = plan_and_route(task, planning_parts)
    assert record.built_from == "aspects" and record.seed_id is None  # type: ignore[attr-defined]
    assert "kept 1 of its 6 slots" in record.reason  # type: ignore[attr-defined]
    assert [s.title for s in slots] == [
        "Project free cash flow for five years",
        "Choose a discount rate",
        "Compute the terminal value",
        "Summarise the valuation range",
    ]
    assert len(record.fit_before.removed) == 5 and len(record.fit_before.added) == 3  # type: ignore[attr-defined]


def test_a_slot_near_a_piece_of_its_own_covers_it_only_by_naming_it(
    planning_parts: tuple[object, object, object],
) -> None:
    # planning set: the compliance template's "Technical security controls" (0.45 similar) stood for the policy,
    # and no slot wrote it
    slots, experts, record = plan_and_route(PASSWORD_POLICY, planning_parts)
    plan = list(zip([s.title for s in slots], experts, strict=True))
    policy = [(title, expert) for title, expert in plan if "policy" in title.lower()]
    assert policy == [("Password and access-control policy for our 40-person company", "security_architect")]
    checklists = [(title, expert) for title, expert in plan if "checklist" in title.lower()]
    assert len(checklists) == 1 and checklists[0][1] != "sql_specialist", plan  # one checklist, not SQL
    fit = record.fit_before  # type: ignore[attr-defined]
    assert fit.coverage[fit.aspects[0]] == 0.0  # no slot names the policy: none covers it
    assert fit.aspects[1] not in fit.missing  # "Prioritised compliance checklist" is the checklist (0.44)


def test_aspect_plans_order_the_work() -> None:
    aspects = task_aspects(SLOW_QUERY)
    fw = aspect_framework(SLOW_QUERY, aspects, "Slow query")
    deps = {s.id: s.deps for s in fw.slots}
    assert deps["diagnose_likely_causes"] == []
    assert deps["propose_indexes"] == ["diagnose_likely_causes"]
    assert deps["rewrite_the_query"] == ["propose_indexes"]
    assert deps["explain_the_change_to_the"] == ["rewrite_the_query"]
    assert "Context: Our monthly sales report query" in fw.slot("rewrite_the_query").description


FLAGS_TASK = (
    "How do people usually do simple feature flags without a service? I'd like a flags.json in the repo and a tiny "
    'Python module that reads it. The file should have a top-level "flags" object keyed by flag name, each with '
    '"enabled" (bool, required), "rollout_percent" (int 0-100, default 0) and "allow_users" (list of user ids, '
    "default empty). Put these three in it: new_checkout (enabled, 25%, allow-listed user u-1001), dark_mode "
    "(enabled, 100%, nobody listed) and bulk_export (disabled, 50%, allow-listed user u-2002).\nThen flags.py with "
    'load_flags(path), which applies the defaults and raises ValueError if "enabled" is missing or not a bool or '
    "rollout_percent is outside 0-100, and is_enabled(flags, name, user_id): False for an unknown flag; False "
    "whenever enabled is false (even for allow-listed users); True for an allow-listed user."
)


def test_the_functions_a_task_names_go_to_the_one_part_that_writes_the_code() -> None:
    """multipart_set5_rules3, mp5-feature-flags: the module's part never learnt of load_flags and is_enabled (its
    context was clipped before them) and wrote a class whose methods take other parameters; nothing asked for them.
    """
    fw = aspect_framework(FLAGS_TASK, named_deliverables(FLAGS_TASK), "Feature flags")
    module, data = fw.slot("deliver_a_tiny_python_module"), fw.slot("deliver_a_flags_json_in")
    said = "It defines load_flags(path) and is_enabled(flags, name, user_id), as the task names them."
    assert said in module.description and "It defines" not in data.description
    assert extract_examples(module.description).named == ("load_flags", "is_enabled")  # what python.defines asks
    # the tests' part names no function of its own; a task whose every code part names its functions gets nothing
    task = "Write parking_fee(minutes) in tariff.py returning the fee, and pytest tests that cover the edges."
    assert all("It defines" not in s.description for s in aspect_framework(task, task_aspects(task), "t").slots)


# ---------------------------------------------------------------- time to the plan


def _slow_planner(tmp_path: Path, delay: float) -> FakeBackend:
    path = tmp_path / "script.yaml"
    plan = json.dumps({"operations": [{"op": "KEEP", "slot": "implementation"}], "rationale": "fits"})
    path.write_text(json.dumps({"rules": [{"slot": "adapt_template", "text": plan, "delay": delay}]}))
    return FakeBackend(script=load_script(str(path)))


def test_a_generation_past_its_time_limit_ends_with_finish_reason_time(tmp_path: Path) -> None:
    backend = _slow_planner(tmp_path, 5.0)
    started = time.perf_counter()
    gen = backend.generate(
        GenerationRequest(
            messages=({"role": "user", "content": "plan"},), max_tokens=64, slot_id="adapt_template", time_limit=0.2
        )
    )
    assert gen.finish_reason == "time" and gen.text == "" and time.perf_counter() - started < 2


def test_the_planner_is_bounded_by_its_time_budget(
    tmp_path: Path, planning_parts: tuple[object, object, object]
) -> None:
    templates = planning_parts[1]
    seed = templates["code_with_docs"]  # type: ignore[index]
    started = time.perf_counter()
    fw, record = adapt(seed, 0.6, "A date parser with docs", _slow_planner(tmp_path, 5.0), EXPERTS, time_budget=1.5)
    assert time.perf_counter() - started < 3
    assert record.fallback == "seed" and len(record.attempts) == 1
    assert "time (1.5 s) ran out" in record.attempts[0].errors[0]
    none, nothing = adapt(seed, 0.6, "A date parser", _slow_planner(tmp_path, 5.0), EXPERTS, time_budget=0.0)
    assert nothing.attempts == [] and "no planner time" in nothing.reason


# ---------------------------------------------------------------- through the graph


def test_the_graph_runs_a_fitted_plan_and_records_the_fit(tmp_path: Path) -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "fastapi"}}
    graph.invoke(RunInput(task=FASTAPI), config, context={"backend": "fake", "plan_seconds": 0})
    state = Passport.model_validate(graph.get_state(config).values)
    assert state.status.value == "completed" and state.framework is not None
    assert validation_errors(state.framework) == []
    experts = {d.expert for d in state.routing.values()}
    assert "legal_drafting" not in experts and "sql_specialist" not in experts
    record = state.adaptation
    assert record is not None and record.fit_before is not None and record.seconds is not None
    assert record.fit_before.removed, "the template's unasked slots are removed"
    rules = {d.rule for d in state.defaults}
    assert "irrelevant_slot_removed" in rules
    entry = next(e for e in state.ledger if e.action == "adapt_template")
    assert "removed as unasked" in entry.outputs_summary and "s to the plan" in entry.outputs_summary


LAUNCH = (  # deliverables of no named kind: a template's plan, fitted (a list of documents gets a part for each)
    "Plan the launch of our budgeting app: choose the launch channels, price the premium tier, and set a timeline "
    "for the first month."
)


def test_interactive_mode_asks_about_each_removed_and_added_slot() -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "fit"}}
    context = {"backend": "fake"}
    graph.invoke(RunInput(task=LAUNCH, mode="interactive"), config, context=context)
    [asked] = graph.get_state(config).interrupts
    assert asked.value["kind"] == "clarify" and asked.value["node"] == "ask_plan_fit"
    ids = {q["id"]: q["allowed"] for q in asked.value["questions"]}
    assert ids["remove:cost_plan"] == ["remove", "keep"]  # the budget template's slots the launch never asked for
    assert ids["add:set_a_timeline_for_the"] == ["add", "leave out"]  # a deliverable no template slot covered
    answers = {q: allowed[0] for q, allowed in ids.items()}
    graph.invoke(Command(resume={**answers, "remove:cost_plan": "perhaps"}), config, context=context)
    [again] = graph.get_state(config).interrupts  # a refused answer changes nothing: asked again, with why
    assert again.value["node"] == "ask_plan_fit" and "perhaps" in again.value["error"]
    answers |= {"remove:cost_plan": "keep", "add:set_a_timeline_for_the": "leave out"}
    graph.invoke(Command(resume=answers), config, context=context)
    [plan] = graph.get_state(config).interrupts
    assert plan.value["kind"] == "approve_plan"
    slots = [s["id"] for s in plan.value["plan"]]
    assert "cost_plan" in slots and "set_a_timeline_for_the" not in slots
    assert "income_forecast" not in slots and "choose_the_launch_channels_price" in slots
    state = Passport.model_validate(graph.get_state(config).values)
    kept = next(e for e in state.ledger if e.action == "plan_fit_keep")
    assert kept.agent == "person" and kept.slot_id == "cost_plan"


def test_autonomous_mode_applies_the_plan_checks_without_asking() -> None:
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "auto"}}
    graph.invoke(RunInput(task=LAUNCH), config, context={"backend": "fake"})
    state = Passport.model_validate(graph.get_state(config).values)
    assert not graph.get_state(config).interrupts and state.framework is not None
    assert "cost_plan" not in {s.id for s in state.framework.slots}
    assert {"irrelevant_slot_removed", "uncovered_aspect_added"} <= {d.rule for d in state.defaults}


def test_a_slot_whose_design_dependency_was_removed_waits_for_the_design_slot_added_in_its_place() -> None:
    # mp-library-schema: the template's logical-schema slot was removed, the task's own schema slot added, and
    # the queries slot, which had read the removed one, ran beside the new schema instead of after it.
    from engine.planning.planner import fit_slots
    from experts.routing.aspects import task_aspects
    from state.adaptation import PlanFit
    from state.framework import SlotSpec

    task = (
        "Design a database schema for a small library (books, members, loans), write SQL queries for overdue "
        "loans and the most borrowed books, and document the schema for the team."
    )
    aspects = task_aspects(task)
    slots = [
        SlotSpec(id="logical_schema", title="Logical schema", description="Entities and relations."),
        SlotSpec(id="queries", title="SQL queries", description="Write the queries.", deps=["logical_schema"]),
        SlotSpec(id="docs", title="Schema documentation", description="Document it.", deps=["queries"]),
    ]
    fit = PlanFit(aspects=[a.text for a in aspects], removed=["logical_schema"], missing=[aspects[0].text])
    fitted, record = fit_slots(slots, fit, SlotSpec, aspects)
    [added] = record.added
    by_id = {s.id: s for s in fitted}
    assert by_id["queries"].deps == [added] and added in by_id["queries"].can_reference
    assert by_id["docs"].deps == ["queries"]  # it lost nothing
    assert by_id[added].deps == []


# planning_heldout7's misses (2026-11-29, a helper's phrasings), read on 2026-12-01; each now planned as labelled.


def test_clauses_that_say_how_the_one_deliverable_is_made_are_not_deliverables() -> None:
    story = (
        "Write a short story about a lighthouse keeper and set it in 1953 and tell it only through his logbook "
        "entries and let the weather do most of the emotional work and end it on the night the light is automated."
    )
    assert len(texts(story)) == 1 and texts(story)[0].endswith("the night the light is automated")
    reset = (
        "design our password reset flow and make the tokens single-use and expire them after 15 minutes and "
        "rate-limit requests per account and per IP and make sure it never reveals whether an email is registered"
    )
    assert len(texts(reset)) == 1
    # work of its own on the deliverable stays its own: a rewrite, tests, a note
    login = (
        "Inherited this. Can you (1) do a proper security review of it, (2) rewrite it in Python with parameterised "
        "queries and argon2, and (3) write a short note for the team on how we migrate existing MD5 hashes?"
    )
    assert texts(login) == [
        "do a proper security review of it",
        "rewrite it in Python with parameterised queries and argon2",  # "it" is the pasted code, not the review
        "write a short note for the team on how we migrate existing MD5 hashes",
    ]
    assert texts("Build a CLI tool that renames photos and test it")[1] == "test the CLI tool"


def test_headlines_a_list_of_headlines_and_follow_ups_name_their_deliverables() -> None:
    assert headline_deliverable("sonnet, night-shift nurse, last hour before handover. Shakespearean rhyme scheme")
    assert headline_deliverable("bash one-liner to find duplicate jpgs under ~/Pictures by md5") == "bash one-liner"
    board = "For our board, who are not technical: a one-page risk assessment of keeping the payroll server."
    assert headline_deliverable(board) == "a one-page risk assessment"
    cron = (
        "k8s CronJob manifest to run our nightly sales report at 02:00 UTC + the python report script itself (pulls "
        "yesterday's orders from our REST API, emails a summary table to sales@)"
    )
    assert [t.split(" (")[0] for t in texts(cron)] == [
        "deliver k8s CronJob manifest to run our nightly sales report at 02:00 UTC",
        "deliver the python report script itself",
    ]
    assert len(texts("Draft a rent review clause (upward-only, increases capped at CPI + 1%).")) == 1
    story = (
        "Could you write me a short story about a lighthouse keeper? Something the kids would actually enjoy. And "
        "then, if it's not too much, some discussion questions and a vocab list I can use with it?"
    )
    assert texts(story)[1] == "write some discussion questions and a vocab list I can use with it"
    loan = "Loan 250,000 at 4.5% over 25 yrs: monthly payment, Python script printing the amortisation table, letter."
    assert len(texts(loan)) == 3
    choice = "Question: shared schema with tenant_id, schema per tenant, or database per tenant?"
    assert named_deliverables(choice) == []


def test_requests_in_other_words_asides_and_apostrophes() -> None:
    donors = (
        "I'd love (a) a query for monthly recurring-donor retention by signup cohort, and (b) a short write-up for "
        "the trustees on what those retention numbers imply for next year's income forecast."
    )
    assert texts(donors) == [
        "deliver a query for monthly recurring-donor retention by signup cohort",
        "deliver a short write-up for the trustees on what those retention numbers imply for next year's income "
        "forecast",
    ]
    rent = "And separately, I'd like to see what the rent would actually be over the 10-year lease under that cap."
    assert texts("Could you draft a rent review clause? " + rent)[1].startswith("show what the rent would actually")
    club = (
        "Based on the spreadsheet our rowing club uses — a Members tab (name, email, date joined), a Sessions tab "
        "(date, coach, boat) and an attendance grid — design normalised Postgres tables for it, as CREATE TABLE "
        "statements with keys and sensible indexes."
    )
    assert len(texts(club)) == 1 and texts(club)[0].startswith("design normalised Postgres tables")
    app = "Also (bear with me, I'm building her a little app) I need a Django model that stores stories."
    assert texts(app) == ["deliver a Django model that stores stories"]
    assert named_deliverables("Do I need a migration for this?") == []


def test_a_label_before_a_colon_and_an_identifier_are_not_verbs() -> None:
    """multipart_set3_first, mp3-duration-parser: "Format: h, m and s parts ..." was read as the verb "format" with
    five objects, and "parse_duration(text) -> int" as the verb "parse": six slots for one function and its tests."""
    task = (
        "parse_duration(text) -> int seconds, in durations.py. Format: h, m and s parts in that order, each "
        "optional, at least one present, e.g. '1h30m', '45m'. Function plus pytest tests please."
    )
    # two parts since multipart_set4_first (mp4-roman-numerals, one part: none of its three answers had tests):
    # the function, and its tests, run against it by check_parts
    assert texts(task) == ["write the function", "write pytest tests"]
    assert texts("Format the dates as ISO strings")[0] == "Format the dates as ISO strings"  # the verb still is one
