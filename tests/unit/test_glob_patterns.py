"""Agent-to-agent ``allow`` patterns: the same answers as a regex would give, in linear time."""

from __future__ import annotations

import re
import time

from hypothesis import given
from hypothesis import strategies as st
from sessionwire.domain.policy import AgentToAgentPolicy, glob_matches


def reference(pattern: str, text: str) -> bool:
    regex = "^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$"
    return re.match(regex, text, re.IGNORECASE | re.DOTALL) is not None


@given(st.text(alphabet="ab*", max_size=8), st.text(alphabet="abAB", max_size=10))
def test_glob_matches_agrees_with_the_regex_it_replaces(pattern: str, text: str) -> None:
    assert glob_matches(pattern, text) == reference(pattern, text)


def test_many_wildcards_do_not_backtrack() -> None:
    # Seven `*` against a near-miss took ~0.8 s a call with the regex (issue 16, finding 6).
    pattern = "a*" * 7 + "b"
    agent = "a" * 40
    policy = AgentToAgentPolicy(enabled=True, allow=(pattern,))
    started = time.perf_counter()
    for _ in range(10):
        assert not policy.is_allowed("main", agent)
    assert time.perf_counter() - started < 0.5
