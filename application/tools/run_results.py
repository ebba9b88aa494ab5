"""The results of the tools that start, steer or report runs (``sessions_send``,
``sessions_spawn``, ``subagents``, ``session_status``, ``sessions_yield``), and the two
refusals a send or spawn may meet: apart from ``results``, so that a process that only
reads sessions builds none of them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from sessionwire.application.tools.results import ToolResult


class HopLimitRefused(ToolResult):
    """A send or spawn refused at the hop limit: exactly these two fields (decision 17)."""

    status: Literal["forbidden"] = "forbidden"
    error: str


class TraceBudgetRefused(ToolResult):
    """A send or spawn refused because its trace spent its budget (decision 31): the
    same two fields as a hop-limit refusal."""

    status: Literal["forbidden"] = "forbidden"
    error: str


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
    status: Literal[
        "accepted",
        "ok",
        "no_reply",
        "input_required",
        "timeout",
        "error",
        "forbidden",
        "cancelled",
    ]
    tool: str | None = None
    reply: str | None = None
    error: str | None = None
    prompt: str | None = None
    """Only when ``input_required``: what the target's run asks (decision 33)."""
    options: list[str] | None = None
    """Only when ``input_required`` with options: the answers the run takes."""
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
