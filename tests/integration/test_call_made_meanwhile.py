"""A send or spawn from a turn that another attempt of the calling run made meanwhile
(the gateway that took the run over, while this one was paused past its lease): its save
conflicts (the same run id in every attempt) and the call is answered for what the other
attempt made, never with an internal StoreConflict. The simulator's seed 8 found the
send's case on two PostgreSQL gateways (tests/integration/test_simulator_faults.py);
here both, on every store."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid5

import pytest
from scopes import before_scopes
from sessionwire import Gateway, GatewayConfig
from sessionwire.application.orchestration.runs import NESTED_CALLS, RunEngine, RunTurn
from sessionwire.application.tools import sessions_send
from sessionwire.application.tools.sessions_send import _EarlierAttempt
from sessionwire.testing import ScriptedRuntime, VirtualClock

CALLS = {
    "sessions_spawn": {"task": "sum up", "cleanup": "keep"},
    "sessions_send": {
        "sessionKey": "agent:main:discord:group:ops",
        "message": "hi",
        "timeoutSeconds": 0,
    },
}


def _first_call_id(self: RunTurn, tool: str, fingerprint: str) -> UUID:
    # Every identical call numbered as the first: two such calls in one turn are what
    # the first call of two attempts of its run is (the same run id).
    return uuid5(NESTED_CALLS, f"{self.state.run_id}\x1f{tool}\x1f{fingerprint}\x1f1")


def _miss_once(tool: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The second call's look for an earlier attempt's misses once, as the stale
    attempt's read did before the other attempt saved."""
    missed: list[str] = []
    if tool == "sessions_spawn":
        load = RunEngine.load

        async def loaded(self: RunEngine, run_id: Any) -> Any:
            found = await load(self, run_id)
            if found is not None and found.state.step == "subagent_task" and not missed:
                missed.append(str(run_id))
                return None
            return found

        monkeypatch.setattr(RunEngine, "load", loaded)
        return missed
    records = sessions_send._earlier_records

    def read(store: Any, run_id: UUID) -> _EarlierAttempt:
        found = records(store, run_id)
        if found.run is not None and not missed:
            missed.append(str(run_id))
            return _EarlierAttempt(run_id)
        return found

    monkeypatch.setattr(sessions_send, "_earlier_records", read)
    return missed


@pytest.mark.parametrize("tool", sorted(CALLS))
async def test_a_call_made_meanwhile_by_another_attempt_is_answered_for(
    tool: str, store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = {"tool": tool, "params": CALLS[tool]}
    runtime = ScriptedRuntime.from_dict(
        {
            "rules": [
                {
                    "session": "agent:main:main",
                    "step": "primary",
                    "match": "^go$",
                    "tools": [call, call],
                    "reply": "made",
                },
                {"step": "subagent_announce", "reply": "ANNOUNCE_SKIP"},
                {"step": "announce", "reply": "ANNOUNCE_SKIP"},
                {"step": "primary", "reply": "done"},
                {"reply": "REPLY_SKIP"},
            ]
        }
    )
    gw = await Gateway.open(
        config=GatewayConfig.load(before_scopes({})), store=store_url, clock=clock, runtime=runtime
    )
    try:
        await gw.record_message("main", role="user", content="hi")
        await gw.record_message("discord:group:ops", role="user", content="hi", channel="discord")
        monkeypatch.setattr(RunTurn, "call_id", _first_call_id)
        missed = _miss_once(tool, monkeypatch)
        await gw.call_tool(
            "discord:group:ops",
            "sessions_send",
            {"sessionKey": "main", "message": "go", "timeoutSeconds": 0},
        )
        await gw.wait_idle()
        answers = [result for _, name, result in runtime.tool_results if name == tool]
        assert len(missed) == 1, (answers, runtime.tool_results)
        assert [a.get("error") for a in answers] == [None, None], answers
        assert answers[0]["runId"] == answers[1]["runId"] == missed[0]
    finally:
        monkeypatch.undo()
        await gw.close()
