"""The two reads called most answer with dicts built directly (no result model): each is
exactly what its documented model (the HTTP API's schema) gives for the same data, every
field present, in the model's order, ``messages`` on a row only when asked for."""

from __future__ import annotations

import json
from typing import Any

from sessionwire import Gateway
from sessionwire.application.tools.read_result_models import (
    SessionListRow,
    SessionsHistoryResult,
    SessionsListResult,
)


def as_the_model_gives(model: type[SessionsListResult | SessionsHistoryResult], answer: Any) -> str:
    return json.dumps(model.model_validate(answer).to_json_dict())


async def record(gateway: Gateway) -> None:
    await gateway.record_message(
        "discord:group:ops",
        role="user",
        content="[Discord 2026-01-01 10:00] deploy with AKIAIOSFODNN7EXAMPLE",
        channel="discord",
        chat_type="group",
        to="channel:ops",
        account_id="bot-1",
        label="ops room",
    )
    await gateway.record_message(
        "discord:group:ops", role="assistant", content="done", usage={"input": 3, "output": 4}
    )
    await gateway.record_message("main", role="user", content="hello")
    await gateway.record_message("cron:nightly", role="user", content="run")


async def test_sessions_list_rows_are_the_models_rows(gateway: Gateway) -> None:
    await record(gateway)
    for params in ({}, {"messageLimit": 2}, {"limit": 1, "kinds": ["group"]}):
        answer = await gateway.call_tool("main", "sessions_list", params)
        assert answer["count"] == len(answer["sessions"]) > 0
        assert json.dumps(answer) == as_the_model_gives(SessionsListResult, answer)
        for row in answer["sessions"]:
            fields = list(SessionListRow.model_fields)
            if "messageLimit" not in params:
                fields.remove("messages")
            assert list(row) == fields
    rows = {row["key"]: row for row in answer["sessions"]}
    assert rows["agent:main:discord:group:ops"]["deliveryContext"] == {
        "channel": "discord",
        "to": "channel:ops",
        "accountId": "bot-1",
    }


async def test_sessions_history_is_the_models_answer(gateway: Gateway) -> None:
    await record(gateway)
    for requester in ("main", "discord:group:ops"):
        answer = await gateway.call_tool(
            requester, "sessions_history", {"sessionKey": "discord:group:ops", "limit": 5}
        )
        flags = ["truncated", "droppedMessages", "contentTruncated", "contentRedacted", "bytes"]
        assert list(answer) == ["sessionKey", "messages", *flags]
        assert len(answer["messages"]) == 2
        assert json.dumps(answer) == as_the_model_gives(SessionsHistoryResult, answer)
        for offset in (0, 1, 2):
            page = await gateway.call_tool(
                requester,
                "sessions_history",
                {"sessionKey": "discord:group:ops", "limit": 1, "offset": offset},
            )
            paging = ["offset", "totalMessages", "hasMore", *(["nextOffset"] * (offset < 1))]
            assert list(page) == ["sessionKey", "messages", *flags, *paging]
            assert json.dumps(page) == as_the_model_gives(SessionsHistoryResult, page)
