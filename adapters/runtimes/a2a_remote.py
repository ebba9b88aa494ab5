"""Remote A2A agents as a runtime (ADR 0035): a run of an agent configured as remote is
sent to that agent over the A2A protocol (the official SDK's client), and the remote
task's reply is the run's reply. Every other agent's runs go to ``local``.

So ``sessions_send`` to a remote agent's session records a run like any other: started,
dispatched, its reply (or failure) recorded, with the same durability: a run cancelled
here cancels the remote task. One session is one remote context: the context id is
derived from the session key, so a conversation goes on in one remote context. The
message id is the run id, so a run dispatched again after a crash finds the remote task
it started (the server dedupes on it, as sessionwire's own A2A server does).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from pydantic import BaseModel, ConfigDict, Field
from sessionwire.application.ports.runtime import AgentRuntime, NoRuntime, RunReply, RunRequest
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import normalize_agent_id

REMOTE_TIMEOUT_SECONDS = 600.0


class RemoteAgent(BaseModel):
    """Where a remote agent is: its A2A base URL (the card is at
    ``<url>/.well-known/agent-card.json``) and the bearer token to present."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(pattern=r"^https?://")
    token: str | None = None


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
    """Runs of the agents in ``agents`` go to those remote A2A agents; others to ``local``."""

    def __init__(
        self,
        agents: Mapping[str, RemoteAgent | Mapping[str, Any]],
        local: AgentRuntime | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.agents = {
            normalize_agent_id(agent_id): RemoteAgent.model_validate(remote)
            for agent_id, remote in agents.items()
        }
        self.local = local or NoRuntime()
        # Tests hand in an in-process transport; otherwise httpx's own.
        self._transport = transport

    async def run(self, request: RunRequest) -> RunReply:
        remote = self.agents.get(normalize_agent_id(request.agent_id))
        if remote is None:
            return await self.local.run(request)
        headers = {"Authorization": f"Bearer {remote.token}"} if remote.token else {}
        async with httpx.AsyncClient(
            headers=headers, timeout=REMOTE_TIMEOUT_SECONDS, transport=self._transport
        ) as http:
            client = await create_client(remote.url, ClientConfig(httpx_client=http))
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
