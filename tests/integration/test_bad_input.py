"""Bad input, table by table: tools answer with an error envelope and write nothing.

The contract (§2): ``call_tool`` never raises. A wrong type, NaN, an unknown parameter,
non-object params, an unknown tool or an invalid requester key is
``{"status": "error", "tool": name, "error": "<clear message>"}``; numbers out of range
are floored and clamped, never an error (§5 decisions 2 and 3). ``record_message`` and
``patch_session`` raise ValueError with a clear message. In every case the store is
unchanged: same read models, same number of events.

Every store test runs on the memory, SQLite and PostgreSQL stores (the ``gateway``
fixture). A table is one test per parameter and store: it runs every row against one
seeded gateway (tools are read-only, and each row checks it wrote nothing) and reports
all failing rows at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.application.tools.params import (
    SessionsHistoryParams,
    SessionsListParams,
    ToolInputError,
)
from sessionwire.testing import VirtualClock

NAN = math.nan
INF = math.inf
MB_STRING = "x" * (1024 * 1024)
KEY_10K = "k" * 10_000
FOUR_MIB = 4 * 1024 * 1024
MAIN_MESSAGES = 25  # user messages in the main session, then one tool result and one reply
VISIBLE_MAIN = MAIN_MESSAGES + 1  # what sessions_history shows without tool results
# No error message may be so long that an agent cannot read it (inputs here reach 1 MB).
MAX_ERROR_LENGTH = 2_000
TOOLS = ["sessions_list", "sessions_history", "agents_list"]
VALID_PARAMS: dict[str, dict[str, Any]] = {
    "sessions_list": {"limit": 5},
    "sessions_history": {"sessionKey": "main"},
    "agents_list": {},
}

Result = dict[str, Any]


# Helpers --------------------------------------------------------------------------------


def short(value: Any) -> str:
    """A readable id for a value, however long."""
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, dict):
        return "{" + ",".join(f"{short(k)}:{short(v)}" for k, v in value.items()) + "}"
    text = repr(value)
    return text if len(text) <= 30 else f"{text[:12]}...<{len(text)} chars>"


def store_state(gateway: Gateway) -> tuple[Any, int]:
    """The read models and the event count; a policy refusal's AccessRefused event (and
    its timeline index rows) is evidence, not a change, so it is not counted."""
    store = store_of(gateway)
    events = sum(1 for _, e in store.events() if type(e).__name__ != "AccessRefused")
    snapshot = store.read_model_snapshot()
    snapshot["session_streams"] = [
        row for row in snapshot.get("session_streams", []) if row[2] != "refusal"
    ]
    return snapshot, events


async def call(gateway: Gateway, requester: Any, tool: Any, params: Any) -> Result:
    """Call a tool and check it wrote nothing (tools are read-only, errors doubly so)."""
    before = store_state(gateway)
    result = await gateway.call_tool(requester, tool, params)
    assert store_state(gateway) == before, "the tool call changed the store"
    assert isinstance(result, dict), result
    return result


def assert_names_tool(shown: Any, tool: str) -> None:
    """The envelope's ``tool`` is the name called, or (a long one) its start and '…'."""
    assert isinstance(shown, str), shown
    assert len(shown) <= MAX_ERROR_LENGTH, f"tool of {len(shown)} characters"
    if shown != tool:
        assert shown.endswith("…"), f"tool {short(shown)} for {short(tool)}"
        assert tool.startswith(shown[:-1]), f"tool {short(shown)} for {short(tool)}"


def assert_error(result: Result, tool: str, *mentions: str) -> str:
    assert set(result) == {"status", "tool", "error"}, f"not an error envelope: {result}"
    assert result["status"] == "error", result
    assert_names_tool(result["tool"], tool)
    error = result["error"]
    assert isinstance(error, str), result
    assert error.strip(), result
    assert not error.startswith("internal error"), error
    assert len(error) <= MAX_ERROR_LENGTH, f"error message of {len(error)} characters"
    for mention in mentions:
        assert mention.lower() in error.lower(), f"{mention!r} not in {error!r}"
    return error


@dataclass(frozen=True)
class Err:
    """The call fails; the message names each of ``mentions``."""

    mentions: tuple[str, ...]

    def check(self, result: Result, tool: str) -> None:
        assert_error(result, tool, *self.mentions)


@dataclass(frozen=True)
class Ok:
    """The call succeeds and ``check_result`` accepts what it answered."""

    check_result: Callable[[Result], None]

    def check(self, result: Result, tool: str) -> None:
        assert "status" not in result, f"expected success, got {result}"
        self.check_result(result)


@dataclass(frozen=True)
class Forbidden:
    """A policy refuses, with exactly this message, whether or not the session exists."""

    message: str

    def check(self, result: Result, tool: str) -> None:
        assert result == {"status": "forbidden", "tool": tool, "error": self.message}, result


Case = tuple[Any, Ok | Err | Forbidden]  # (params, what must happen)


