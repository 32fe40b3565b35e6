"""The assist placeholder parser: edge cases and properties (it never crashes, never loses a placeholder)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.assist import (
    AssistRecord,
    AssistSource,
    mark_unresolved,
    replace_assists,
    scan_assists,
    unresolved_marker,
    unresolved_markers,
)


def test_several_per_line_and_every_kind() -> None:
    text = (
        "Connect to {{ASSIST:user:your database hostname}} with a timeout of "
        "{{ASSIST:lookup:recommended connection timeout}}; see {{ASSIST:expert:legal:Delaware liability statute}}."
    )
    scan = scan_assists(text)
    assert [(p.kind, p.domain, p.description) for p in scan.placeholders] == [
        ("user", None, "your database hostname"),
        ("lookup", None, "recommended connection timeout"),
        ("expert", "legal", "Delaware liability statute"),
    ]
    assert not scan.malformed
    assert all(text[p.start : p.end] == p.raw for p in scan.placeholders)


def test_multi_line_lists_and_code_blocks() -> None:
    text = (
        "## 1. Setup\n"
        "- host: {{ASSIST:user:the production\n   database hostname}}\n"
        "  1. port {{ASSIST:lookup:port of the\nproduction database}}\n"
        "```python\n"
        'TIMEOUT = "{{ASSIST:lookup:client read timeout}}"  # {{ASSIST:expert:security:TLS minimum}}\n'
        "```\n"
    )
    scan = scan_assists(text)
    assert [p.description for p in scan.placeholders] == [
        "the production database hostname",
        "port of the production database",
        "client read timeout",
        "TLS minimum",
    ]
    assert scan.placeholders[3].domain == "security"


def test_optional_domain_on_lookup_and_colons_in_descriptions() -> None:
    (a, b, c) = scan_assists(
        "{{ASSIST:lookup:security:NIST guidance for PHI}} {{ASSIST:lookup:RFC 7231: caching rules}} "
        "{{ASSIST:expert:legal:clause 4: indemnity cap}}"
    ).placeholders
    assert (a.domain, a.description) == ("security", "NIST guidance for PHI")
    assert (b.domain, b.description) == (None, "RFC 7231: caching rules")
    assert (c.domain, c.description) == ("legal", "clause 4: indemnity cap")


def test_case_and_spacing_are_tolerated() -> None:
    (p,) = scan_assists("x {{ assist : Lookup :  session   timeout }} y").placeholders
    assert (p.kind, p.description) == ("lookup", "session timeout")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{{ASSIST:lookup:never closed", "never closed"),
        ("{{ASSIST:lookup:a {{ASSIST:user:b}}", "another '{{' opens"),
        ("{{ASSIST:guess:the answer}}", "unknown type 'guess'"),
        ("{{ASSIST:expert:no domain given}}", "needs a domain"),
        ("{{ASSIST:lookup:   }}", "empty description"),
        ("{{ASSIST}}", "must be followed by ':type:'"),
        ("{{ASSIST:lookup:one } brace}}", "stray brace"),
        ("{{ASSIST:lookup:" + "x" * 400 + "}}", "description of 400 characters"),
    ],
)
def test_malformed_placeholders_are_reported_and_left_untouched(text: str, problem: str) -> None:
    scan = scan_assists(text)
    assert scan.malformed and problem in scan.malformed[0].problem
    assert scan.malformed[0].line == 1 and "left as written" in scan.malformed[0].warning()
    if "another" in problem:  # the inner, well-formed one is still found
        assert [p.description for p in scan.placeholders] == ["b"]
    else:
        assert not scan.placeholders
        assert mark_unresolved(text, "r") == text


def test_malformed_line_number_and_a_good_one_after_it() -> None:
    scan = scan_assists("ok\n{{ASSIST:nope:x}}\n{{ASSIST:user:y}}")
    assert scan.malformed[0].line == 2 and scan.malformed[0].raw == "{{ASSIST:nope:x}}"
    assert [p.description for p in scan.placeholders] == ["y"]


def test_unresolved_markers_carry_type_domain_description_and_reason() -> None:
    text = "a {{ASSIST:expert:legal:Delaware statute}} b {{ASSIST:user:hostname}}"
    out = mark_unresolved(text, "needs {braces} removed")
    assert unresolved_markers(out) == [
        "{{UNRESOLVED:expert:legal:Delaware statute - needs braces removed}}",
        "{{UNRESOLVED:user:hostname - needs braces removed}}",
    ]
    assert unresolved_marker("lookup", None, "x", "r") == "{{UNRESOLVED:lookup:x - r}}"


def test_a_resolved_record_must_name_a_source() -> None:
    base = dict(id="s.a1", slot_id="s", asker="e", kind="lookup", description="d", placeholder="{{...}}")
    with pytest.raises(ValueError, match="at least one source"):
        AssistRecord(status="resolved", value="a guess", **base)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="marker and reason"):
        AssistRecord(status="unresolved", value="a guess", marker="m", reason="r", **base)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs its file"):
        AssistSource(kind="document")
    src = AssistSource(kind="document", file="/kb/a.md", section="S", line_start=3, line_end=4, score=0.71234)
    ok = AssistRecord(status="resolved", value="v", sources=[src], **base)  # type: ignore[arg-type]
    assert ok.sources[0].cite() == "/kb/a.md, §S, lines 3-4; score 0.71"
    assert AssistSource(kind="document", file="/kb/b.pdf", page=2).cite(short=True) == "b.pdf, page 2"


# --- properties ----------------------------------------------------------------------------------------------

_plain = st.text(alphabet=st.characters(blacklist_characters="{}:", blacklist_categories=("Cs",)), max_size=40)
_words = st.text(alphabet="abcdefghij klmnop-.,?", min_size=1, max_size=30).filter(lambda s: s.strip())
_domain = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=12)


@st.composite
def _placeholder(draw: st.DrawFn) -> tuple[str, tuple[str, str | None, str]]:
    kind = draw(st.sampled_from(["lookup", "expert", "user"]))
    desc = draw(_words)
    norm = " ".join(desc.split())
    if kind == "expert":
        dom = draw(_domain)
        return f"{{{{ASSIST:expert:{dom}:{desc}}}}}", (kind, dom, norm)
    return f"{{{{ASSIST:{kind}:{desc}}}}}", (kind, None, norm)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_never_crashes_on_any_text(text: str) -> None:
    scan = scan_assists(text)
    for p in scan.placeholders:
        assert text[p.start : p.end] == p.raw
    assert replace_assists(text, lambda p: p.raw) == text
    mark_unresolved(text, "r")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="{}:ASITlookupexr \n", max_size=80))
def test_never_crashes_on_brace_soup(text: str) -> None:
    scan = scan_assists(text)
    assert replace_assists(text, lambda p: p.raw) == text
    assert len(unresolved_markers(mark_unresolved(text, "r"))) >= len(scan.placeholders)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_plain, _placeholder()), max_size=6), _plain)
def test_every_well_formed_placeholder_is_found_in_order(parts: list[tuple[str, tuple[str, Any]]], tail: str) -> None:
    text = "".join(pre + ph for pre, (ph, _) in parts) + tail
    scan = scan_assists(text)
    assert [(p.kind, p.domain, p.description) for p in scan.placeholders] == [exp for _, (_, exp) in parts]
    marked = mark_unresolved(text, "reason")
    assert not scan_assists(marked).placeholders
    assert len(unresolved_markers(marked)) == len(parts)
