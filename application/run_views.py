"""Runs as the interfaces answer them: the shapes of ``gw.run`` / ``gw.runs`` /
``gw.cancel_run`` results as Pydantic models, for the HTTP document and for checking
what a transport sends back. The gateway builds the dicts (``StoredRun.to_json_dict``);
these models only describe them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sessionwire.application.ports.run_read_model import RUN_STATUSES

RunStatus = Literal["queued", "running", "input_required", "ok", "error", "timeout", "cancelled"]
assert set(RunStatus.__args__) == set(RUN_STATUSES)  # type: ignore[attr-defined]

MAX_CANCEL_REASON = 1000


class RunInputRequestView(BaseModel):
    """What a waiting run asks: ``options`` null when any text is an answer."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    options: list[str] | None


class RunView(BaseModel):
    """One run (``gw.run``): camelCase, times as ISO 8601 strings (UTC), null when not
    yet known. ``exchangeId`` / ``spawnId`` appear when the run belongs to one."""

    model_config = ConfigDict(frozen=True)

    runId: str
    status: RunStatus
    sessionKey: str
    agentId: str
    step: str
    requesterSessionKey: str | None
    traceId: str | None
    parentRunId: str | None
    hop: int
    createdAt: str | None
    startedAt: str | None
    endedAt: str | None
    attempt: int
    usage: dict[str, Any] | None
    model: str | None
    error: str | None
    exchangeId: str | None = None
    spawnId: str | None = None
    inputRequest: RunInputRequestView | None = None
    """Only while ``input_required``: what the run asks (decision 33)."""


class RunList(BaseModel):
    """``gw.runs``: newest first."""

    runs: list[RunView]


class RunCancelParams(BaseModel):
    """The body of a cancel (optional: every field has a default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str = Field(
        default="",
        max_length=MAX_CANCEL_REASON,
        description="why the run is cancelled (recorded with RunCancelled)",
    )


class RunInputBody(BaseModel):
    """The body of an answer to a run waiting for input (decision 33)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(description="the answer: one of the run's options when it gave some")


class RunInputAnswer(BaseModel):
    """What an answer gets: ``accepted`` (the run's next turn is queued), or ``error``
    with the reason (the run does not wait, the answer is not an option...)."""

    status: Literal["accepted", "error", "forbidden"]
    runId: str | None = None
    sessionKey: str | None = None
    tool: str | None = None
    error: str | None = None


class RunCancelResult(RunView):
    """The run after the cancel. ``cancelled`` is true when this call cancelled it (then
    ``cascaded`` lists the runs it caused that were cancelled with it); false when the
    run had already ended (then ``reason`` says how), the run unchanged."""

    cancelled: bool
    cascaded: list[str] | None = None
    reason: str | None = None