def err(*mentions: str) -> Err:
    return Err(mentions)


def rows(count: int) -> Ok:
    def check(result: Result) -> None:
        assert result["count"] == len(result["sessions"]) == count, (
            f"{result['count']} rows, expected {count}"
        )

    return Ok(check)


def kinds_listed(*kinds: str) -> Ok:
    def check(result: Result) -> None:
        assert sorted(row["kind"] for row in result["sessions"]) == sorted(kinds), result

    return Ok(check)


def main_row_messages(count: int | None) -> Ok:
    """No row carries ``messages`` (None), or the main row carries the last ``count``."""

    def check(result: Result) -> None:
        if count is None:
            assert all("messages" not in row for row in result["sessions"]), result
            return
        (main,) = [row for row in result["sessions"] if row["key"] == "main"]
        messages = main["messages"]
        assert len(messages) == count, f"{len(messages)} messages, expected {count}"
        assert all(m["role"] != "toolResult" for m in messages)
        assert messages[-1]["content"][0]["text"] == "done"

    return Ok(check)


HISTORY_FLAGS = ("truncated", "droppedMessages", "contentTruncated", "contentRedacted", "bytes")


def history(count: int, *, key: str = "main", tools: bool = False) -> Ok:
    def check(result: Result) -> None:
        assert list(result) == ["sessionKey", "messages", *HISTORY_FLAGS], result
        assert result["sessionKey"] == key, result["sessionKey"]
        assert len(result["messages"]) == count, f"{len(result['messages'])} messages"
        assert ("toolResult" in {m["role"] for m in result["messages"]}) == tools

    return Ok(check)


def page(count: int, *, offset: int | None, total: int) -> Ok:
    """A page of ``count`` messages at ``offset`` (None: anywhere at or past the end)."""

    def check(result: Result) -> None:
        assert result["totalMessages"] == total, result
        assert len(result["messages"]) == count, f"{len(result['messages'])} messages"
        if offset is None:
            assert result["offset"] >= total, result
        else:
            assert result["offset"] == offset, result
        assert result["hasMore"] == (result["offset"] + count < total), result
        assert ("nextOffset" in result) == result["hasMore"], result

    return Ok(check)


def requester_is(agent_id: str) -> Ok:
    def check(result: Result) -> None:
        assert result["requester"] == agent_id, result

    return Ok(check)


async def run_table(
    gateway: Gateway, tool: Any, cases: list[Case], *, requester: Any = "main"
) -> None:
    """Every row, against one gateway; all failing rows are reported together."""
    failures = []
    for params, expect in cases:
        try:
            expect.check(await call(gateway, requester, tool, params), tool)
        except AssertionError as error:
            failures.append(f"  {short(params)}: {str(error).splitlines()[0]}")
    assert not failures, f"{len(failures)} of {len(cases)} rows failed:\n" + "\n".join(failures)


# Fixtures -------------------------------------------------------------------------------


@pytest.fixture
async def seeded(gateway: Gateway, clock: VirtualClock) -> Gateway:
    """An old group chat; 30 minutes later main (25 + 2 messages) and a cron job."""
    await gateway.record_message(
        "agent:main:discord:group:dev", role="user", content="old", chat_type="group"
    )
    await clock.advance(30 * 60)
    for index in range(MAIN_MESSAGES):
        await gateway.record_message("main", role="user", content=f"m{index}")
    await gateway.record_message(
        "main", role="toolResult", content=[{"type": "text", "text": "tool output"}]
    )
    await gateway.record_message("main", role="assistant", content="done")
    await gateway.record_message("cron:nightly", role="user", content="run")
    return gateway


@pytest.fixture
async def recorded(gateway: Gateway) -> Gateway:
    """Two sessions, one labelled ``taken``."""
    await gateway.record_message("main", role="user", content="hi", label="mine")
    await gateway.record_message("cron:nightly", role="user", content="run", label="taken")
    return gateway


# Tool parameters: one table per tool and parameter --------------------------------------

# Values no number parameter accepts (the message must name the parameter).
NOT_NUMBERS: list[Any] = [
    "5",
    "",
    "   ",
    "abc",
    MB_STRING,
    "\x00",
    [],
    [5],
    {},
    {"value": 5},
    True,
    False,
    NAN,
    -NAN,
]
TOO_LOW = (-5, 0, -0.0, 0.5, 1e-300, -INF, -1e308, -(10**30), -(10**400))
TOO_HIGH = (1e308, 10**30, 10**400, INF)

