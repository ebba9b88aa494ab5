"""Remote A2A agents as a runtime (ADR 0035): a run of an agent configured as remote is
sent to that agent over the A2A protocol (the official SDK's client), and the remote
task's reply is the run's reply. Every other agent's runs go to ``local``.

So ``sessions_send`` to a remote agent's session records a run like any other: started,
dispatched, its reply (or failure) recorded, with the same durability: a run cancelled
here cancels the remote task. One session is one remote context: the context id is
derived from the session key, so a conversation goes on in one remote context. The
message id is the run id, so a run dispatched again after a crash finds the remote task
it started (the server dedupes on it, as sessionwire's own A2A server does).

Every request goes through the egress client (``http.egress``, ADR 0040). The card is
read without the token; every endpoint it names must be on the configured URL's origin,
and with ``cardKey`` its signature must verify, before the token or the message is sent
anywhere. The token only ever goes to that origin.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.signing import SignatureVerificationError, create_signature_verifier
from google.protobuf.json_format import ParseError
from jwt import PyJWK
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sessionwire.adapters.a2a.agent_cards import jwk_of
from sessionwire.adapters.egress.client import PinnedBearer, egress_client
from sessionwire.adapters.egress.fence import Resolver, system_resolver
from sessionwire.application.audit.checkpoint import parse_public_key
from sessionwire.application.config.gateway_config import EgressConfig
from sessionwire.application.ports.runtime import AgentRuntime, NoRuntime, RunReply, RunRequest
from sessionwire.domain.egress import Origin
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import normalize_agent_id

REMOTE_TIMEOUT_SECONDS = 600.0


class RemoteAgent(BaseModel):
    """Where a remote agent is: its A2A base URL (the card is at
    ``<url>/.well-known/agent-card.json``), the bearer token to present, and the key its
    card must be signed with (``ed25519:BASE64``, what ``audit keygen`` prints there)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    url: str = Field(pattern=r"^https?://")
    token: str | None = None
    card_key: str | None = Field(default=None, alias="cardKey")

    @field_validator("url")
    @classmethod
    def _has_origin(cls, url: str) -> str:
        Origin.of(url)
        return url

    @field_validator("card_key")
    @classmethod
    def _is_a_key(cls, key: str | None) -> str | None:
        if key is not None:
            parse_public_key(key)
        return key

    @property
    def origin(self) -> Origin:
        return Origin.of(self.url)


class CardRefused(SessionwireError, RuntimeError):
    """The remote agent's card cannot be trusted; nothing was sent to it."""


class RemoteAgentFailed(SessionwireError, RuntimeError):
    """The remote task ended without a reply (failed, cancelled, rejected)."""


def context_id_for(session_key: str) -> str:
    """One remote context per local session, stable across runs and restarts."""
    return "sw-" + hashlib.sha256(session_key.encode("utf-8")).hexdigest()[:32]


def reply_text(task: Task) -> str:
    """The remote agent's words: its artifacts' text, else the final status message's."""
    texts = [part.text for artifact in task.artifacts for part in artifact.parts if part.text]
    if not texts:
        texts = [part.text for part in task.status.message.parts if part.text]
    return "\n".join(texts)


class A2ARemoteRuntime(AgentRuntime):
    """Runs of the agents in ``agents`` go to those remote A2A agents; others to ``local``.

    ``egress`` is the config's ``http.egress`` (None: its defaults, public addresses
    only); ``transport`` is for tests (an in-process server, fenced all the same)."""

    def __init__(
        self,
        agents: Mapping[str, RemoteAgent | Mapping[str, Any]],
        local: AgentRuntime | None = None,
        *,
        egress: EgressConfig | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.agents = {
            normalize_agent_id(agent_id): RemoteAgent.model_validate(remote)
            for agent_id, remote in agents.items()
        }
        self.local = local or NoRuntime()
        self.egress = egress
        self._transport = transport
        self._resolver = resolver

    async def run(self, request: RunRequest) -> RunReply:
        remote = self.agents.get(normalize_agent_id(request.agent_id))
        if remote is None:
            return await self.local.run(request)
        auth = PinnedBearer(remote.token, remote.origin) if remote.token else None
        async with egress_client(
            self.egress,
            timeout=REMOTE_TIMEOUT_SECONDS,
            auth=auth,
            transport=self._transport,
            resolver=self._resolver,
        ) as http:
            card = await trusted_card(http, remote)
            client = await create_client(card, ClientConfig(httpx_client=http))
            try:
                return await self._ask(client, request)
            finally:
                await client.close()

    async def _ask(self, client: Any, request: RunRequest) -> RunReply:
        message = Message(
            message_id=request.run_id,
            role=Role.ROLE_USER,
            context_id=context_id_for(request.session_key),
            parts=[Part(text=request.message)],
        )
        task_id: str | None = None
        try:
            # Streamed when the card says it can be (else one answer): the task's id
            # comes first, so a cancel here can reach the remote task at once.
            async for event in client.send_message(SendMessageRequest(message=message)):
                if event.HasField("task"):
                    task_id = event.task.id
                elif event.HasField("status_update"):
                    task_id = event.status_update.task_id
            if task_id is None:
                raise RemoteAgentFailed("the remote agent answered with no task")
            task: Task = await client.get_task(GetTaskRequest(id=task_id))
        except asyncio.CancelledError:
            # Our run was cancelled (or timed out): so is the remote task.
            if task_id is not None:
                await asyncio.shield(self._cancel(client, task_id))
            raise
        if task.status.state != TaskState.TASK_STATE_COMPLETED:
            state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
            raise RemoteAgentFailed(f"the remote task ended {state}: {reply_text(task)}".strip())
        return RunReply(text=reply_text(task))

    async def _cancel(self, client: Any, task_id: str) -> None:
        try:
            await client.cancel_task(CancelTaskRequest(id=task_id))
        except Exception:  # the remote task may have ended meanwhile: nothing to stop
            return


async def trusted_card(http: httpx.AsyncClient, remote: RemoteAgent) -> AgentCard:
    """The remote agent's card, read without the token, once it is known to be safe to
    send to: signed with ``cardKey`` when one is configured, and naming only endpoints on
    the configured URL's origin (a card that points elsewhere would take the token and
    the message there). Anything else is ``CardRefused``."""
    where = f"{remote.url.rstrip('/')}/{AGENT_CARD_WELL_KNOWN_PATH.lstrip('/')}"
    response = await http.get(where, auth=None)
    if response.status_code != 200:
        raise CardRefused(f"the card at {where} answered {response.status_code}")
    try:
        card = parse_agent_card(response.json())
    except (ValueError, ParseError) as error:
        raise CardRefused(f"the card at {where} is not an agent card: {error}") from None
    if remote.card_key is not None:
        key = PyJWK(jwk_of(parse_public_key(remote.card_key)))
        verify = create_signature_verifier(lambda kid, jku: key, ["EdDSA"])
        try:
            verify(card)
        except SignatureVerificationError as error:
            raise CardRefused(
                f"the card at {where} is not signed by the configured cardKey ({error}); "
                "nothing was sent"
            ) from None
    foreign = sorted(
        {
            interface.url
            for interface in card.supported_interfaces
            if not _on_origin(interface.url, remote.origin)
        }
    )
    if foreign or not card.supported_interfaces:
        named = ", ".join(foreign) or "no endpoint"
        raise CardRefused(
            f"the card at {where} names {named}, not on {remote.origin} (the configured "
            "url's origin); nothing was sent"
        )
    return card


def _on_origin(url: str, origin: Origin) -> bool:
    try:
        return Origin.of(url) == origin
    except ValueError:
        return False
