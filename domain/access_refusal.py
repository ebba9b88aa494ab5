"""A refused request, kept as evidence: who asked for what, which rule said no.

Every tool call that a policy refuses (sandbox visibility, the agent-to-agent rule, a
send policy) becomes one of these, so an auditor can list the refusals as well as what
happened. Each refusal is its own short stream: recording it never contends with the
session it names (which may not even exist).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sessionwire.domain.base import Aggregate
from sessionwire.domain.causality import Causality
from sessionwire.domain.policy import Check, Refusal


class AccessRefusalState(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    requester_key: str
    tool: str
    reference: str
    target_key: str | None
    check: Check
    rule: str
    status: Literal["forbidden", "error"]
    message: str
    trace_id: str | None = None
    run_id: str | None = None
    hops: int | None = None


class AccessRefusal(Aggregate):
    state: AccessRefusalState

    class AccessRefused(Aggregate.Created):
        requester_key: str
        tool: str
        reference: str
        target_key: str | None = None
        check: Check
        rule: str
        status: Literal["forbidden", "error"]
        message: str
        # The chain of the run that made the refused call, when a run made it.
        trace_id: str | None = None
        run_id: str | None = None
        hops: int | None = None

    def __init__(
        self,
        requester_key: str,
        tool: str,
        reference: str,
        check: Check,
        rule: str,
        status: Literal["forbidden", "error"],
        message: str,
        target_key: str | None = None,
        trace_id: str | None = None,
        run_id: str | None = None,
        hops: int | None = None,
    ) -> None:
        self.state = AccessRefusalState(
            requester_key=requester_key,
            tool=tool,
            reference=reference,
            target_key=target_key,
            check=check,
            rule=rule,
            status=status,
            message=message,
            trace_id=trace_id,
            run_id=run_id,
            hops=hops,
        )

    @classmethod
    def record(
        cls,
        *,
        id: UUID,
        refusal: Refusal,
        requester_key: str,
        tool: str,
        reference: str,
        target_key: str | None,
        at: datetime,
        caller: Causality | None = None,
        caller_run_id: str | None = None,
    ) -> AccessRefusal:
        return cls._create(
            cls.AccessRefused,
            id=id,
            timestamp=at,
            requester_key=requester_key,
            tool=tool,
            reference=reference,
            target_key=target_key,
            check=refusal.check,
            rule=refusal.rule,
            status=refusal.status,
            message=refusal.message,
            trace_id=caller.trace_id if caller else None,
            run_id=caller_run_id,
            hops=caller.hops if caller else None,
        )
