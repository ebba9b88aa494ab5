"""The tool registry (issue 37 item 1, ADR 0037 amended): each tool declared once in
``application/tools/registry.py``, every surface serving exactly the registered tools,
and the JSON Schemas generated from the parameter models the ones written by hand before
(``tests/fixtures/tool_wire_shapes.json``, snapshot on fa7aaf7).

The expectations here are written out, not read from the registry: a surface that lost a
tool, or named one the registry does not hold, fails a test."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, get_args

import httpx
import pytest
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.cli.demo.scenario import ToolName
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.mcp.server import tool_definitions
from sessionwire.adapters.read_composition import open_read_tools
from sessionwire.adapters.telemetry.prometheus import PrometheusTelemetry
from sessionwire.adapters.testkit.internals import internals
from sessionwire.application.ports.telemetry import ToolSpan
from sessionwire.application.tools.params import ToolParams, wire
from sessionwire.application.tools.registry import READS, REGISTRY, ToolRegistry, ToolSpec
from sessionwire.application.tools.results import ToolResult
from sessionwire.application.tools.schemas import parameters_schema
from sessionwire.testing import VirtualClock
from test_sessions_spawn import SUBAGENT_TOOLS

ROOT = Path(__file__).resolve().parents[2]
HAND_WRITTEN: list[dict[str, Any]] = json.loads(
    (ROOT / "tests" / "fixtures" / "tool_wire_shapes.json").read_text(encoding="utf-8")
)["tools"]

TOOLS = [
    "sessions_list",
    "sessions_history",
    "sessions_search",
    "sessions_send",
    "sessions_spawn",
    "sessions_yield",
    "agents_list",
    "subagents",
    "session_status",
    "run_input",
]
# The tools a run is offered: all but run_input, which answers a run for a person.
RUN_OFFERED = [name for name in TOOLS if name != "run_input"]
# OpenClaw's tools that are not the gateway's, offered to a run before the gateway's own:
# those a sub-agent keeps, then those it is denied.
OPENCLAW = [*SUBAGENT_TOOLS, "gateway", "cron", "memory_search", "memory_get", "whatsapp_login"]
# What a sub-agent gets by default: OpenClaw's tools but its deny list, and of the
# gateway's sessions_yield only; one that may nest sessions_spawn too (decision 30).
SUBAGENT_DEFAULT = [*SUBAGENT_TOOLS, "sessions_yield"]
ORCHESTRATOR_DEFAULT = [*SUBAGENT_TOOLS, "sessions_spawn", "sessions_yield"]
READERS = ["sessions_list", "sessions_history", "sessions_search", "agents_list"]
SUBAGENT_KEY = "agent:main:subagent:0f0e3c52-7c0e-4a4e-9d55-0c8a2e7d3b10"


@pytest.fixture
async def memory_gateway() -> Any:
    gateway = await Gateway.open(config=GatewayConfig(), store="memory", clock=VirtualClock())
    yield gateway
    await gateway.close()


def test_the_registry_holds_the_tools_in_their_wire_order() -> None:
    assert list(REGISTRY.names) == TOOLS
    assert [tool["name"] for tool in HAND_WRITTEN] == TOOLS
    assert all(name in REGISTRY for name in TOOLS)
    assert ["sessions_list"] not in REGISTRY  # a made-up name may be any JSON value


# The schemas ------------------------------------------------------------------------------


async def test_the_generated_schemas_are_the_hand_written_ones(memory_gateway: Gateway) -> None:
    served = memory_gateway.tool_schemas()
    expected = [
        {k: tool[k] for k in ("name", "description", "parameters")} for tool in HAND_WRITTEN
    ]
    assert served == expected
    # Byte for byte as served (GET /v1/tools, MCP's tools/list), but subagents': its
    # model lists recentMinutes before reason (as its "accepted:" message does), the
    # hand-written schema after it; JSON objects are unordered, the members are equal.
    for generated, written in zip(served, expected, strict=True):
        if generated["name"] != "subagents":
            assert json.dumps(generated) == json.dumps(written)
    subagents = served[TOOLS.index("subagents")]["parameters"]["properties"]
    assert list(subagents) == ["action", "target", "message", "recentMinutes", "reason"]


def test_a_schema_keeps_openclaws_dialect_for_any_field_type() -> None:
    # What a new tool's model would get, beyond the types today's tools use.
    class ProbeParams(ToolParams):
        tool: ClassVar[str] = "probe"
        """Not part of the schema."""

        count: Annotated[int | None, wire("How many.", minimum=0)] = None
        names: Annotated[frozenset[str], wire("Which.")] = frozenset()
        flag: bool = False
        query: str

    schema = parameters_schema(ProbeParams)
    assert schema == {
        "type": "object",
        "properties": {
            "count": {"type": "number", "minimum": 0, "description": "How many."},
            "names": {"type": "array", "items": {"type": "string"}, "description": "Which."},
            "flag": {"type": "boolean"},
            "query": {"type": "string"},
        },
        "additionalProperties": False,
        "required": ["query"],
    }
    assert not re.search(r'"(anyOf|oneOf|integer|title|default|null)"', json.dumps(schema))


# The entries -------------------------------------------------------------------------------


def test_every_entry_names_a_handler_and_result_models_that_exist() -> None:
    for spec in REGISTRY:
        params, handler = spec.entry()
        assert params.tool == spec.name
        inspect.signature(handler).bind(object(), object())  # called (context, params)
        for topic in spec.results:
            module, _, name = topic.partition(":")
            model = getattr(__import__(module, fromlist=[name]), name)
            assert issubclass(model, ToolResult), topic


def test_a_tool_is_registered_once_with_its_own_parameters() -> None:
    spec = REGISTRY["sessions_list"]
    with pytest.raises(ValueError, match="twice"):
        ToolRegistry((spec, spec))
    with pytest.raises(ValueError, match="sessions_history's"):
        ToolSpec(
            name="sessions_list",
            description="",
            params=REGISTRY["sessions_history"].params_model,
            results=(),
            hints=spec.hints,
            subagents="denied",
        )


def test_a_parameters_topic_is_checked_when_it_is_first_used() -> None:
    # Named by topic (built on use, issue 38 item 7): the model's tool is checked then.
    spec = ToolSpec(
        name="sessions_list",
        description="",
        params="sessionwire.application.tools.params:SessionsHistoryParams",
        results=(),
        hints=READS,
        subagents="denied",
    )
    with pytest.raises(ValueError, match="sessions_history's"):
        spec.entry()


class ProbeToolParams(ToolParams):
    tool: ClassVar[str] = "sessions_probe"

    query: Annotated[str, wire("What to look for.", maxLength=64)]


def sessions_probe(context: Any, params: ProbeToolParams) -> ToolResult:
    return ToolResult(tool="sessions_probe")


def test_a_new_tool_is_one_entry_the_derived_tables_take_up() -> None:
    # ADR 0037 amended, "Adding a tool": its entry alone puts it in the tables.
    spec = ToolSpec(
        name="sessions_probe",
        description="Look for something.",
        params=ProbeToolParams,
        results=("sessionwire.application.tools.results:ToolResult",),
        hints=REGISTRY["sessions_list"].hints,
        subagents="denied",
        handler=f"{__name__}:sessions_probe",
    )
    grown = ToolRegistry((*REGISTRY, spec))
    assert grown.names == (*TOOLS, "sessions_probe")
    assert grown.entries()["sessions_probe"] == (ProbeToolParams, sessions_probe)
    assert [s.name for s in grown.on("http")] == [*TOOLS, "sessions_probe"]
    assert [s.name for s in grown.on("reader")] == READERS
    assert grown.catalogue.known == (*OPENCLAW, *RUN_OFFERED, "sessions_probe")
    assert "sessions_probe" in grown.catalogue.denied
    assert parameters_schema(spec.params_model)["properties"] == {
        "query": {"type": "string", "maxLength": 64, "description": "What to look for."}
    }


# Every surface -----------------------------------------------------------------------------


async def test_http_serves_a_route_and_a_listing_for_each_registered_tool_only(
    memory_gateway: Gateway,
) -> None:
    app = create_app(memory_gateway, "token", console=False)
    document = app.openapi()
    routes = [path.removeprefix("/v1/tools/") for path in document["paths"]]
    assert [path for path in routes if not path.startswith("/")] == TOOLS
    headers = {"Authorization": "Bearer token", "X-Sessionwire-Session": "main"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gw", headers=headers
    ) as http:
        listed = (await http.get("/v1/tools")).json()["tools"]
        assert [tool["name"] for tool in listed] == TOOLS
        for name in TOOLS:
            answer = await http.post(f"/v1/tools/{name}", content=b"")
            # The tool's own answer (a refusal too), never the HTTP error shape.
            assert answer.status_code == 200, name
            body = answer.json()
            assert "error" not in body or body["tool"] == name, (name, body)
        unknown = await http.post("/v1/tools/sessions_rewind", content=b"")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == (
        f"unknown tool 'sessions_rewind' (tools: {', '.join(TOOLS)})"
    )


async def test_mcp_lists_each_registered_tool_with_its_hints(memory_gateway: Gateway) -> None:
    listed = tool_definitions(memory_gateway)
    assert [tool.name for tool in listed] == TOOLS
    hints = {
        tool.name: tool.annotations.model_dump(by_alias=True, exclude_none=True)
        for tool in listed
        if tool.annotations is not None
    }
    assert hints == {tool["name"]: tool["mcpAnnotations"] for tool in HAND_WRITTEN}


async def test_a_run_is_offered_openclaws_tools_then_each_registered_one(
    memory_gateway: Gateway,
) -> None:
    service = internals(memory_gateway)
    assert list(await service.tools_of_session("agent:main:main")) == [*OPENCLAW, *RUN_OFFERED]
    assert list(await service.tools_of_session(SUBAGENT_KEY)) == SUBAGENT_DEFAULT
    assert list(service.tool_access.orchestrator_tools) == ORCHESTRATOR_DEFAULT


async def test_a_sub_agent_is_refused_each_registered_tool_it_may_not_use(
    gateway: Gateway,
) -> None:
    # On every store: the refusal is recorded as evidence before the tool runs.
    for name in TOOLS:
        answer = await gateway.call_tool(SUBAGENT_KEY, name, {})
        refused = answer["status"] == "forbidden" and "sub-agent" in answer["error"]
        assert refused == (name not in SUBAGENT_DEFAULT), (name, answer)


async def test_the_read_path_answers_the_reader_tools_only() -> None:
    tools = await open_read_tools(GatewayConfig(), "memory", clock=VirtualClock())
    try:
        for name in TOOLS:
            answer = await tools.call_tool("main", name, {})
            unknown = str(answer.get("error", ""))
            if name in READERS:
                assert not unknown.startswith("unknown tool"), (name, answer)
            else:
                assert unknown == f"unknown tool {name!r} (tools: {', '.join(READERS)})"
    finally:
        await tools.close()


def test_metrics_label_each_registered_tool_and_no_other() -> None:
    telemetry = PrometheusTelemetry()
    for name in [*TOOLS, "sessions_rewind", "exec"]:
        with telemetry.tool_span(ToolSpan(tool=name, requester="main", run_id=None, trace_id=None)):
            pass
    labels = re.findall(
        r'sessionwire_tool_calls_total\{status="\w+",tool="(\w+)"\}', _text(telemetry)
    )
    assert sorted(labels) == sorted([*TOOLS, "other"])


def _text(telemetry: PrometheusTelemetry) -> str:
    return telemetry.exposition().decode()


def test_the_demo_scenarios_name_registered_tools_only() -> None:
    assert set(get_args(ToolName)) <= set(TOOLS)


DOCS_ROW = re.compile(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \| ([^|]+) \|", re.MULTILINE)
DOCS_HINTS = {
    "sessions_list": "read-only",
    "sessions_history": "read-only",
    "sessions_search": "read-only",
    "sessions_send": "open-world",
    "sessions_spawn": "open-world",
    "sessions_yield": "open-world",
    "agents_list": "read-only",
    "subagents": "destructive",
    "session_status": "read-only",
    "run_input": "open-world",
}
DOCS_SUBAGENTS = {
    "denied": "denied",
    "allowed": "allowed",
    "orchestrator": "only while it may nest",
}


def test_the_docs_tool_table_is_the_registry() -> None:
    rows = DOCS_ROW.findall((ROOT / "docs" / "tools.md").read_text(encoding="utf-8"))
    assert [name for name, _, _ in rows] == TOOLS
    for name, hints, subagent in rows:
        spec = REGISTRY[name]
        assert hints.strip() == DOCS_HINTS[name]
        assert (spec.hints.read_only, spec.hints.destructive) == (
            DOCS_HINTS[name] == "read-only",
            DOCS_HINTS[name] == "destructive",
        )
        assert subagent.strip() == DOCS_SUBAGENTS[spec.subagents]