TABLES: dict[tuple[str, str], list[Case]] = {
    # sessions_list.limit: default 50, floored, clamped to 1..200
    ("sessions_list", "limit"): [
        ({}, rows(3)),
        ({"limit": None}, rows(3)),
        *[({"limit": v}, rows(1)) for v in TOO_LOW],
        ({"limit": 1.99}, rows(1)),
        ({"limit": 2}, rows(2)),
        ({"limit": 2.9}, rows(2)),
        *[({"limit": v}, rows(3)) for v in (3, 200, 200.5, 201, *TOO_HIGH)],
        *[({"limit": v}, err("limit")) for v in NOT_NUMBERS],
    ],
    # sessions_list's filters: label exact, agentId and search trimmed text (empty: no
    # filter), archived a boolean and nothing else. Nothing of the seed is archived.
    ("sessions_list", "filters"): [
        *[({name: None}, rows(3)) for name in ("label", "agentId", "search", "archived")],
        *[({name: "  "}, rows(3)) for name in ("label", "agentId", "search")],
        ({"agentId": "MAIN"}, rows(3)),
        ({"agentId": "work"}, rows(0)),
        ({"search": "NIGHTLY"}, rows(1)),
        ({"label": "nope"}, rows(0)),
        ({"archived": False}, rows(3)),
        ({"archived": True}, rows(0)),
        *[
            ({name: v}, err(name, "string"))
            for name in ("label", "agentId", "search")
            for v in (5, True, NAN, [], {})
        ],
        *[({name: "a" * 65}, err(name, "too long")) for name in ("label", "agentId")],
        ({"search": MB_STRING}, err("search", "too long")),
        *[({"archived": v}, err("archived")) for v in ("true", 1, 0, NAN, [], {})],
    ],
    # sessions_list.activeMinutes: floored, at least 1; +inf, or any window longer than
    # there has been time, is no filter. The group chat is 30 minutes old.
    ("sessions_list", "activeMinutes"): [
        ({"activeMinutes": None}, rows(3)),
        ({"activeMinutes": 30}, rows(3)),
        ({"activeMinutes": 30.9}, rows(3)),
        ({"activeMinutes": 29.9}, rows(2)),
        *[({"activeMinutes": v}, rows(2)) for v in (1, 1.5, *TOO_LOW)],
        *[({"activeMinutes": v}, rows(3)) for v in (10**6, 10**9, 10**9 + 1, 10**15, *TOO_HIGH)],
        *[({"activeMinutes": v}, err("activeMinutes")) for v in NOT_NUMBERS],
    ],
    # sessions_list.messageLimit: default 0, floored, clamped to 0..20; no tool results
    ("sessions_list", "messageLimit"): [
        *[
            ({"messageLimit": v}, main_row_messages(None))
            for v in (None, 0, -5, 0.9, -INF, -1e308, -(10**400))
        ],
        ({"messageLimit": 1}, main_row_messages(1)),
        ({"messageLimit": 3}, main_row_messages(3)),
        ({"messageLimit": 3.7}, main_row_messages(3)),
        *[({"messageLimit": v}, main_row_messages(20)) for v in (20, 20.5, 21, *TOO_HIGH)],
        *[({"messageLimit": v}, err("messageLimit")) for v in NOT_NUMBERS],
    ],
    # sessions_list.kinds: strings trimmed and lower-cased, unknown ones dropped; a single
    # string is a one-element list; nothing valid left = no filter
    ("sessions_list", "kinds"): [
        *[
            ({"kinds": v}, rows(3))
            for v in (None, [], "", "   ", [""], ["  "], ["bogus"], "bogus", [MB_STRING], ["\x00"])
        ],
        *[
            ({"kinds": v}, kinds_listed("main"))
            for v in (["main"], "main", [" MAIN "], ["main", "bogus"], ["main", "main"])
        ],
        ({"kinds": ["cron"]}, kinds_listed("cron")),
        ({"kinds": ["group"]}, kinds_listed("group")),
        ({"kinds": ["main", "cron"]}, kinds_listed("cron", "main")),
        ({"kinds": ["hook"]}, rows(0)),
        *[
            ({"kinds": v}, err("kinds"))
            for v in (5, 1.5, True, NAN, INF, 10**30, {}, {"main": True}, [5], ["main", None])
        ],
        ({"kinds": [["main"]]}, err("kinds")),
        ({"kinds": [{}]}, err("kinds")),
        ({"kinds": [NAN]}, err("kinds")),
    ],
    # several at once: valid ones combine, any bad one is an error
    ("sessions_list", "combined"): [
        ({"limit": 1, "kinds": ["cron", "group"], "activeMinutes": 60}, rows(1)),
        ({"limit": 500, "kinds": "group", "activeMinutes": 5}, rows(0)),
        ({"limit": "x", "messageLimit": "y"}, err()),
        ({"limit": 5, "messageLimit": NAN}, err("messageLimit")),
        ({"kinds": ["main"], "activeMinutes": []}, err("activeMinutes")),
    ],
    # sessions_history.sessionKey: required (a key or a sessionId); trimmed; empty = missing
    ("sessions_history", "sessionKey"): [
        *[
            (params, err("sessionKey required"))
            for params in (
                {},
                {"sessionKey": None},
                {"sessionKey": ""},
                {"sessionKey": "   "},
                {"sessionKey": "\t\n"},
                {"sessionKey": "\u2028"},
                {"limit": 5},
                {"limit": NAN, "includeTools": "x"},
            )
        ],
        *[
            ({"sessionKey": v}, err("sessionKey", "string"))
            for v in (5, 0, 1.5, -1, True, False, NAN, INF, 10**30, [], ["main"], {}, {"k": "v"})
        ],
        *[
            ({"sessionKey": v}, err("sessionKey", "too long"))
            for v in (MB_STRING, KEY_10K, "a" * 600)
        ],
        *[
            ({"sessionKey": v}, err("sessionKey", "control"))
            for v in ("\x00", "main\x00", "ma\nin", "\x1b[31mmain", "main\x7f")
        ],
        *[
            ({"sessionKey": v}, err("sessionKey", "invalid"))
            for v in ("agent::x", ":::", "agent:main")
        ],
        *[({"sessionKey": v}, err("sessionKey", "Unicode")) for v in ("\ud800", "main\udfff")],
        # well formed, but no such session: the message names the key
        *[
            ({"sessionKey": v}, err(f"Session not found: {v}"))
            for v in (
                "global",
                "unknown",
                "agent:main:nope",
                "nope",
                "AGENT:MAIN:NOPE",
                "a" * 400,
                "00000000-0000-0000-0000-000000000000",
            )
        ],
        # another agent's key, stored or not: the agent-to-agent rule answers first
        (
            {"sessionKey": "agent:other:main"},
            Forbidden(
                "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true "
                "to allow cross-agent access."
            ),
        ),
        # valid spellings of the main session: keys are case-insensitive and trimmed
        *[
            ({"sessionKey": v}, history(VISIBLE_MAIN))
            for v in ("main", " main ", "agent:main:main", "AGENT:Main:MAIN", "Agent:MAIN:Main\n")
        ],
        ({"sessionKey": "cron:nightly"}, history(1, key="agent:main:cron:nightly")),
        ({"sessionKey": " CRON:Nightly "}, history(1, key="agent:main:cron:nightly")),
    ],
    # sessions_history.limit: default 200, floored, clamped to 1..1000
    ("sessions_history", "limit"): [
        *[({"sessionKey": "main", "limit": v}, history(1)) for v in TOO_LOW],
        ({"sessionKey": "main", "limit": 2.9}, history(2)),
        *[
            ({"sessionKey": "main", "limit": v}, history(VISIBLE_MAIN))
            for v in (None, 26, 1000, 1001, *TOO_HIGH)
        ],
        *[({"sessionKey": "main", "limit": v}, err("limit")) for v in NOT_NUMBERS],
    ],
    # sessions_history.offset: a number at least 0, floored; past the end an empty page
    ("sessions_history", "offset"): [
        ({"sessionKey": "main", "offset": None}, history(VISIBLE_MAIN)),
        ({"sessionKey": "main", "offset": 0, "limit": 2}, page(2, offset=0, total=VISIBLE_MAIN)),
        ({"sessionKey": "main", "offset": 1.9, "limit": 2}, page(2, offset=1, total=VISIBLE_MAIN)),
        *[
            ({"sessionKey": "main", "offset": v}, page(0, offset=None, total=VISIBLE_MAIN))
            for v in (VISIBLE_MAIN, 1e308, 10**30, 10**400, INF)
        ],
        *[
            ({"sessionKey": "main", "offset": v}, err("offset", "non-negative"))
            for v in (-1, -0.5, -1e-300, -INF, -(10**30), -(10**400))
        ],
        *[({"sessionKey": "main", "offset": v}, err("offset")) for v in NOT_NUMBERS],
    ],
    # sessions_history.includeTools: a boolean and nothing else
    ("sessions_history", "includeTools"): [
        ({"sessionKey": "main", "includeTools": None}, history(VISIBLE_MAIN)),
        ({"sessionKey": "main", "includeTools": False}, history(VISIBLE_MAIN)),
        ({"sessionKey": "main", "includeTools": True}, history(VISIBLE_MAIN + 1, tools=True)),
        ({"sessionKey": "main", "includeTools": True, "limit": 2}, history(2, tools=True)),
        *[
            ({"sessionKey": "main", "includeTools": v}, err("includeTools"))
            for v in ("true", "false", "", "  ", 1, 0, 1.0, NAN, INF, [], [True], {})
        ],
    ],
    # agents_list takes no parameters
    ("agents_list", "params"): [
        ({}, requester_is("main")),
        (None, requester_is("main")),
        ({"limit": 5}, err("unknown parameter", "'limit'")),
        ({"x": 1}, err("unknown parameter", "'x'")),
        ({"": None}, err("unknown parameter")),
        ({MB_STRING: 1}, err("unknown parameter", "xxxxxxxx", "1048576 characters")),
    ],
}


