"""No answer tells whether a hidden session or label exists (issue 16, findings 3 and 4).

Each case asks the same thing about a name a hidden session holds and about a name no
session holds; the two answers must be equal byte for byte once the name itself (and the
new ids of a call that goes through) are set aside.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.testing import ScriptedRuntime, VirtualClock

SCRIPT = {"rules": [{"step": "subagent_task", "reply": "done"}, {"reply": "ANNOUNCE_SKIP"}]}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def shape(result: dict[str, Any], name: str) -> bytes:
    """The answer with the asked-about name and any fresh ids replaced."""
    text = json.dumps(result, sort_keys=True).replace(name, "<name>")
    return UUID.sub("<id>", text).encode()


@pytest.fixture
async def world(store_url: str, config: GatewayConfig) -> AsyncIterator[Gateway]:
    gateway = await Gateway.open(
        config=config,
        store=store_url,
        clock=VirtualClock(),
        runtime=ScriptedRuntime.from_dict(SCRIPT),
    )
    await gateway.record_message("main", role="user", content="hi")
    await gateway.record_message("webchat:dm:alice", role="user", content="secret")
    await gateway.record_message(
        "agent:other:main", role="user", content="secret", label="hidden-job"
    )
    yield gateway
    await gateway.close()


@pytest.mark.parametrize(
    "config",
    [
        GatewayConfig.model_validate(
            {
                "agents": {
                    "defaults": {"sandbox": {"mode": "all", "sessionToolsVisibility": "spawned"}}
                }
            }
        )
    ],
)
@pytest.mark.parametrize("tool", ["sessions_send", "sessions_history"])
async def test_a_sandboxed_refusal_is_the_same_whether_the_session_exists(
    world: Gateway, tool: str
) -> None:
    answers = []
    for name in ("webchat:dm:alice", "webchat:dm:bob"):
        params: dict[str, Any] = {"sessionKey": name}
        if tool == "sessions_send":
            params |= {"message": "hello?", "timeoutSeconds": 0}
        answer = await world.call_tool("main", tool, params)
        assert answer["status"] == "forbidden"
        answers.append(shape(answer, name))
    assert answers[0] == answers[1]


async def test_spawn_with_another_agents_label_answers_as_for_a_free_label(
    world: Gateway,
) -> None:
    # agent-to-agent is off (the default): agent `other` and its labels are hidden from main.
    answers = []
    for label in ("hidden-job", "free-job"):
        answer = await world.call_tool("main", "sessions_spawn", {"task": "digest", "label": label})
        answers.append(shape(answer, label))
    assert json.loads(answers[0])["status"] == "accepted"
    assert answers[0] == answers[1]
