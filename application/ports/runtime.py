"""Ports to the agents and the chat channels: AgentRuntime and ChannelDelivery."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.run import InputRequest as InputRequest  # a runtime's question


@dataclass(frozen=True)
class RunRequest:
    """Everything an agent runtime gets for one run."""

    run_id: str
    session_key: str
    agent_id: str
    step: str
    message: str
    context: str | None
    clock: Clock
    transcript: Callable[[int], Awaitable[list[dict[str, Any]]]]
    """The session's last N messages (raw transcript format), oldest first:
    ``await request.transcript(20)`` (read off the event loop, decision 23)."""
    turn: int | None = None
    requester_key: str | None = None
    tools: tuple[str, ...] = ()
    """The tools this run may call."""
    run_token: str | None = None
    """Proves a tool call over HTTP (header ``X-Sessionwire-Run: <run_id>:<token>``) or
    MCP (argument ``_run``) is made by this run, while it is in flight: the call then
    joins the run's chain and its hop limit (decision 17)."""
    call_tool: Callable[[str, Any], Awaitable[dict[str, Any]]] | None = None
    """Call one of the gateway's tools as this run's session, from inside the turn:
    ``await request.call_tool("sessions_yield", {"waitFor": "any"})`` (its JSON result;
    it never raises). None where the gateway offers no tools."""


@dataclass(frozen=True)
class RunReply:
    """A turn's answer: its text, or (``input_request``) a question for a person, which
    makes the run wait for the answer (decision 33); the answer is the message of the
    run's next turn. ``text`` beside a question is ignored: the prompt is what is said."""

    text: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    input_request: InputRequest | None = None


class AgentRuntime(ABC):
    """Runs one agent turn. Cancelled (asyncio) when the run times out."""

    @abstractmethod
    async def run(self, request: RunRequest) -> RunReply: ...


class NoRuntime(AgentRuntime):
    """The runtime of a gateway opened without one: every run fails, saying so."""

    async def run(self, request: RunRequest) -> RunReply:
        raise RuntimeError("no agent runtime is configured for this gateway")


@dataclass(frozen=True)
class Delivery:
    channel: str
    to: str
    message: str
    session_key: str
    account_id: str | None = None
    thread_id: str | None = None
    idempotency_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "to": self.to,
            "accountId": self.account_id,
            "message": self.message,
            "sessionKey": self.session_key,
            "threadId": self.thread_id,
            "idempotencyKey": self.idempotency_key,
        }


class DeliveryRejected(SessionwireError):
    """Raised by a ``ChannelDelivery`` for a delivery that can never succeed (the chat is
    gone, the account was removed): it is abandoned at once instead of retried."""


class ChannelDelivery(ABC):
    """Posts a message to a chat channel. ``idempotency_key`` is stable across retries.

    Any exception but ``DeliveryRejected`` is a retryable failure: the delivery goes to
    the outbox and is attempted again with back-off on the gateway clock.
    """

    @abstractmethod
    async def deliver(self, delivery: Delivery) -> None: ...


class RecordedDelivery(ChannelDelivery):
    """The default: nothing leaves the gateway; the delivery event is the record."""

    async def deliver(self, delivery: Delivery) -> None:
        return None