@pytest.mark.parametrize(("tool", "parameter"), list(TABLES), ids=[f"{t}.{p}" for t, p in TABLES])
async def test_tool_parameters(seeded: Gateway, tool: str, parameter: str) -> None:
    await run_table(seeded, tool, TABLES[(tool, parameter)])


async def test_sessions_history_accepts_a_session_id_in_any_case(seeded: Gateway) -> None:
    listed = await call(seeded, "main", "sessions_list", {"kinds": ["main"]})
    session_id = listed["sessions"][0]["sessionId"]
    cases: list[Case] = [
        ({"sessionKey": spelling}, history(VISIBLE_MAIN))
        for spelling in (session_id, session_id.upper(), f"  {session_id}\n")
    ]
    await run_table(seeded, "sessions_history", cases)


# What every tool shares: the params object, unknown parameters, the requester, the name -----

NOT_OBJECTS: list[Any] = [[], [{}], ["sessionKey", "main"], "", "{}", "main", 5, 0, 1.5]
NOT_OBJECTS += [True, False, NAN, INF, MB_STRING]

UNKNOWN_NAMES: list[tuple[Any, str]] = [
    ("bogus", "'bogus'"),
    ("Limit", "'Limit'"),
    ("session_key", "'session_key'"),
    ("SessionKey", "'SessionKey'"),
    ("", "''"),
    (" limit", "' limit'"),
    ("\x00", "'\\x00'"),
    ("sessionKey\u200b", "sessionKey"),
    (5, "'5'"),
    (None, "'None'"),
    (KEY_10K, "10000 characters"),
    (MB_STRING, "1048576 characters"),
]


