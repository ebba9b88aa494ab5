"""A call a remote agent made over a protocol (A2A, ADR 0035), kept as evidence.

Every A2A method a caller invokes (send, get, list, cancel, subscribe, push config) is
one of these: who called (the token's scope), which agent, which task and context, and
what it was answered. Reads are recorded as well as writes, so an auditor replaying the
log sees every look a remote caller had, and every refusal. Each call is its own short
stream, like a refusal: recording it never contends with the session it names.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sessionwire.domain.base import Aggregate

RemoteProtocol = Literal["a2a"]
CallOutcome = Literal["ok", "not_found", "refused", "invalid", "error"]


class RemoteCallState(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    protocol: RemoteProtocol
    method: str
    caller: str
    agent_id: str
    outcome: CallOutcome
    session_key: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    detail: str | None = None


class RemoteCall(Aggregate):
    state: RemoteCallState

    class RemoteCallReceived(Aggregate.Created):
        protocol: RemoteProtocol
        method: str
        caller: str
        """The caller's token scope: ``operator``, or the session its token is bound to."""
        agent_id: str
        outcome: CallOutcome
        session_key: str | None = None
        task_id: str | None = None
        context_id: str | None = None
        detail: str | None = None
        """What was refused and why, the push URL configured, the listing's size."""

    def __init__(
        self,
        protocol: RemoteProtocol,
        method: str,
        caller: str,
        agent_id: str,
        outcome: CallOutcome,
        session_key: str | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.state = RemoteCallState(
            protocol=protocol,
            method=method,
            caller=caller,
            agent_id=agent_id,
            outcome=outcome,
            session_key=session_key,
            task_id=task_id,
            context_id=context_id,
            detail=detail,
        )

    @classmethod
    def record(
        cls,
        *,
        id: UUID,
        protocol: RemoteProtocol,
        method: str,
        caller: str,
        agent_id: str,
        outcome: CallOutcome,
        at: datetime,
        session_key: str | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        detail: str | None = None,
    ) -> RemoteCall:
        return cls._create(
            cls.RemoteCallReceived,
            id=id,
            timestamp=at,
            protocol=protocol,
            method=method,
            caller=caller,
            agent_id=agent_id,
            outcome=outcome,
            session_key=session_key,
            task_id=task_id,
            context_id=context_id,
            detail=detail,
        )
