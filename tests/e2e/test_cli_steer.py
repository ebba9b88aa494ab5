"""``sessionwire sessions send`` into a session whose run another gateway is running, under
``session.agentToAgent.busy: steer`` (PostgreSQL: the busy check reads the store, so the
other gateway's run counts): the command line says the message was steered, into which
run."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from command_line import run_in_process
from sessionwire import GatewayConfig, SyncGateway
from sessionwire.testing import ScriptedRuntime, VirtualClock

SCRIPT = {
    "rules": [
        # "long" keeps the ops session's run in flight while the command sends into it.
        {"step": "primary", "match": "^long", "reply": "late", "delaySeconds": 600},
        {"step": "primary", "reply": "pong"},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
    ]
}
OPS = "agent:main:discord:group:ops"
STEERING = {"session": {"agentToAgent": {"busy": "steer", "maxPingPongTurns": 0}}}


def test_a_send_from_the_command_line_is_steered_into_the_running_run(
    postgres_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "agents.json"
    script.write_text(json.dumps(SCRIPT))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(STEERING))
    with SyncGateway.open(
        store=postgres_url,
        config=GatewayConfig.load(STEERING),
        runtime=ScriptedRuntime.from_dict(SCRIPT),
        # Virtual time from now: the long run waits on this clock, so wait_idle returns
        # with it running (nothing advances it), and its deadline and lease are the real
        # ones the command's gateway reads.
        clock=VirtualClock(start=datetime.now(UTC)),
    ) as gateway:
        gateway.record_message("main", role="user", content="hi")
        gateway.record_message(OPS, role="user", content="standup")
        params = {"sessionKey": OPS, "message": "long job", "timeoutSeconds": 0}
        first = gateway.call_tool("main", "sessions_send", params)
        gateway.wait_idle()
        found = gateway.run(first["runId"])
        assert found is not None
        assert found["status"] == "running"

        ran = run_in_process(
            "--config",
            str(config),
            "sessions",
            "send",
            OPS,
            "be quick",
            "--timeout-seconds",
            "0",
            "--runtime",
            str(script),
            env={"SESSIONWIRE_STORE": postgres_url},
        )
        assert ran.returncode == 0, ran.stderr
        assert f"accepted: message steered into run {first['runId']}" in ran.stdout
        ended = gateway.cancel_run(first["runId"], "the test is done")
        assert ended is not None
        assert ended["cancelled"] is True