@pytest.mark.parametrize("tool", TOOLS)
async def test_params_must_be_an_object(seeded: Gateway, tool: str) -> None:
    await run_table(seeded, tool, [(p, err("parameters", "JSON object")) for p in NOT_OBJECTS])


@pytest.mark.parametrize("tool", TOOLS)
async def test_unknown_parameters_are_named(seeded: Gateway, tool: str) -> None:
    """Even next to valid ones, and however odd the name; the message stays short."""
    cases: list[Case] = [
        ({**VALID_PARAMS[tool], name: 1}, err("unknown parameter", mention, "accepted:"))
        for name, mention in UNKNOWN_NAMES
    ]
    await run_table(seeded, tool, cases)


BAD_REQUESTERS: list[tuple[Any, str]] = [
    ("", "empty"),
    ("   ", "empty"),
    ("\x00", "control"),
    ("main\x00", "control"),
    ("agent:main:main\x1b", "control"),
    ("agent::x", "agent::x"),
    (":::", "invalid"),
    ("agent:main", "invalid"),
    (KEY_10K, "too long"),
    ("a" * 513, "too long"),
    (MB_STRING, "too long"),
    ("\ud800", "Unicode"),
    ("agent:main:\udfff", "Unicode"),
    (None, "string"),
    (5, "string"),
    (NAN, "string"),
    (True, "string"),
    ([], "string"),
    (["main"], "string"),
    ({}, "string"),
]


@pytest.mark.parametrize("tool", TOOLS)
async def test_invalid_requesters_are_errors(seeded: Gateway, tool: str) -> None:
    failures = []
    for requester, mention in BAD_REQUESTERS:
        try:
            result = await call(seeded, requester, tool, VALID_PARAMS[tool])
            assert_error(result, tool, "requester", mention)
        except AssertionError as error:
            failures.append(f"  {short(requester)}: {str(error).splitlines()[0]}")
    assert not failures, "\n".join(failures)


async def test_every_spelling_of_main_is_the_main_requester(seeded: Gateway) -> None:
    for requester in ("main", " main ", "agent:main:main", "AGENT:Main:MAIN", "Agent:MAIN:main\n"):
        agents = await call(seeded, requester, "agents_list", {})
        assert agents["requester"] == "main", requester
        listed = await call(seeded, requester, "sessions_list", {"kinds": ["main"]})
        assert [row["key"] for row in listed["sessions"]] == ["main"], requester


@pytest.mark.parametrize(
    ("requester", "agent_id", "visible"),
    [
        ("global", "main", 3),
        ("unknown", "main", 3),
        ("cron:nightly", "main", 3),
        ("agent:other:x", "other", 0),
        ("agent:OTHER:main", "other", 0),
    ],
)
async def test_reserved_and_foreign_requesters_are_valid(
    seeded: Gateway, requester: str, agent_id: str, visible: int
) -> None:
    """``global`` and ``unknown`` count as agent main (openclaw-behaviour §4 step 3.2);
    another agent sees none of main's sessions while agent-to-agent is off."""
    agents = await call(seeded, requester, "agents_list", {})
    assert agents["requester"] == agent_id
    listed = await call(seeded, requester, "sessions_list", {})
    assert listed["count"] == visible


UNKNOWN_TOOLS = ["nope", "", "   ", " sessions_list", "sessions_list ", "SESSIONS_LIST"]
UNKNOWN_TOOLS += ["sessions-list", "sessions_list\x00", "sessionsList", "\ud800", KEY_10K[:200]]
UNKNOWN_TOOLS += [KEY_10K, MB_STRING]


