from sessionwire import Gateway


async def test_a_recorded_message_is_listed_and_readable(gateway: Gateway) -> None:
    await gateway.record_message("main", role="user", content="hi", channel="whatsapp")
    listed = await gateway.call_tool("agent:main:main", "sessions_list", {})
    assert [row["key"] for row in listed["sessions"]] == ["main"]
    history = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main"})
    assert [m["content"][0]["text"] for m in history["messages"]] == ["hi"]
