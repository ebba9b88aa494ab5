"""Tool results: the JSON shapes of the source document, as pydantic models, and for the
two reads called most (``sessions_history``, ``sessions_list``) as typed dicts built
directly: validating the gateway's own output into a model and dumping it again was a
tenth of a read's CPU and checked nothing the types do not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict


class ToolResult(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ToolError(ToolResult):
    status: Literal["error", "forbidden"] = "error"
    tool: str
    error: str

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class HopLimitRefused(ToolResult):
    """A send or spawn refused at the hop limit: exactly these two fields (decision 17)."""

    status: Literal["forbidden"] = "forbidden"
    error: str


class TraceBudgetRefused(ToolResult):
    """A send or spawn refused because its trace spent its budget (decision 31): the
    same two fields as a hop-limit refusal."""

    status: Literal["forbidden"] = "forbidden"
    error: str


class DeliveryContext(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    channel: str | None = None
    to: str | None = None
    accountId: str | None = None


class SessionListRow(BaseModel):
    """One ``sessions_list`` row; every field the source document names is present."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    key: str
    kind: str
    channel: str
    label: str | None
    displayName: str | None
    updatedAt: int
    sessionId: str
    model: str | None
    contextTokens: int | None
    totalTokens: int | None
    thinkingLevel: str | None
    verboseLevel: str | None
    systemSent: bool
    abortedLastRun: bool
    sendPolicy: str | None
    lastChannel: str | None
    lastTo: str | None
    lastAccountId: str | None
    deliveryContext: DeliveryContext | None
    transcriptPath: str
    messages: list[dict[str, Any]] | None = None


class SessionsListResult(ToolResult):
    """``sessions_list``'s answer as a model: its documented schema (OpenAPI). The tool
    builds ``SessionsListAnswer`` directly; tests hold the two to each other."""

    count: int
    sessions: list[SessionListRow]

    def to_json_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        for row in data["sessions"]:
            if row["messages"] is None:
                del row["messages"]
        return data


class SessionsHistoryResult(ToolResult):
    """``sessions_history``'s answer as a model (see ``SessionsListResult``); the paging
    fields only when ``offset`` was given (decision 27)."""

    sessionKey: str
    messages: list[dict[str, Any]]
    truncated: bool
    droppedMessages: bool
    contentTruncated: bool
    contentRedacted: bool
    bytes: int
    offset: int | None = None
    totalMessages: int | None = None
    hasMore: bool | None = None
    nextOffset: int | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class SessionRow(TypedDict):
    """One ``sessions_list`` row as the tool answers it: ``SessionListRow``'s fields, in
    its order, ``messages`` only when asked for (tests hold the two to each other)."""

    key: str
    kind: str
    channel: str
    label: str | None
    displayName: str | None
    updatedAt: int
    sessionId: str
    model: str | None
    contextTokens: int | None
    totalTokens: int | None
    thinkingLevel: str | None
    verboseLevel: str | None
    systemSent: bool
    abortedLastRun: bool
    sendPolicy: str | None
    lastChannel: str | None
    lastTo: str | None
    lastAccountId: str | None
    deliveryContext: dict[str, str | None] | None
    transcriptPath: str
    messages: NotRequired[list[dict[str, Any]]]


class ListVisibility(TypedDict):
    """How a scoped ``sessions_list`` was limited (absent when the scope is ``all``)."""

    mode: str
    restricted: bool
    warning: str


class SessionsListAnswer(TypedDict):
    count: int
    sessions: list[SessionRow]
    visibility: NotRequired[ListVisibility]


class SessionsHistoryAnswer(TypedDict):
    sessionKey: str
    messages: list[dict[str, Any]]
    truncated: bool
    droppedMessages: bool
    contentTruncated: bool
    contentRedacted: bool
    bytes: int
    offset: NotRequired[int]
    totalMessages: NotRequired[int]
    hasMore: NotRequired[bool]
    nextOffset: NotRequired[int]


@dataclass(frozen=True)
class ReadAnswer:
    """A read tool's answer, already the JSON data the caller gets."""

    data: SessionsListAnswer | SessionsHistoryAnswer

    def to_json_dict(self) -> dict[str, Any]:
        return dict(self.data)


class AgentListEntry(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    name: str | None = None
    configured: bool


class AgentsListResult(ToolResult):
    requester: str
    allowAny: bool
    agents: list[AgentListEntry]

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class SendDeliveryShown(BaseModel):
    """What became of the sent message (decision 29, ``domain/send_delivery.py``)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    status: Literal["started", "queued", "steered", "refused"]
    position: int | None = None
    """Only when ``queued``: runs of the session ahead of the message when it was sent."""
    runId: str | None = None
    """Only when ``steered``: the run in flight the message was injected into."""
    mode: Literal["announce"] | None = None


class SendResult(ToolResult):
    """``sessions_send``: every early return carries a fresh runId too (OpenClaw)."""

    runId: str
    status: Literal["accepted", "ok", "timeout", "error", "forbidden", "cancelled"]
    tool: str | None = None
    reply: str | None = None
    error: str | None = None
    sessionKey: str | None = None
    delivery: SendDeliveryShown | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class SpawnResult(ToolResult):
    status: Literal["accepted", "error", "forbidden"]
    tool: str | None = None
    error: str | None = None
    runId: str | None = None
    childSessionKey: str | None = None
    modelApplied: bool | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class SubagentsResult(ToolResult):
    """``subagents``: ``list`` gives ``requesterSessionKey``, ``total``, ``active`` and
    ``recent`` (one row per spawn in the caller's tree); ``cancel`` gives ``runs`` (each
    ``cancelled``, with ``cascaded`` or the ``reason`` it was not); ``steer`` gives the
    ``runId`` and ``sessionKey`` steered and the run's ``steers`` so far."""

    status: Literal["ok"] = "ok"
    action: Literal["list", "cancel", "steer"]
    requesterSessionKey: str | None = None
    total: int | None = None
    active: list[dict[str, Any]] | None = None
    recent: list[dict[str, Any]] | None = None
    target: str | None = None
    runs: list[dict[str, Any]] | None = None
    runId: str | None = None
    sessionKey: str | None = None
    steers: int | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class SessionStatusResult(ToolResult):
    """``session_status``: the calling session's card. ``currentRun`` is null when no
    run of it is in flight; ``budget`` appears when a trace budget is configured."""

    status: Literal["ok"] = "ok"
    sessionKey: str
    key: str
    sessionId: str
    agentId: str
    label: str | None
    model: str | None
    updatedAt: int
    currentRun: dict[str, Any] | None
    queuedRuns: int
    children: list[dict[str, Any]]
    usage: dict[str, Any]
    budget: dict[str, Any] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if data["budget"] is None:
            del data["budget"]
        return data


class YieldChildRow(BaseModel):
    """A child a yield waits for, as ``sessions_yield`` answers it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    childSessionKey: str
    runId: str
    label: str | None = None


class YieldResult(ToolResult):
    """``sessions_yield``: the turn ends; the session is woken by a new turn later."""

    status: Literal["yielded", "error", "forbidden"]
    tool: str | None = None
    error: str | None = None
    yieldId: str | None = None
    waitFor: Literal["all", "any"] | None = None
    dueAt: int | None = None
    """When the wait times out at the latest (ms since the epoch); absent: never."""
    children: list[YieldChildRow] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)
