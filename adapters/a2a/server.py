"""The A2A server over the gateway (contract decisions 32 and 38, ADRs 0035 and 0046).

The official SDK (``a2a-sdk``) speaks the protocol: JSON-RPC and HTTP+JSON (REST), SSE
streams, at version 1.0 and, through its own compatibility layer, at 0.3 (a request
without an ``A2A-Version`` header is a 0.3 one, as the spec says). Every binding and
version reaches the same ``GatewayRequestHandler``, which answers each method from the
gateway, one handler per agent:

- SendMessage: a run in ``agent:<id>:a2a:<contextId>`` (``application/remote_tasks.py``),
  provenance ``a2a-remote``; waits for its end unless ``returnImmediately``;
- GetTask / ListTasks / CancelTask: the run, the runs read model, ``cancel_run``;
- SendStreamingMessage / SubscribeToTask: the task now, then each change of its state,
  read from the gateway's event stream (a reconnect starts from the task as it is);
- push-notification configs: a delivery through the outbox when the task ends; set only
  by operator tokens or ``http.egress.pushSessions``, the URL checked when set (ADR 0040).

The caller is the token's scope (decision 22): an operator token any agent's caller and
sees every task of it; a session-bound token only its session's agent, and only the tasks
it started. A task hidden from the caller, or of an agent its token may not call, is
answered as a missing one. Every call is recorded (``RemoteCall``).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from a2a.compat.v0_3.versions import is_legacy_version
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, VERSION_HEADER
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionwire.adapters.a2a.agent_cards import (
    CARD_PATH,
    agent_card,
    agent_path,
    card_document,
    served_agents,
)
from sessionwire.adapters.a2a.push import PUSH_CHANNEL, PUSH_CHANNEL_V03, A2APushDelivery
from sessionwire.adapters.a2a.task_view import (
    TASK_STATES,
    TERMINAL,
    artifact_update,
    rejected_task,
    status_update,
    task_of,
    task_state,
)
from sessionwire.adapters.access.tokens import Grant
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.application.config.gateway_config import AgentEntry
from sessionwire.application.library_logging import library_logger
from sessionwire.application.ports.run_read_model import StoredRun
from sessionwire.application.remote_tasks import (
    OPERATOR_CALLER,
    RemoteCaller,
    RemoteTaskRefused,
    TaskCursor,
    TaskPage,
    check_context_id,
)
from sessionwire.application.tools.results import ToolError
from sessionwire.domain.egress import EgressRefused
from sessionwire.domain.keys import InvalidSessionKey, agent_id_of
from sessionwire.domain.push_request import PushRequestState
from sessionwire.domain.run import RunState
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

GRANT = "sessionwire.grant"
MAX_PAGE = 100
DEFAULT_PAGE = 50
TASK_NOT_FOUND = "no task with this id that this caller may see"

log = library_logger("sessionwire.a2a")


def page_token(cursor: TaskCursor) -> str:
    """The opaque ``nextPageToken``: where the listing goes on (a run's place in the
    runs read model's order), base64url JSON."""
    body = json.dumps({"c": cursor.created_at, "r": cursor.run_id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def read_page_token(token: str) -> TaskCursor:
    """The place a ``pageToken`` names; a token this server did not give is invalid."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        created_at, run_id = data["c"], data["r"]
        if isinstance(created_at, bool) or not isinstance(created_at, int):
            raise ValueError(created_at)
        if not isinstance(run_id, str):
            raise ValueError(run_id)
        return TaskCursor(created_at, str(uuid.UUID(run_id)))
    except (ValueError, TypeError, KeyError, binascii.Error):
        raise InvalidParamsError("pageToken: not a token this server gave") from None


class GrantContext(DefaultServerCallContextBuilder):
    """The SDK's call context (headers: the protocol version), with the token's grant the
    Gatekeeper checked."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[GRANT] = request.scope.get("state", {}).get("grant")
        return context


def is_legacy_call(context: ServerCallContext) -> bool:
    """Whether the call is a 0.3 one. The routes checked its ``A2A-Version`` against the
    version they serve (none is 0.3), so the header says which version is calling; a
    call with no HTTP request behind it (no headers at all: in process) is current."""
    headers = context.state.get("headers")
    if headers is None:
        return False
    return is_legacy_version(headers.get(VERSION_HEADER.lower()) or PROTOCOL_VERSION_0_3)


def caller_of(context: ServerCallContext) -> RemoteCaller:
    grant = context.state.get(GRANT)
    if not isinstance(grant, Grant):
        # Only behind the Gatekeeper: a route without a grant is a wiring bug.
        raise RuntimeError("an A2A call reached the handler without a checked token")
    return RemoteCaller(OPERATOR_CALLER if grant.session is None else grant.session)


def push_config(push: PushRequestState, tenant: str = "") -> TaskPushNotificationConfig:
    """A push request as the protocol shows it (its token included: it is the caller's)."""
    return TaskPushNotificationConfig(
        tenant=tenant,
        id=push.config_id,
        task_id=push.run_id,
        url=push.url,
        token=push.token or "",
    )


def text_of(message: Message) -> str:
    """The message's words: its text parts, one per line. Other parts are refused."""
    texts: list[str] = []
    for part in message.parts:
        if part.WhichOneof("content") != "text":
            raise InvalidParamsError("only text parts are accepted")
        texts.append(part.text)
    return "\n".join(texts)


class GatewayRequestHandler(RequestHandler):
    """The A2A methods of one agent, answered from the gateway."""

    def __init__(self, gateway: Gateway, agent_id: str, card: AgentCard) -> None:
        self.gateway = gateway
        self.config = gateway.served.config
        self.agent_id = agent_id
        self.card = card
        self.tasks = gateway.served.remote_tasks()

    # Who may call -------------------------------------------------------------------

    def _may_call(self, caller: RemoteCaller) -> bool:
        """A session-bound token calls its own session's agent only."""
        if caller.is_operator:
            return True
        try:
            return agent_id_of(self.config.key_rules.canonical(caller.scope)) == self.agent_id
        except InvalidSessionKey:
            return False

    async def _visible(self, caller: RemoteCaller, task_id: str, method: str) -> RunState:
        state = (
            await self.tasks.task(caller, self.agent_id, task_id)
            if self._may_call(caller)
            else None
        )
        if state is None:
            await self.tasks.record_call(
                caller, self.agent_id, method, "not_found", task_id=task_id[:100]
            )
            raise TaskNotFoundError(TASK_NOT_FOUND)
        return state

    async def _record(
        self, caller: RemoteCaller, method: str, state: RunState, detail: str | None = None
    ) -> None:
        await self.tasks.record_call(
            caller,
            self.agent_id,
            method,
            "ok",
            task_id=state.run_id,
            session_key=state.session_key,
            detail=detail,
        )

    # Sending ------------------------------------------------------------------------

    async def _start(
        self, params: SendMessageRequest, context: ServerCallContext, method: str
    ) -> RunState | Task:
        caller = caller_of(context)
        message = params.message
        if not self._may_call(caller):
            await self.tasks.record_call(
                caller, self.agent_id, method, "refused", detail="token of another agent"
            )
            raise (
                TaskNotFoundError(TASK_NOT_FOUND)
                if message.task_id
                else InvalidParamsError("this token may not call this agent")
            )
        if message.task_id:
            # Our tasks take one message each, but the answer to a task that asks for
            # input (decision 33); any other follow-up names the context instead.
            state = await self._visible(caller, message.task_id, method)
            if state.status != "input_required":
                raise UnsupportedOperationError(
                    f"task {state.run_id} takes no further message; send in its context"
                )
            return await self._answer(caller, state, text_of(message), method)
        context_id = message.context_id or str(uuid.uuid4())
        text = text_of(message)
        config = params.configuration
        if config.HasField("task_push_notification_config"):
            # Before the task starts: a refused push refuses the message, not half of it.
            await self._check_push(caller, config.task_push_notification_config, None)
        try:
            check_context_id(context_id)
            state = await self.tasks.start(
                caller,
                self.agent_id,
                context_id=context_id,
                message_id=message.message_id or str(uuid.uuid4()),
                text=text,
            )
        except RemoteTaskRefused as refused:
            task_id = str(uuid.uuid4())
            await self.tasks.record_call(
                caller,
                self.agent_id,
                method,
                "refused",
                task_id=task_id,
                context_id=context_id,
                session_key=refused.session_key,
                detail=refused.reason,
            )
            return rejected_task(
                task_id=task_id, context_id=context_id, text=text, reason=refused.reason
            )
        except (ValueError, InvalidSessionKey) as error:
            await self.tasks.record_call(
                caller, self.agent_id, method, "invalid", detail=str(error)
            )
            raise InvalidParamsError(str(error)) from None
        await self._record(caller, method, state, detail=f"context {context_id}")
        if config.HasField("task_push_notification_config"):
            await self._add_push(caller, state, config.task_push_notification_config, context)
        return state

    async def _answer(
        self, caller: RemoteCaller, state: RunState, text: str, method: str
    ) -> RunState:
        """The message is the answer of the waiting task: the caller may see the task
        (``_visible``), so it may answer it; refused (not an option, answered already)
        as an invalid parameter, nothing written."""
        answer = await self.gateway.served.answer_task(state.run_id, text, by=caller.requester_key)
        if isinstance(answer, ToolError):
            await self.tasks.record_call(
                caller, self.agent_id, method, "invalid", task_id=state.run_id, detail=answer.error
            )
            raise InvalidParamsError(answer.error)
        await self._record(caller, method, state, detail="input")
        return await self.tasks.task(caller, self.agent_id, state.run_id) or state

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        started = await self._start(params, context, "SendMessage")
        if isinstance(started, Task):
            return started
        config = params.configuration
        history = config.history_length if config.HasField("history_length") else None
        if not config.return_immediately:
            ended = await self.tasks.wait(started.run_id, until_input=True)
            started = ended or started
        fresh = await self.tasks.task(caller_of(context), self.agent_id, started.run_id)
        return task_of(fresh or started, history_length=history)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        started = await self._start(params, context, "SendStreamingMessage")
        if isinstance(started, Task):
            yield started
            return
        async for event in self._follow(caller_of(context), started):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        caller = caller_of(context)
        state = await self._visible(caller, params.id, "SubscribeToTask")
        if task_state(state) in TERMINAL:
            await self.tasks.record_call(
                caller,
                self.agent_id,
                "SubscribeToTask",
                "invalid",
                task_id=state.run_id,
                detail="task ended",
            )
            raise UnsupportedOperationError(f"task {state.run_id} has ended ({state.status})")
        await self._record(caller, "SubscribeToTask", state)
        async for event in self._follow(caller, state):
            yield event

    async def _follow(self, caller: RemoteCaller, state: RunState) -> AsyncGenerator[Event]:
        """The task as it is now, then each change of its state until it ends. The
        event stream is followed from before the task is read, so no change between the
        two is missed; a change already shown is not shown again."""
        position = await self.gateway.served.sealed_position()
        subscription = self.gateway.subscribe(position, session_key=state.session_key)
        try:
            current = await self.tasks.task(caller, self.agent_id, state.run_id) or state
            yield task_of(current)
            shown = current.status
            if current.ended:
                return
            async for event in subscription:
                if event.get("streamId") != current.run_id:
                    continue
                fresh = await self.tasks.task(caller, self.agent_id, current.run_id)
                if fresh is None or fresh.status == shown:
                    continue
                shown = fresh.status
                if fresh.ended:
                    artifact = artifact_update(fresh)
                    if artifact is not None:
                        yield artifact
                yield status_update(fresh)
                if fresh.ended:
                    return
        finally:
            subscription.close()

    # Tasks --------------------------------------------------------------------------

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        caller = caller_of(context)
        state = await self._visible(caller, params.id, "GetTask")
        await self._record(caller, "GetTask", state)
        history = params.history_length if params.HasField("history_length") else None
        return task_of(state, history_length=history)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        caller = caller_of(context)
        size = params.page_size if params.HasField("page_size") else DEFAULT_PAGE
        if not 1 <= size <= MAX_PAGE:
            raise InvalidParamsError(f"pageSize must be from 1 to {MAX_PAGE}")
        after = read_page_token(params.page_token) if params.page_token else None
        page = TaskPage(tasks=[], total=0, next=None)
        if self._may_call(caller):
            wanted = params.status
            since = (
                params.status_timestamp_after.ToNanoseconds()
                if params.HasField("status_timestamp_after")
                else None
            )

            def keep(row: StoredRun) -> bool:
                if wanted and TASK_STATES.get(row.status) != wanted:
                    return False
                if since is None:
                    return True
                # The status's timestamp (task_view): when the run ended, else started.
                stamp = row.ended_at or row.started_at
                return stamp is not None and stamp * 1_000_000 >= since

            try:
                page = await self.tasks.tasks(
                    caller,
                    self.agent_id,
                    context_id=params.context_id or None,
                    keep=keep,
                    size=size,
                    after=after,
                )
            except ValueError as error:
                raise InvalidParamsError(str(error)) from None
        history = params.history_length if params.HasField("history_length") else None
        tasks = [task_of(state, history_length=history) for state in page.tasks]
        await self.tasks.record_call(
            caller,
            self.agent_id,
            "ListTasks",
            "ok",
            context_id=params.context_id or None,
            detail=f"{len(tasks)} task(s)",
        )
        return ListTasksResponse(
            tasks=tasks,
            page_size=size,
            total_size=page.total,
            next_page_token="" if page.next is None else page_token(page.next),
        )

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        caller = caller_of(context)
        state = await self._visible(caller, params.id, "CancelTask")
        if state.ended:
            await self.tasks.record_call(
                caller,
                self.agent_id,
                "CancelTask",
                "invalid",
                task_id=state.run_id,
                detail=f"task ended ({state.status})",
            )
            raise TaskNotCancelableError(f"task {state.run_id} has ended ({state.status})")
        after = await self.tasks.cancel(caller, self.agent_id, state.run_id) or state
        await self._record(caller, "CancelTask", after)
        return task_of(after)

    # Push notifications -------------------------------------------------------------

    def _pushes(self) -> bool:
        return isinstance(self.gateway.delivery, A2APushDelivery)

    def _may_push(self, caller: RemoteCaller) -> bool:
        """Operator tokens, and tokens of the sessions ``http.egress.pushSessions``
        names: a push URL makes the gateway send requests, so not every caller may."""
        if caller.is_operator:
            return True
        rules = self.config.key_rules
        try:
            allowed = {rules.canonical(key) for key in self.config.http.egress.pushSessions}
            return rules.canonical(caller.scope) in allowed
        except InvalidSessionKey:
            return False

    async def _check_push(
        self, caller: RemoteCaller, config: TaskPushNotificationConfig, state: RunState | None
    ) -> None:
        """Refuse a push config before anything is kept or started: no pushes here, a
        caller that may not set one, or a URL the send would refuse (it is checked again
        then, resolved anew)."""
        if not self._pushes():
            raise PushNotificationNotSupportedError("this gateway sends no push notifications")
        refusal: str | None = None
        if not self._may_push(caller):
            refusal = (
                "this token may not set push notification URLs: operator tokens, and "
                "sessions named in http.egress.pushSessions, may"
            )
        elif config.HasField("authentication"):
            raise InvalidParamsError("push authentication schemes are not supported; use token")
        else:
            delivery = self.gateway.delivery
            assert isinstance(delivery, A2APushDelivery)
            try:
                await delivery.check_url(config.url)
            except EgressRefused as refused:
                refusal = str(refused)
        if refusal is not None:
            await self.tasks.record_call(
                caller,
                self.agent_id,
                "CreateTaskPushNotificationConfig",
                "refused",
                task_id=state.run_id if state else None,
                session_key=state.session_key if state else None,
                detail=refusal[:500],
            )
            raise InvalidParamsError(refusal)

    async def _add_push(
        self,
        caller: RemoteCaller,
        state: RunState,
        config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        await self._check_push(caller, config, state)
        push = await self.tasks.request_push(
            state,
            config_id=config.id or str(uuid.uuid4()),
            url=config.url,
            token=config.token or None,
            # The notification goes out in the version of the call that set it.
            channel=PUSH_CHANNEL_V03 if is_legacy_call(context) else PUSH_CHANNEL,
        )
        await self._record(
            caller,
            "CreateTaskPushNotificationConfig",
            state,
            detail=f"push {push.config_id} to {push.url}",
        )
        return push_config(push, config.tenant)

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        caller = caller_of(context)
        state = await self._visible(caller, params.task_id, "CreateTaskPushNotificationConfig")
        return await self._add_push(caller, state, params, context)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        caller = caller_of(context)
        state = await self._visible(caller, params.task_id, "GetTaskPushNotificationConfig")
        found = [p for p in await self.tasks.pushes_of(state) if p.config_id == params.id]
        await self._record(
            caller, "GetTaskPushNotificationConfig", state, detail=f"push {params.id}"
        )
        if not found:
            raise TaskNotFoundError("no push notification config with this id for this task")
        return push_config(found[0], params.tenant)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        caller = caller_of(context)
        state = await self._visible(caller, params.task_id, "ListTaskPushNotificationConfigs")
        await self._record(caller, "ListTaskPushNotificationConfigs", state)
        pushes = await self.tasks.pushes_of(state)
        return ListTaskPushNotificationConfigsResponse(
            configs=[push_config(push, params.tenant) for push in pushes]
        )

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        caller = caller_of(context)
        state = await self._visible(caller, params.task_id, "DeleteTaskPushNotificationConfig")
        await self.tasks.withdraw_push(state, params.id)
        await self._record(
            caller, "DeleteTaskPushNotificationConfig", state, detail=f"push {params.id}"
        )

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError("this agent has no extended card")


def a2a_routes(
    gateway: Gateway,
    *,
    signing_key: Ed25519PrivateKey | None = None,
    public_url: str | None = None,
) -> list[BaseRoute]:
    """For each served agent: its card at ``/a2a/<id>/.well-known/agent-card.json``
    (public), and (a token needed) its JSON-RPC endpoint at ``/a2a/<id>`` and its REST
    paths under it (``/a2a/<id>/message:send``…, and the 0.3 ones ``/a2a/<id>/v1/…``)."""
    routes: list[BaseRoute] = []
    pushes = isinstance(gateway.delivery, A2APushDelivery)
    for agent_id, entry in served_agents(gateway.served.config).items():
        card = agent_card(
            agent_id, entry, base_url=public_url or "http://localhost", push_notifications=pushes
        )
        handler = GatewayRequestHandler(gateway, agent_id, card)
        path = agent_path(agent_id)
        routes.extend(
            create_jsonrpc_routes(
                handler, path, context_builder=GrantContext(), enable_v0_3_compat=True
            )
        )
        rest = create_rest_routes(
            handler, context_builder=GrantContext(), enable_v0_3_compat=True, path_prefix=path
        )
        # Not the SDK's tenant mount (``/{tenant}`` + the paths): it sits at the app's
        # root, where it would match every two-segment path (the console's among them),
        # and no agent here has tenants.
        routes.extend(route for route in rest if not isinstance(route, Mount))
        routes.append(
            Route(
                agent_path(agent_id) + CARD_PATH,
                _card_endpoint(agent_id, entry, pushes, signing_key, public_url),
                methods=["GET"],
            )
        )
    return routes


def _card_endpoint(
    agent_id: str,
    entry: AgentEntry,
    pushes: bool,
    signing_key: Ed25519PrivateKey | None,
    public_url: str | None,
) -> Any:
    if public_url is not None:
        # The configured URL's card, signed once: the request (its Host, its
        # X-Forwarded-*) has no say in what is signed (contract decision 38).
        signed = card_document(
            agent_card(
                agent_id,
                entry,
                base_url=public_url,
                push_notifications=pushes,
                signing_key=signing_key,
            ),
            signing_key,
        )

        async def configured(request: Request) -> Response:
            return JSONResponse(signed)

        return configured

    async def card(request: Request) -> Response:
        # No public URL: the card names the URL the client reached (so a client on
        # this machine or network finds the endpoint), and is never signed, since a
        # signature would vouch for a host the request chose.
        served = agent_card(
            agent_id, entry, base_url=str(request.base_url), push_notifications=pushes
        )
        return JSONResponse(card_document(served))

    return card
