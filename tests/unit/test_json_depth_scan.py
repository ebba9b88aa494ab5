"""The JSON depth pre-check (issue 36, item 1): right on every input a parser accepts,
and linear on the inputs built to make a scanner restart.

The regex it replaced restarted at every quote of an unterminated string full of ``\\"``:
a 40 KB body held the server for 20 s. Work is measured as CPU time per byte at two
sizes eight times apart (the least of several runs, so another process's noise only
ever lowers the ratio it could raise): linear work keeps the ratio near 1, quadratic
work makes it near 8; the bound, 3, leaves room for a cache miss but not for a restart.
"""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from sessionwire.adapters.access.auth import MAX_JSON_DEPTH, json_depth_exceeds

# The adversarial families: one unit repeated, behind a prefix that opens brackets.
FAMILIES = {
    "nested brackets": (b"", b"["),
    "unterminated string of escaped quotes": (b'"', b'\\"'),
    "brackets then escaped quotes": (b"[" * 40 + b'"', b'\\"'),
    "long run of quotes": (b"[", b'"'),
    "backslash runs and quotes": (b'["', b'\\\\\\"'),
    "strings of brackets": (b"[", b'"[[[[{{",'),
    "mixed": (b"{", b'[\\"\\\\"]"'),
}


def depth(value: Any) -> int:
    """The nesting of a parsed value, counted on the value (not on its text)."""
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n/'),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\a'), inner, max_size=3)
    ),
    max_leaves=60,
)


@given(json_values)
@example([[[["\\"]]]])
@example({'"[': [{"]}": "\\\\"}]})
def test_it_says_what_the_parsed_value_says(value: Any) -> None:
    text = json.dumps(value).encode()
    for limit in (0, 1, 2, 3, 5):
        assert json_depth_exceeds(text, limit) == (depth(value) > limit)


def test_the_issues_body_and_the_limit_itself() -> None:
    attack = b"[" * 40_000 + b'"' + b'\\"' * 20_000
    assert json_depth_exceeds(attack)
    at_limit = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert not json_depth_exceeds(at_limit)
    assert json_depth_exceeds(b"[" + at_limit + b"]")
    # Brackets inside a string do not nest, even after escaped backslashes and quotes.
    assert not json_depth_exceeds(b'["\\\\\\"' + b"[" * 100 + b'"]')


def _seconds_per_byte(raw: bytes, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        json_depth_exceeds(raw)
        best = min(best, time.process_time() - started)
    return best / len(raw)


def _body(family: str, units: int, tail: bytes) -> bytes:
    prefix, unit = FAMILIES[family]
    return prefix + unit * units + tail


@settings(max_examples=len(FAMILIES) * 2, deadline=None)
@given(st.sampled_from(sorted(FAMILIES)), st.sampled_from([b"", b'"', b"]", b"\\"]))
def test_work_per_byte_does_not_grow_with_the_size(family: str, tail: bytes) -> None:
    small = _body(family, 8_000, tail)
    large = _body(family, 64_000, tail)
    # A floor under the small size's time: the clock's tick, not the scan, at small sizes.
    small_rate = max(_seconds_per_byte(small), 1e-9)
    assert _seconds_per_byte(large) / small_rate < 3, family