async def test_unknown_tool_names_are_errors(seeded: Gateway) -> None:
    failures = []
    for name in [*UNKNOWN_TOOLS, None, 5, 1.5, True, ["sessions_list"], {}]:
        try:
            result = await call(seeded, "main", name, VALID_PARAMS["sessions_list"])
            error = assert_error(result, str(name), "unknown tool")
            assert all(tool in error for tool in TOOLS), error
        except AssertionError as failure:
            failures.append(f"  {short(name)}: {str(failure).splitlines()[0]}")
    assert not failures, "\n".join(failures)


async def test_tools_work_after_a_run_of_bad_calls(seeded: Gateway) -> None:
    for params in ({"limit": NAN}, [], {"bogus": 1}, {"sessionKey": "\x00"}, {"sessionKey": 5}):
        await call(seeded, "main", "sessions_history", params)
    result = await call(seeded, "main", "sessions_history", {"sessionKey": "main", "limit": 1})
    assert result["messages"][0]["content"][0]["text"] == "done"


# Clamps, exactly, at the parameter layer (no store needed) ---------------------------------

CLAMPS: list[tuple[type, str, Any, Any]] = [
    (SessionsListParams, "limit", None, 50),
    (SessionsListParams, "limit", -(10**400), 1),
    (SessionsListParams, "limit", -INF, 1),
    (SessionsListParams, "limit", 0, 1),
    (SessionsListParams, "limit", 0.99, 1),
    (SessionsListParams, "limit", 7.99, 7),
    (SessionsListParams, "limit", 200, 200),
    (SessionsListParams, "limit", 200.5, 200),
    (SessionsListParams, "limit", 201, 200),
    (SessionsListParams, "limit", 1e308, 200),
    (SessionsListParams, "limit", 10**400, 200),
    (SessionsListParams, "limit", INF, 200),
    (SessionsListParams, "activeMinutes", None, None),
    (SessionsListParams, "activeMinutes", -INF, 1),
    (SessionsListParams, "activeMinutes", -5, 1),
    (SessionsListParams, "activeMinutes", 90.5, 90),
    (SessionsListParams, "activeMinutes", 10**9, 10**9),
    (SessionsListParams, "activeMinutes", 10**9 + 1, None),
    (SessionsListParams, "activeMinutes", 1e308, None),
    (SessionsListParams, "activeMinutes", 10**400, None),
    (SessionsListParams, "activeMinutes", INF, None),
    (SessionsListParams, "messageLimit", None, 0),
    (SessionsListParams, "messageLimit", -1, 0),
    (SessionsListParams, "messageLimit", -INF, 0),
    (SessionsListParams, "messageLimit", 19.9, 19),
    (SessionsListParams, "messageLimit", 21, 20),
    (SessionsListParams, "messageLimit", INF, 20),
    (SessionsListParams, "messageLimit", 10**400, 20),
    (SessionsHistoryParams, "limit", None, 200),
    (SessionsHistoryParams, "limit", -5, 1),
    (SessionsHistoryParams, "limit", -INF, 1),
    (SessionsHistoryParams, "limit", 999.9, 999),
    (SessionsHistoryParams, "limit", 1001, 1000),
    (SessionsHistoryParams, "limit", 1e308, 1000),
    (SessionsHistoryParams, "limit", 10**30, 1000),
    (SessionsHistoryParams, "limit", 10**400, 1000),
    (SessionsHistoryParams, "limit", INF, 1000),
]


@pytest.mark.parametrize(
    ("params_class", "name", "value", "expected"),
    CLAMPS,
    ids=[f"{c[0].__name__}.{c[1]}={short(c[2])}" for c in CLAMPS],
)
def test_numbers_are_floored_and_clamped(
    params_class: Any, name: str, value: Any, expected: Any
) -> None:
    raw = {name: value}
    if params_class is SessionsHistoryParams:
        raw["sessionKey"] = "main"
    parsed = params_class.parse(raw)
    assert getattr(parsed, name) == expected
    assert expected is None or type(getattr(parsed, name)) is int


@pytest.mark.parametrize(
    ("params_class", "name"),
    [
        (SessionsListParams, "limit"),
        (SessionsListParams, "activeMinutes"),
        (SessionsListParams, "messageLimit"),
        (SessionsHistoryParams, "limit"),
    ],
    ids=short,
)
def test_nan_is_an_error_not_a_clamp(params_class: Any, name: str) -> None:
    raw: dict[str, Any] = {name: NAN}
    if params_class is SessionsHistoryParams:
        raw["sessionKey"] = "main"
    with pytest.raises(ToolInputError, match=f"^{name} must be a number, not NaN$"):
        params_class.parse(raw)


# record_message ---------------------------------------------------------------------------

