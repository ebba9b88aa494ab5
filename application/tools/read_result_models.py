"""``sessions_list``'s and ``sessions_history``'s answers as pydantic models: their
documented schema (OpenAPI, the gateway's methods). The tools build the typed dicts of
``results`` directly; tests hold the two to each other. Apart from ``results``, so that
the CLI's reads do not build these models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from sessionwire.application.tools.results import ToolResult


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


class SearchHit(BaseModel):
    """One message ``sessions_search`` found."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    sessionKey: str
    messageIndex: int
    """Its index in the session's transcript (0: the first message; tool results
    counted)."""
    role: str
    snippet: str
    """The message's text around the first word found, as ``sessions_history`` shows it
    to this caller (redacted)."""
    timestamp: int | None
    """When it was written (milliseconds since the epoch)."""


class SessionsSearchResult(ToolResult):
    """``sessions_search``'s answer (decision 35): the newest matches first; ``truncated``
    when more matched than ``limit``."""

    results: list[SearchHit]
    truncated: bool
