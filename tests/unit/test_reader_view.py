"""Stored lines as readers get them (domain/reader_view.py): masking is skipped only where
the redactor provably changes nothing, so the answer is exactly what decoding, cleaning,
adding provenance and masking every line one by one gives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json
from sessionwire.domain.causality import with_provenance
from sessionwire.domain.reader_view import history_view, reader_messages
from sessionwire.domain.redaction import DEFAULT_PATTERNS, Redactor, redactor_for
from sessionwire.domain.transcript import clean_for_reader


def one_by_one(lines: list[str], redactor: Redactor | None) -> list[dict[str, Any]]:
    """What readers got before: every line decoded, cleaned, given provenance, masked."""
    shown = [with_provenance(clean_for_reader(json.loads(line))) for line in lines]
    return shown if redactor is None else [redactor.mask(message) for message in shown]


def same(lines: list[str], redactor: Redactor | None) -> None:
    expected = one_by_one(lines, redactor)
    got = reader_messages(lines, redactor)
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)  # key order too


def line(text: str, role: str = "user", **more: Any) -> str:
    message = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1, **more}
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


REDACTORS = {
    "defaults": Redactor(DEFAULT_PATTERNS),
    # Anchored patterns look at the ends of each string, which the stored text hides.
    "anchored": redactor_for((r"^internal-\d+", r"(?m)^ops$", r"tail\d$", r"\Acode")),
    # Matches what with_provenance adds, which is not in the stored text.
    "provenance": redactor_for(("agent",), defaults=False),
    "none": redactor_for((), defaults=False),
}

FRAGMENTS = [
    "plain words",
    "AKIAIOSFODNN7EXAMPLE",
    "Bearer 8f14e45fceea167a5a36dedd4bea2543",
    "Bearer\n8f14e45fceea167a5a36dedd4bea2543",
    "OPENAI_API_KEY=9a8b7c6d5e4f3a2b1c0d",
    "sk-3kF9wQ2xL7vB1nM8zR4tY6uP0aS5dG",
    "[Telegram 2026-01-01 10:00] ",
    "[w2-big#12] ",
    "[message_id: 42]",
    "\n",
    "\t",
    '"quoted"',
    "back\\slash",
    "é ünïcode 🙂",
    "internal-42",
    "ops",
    "tail7",
    "code",
    "agent",
    "password",
    ": ",
    "token",
    "=",
    "abcdefghijklmnop",
]


@st.composite
def stored_lines(draw: st.DrawFn) -> list[str]:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        text = "".join(draw(st.lists(st.sampled_from(FRAGMENTS), max_size=6)))
        role = draw(st.sampled_from(["user", "assistant", "toolResult"]))
        more: dict[str, Any] = {}
        if draw(st.booleans()):
            more["provenance"] = {
                "kind": draw(st.sampled_from(["a2a", "agent", "user"])),
                "sessionKey": draw(st.sampled_from(["agent:main:ops", "agent:x:code"])),
            }
        if draw(st.booleans()):
            more["arguments"] = {"token": draw(st.sampled_from(FRAGMENTS))}
        ascii_only = draw(st.booleans())
        blocks: list[Any] = [{"type": "text", "text": text}]
        if draw(st.booleans()):
            blocks.append({"type": "image", "text": 5, "data": draw(st.sampled_from(FRAGMENTS))})
        content: Any = draw(st.sampled_from([blocks, blocks[::-1], text]))
        message = {"role": role, "content": content, "timestamp": 1}
        lines.append(
            json.dumps({**message, **more}, separators=(",", ":"), ensure_ascii=ascii_only)
        )
    return lines


@pytest.mark.parametrize("name", REDACTORS)
@settings(max_examples=150, deadline=None)
@given(lines=stored_lines())
def test_the_lines_read_as_they_did_one_by_one(name: str, lines: list[str]) -> None:
    same(lines, REDACTORS[name])
    same(lines, None)


def test_an_escaped_newline_does_not_hide_a_bearer_token() -> None:
    # Stored as "Bearer\\n8f14…": the stored text has no whitespace after Bearer.
    lines = [line("Bearer\n8f14e45fceea167a5a36dedd4bea2543")]
    (shown,) = reader_messages(lines, REDACTORS["defaults"])
    assert shown["content"][0]["text"] == "Bearer\n[redacted:bearer-token]"


def test_an_anchored_pattern_masks_the_start_of_a_text() -> None:
    lines = [line("internal-42 is the badge"), line("plain", role="assistant")]
    shown = reader_messages(lines, REDACTORS["anchored"])
    assert shown[0]["content"][0]["text"] == "[redacted:configured] is the badge"
    same(lines, REDACTORS["anchored"])


def test_the_added_provenance_is_masked_like_the_rest() -> None:
    lines = [line("nothing here", role="assistant")]
    (shown,) = reader_messages(lines, REDACTORS["provenance"])
    assert shown["provenance"] == {"kind": "[redacted:configured]"}


def test_a_secret_in_one_line_masks_that_line_only() -> None:
    lines = [line("plain"), line("use AKIAIOSFODNN7EXAMPLE"), line("[w2-big#3] plain too")]
    shown = reader_messages(lines, REDACTORS["defaults"])
    assert [m["content"][0]["text"] for m in shown] == [
        "plain",
        "use [redacted:aws-access-key]",
        "[w2-big#3] plain too",
    ]


@pytest.mark.parametrize(
    ("pattern", "free"),
    [
        (r"\bsk-[A-Za-z0-9_-]{20,}", True),
        (r"(?i)\b[a-z]+://[^\s/:@]+:(?P<secret>[^\s/@]+)@", True),
        (r"^x", False),
        (r"x$", False),
        (r"\Ax", False),
        (r"x\z", False),
        (r"\[^x", False),  # a literal [, then an anchor
        (r"[a^]", False),  # no anchor, but answered as one: only ever too careful
    ],
)
def test_patterns_with_anchors_are_never_skipped(pattern: str, free: bool) -> None:
    redactor = redactor_for((pattern,), defaults=False)
    assert redactor.finds_nothing_in("nothing to see") is free


@pytest.mark.parametrize("name", sorted(REDACTORS))
def test_the_history_view_measures_what_it_returns(name: str) -> None:
    lines = [
        line("plain words"),
        line("[Telegram 2026-01-01 10:00] hello\n[message_id: 42]"),
        line("sk-3kF9wQ2xL7vB1nM8zR4tY6uP0aS5dG", role="assistant"),
        line("big", count=123456789012345678901234567890, ratio=float("inf")),
    ]
    for redactor in (REDACTORS[name], None):
        messages, _, size = history_view(lines, redactor)
        assert messages == one_by_one(lines, redactor)
        assert messages[-1]["count"] == 123456789012345678901234567890  # still an integer
        assert size == len(to_json(messages))
