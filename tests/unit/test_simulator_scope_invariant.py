"""The simulator's ``visibility`` invariant (decision 28) fires on hand-made answers that
break the configured scope, and stays quiet on answers that keep it. No gateway."""

from __future__ import annotations

from typing import Any

import pytest
from sessionwire.adapters.testkit.simulator.invariants import INVARIANTS
from sessionwire.adapters.testkit.simulator.scopes import ScopeCheck, ScopedCall
from sessionwire.application.config.gateway_config import GatewayConfig

MAIN = "agent:main:main"
OPS = "agent:main:discord:group:ops"
DEV = "agent:main:discord:group:dev"
BETA = "agent:beta:main"
CHILD = "agent:main:subagent:c1"
GRANDCHILD = "agent:beta:subagent:g1"
SPAWNED_BY = {CHILD: OPS, GRANDCHILD: CHILD}
REFUSED = {
    "status": "forbidden",
    "error": "Session not found, or not visible under tools.sessions.visibility=tree.",
}


def check(mode: str) -> ScopeCheck:
    return ScopeCheck(
        GatewayConfig.load(
            {
                "tools": {
                    "agentToAgent": {"enabled": True, "allow": ["*"]},
                    "sessions": {"visibility": mode},
                }
            }
        )
    )


def listed(mode: str, requester: str, *keys: str) -> list[str]:
    rows: list[dict[str, Any]] = [{"key": key} for key in keys]
    call = ScopedCall(requester, "sessions_list", {}, {"count": len(rows), "sessions": rows})
    return check(mode).problems(call, SPAWNED_BY)


def sent(mode: str, requester: str, target: str, result: dict[str, Any]) -> list[str]:
    call = ScopedCall(requester, "sessions_send", {"sessionKey": target}, result)
    return check(mode).problems(call, SPAWNED_BY)


def read(mode: str, requester: str, target: str, result: dict[str, Any]) -> list[str]:
    call = ScopedCall(requester, "sessions_history", {"sessionKey": target}, result)
    return check(mode).problems(call, SPAWNED_BY)


def test_the_invariant_is_listed() -> None:
    assert "visibility" in INVARIANTS


@pytest.mark.parametrize(
    ("mode", "requester", "keys"),
    [
        ("self", OPS, (OPS,)),
        ("tree", OPS, (OPS, CHILD, GRANDCHILD)),  # what it spawned, transitively
        ("tree", MAIN, ("main", OPS, DEV, CHILD)),  # main sees its agent ("main": itself)
        ("agent", OPS, (OPS, DEV, MAIN, CHILD)),
        ("all", OPS, (OPS, BETA, GRANDCHILD)),
    ],
)
def test_a_listing_within_the_scope_keeps_it(mode: str, requester: str, keys: tuple[str]) -> None:
    assert listed(mode, requester, *keys) == []


@pytest.mark.parametrize(
    ("mode", "requester", "outside"),
    [
        ("self", OPS, DEV),
        ("self", MAIN, OPS),  # strict for main too
        ("tree", OPS, DEV),  # a sibling, not spawned by it
        ("tree", MAIN, BETA),  # another agent's main, not spawned
        ("tree", CHILD, OPS),  # its parent is not in its tree
        ("agent", OPS, BETA),
        ("agent", DEV, GRANDCHILD),
    ],
)
def test_a_session_outside_the_scope_listed_read_or_sent_into_fires(
    mode: str, requester: str, outside: str
) -> None:
    [problem] = listed(mode, requester, requester, outside)
    assert f"listed {outside}, outside its scope" in problem
    [problem] = read(mode, requester, outside, {"sessionKey": outside, "messages": []})
    assert f"read {outside}, outside its scope" in problem
    [problem] = sent(mode, requester, outside, {"runId": "r", "status": "accepted"})
    assert f"sent into {outside}, outside its scope (answered accepted)" in problem
    # Refused, the same calls keep it.
    assert read(mode, requester, outside, REFUSED) == []
    assert sent(mode, requester, outside, REFUSED) == []


@pytest.mark.parametrize(
    ("mode", "requester", "inside"),
    [
        ("self", OPS, OPS),
        ("tree", MAIN, DEV),
        ("agent", OPS, DEV),
        ("all", OPS, BETA),
    ],
)
def test_a_session_inside_the_scope_refused_for_visibility_fires(
    mode: str, requester: str, inside: str
) -> None:
    [problem] = sent(mode, requester, inside, REFUSED)
    assert f"was refused {inside}, inside its scope" in problem
    # Any other refusal (a send policy, the hop limit) is not the scope's.
    assert sent(mode, requester, inside, {"status": "forbidden", "error": "hop limit"}) == []


def test_a_sub_agent_refused_the_session_tools_keeps_it() -> None:
    assert sent("agent", CHILD, OPS, REFUSED) == []


def searched(mode: str, requester: str, *keys: str) -> list[str]:
    hits = [
        {"sessionKey": key, "messageIndex": 0, "role": "user", "snippet": "sim", "timestamp": 1}
        for key in keys
    ]
    call = ScopedCall(requester, "sessions_search", {"query": "sim"}, {"results": hits})
    return check(mode).problems(call, SPAWNED_BY)


@pytest.mark.parametrize(
    ("mode", "requester", "inside", "outside"),
    [
        ("self", OPS, OPS, DEV),
        ("tree", OPS, GRANDCHILD, DEV),
        ("agent", OPS, MAIN, BETA),
    ],
)
def test_a_search_showing_a_message_outside_the_scope_breaks_it(
    mode: str, requester: str, inside: str, outside: str
) -> None:
    # Decision 35: a search never shows what the caller cannot list.
    assert searched(mode, requester, inside) == []
    (problem,) = searched(mode, requester, inside, outside)
    assert problem == (
        f"sessions_search by {requester} (visibility {mode}) found a message of {outside}, "
        "outside its scope"
    )
