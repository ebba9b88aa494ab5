"""Fuzzing ``call_tool``: whatever an agent sends, the gateway answers and the store holds.

Random tool names (the real ones too), random requesters and random JSON-like params
(NaN, infinities, huge integers, control characters, lone surrogates, nested lists and
objects, the real parameter names next to random ones). For every call:

- it returns a dict and never raises;
- an error is ``{"status": "error" | "forbidden", "tool": str, "error": str}`` and never
  an ``internal error`` (that would be a crash the gateway papered over);
- a success has the tool's result shape and is strict JSON;
- the store is untouched: the same read models and the same number of events (the tools
  are read-only).

After the run, a normal ``record_message`` and ``sessions_history`` still work and the
read models still equal a rebuild from the event log.

Hypothesis runs inside a plain sync test against a ``SyncGateway`` (its own event loop),
once per store: memory, a SQLite file and PostgreSQL.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scopes import before_scopes
from sessionwire import SyncGateway
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.gateway import TOOLS as REGISTERED_TOOLS
from sessionwire.testing import VirtualClock

# Read-only tools only: a fuzzer must not call a writing tool with random arguments and
# then claim the store changed by accident.
READ_ONLY_TOOLS = ("sessions_list", "sessions_history", "agents_list")
PARAMETER_NAMES = (
    "kinds",
    "limit",
    "activeMinutes",
    "messageLimit",
    "sessionKey",
    "includeTools",
    "offset",
    "label",
    "agentId",
    "search",
    "archived",
)
HISTORY_FLAGS = {"truncated", "droppedMessages", "contentTruncated", "contentRedacted", "bytes"}
HISTORY_PAGING = {"offset", "totalMessages", "hasMore"}
RESULT_KEYS = {
    "sessions_list": {"count", "sessions"},
    "sessions_history": {"sessionKey", "messages", *HISTORY_FLAGS},
    "agents_list": {"requester", "allowAny", "agents"},
}
EXAMPLES_PER_STORE = 150
SEEDED_KEYS = ("main", "cron:nightly", "agent:main:discord:group:dev", "agent:work:main")
ODD_KEYS = (
    "main",
    "MAIN",
    " main ",
    "AGENT:Main:MAIN",
    "agent:main:main",
    "agent::x",
    "agent:main",
    ":::",
    "global",
    "unknown",
    "cron:nightly",
    "agent:work:main",
    "agent:main:discord:group:dev",
    "00000000-0000-0000-0000-000000000000",
    "\x00",
    "main\x00",
    "\ud800",
    "",
    "   ",
    "k" * 600,
    "k" * 10_000,
)

# Strategies -----------------------------------------------------------------------------

# Every code point, control characters and lone surrogates included.
any_text = st.text(st.characters(exclude_categories=()), max_size=40)
odd_text = st.sampled_from(ODD_KEYS) | any_text
numbers = (
    st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, -1, 1, 20, 21, 200, 201, 1000, 1001, 2**63, -(2**63) - 1])
    | st.sampled_from([10**30, -(10**30), 10**400, -(10**400), 1e308, -1e308, math.nan])
)
scalars = st.none() | st.booleans() | numbers | odd_text
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(PARAMETER_NAMES) | any_text, children, max_size=4)
    ),
    max_leaves=12,
)
# Mostly objects that use the real parameter names, sometimes anything at all.
known_params = st.fixed_dictionaries(
    {},
    optional={
        "kinds": st.lists(
            st.sampled_from(["main", "group", "cron", "hook", "node", "other", " MAIN "])
            | any_text,
            max_size=4,
        )
        | json_values,
        "limit": numbers | json_values,
        "activeMinutes": numbers | json_values,
        "messageLimit": numbers | json_values,
        "sessionKey": odd_text | json_values,
        "includeTools": st.booleans() | json_values,
    },
)
params_strategy = (
    known_params
    | st.dictionaries(st.sampled_from(PARAMETER_NAMES) | any_text, json_values, max_size=5)
    | json_values
)
tool_names = (
    st.sampled_from(READ_ONLY_TOOLS)
    | st.sampled_from(["", " sessions_list", "SESSIONS_LIST", "sessions_send", "nope"]).filter(
        lambda name: name not in REGISTERED_TOOLS
    )
    | any_text.filter(lambda name: name not in REGISTERED_TOOLS)
    | st.none()
    | st.integers()
)
requesters = odd_text | st.none() | st.integers() | st.lists(st.text(max_size=3), max_size=2)
wild_calls = st.tuples(tool_names, requesters, params_strategy)

# Calls an agent could well make: a real tool, a real requester, the right parameter names
# with values of any type (numbers of any size). Half the examples, so that the success
# paths (clamps, filters, resolution, cross-agent refusals) are fuzzed too.
good_requesters = st.sampled_from(
    ["main", "agent:main:main", "AGENT:Main:MAIN", "cron:nightly", "agent:work:main", "global"]
)
session_refs = st.sampled_from(
    [
        "main",
        " MAIN ",
        "agent:main:main",
        "cron:nightly",
        "agent:work:main",
        "nope",
        "home",
        "agent:main:discord:group:dev",
        "AGENT:MAIN:DISCORD:GROUP:DEV",
    ]
)
kinds_values = st.lists(
    st.sampled_from(["main", "group", "cron", "hook", "node", "other", " MAIN "]) | any_text,
    max_size=4,
) | st.sampled_from(["main", "", "bogus"])
plausible_calls = st.one_of(
    st.tuples(
        st.just("sessions_list"),
        good_requesters,
        st.fixed_dictionaries(
            {},
            optional={
                "kinds": kinds_values,
                "limit": numbers,
                "activeMinutes": numbers,
                "messageLimit": numbers,
            },
        ),
    ),
    st.tuples(
        st.just("sessions_history"),
        good_requesters,
        st.fixed_dictionaries(
            {"sessionKey": session_refs | odd_text},
            optional={"limit": numbers, "includeTools": st.booleans()},
        ),
    ),
    st.tuples(st.just("agents_list"), good_requesters, st.just({}) | st.none()),
)
calls = plausible_calls | wild_calls


# Fixture: a seeded SyncGateway per store -------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def sync_gateway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SyncGateway]:
    if request.param == "memory":
        store = "memory"
    elif request.param == "sqlite":
        store = f"sqlite:///{tmp_path}/fuzz.db"
    else:
        store = str(request.getfixturevalue("postgres_url"))
    gateway = SyncGateway.open(
        store=store,
        clock=VirtualClock(start=datetime(2026, 5, 1, 12, tzinfo=UTC)),
        config=before_scopes(
            {"tools": {"agentToAgent": {"enabled": True, "allow": ["main", "ops"]}}}
        ),
    )
    try:
        for index in range(5):
            gateway.record_message("main", role="user", content=f"m{index}\x00\u2028")
        gateway.record_message(
            "main", role="toolResult", content=[{"type": "text", "text": "tool output"}]
        )
        gateway.record_message("main", role="assistant", content="done", label="home")
        gateway.record_message("cron:nightly", role="user", content="run")
        gateway.record_message(
            "agent:main:discord:group:dev",
            role="user",
            content="[Discord dev] hi",
            chat_type="group",
        )
        gateway.record_message("agent:work:main", role="user", content="work")
        yield gateway
    finally:
        gateway.close()


def store_state(gateway: SyncGateway) -> tuple[Any, int]:
    """The read models and the event count; a policy refusal's AccessRefused event is
    evidence, not a change, so it is not counted."""
    store = store_of(gateway._gateway)  # the facade does not expose it; tests may look
    events = sum(1 for _, e in store.events() if type(e).__name__ != "AccessRefused")
    snapshot = store.read_model_snapshot()
    # The refusal's timeline index rows are part of that evidence.
    snapshot["session_streams"] = [
        row for row in snapshot.get("session_streams", []) if row[2] != "refusal"
    ]
    return snapshot, events


def check_result(result: Any, name: Any) -> None:
    assert isinstance(result, dict), result
    if "status" in result:
        assert set(result) == {"status", "tool", "error"}, result
        assert result["status"] in {"error", "forbidden"}, result
        assert isinstance(result["tool"], str)
        assert isinstance(result["error"], str), result
        assert result["error"].strip(), result
        assert not result["error"].startswith("internal error"), result["error"]
        return
    assert name in READ_ONLY_TOOLS, f"unknown tool {name!r} answered {result}"
    keys = set(result)
    if name == "sessions_history" and "offset" in result:
        # A page (decision 27): its paging fields, nextOffset while older messages remain.
        keys -= HISTORY_PAGING | {"nextOffset"} if result["hasMore"] else HISTORY_PAGING
    assert keys == RESULT_KEYS[name], result
    json.dumps(result, allow_nan=False)  # strict JSON, ready for the wire


# Tests ----------------------------------------------------------------------------------


def test_call_tool_never_raises_and_never_writes(sync_gateway: SyncGateway) -> None:
    baseline = store_state(sync_gateway)
    seen: dict[str, int] = {"ok": 0, "error": 0, "forbidden": 0}

    @settings(
        max_examples=EXAMPLES_PER_STORE,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(call=calls)
    def one_call(call: tuple[Any, Any, Any]) -> None:
        name, requester, params = call
        result = sync_gateway.call_tool(requester, name, params)
        check_result(result, name)
        seen[result.get("status", "ok")] += 1
        assert store_state(sync_gateway) == baseline, "a tool call changed the store"

    one_call()
    assert seen["ok"] >= EXAMPLES_PER_STORE // 10, seen
    assert seen["error"] > 0, seen

    # Not corrupted: a normal write and read still work, and the read models still equal
    # what the event log rebuilds.
    recorded = sync_gateway.record_message("main", role="user", content="after the fuzz")
    assert recorded["sessionKey"] == "agent:main:main"
    history = sync_gateway.call_tool("main", "sessions_history", {"sessionKey": "main", "limit": 1})
    assert history["messages"][0]["content"][0]["text"] == "after the fuzz"
    listed = sync_gateway.call_tool("main", "sessions_list", {})
    assert {row["key"] for row in listed["sessions"]} >= {"main", "agent:main:cron:nightly"}
    live = store_state(sync_gateway)
    store_of(sync_gateway._gateway).rebuild_read_models()
    assert store_state(sync_gateway) == live


@settings(max_examples=300, deadline=None, database=None)
@given(params=params_strategy)
def test_parameter_parsing_never_crashes(params: Any) -> None:
    """The parameter models alone: a ToolInputError or a parsed model, nothing else."""
    from sessionwire.application.tools.params import ToolInputError

    for params_class, _ in REGISTERED_TOOLS.values():
        try:
            parsed = params_class.parse(params)
        except ToolInputError as error:
            message = str(error)
        else:
            message = None
        if message is not None:
            assert message.strip()
            assert len(message) <= 2_000, len(message)
            continue
        for name in ("limit", "messageLimit", "activeMinutes"):
            value = getattr(parsed, name, None)
            assert value is None or (type(value) is int and value >= 0), (name, value)
