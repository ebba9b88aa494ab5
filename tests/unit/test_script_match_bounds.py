"""ScriptedRuntime ``match`` patterns run in bounded time on any message (issue 16, finding 6)."""

from __future__ import annotations

import pytest
from sessionwire.adapters.runtimes.scripted import ScriptedRuntime, ScriptError


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("a*a*x", "more than one unbounded repeat"),
        ("(a+)+x", "a repeat inside a repeat"),
        ("(a|aa)*x", "alternatives inside a repeat"),
        (r"(a)\1", "backreferences"),
        ("x" * 300, "longer than 256"),
    ],
)
def test_a_pattern_that_can_blow_up_is_refused(pattern: str, problem: str) -> None:
    with pytest.raises(ScriptError) as refused:
        ScriptedRuntime.from_dict({"rules": [{"match": pattern, "reply": "r"}]})
    assert problem in str(refused.value)


@pytest.mark.parametrize("pattern", ["(?i)^ping", "^(ping|wait)$", "quick", r"\w+ done", "a{2,5}b"])
def test_usual_patterns_are_accepted(pattern: str) -> None:
    ScriptedRuntime.from_dict({"rules": [{"match": pattern, "reply": "r"}]})


def test_matching_looks_at_a_bounded_window_of_the_message() -> None:
    runtime = ScriptedRuntime.from_dict({"rules": [{"match": ".*x", "reply": "r"}]})
    rule = runtime.rules[0]
    # An "x" past the window: a rule that scanned the whole message would match it.
    message = "a" * 5_000_000 + "x"

    class Request:
        agent_id = "main"
        session_key = "agent:main:main"
        step = "primary"

    request = Request()
    request.message = message  # type: ignore[attr-defined]
    assert not rule.applies_to(request)  # type: ignore[arg-type]
