"""Tool results: the JSON shapes of the source document, as pydantic models."""

from __future__ import annotations

from typing import Any, Literal

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
    count: int
    sessions: list[SessionListRow]

    def to_json_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        for row in data["sessions"]:
            if row["messages"] is None:
                del row["messages"]
        return data


class SessionsHistoryResult(ToolResult):
    sessionKey: str
    messages: list[dict[str, Any]]


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
