"""The visibility scopes (contract decision 28) as the one policy module decides them:
every scope x a main, a non-main and a sandboxed requester x the sessions around it.

The world: agent ``main`` with its main session, a group ``dev`` and a cron job; ``dev``
spawned ``kid``, which spawned ``grandkid`` (nested); main spawned ``helper`` of agent
``other``; agent ``other`` has its main session. A ``ghost`` key names nothing stored.
"""

from __future__ import annotations

import pytest
from sessionwire.domain.policy import (
    AccessPolicy,
    AgentToAgentPolicy,
    PolicyTarget,
    SendPolicy,
)

MAIN = "agent:main:main"
DEV = "agent:main:discord:group:dev"
CRON = "agent:main:cron:job"
KID = "agent:main:subagent:kid"
GRANDKID = "agent:main:subagent:grandkid"
HELPER = "agent:other:subagent:helper"
OTHER = "agent:other:main"
GHOST = "agent:main:discord:group:ghost"

ANCESTORS = {KID: (DEV,), GRANDKID: (KID, DEV), HELPER: (MAIN,)}
TARGETS = [MAIN, DEV, CRON, KID, GRANDKID, HELPER, OTHER, GHOST]


def target(key: str) -> PolicyTarget | None:
    if key == GHOST:
        return None
    ancestors = ANCESTORS.get(key, ())
    return PolicyTarget(
        key=key,
        rest=key.split(":", 2)[2],
        agent_id=key.split(":")[1],
        spawned_by=ancestors[0] if ancestors else None,
        ancestors=ancestors,
    )


def policy(requester: str, mode: str, *, sandboxed: bool = False, a2a: bool = True) -> AccessPolicy:
    return AccessPolicy(
        requester_key=requester,
        requester_agent=requester.split(":")[1],
        a2a=AgentToAgentPolicy(enabled=a2a),
        send=SendPolicy(),
        sandboxed=sandboxed,
        visibility=mode,  # type: ignore[arg-type]
        requester_is_main=requester.endswith(":main"),
    )


def reachable(access: AccessPolicy) -> set[str]:
    return {
        key
        for key in TARGETS
        if access.reach_refusal(
            target(key), key, access="history", target_key=key, target_agent=key.split(":")[1]
        )
        is None
    }


# (requester, mode, sandboxed) -> what it reaches (a2a on: cross-agent needs `all`).
MATRIX = [
    (MAIN, "self", False, {MAIN}),
    (MAIN, "tree", False, {MAIN, DEV, CRON, KID, GRANDKID, GHOST, HELPER}),
    (MAIN, "agent", False, {MAIN, DEV, CRON, KID, GRANDKID, GHOST}),
    (MAIN, "all", False, set(TARGETS)),
    (DEV, "self", False, {DEV}),
    (DEV, "tree", False, {DEV, KID, GRANDKID}),
    (DEV, "agent", False, {MAIN, DEV, CRON, KID, GRANDKID, GHOST}),
    (DEV, "all", False, set(TARGETS)),
    # Sandboxed: only what it spawned, whatever the scope (the clamp), never itself.
    (DEV, "self", True, set()),
    (DEV, "tree", True, {KID, GRANDKID}),
    (DEV, "agent", True, {KID, GRANDKID}),
    (DEV, "all", True, {KID, GRANDKID}),
    (MAIN, "tree", True, {HELPER}),
    (MAIN, "all", True, {HELPER}),
    (MAIN, "self", True, set()),
]


@pytest.mark.parametrize(
    ("requester", "mode", "sandboxed", "reached"),
    MATRIX,
    ids=[f"{r.split(':')[-1]}-{m}{'-sandboxed' if s else ''}" for r, m, s, _ in MATRIX],
)
def test_what_each_scope_reaches(
    requester: str, mode: str, sandboxed: bool, reached: set[str]
) -> None:
    access = policy(requester, mode, sandboxed=sandboxed)
    assert reachable(access) == reached
    # `sees` (lists, lookups by id or label) says the same of every stored session.
    for key in TARGETS:
        stored = target(key)
        if stored is not None:
            assert access.sees(stored) == (key in reached), key


@pytest.mark.parametrize("mode", ["self", "tree", "agent", "all"])
def test_another_agent_still_needs_agent_to_agent(mode: str) -> None:
    closed = policy(MAIN, mode, a2a=False)
    assert OTHER not in reachable(closed)
    assert HELPER not in reachable(closed)  # its own child, but of another agent


def test_the_effective_scope_is_clamped_by_the_sandbox() -> None:
    assert policy(DEV, "all", sandboxed=True).effective_visibility == "tree"
    assert policy(DEV, "agent", sandboxed=True).effective_visibility == "tree"
    assert policy(DEV, "self", sandboxed=True).effective_visibility == "self"
    assert policy(DEV, "agent").effective_visibility == "agent"


@pytest.mark.parametrize(("mode", "sandboxed"), [("self", False), ("tree", False), ("tree", True)])
def test_a_hidden_session_and_a_missing_one_get_the_same_refusal(
    mode: str, sandboxed: bool
) -> None:
    access = policy(DEV, mode, sandboxed=sandboxed)
    hidden = access.reach_refusal(
        target(CRON), "REF", access="messaging", target_key=CRON, target_agent="main"
    )
    missing = access.reach_refusal(
        None, "REF", access="messaging", target_key=GHOST, target_agent="main"
    )
    assert hidden is not None
    assert hidden == missing


def test_refusals_name_the_scope_and_its_rule() -> None:
    tree = policy(DEV, "tree").reach_refusal(
        target(MAIN), MAIN, access="messaging", target_key=MAIN, target_agent="main"
    )
    assert tree is not None
    assert (tree.check, tree.rule, tree.message) == (
        "visibility",
        "tools.sessions.visibility",
        "Session not found, or not visible under tools.sessions.visibility=tree.",
    )
    cross = policy(MAIN, "agent").reach_refusal(
        target(OTHER), OTHER, access="history", target_key=OTHER, target_agent="other"
    )
    assert cross is not None
    assert cross.message.startswith("Session history visibility is restricted. Set ")


def test_list_scopes_follow_the_same_rules() -> None:
    assert policy(DEV, "tree").list_scope().tree
    assert policy(DEV, "tree").list_scope().requester
    assert not policy(DEV, "tree").list_scope().agent
    assert policy(MAIN, "tree").list_scope().agent
    assert policy(MAIN, "all").list_scope().every
    sandboxed = policy(DEV, "agent", sandboxed=True).list_scope()
    assert (sandboxed.requester, sandboxed.tree, sandboxed.agent) == (False, True, False)
    nothing = policy(DEV, "self", sandboxed=True).list_scope()
    assert (nothing.requester, nothing.tree, nothing.agent, nothing.every) == (False,) * 4
