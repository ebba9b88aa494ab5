"""The runs read model: one row per run, for run status and listings (``gw.run``,
``gw.runs``), written in the transaction that records the run's events (ADR 0017)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

RUN_STATUSES = ("queued", "running", "input_required", "ok", "error", "timeout", "cancelled")
NOT_ENDED = frozenset({"queued", "running", "input_required"})


@dataclass(frozen=True)
class RunQuery:
    """Runs newest first (by when each was recorded), filtered, then limited.

    ``before`` pages on by keyset: the (createdAt ms, runId) of the last row of the page
    before, so a page costs the same however many runs there are.
    """

    limit: int
    session_key: str | None = None
    status: str | None = None
    trace_id: str | None = None
    parent_run_id: str | None = None
    before: tuple[int, str] | None = None


@dataclass(frozen=True)
class StoredRun:
    run_id: str
    status: str
    session_key: str
    agent_id: str
    step: str
    requester_key: str | None
    trace_id: str | None
    parent_run_id: str | None
    hop: int
    created_at: int
    started_at: int | None
    ended_at: int | None
    attempt: int
    usage: dict[str, Any] | None
    model: str | None
    error: str | None
    exchange_id: str | None
    spawn_id: str | None
    input_request: dict[str, Any] | None = None
    """What the run asks while ``input_required`` (``{"prompt", "options"}``, decision
    33): read from the run's own row, not the read model, when it waits."""

    @property
    def ended(self) -> bool:
        return self.status not in NOT_ENDED

    def to_json_dict(self) -> dict[str, Any]:
        """The run as the gateway answers it: camelCase, times as ISO strings."""
        found: dict[str, Any] = {
            "runId": self.run_id,
            "status": self.status,
            "sessionKey": self.session_key,
            "agentId": self.agent_id,
            "step": self.step,
            "requesterSessionKey": self.requester_key,
            "traceId": self.trace_id,
            "parentRunId": self.parent_run_id,
            "hop": self.hop,
            "createdAt": _iso(self.created_at),
            "startedAt": _iso(self.started_at),
            "endedAt": _iso(self.ended_at),
            "attempt": self.attempt,
            "usage": self.usage,
            "model": self.model,
            "error": self.error,
        }
        if self.exchange_id is not None:
            found["exchangeId"] = self.exchange_id
        if self.spawn_id is not None:
            found["spawnId"] = self.spawn_id
        if self.input_request is not None:
            found["inputRequest"] = self.input_request
        return found


def _iso(millis: int | None) -> str | None:
    if millis is None:
        return None
    return datetime.fromtimestamp(millis / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


class RunReadModel(ABC):
    @abstractmethod
    def run(self, run_id: str) -> StoredRun | None:
        """The run with this id (a canonical UUID string), from the read model."""

    @abstractmethod
    def list_runs(self, query: RunQuery) -> list[StoredRun]:
        """Runs newest first, filtered, at most ``query.limit``."""
