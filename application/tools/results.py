"""Tool results: the JSON shapes of the source document, as pydantic models, and for the
two reads called most (``sessions_history``, ``sessions_list``) as typed dicts built
directly: validating the gateway's own output into a model and dumping it again was a
tenth of a read's CPU and checked nothing the types do not.

This module holds what every tool and the CLI's reads need; the run tools' results are
in ``run_results``, the reads' documented models in ``read_result_models``: each model
costs its class's building at import (40 M instructions for all of them, issue 23)."""

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


class SearchHitRow(TypedDict):
    """One ``sessions_search`` hit as the tool answers it: ``SearchHit``'s fields, in its
    order (a plain row, as the other read tools answer, so a read builds no model)."""

    sessionKey: str
    messageIndex: int
    role: str
    snippet: str
    timestamp: int | None


class SessionsSearchAnswer(TypedDict):
    results: list[SearchHitRow]
    truncated: bool


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

    data: SessionsListAnswer | SessionsHistoryAnswer | SessionsSearchAnswer

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