# why -> [(key, keyword arguments, text the ValueError's message contains, or None)]
RECORD_CASES: dict[str, list[tuple[Any, dict[str, Any], str | None]]] = {
    "role": [
        ("main", {"role": role, "content": "x"}, "role")
        for role in ("system", "User", "", " user", None, 5, ["user"])
    ],
    "content": [
        ("main", {"role": "user", "content": None}, "content"),
        ("main", {"role": "user", "content": 5}, "content"),
        ("main", {"role": "user", "content": {"type": "text", "text": "x"}}, "content"),
        ("main", {"role": "user", "content": [1]}, "content"),
        ("main", {"role": "user", "content": ["x"]}, "content"),
        ("main", {"role": "user", "content": [{"type": "text", "text": "x"}, None]}, "content"),
        ("main", {"role": "user", "content": [{}]}, "type"),
        ("main", {"role": "user", "content": [{"type": 5}]}, "type"),
        ("main", {"role": "user", "content": [{"type": ""}]}, "type"),
        ("main", {"role": "user", "content": [{"type": "text"}]}, "text"),
        ("main", {"role": "user", "content": [{"type": "text", "text": 5}]}, "text"),
        ("main", {"role": "user", "content": [{"type": "text", "text": None}]}, "text"),
        # the transcript is JSON: no NaN or Infinity anywhere in a block
        *[
            ("main", {"role": "user", "content": [{"type": "text", "text": "x", "n": v}]}, "NaN")
            for v in (NAN, INF, -INF)
        ],
        ("main", {"role": "user", "content": [{"type": "image", "meta": {"w": [NAN]}}]}, "NaN"),
    ],
    "oversize": [
        ("main", {"role": "user", "content": "x" * (FOUR_MIB + 1)}, "too large"),
        # 2 bytes a character: under 4 Mi characters, over 4 MiB
        ("main", {"role": "user", "content": "\u00e9" * (FOUR_MIB // 2 + 1)}, "too large"),
        (
            "main",
            {"role": "assistant", "content": [{"type": "text", "text": "y" * FOUR_MIB}]},
            "too large",
        ),
        (
            "main",
            {"role": "user", "content": [{"type": "text", "text": "z" * (FOUR_MIB // 2)}] * 3},
            "too large",
        ),
    ],
    "chat_type": [
        ("main", {"role": "user", "content": "x", "chat_type": v}, "chat_type")
        for v in ("room", "", "  ", 5, ["group"])
    ],
    "routing": [
        ("main", {"role": "user", "content": "x", name: value}, name)
        for name, value in (
            ("channel", 5),
            ("to", ["a"]),
            ("display_name", {}),
            ("account_id", 1.5),
        )
    ],
    "label": [
        ("main", {"role": "user", "content": "x", "label": ""}, "label"),
        ("main", {"role": "user", "content": "x", "label": "   "}, "label"),
        ("main", {"role": "user", "content": "x", "label": "l" * 65}, "label"),
        ("main", {"role": "user", "content": "x", "label": 5}, "label"),
        # control characters: PostgreSQL cannot store NUL, so no store takes them
        *[
            ("main", {"role": "user", "content": "x", "label": v}, "label")
            for v in ("a\x00b", "a\x07b", "line\nbreak", "a\ud800")
        ],
        ("main", {"role": "user", "content": "x", "label": "taken"}, "already in use"),
        ("main", {"role": "user", "content": "x", "label": " taken "}, "already in use"),
        ("agent:main:new", {"role": "user", "content": "x", "label": "taken"}, "already in use"),
    ],
    "usage": [
        ("main", {"role": "user", "content": "x", "usage": "x"}, "usage"),
        ("main", {"role": "user", "content": "x", "usage": [1]}, "usage"),
        ("main", {"role": "user", "content": "x", "usage": {"input": -1}}, "input"),
        ("main", {"role": "user", "content": "x", "usage": {"input": NAN}}, "input"),
        ("main", {"role": "user", "content": "x", "usage": {"output": "many"}}, "output"),
        ("main", {"role": "user", "content": "x", "usage": {"totalTokens": -5}}, "totalTokens"),
    ],
    "model": [("main", {"role": "user", "content": "x", "model": 5}, "model")],
    # a truthy non-bool must not make the sender an owner
    "owner": [
        ("main", {"role": "user", "content": "x", "sender_is_owner": v}, "sender_is_owner")
        for v in (None, "no", "yes", 1, 0, "true", [True])
    ],
    "key": [
        ("", {"role": "user", "content": "x"}, "session key"),
        ("   ", {"role": "user", "content": "x"}, "session key"),
        ("\x00", {"role": "user", "content": "x"}, "control"),
        ("main\n\x07", {"role": "user", "content": "x"}, "control"),
        ("agent::x", {"role": "user", "content": "x"}, "agent::x"),
        ("agent:main", {"role": "user", "content": "x"}, "agent:main"),
        (":::", {"role": "user", "content": "x"}, "session key"),
        (KEY_10K, {"role": "user", "content": "x"}, "too long"),
        (MB_STRING, {"role": "user", "content": "x"}, "too long"),
        (None, {"role": "user", "content": "x"}, "session key"),
        (5, {"role": "user", "content": "x"}, "session key"),
        (["main"], {"role": "user", "content": "x"}, "session key"),
        # a bad key wins over the rest: nothing else is looked at
        ("agent::x", {"role": "bogus", "content": None}, "session key"),
    ],
    # lone surrogates cannot be stored or sent as JSON text
    "unicode": [
        ("\ud800", {"role": "user", "content": "x"}, "Unicode"),
        ("main", {"role": "user", "content": "\ud800"}, "Unicode"),
        ("main", {"role": "user", "content": [{"type": "text", "text": "a\udfffb"}]}, "Unicode"),
        ("main", {"role": "user", "content": [{"type": "x", "\ud800": 1}]}, "Unicode"),
    ],
}


@pytest.mark.parametrize("why", list(RECORD_CASES))
async def test_record_message_rejects_bad_input(recorded: Gateway, why: str) -> None:
    failures = []
    for key, kwargs, mention in RECORD_CASES[why]:
        case = f"{short(key)} {short(kwargs)}"
        before = store_state(recorded)
        try:
            await recorded.record_message(key, **kwargs)
        except ValueError as error:
            message = str(error)
            if not message.strip() or (mention and mention.lower() not in message.lower()):
                failures.append(f"  {case}: message {message[:200]!r} lacks {mention!r}")
        except Exception as error:
            failures.append(f"  {case}: raised {type(error).__name__}, not ValueError: {error}")
        else:
            failures.append(f"  {case}: accepted")
        if store_state(recorded) != before:
            failures.append(f"  {case}: wrote to the store")
    assert not failures, "\n".join(failures)


async def test_record_message_just_under_the_size_limit_is_accepted(recorded: Gateway) -> None:
    overhead = len('{"role":"user","content":[{"type":"text","text":""}],"timestamp":0}')
    text = "x" * (FOUR_MIB - overhead - 20)
    await recorded.record_message("main", role="user", content=text)
    result = await call(recorded, "main", "sessions_history", {"sessionKey": "main", "limit": 1})
    assert result["messages"][0]["content"][0]["text"] == text


async def test_record_message_canonicalises_odd_spellings_of_main(recorded: Gateway) -> None:
    for key in ("AGENT:Main:MAIN", " main ", "agent:main:main", "Main"):
        result = await recorded.record_message(key, role="user", content="again")
        assert result["sessionKey"] == "agent:main:main", key
    listed = await call(recorded, "main", "sessions_list", {})
    assert listed["count"] == 2


# patch_session ----------------------------------------------------------------------------

PATCH_CASES: list[tuple[dict[str, Any], str]] = [
    ({"sendPolicy": "maybe"}, "sendPolicy"),
    ({"sendPolicy": ""}, "sendPolicy"),
    ({"sendPolicy": 5}, "sendPolicy"),
    ({"sendPolicy": True}, "sendPolicy"),
    ({"label": ""}, "label"),
    ({"label": "  "}, "label"),
    ({"label": "l" * 65}, "label"),
    ({"label": ["x"]}, "label"),
    ({"label": "taken"}, "already in use"),
    ({"label": "a\x00b"}, "label"),
    ({"label": "\ud800"}, "label"),
    ({"model": ""}, "model"),
    ({"model": 5}, "model"),
    ({"thinkingLevel": "ultra"}, "thinkingLevel"),
    ({"verboseLevel": "loud"}, "verboseLevel"),
    ({"bogus": "x"}, "bogus"),
    ({"send_policy": "allow"}, "send_policy"),
    ({"label": "ok", "sendPolicy": "nope"}, "sendPolicy"),
]


async def test_patch_session_rejects_bad_fields(recorded: Gateway) -> None:
    failures = []
    for changes, mention in PATCH_CASES:
        before = store_state(recorded)
        try:
            await recorded.patch_session("main", **changes)
        except ValueError as error:
            if mention.lower() not in str(error).lower():
                failures.append(f"  {short(changes)}: {error} lacks {mention!r}")
        else:
            failures.append(f"  {short(changes)}: accepted")
        if store_state(recorded) != before:
            failures.append(f"  {short(changes)}: wrote to the store")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("key", "error"),
    [
        ("agent:main:nope", LookupError),
        ("global", LookupError),
        ("", ValueError),
        ("agent::x", ValueError),
        ("\x00", ValueError),
        (KEY_10K, ValueError),
        (None, ValueError),
    ],
    ids=short,
)
async def test_patch_session_on_a_bad_or_missing_key(
    recorded: Gateway, key: Any, error: type[Exception]
) -> None:
    before = store_state(recorded)
    with pytest.raises(error):
        await recorded.patch_session(key, sendPolicy="deny")
    assert store_state(recorded) == before
