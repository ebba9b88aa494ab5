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
    """``sessions_history``'s answer as a model (see ``SessionsListResult``)."""

    sessionKey: str
    messages: list[dict[str, Any]]


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


class SendResult(ToolResult):
    """``sessions_send``: every early return carries a fresh runId too (OpenClaw)."""

    runId: str
    status: Literal["accepted", "ok", "timeout", "error", "forbidden", "cancelled"]
    tool: str | None = None
    reply: str | None = None
    error: str | None = None
    sessionKey: str | None = None
    delivery: dict[str, str] | None = None

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
