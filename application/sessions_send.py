"""``sessions_send``: a message into another session, a wait, and the exchange after it."""

from __future__ import annotations

from typing import Any

from sessionwire.application.context import ToolContext
from sessionwire.application.session_refs import SessionNotResolved, resolve_session
from sessionwire.application.tool_params import SessionsSendParams
from sessionwire.application.tool_results import SendResult
from sessionwire.domain.agent_to_agent import (
    message_context,
    reply_text,
    resolve_announce_target,
)
from sessionwire.domain.exchange import Exchange
from sessionwire.domain.keys import agent_id_of, normalize_agent_id
from sessionwire.domain.run import Run
from sessionwire.domain.session import SessionState

PENDING_DELIVERY = {"status": "pending", "mode": "announce"}


class SendRefused(Exception):
    def __init__(self, status: str, error: str, session_key: str | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.session_key = session_key


def _a2a_refusal(context: ToolContext, target_agent: str) -> str | None:
    return context.a2a.refusal(context.requester.agent_id, target_agent, access="messaging")


def _target_by_label(context: ToolContext, params: SessionsSendParams) -> str:
    label = params.label or ""
    requested = normalize_agent_id(params.agentId) if params.agentId else None
    if requested is not None:
        refusal = _a2a_refusal(context, requested)
        if refusal:
            raise SendRefused("forbidden", refusal)
    matches = [
        stored
        for stored in context.store.sessions_by_label(label)
        if requested is None or stored.state.agent_id == requested
    ]
    if not matches:
        raise SendRefused("error", f"No session found with label: {label}")
    if len(matches) > 1:
        keys = ", ".join(stored.state.key for stored in matches[:2])
        raise SendRefused("error", f"Multiple sessions found with label: {label} ({keys})")
    return matches[0].state.key


def announce_channel(target: SessionState) -> str:
    """The target channel the step texts name: the announce target's, or "unknown" (§6.6)."""
    announce_target = resolve_announce_target(
        target.key,
        stored_channel=target.last_channel,
        stored_to=target.last_to,
        stored_account_id=target.last_account_id,
    )
    return announce_target.channel if announce_target else "unknown"


async def sessions_send(context: ToolContext, params: SessionsSendParams) -> SendResult:
    services = context.services
    assert services is not None, "sessions_send needs the gateway's run engine"
    run_id = services.ids.new_id()
    try:
        if params.sessionKey and params.label:
            raise SendRefused("error", "Provide either sessionKey or label (not both).")
        reference = params.sessionKey
        if reference is None and params.label:
            reference = _target_by_label(context, params)
        if reference is None:
            raise SendRefused("error", "Either sessionKey or label is required")
        try:
            target = resolve_session(context, reference)
        except SessionNotResolved as error:
            raise SendRefused("error", error.message) from None
        display = context.display_key(target.state.key)
        refusal = _a2a_refusal(context, target.state.agent_id)
        if refusal:
            raise SendRefused("forbidden", refusal, display)
    except SendRefused as refused:
        return SendResult(
            runId=str(run_id),
            status=refused.status,
            tool="sessions_send",
            error=refused.error,
            sessionKey=refused.session_key,
        )

    requester = context.requester
    requester_session = context.store.session(requester.key)
    requester_channel = requester_session.state.last_channel if requester_session else None
    now = context.clock.now()
    run = Run.start(
        run_id=run_id,
        session_key=target.state.key,
        agent_id=agent_id_of(target.state.key),
        step="primary",
        message=params.message,
        context=message_context(
            requester_key=requester.raw,
            requester_channel=requester_channel,
            target_display=display,
        ),
        timeout_seconds=services.run_timeout_seconds,
        requester_key=requester.key,
        at=now,
    )
    exchange = Exchange.open(
        primary_run_id=run_id,
        requester_key=requester.key,
        requester_display=requester.raw,
        requester_channel=requester_channel,
        target_key=target.state.key,
        target_display=display,
        target_channel=announce_channel(target.state),
        original_message=params.message,
        max_turns=context.config.session.agentToAgent.max_ping_pong_turns,
        at=now,
    )
    services.runs.save_and_enqueue(run, exchange)
    services.exchanges.start(exchange.id)
    if params.timeoutSeconds == 0:
        return SendResult(
            runId=str(run_id), status="accepted", sessionKey=display, delivery=PENDING_DELIVERY
        )
    state = await services.runs.wait(run_id, timeout=params.timeoutSeconds)
    if state is None:
        return SendResult(
            runId=str(run_id),
            status="timeout",
            error=(
                f"no reply within {params.timeoutSeconds}s; the run goes on, and its reply, "
                "the agent-to-agent loop and the announce are recorded when it finishes "
                "(read them with sessions_history)"
            ),
            sessionKey=display,
            delivery=PENDING_DELIVERY,
        )
    if state.status != "ok":
        return SendResult(
            runId=str(run_id),
            status="error",
            tool="sessions_send",
            error=state.error or "agent error",
            sessionKey=display,
        )
    reply: Any = reply_text(state.reply)
    return SendResult(
        runId=str(run_id),
        status="ok",
        reply=reply,
        sessionKey=display,
        delivery=PENDING_DELIVERY,
    )
