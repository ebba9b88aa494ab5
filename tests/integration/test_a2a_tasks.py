"""A2A tasks are runs (contract decision 32, ADR 0035), on every store: the A2A request
handler driven in process, on the virtual clock (a run that must stay in flight waits on
a clock that only moves when told)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
from command_line import run_in_process
from egress_rig import public_resolver
from sessionwire import Gateway
from sessionwire.adapters.a2a.agent_cards import agent_card, served_agents
from sessionwire.adapters.a2a.push import TOKEN_HEADER, A2APushDelivery
from sessionwire.adapters.a2a.server import GRANT, GatewayRequestHandler
from sessionwire.adapters.access.tokens import Grant
from sessionwire.adapters.testkit.virtual_clock import VirtualClock
from sessionwire.application.ports.runtime import RecordedDelivery
from sessionwire.testing import ScriptedRuntime

SCRIPT = {
    "rules": [
        {"match": "^slow", "reply": "late", "delaySeconds": 60},
        {"reply": "pong: {message}"},
    ]
}
OPERATOR = Grant(None, "operator#1")
MAIN = Grant("main", "session main#2")
OTHER = Grant("agent:main:other", "session agent:main:other#3")
OPS = Grant("agent:ops:main", "session agent:ops:main#4")


def context(grant: Grant) -> ServerCallContext:
    return ServerCallContext(state={GRANT: grant})


def send(
    text: str, context_id: str = "", *, message_id: str | None = None, wait: bool = True
) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=message_id or str(uuid.uuid4()),
            role=Role.ROLE_USER,
            context_id=context_id,
            parts=[Part(text=text)],
        ),
        configuration=SendMessageConfiguration(return_immediately=not wait),
    )


async def opened(
    store_url: str, clock: VirtualClock, config: Any = None, delivery: Any = None
) -> tuple[Gateway, GatewayRequestHandler]:
    gateway = await Gateway.open(
        delivery=delivery,
        config=config or {"agents": {"list": [{"id": "main", "default": True}, {"id": "ops"}]}},
        store=store_url,
        clock=clock,
        runtime=ScriptedRuntime.from_dict(SCRIPT),
    )
    entry = served_agents(gateway.served.config)["main"]
    card = agent_card("main", entry, base_url="http://test", push_notifications=False)
    return gateway, GatewayRequestHandler(gateway, "main", card)


def as_task(answer: Task | Message) -> Task:
    assert isinstance(answer, Task)
    return answer


async def test_a_task_is_a_run_in_the_contexts_session(store_url: str, clock: VirtualClock) -> None:
    gateway, handler = await opened(store_url, clock)
    try:
        task = as_task(await handler.on_message_send(send("hi", "c1"), context(OPERATOR)))
        run = await gateway.run(task.id)
        history = await gateway.call_tool(
            "agent:main:a2a:c1", "sessions_history", {"sessionKey": "agent:main:a2a:c1"}
        )
        timeline = await gateway.timeline("agent:main:a2a:c1")
    finally:
        await gateway.close()
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "pong: hi"
    assert run is not None
    assert (run["sessionKey"], run["status"], run["step"]) == ("agent:main:a2a:c1", "ok", "primary")
    assert [m["provenance"]["kind"] for m in history["messages"]] == ["a2a-remote", "agent"]
    events = [entry.event for entry in timeline.entries]
    assert events[0] == "SessionOpened"
    assert "RemoteCallReceived" in events


async def test_the_same_message_id_finds_the_same_task(store_url: str, clock: VirtualClock) -> None:
    gateway, handler = await opened(store_url, clock)
    try:
        first = as_task(
            await handler.on_message_send(send("x", "c2", message_id="m-1"), context(MAIN))
        )
        again = as_task(
            await handler.on_message_send(send("x", "c2", message_id="m-1"), context(MAIN))
        )
        runs = await gateway.runs(session_key="agent:main:a2a:c2")
    finally:
        await gateway.close()
    assert first.id == again.id
    assert len(runs["runs"]) == 1


async def test_a_hidden_task_is_answered_as_a_missing_one(
    store_url: str, clock: VirtualClock
) -> None:
    gateway, handler = await opened(store_url, clock)
    try:
        task = as_task(await handler.on_message_send(send("mine", "c3"), context(MAIN)))
        refusals: list[str] = []
        for grant, task_id in (
            (MAIN, str(uuid.uuid4())),
            (OTHER, task.id),
            (OPS, task.id),
            (MAIN, "not-a-uuid"),
        ):
            with pytest.raises(TaskNotFoundError) as refused:
                await handler.on_get_task(GetTaskRequest(id=task_id), context(grant))
            refusals.append(str(refused.value))
        other_list = await handler.on_list_tasks(ListTasksRequest(), context(OTHER))
        mine = await handler.on_list_tasks(ListTasksRequest(), context(MAIN))
        operator_sees = await handler.on_get_task(GetTaskRequest(id=task.id), context(OPERATOR))
    finally:
        await gateway.close()
    assert len(set(refusals)) == 1
    assert list(other_list.tasks) == []
    assert [t.id for t in mine.tasks] == [task.id]
    assert operator_sees is not None


async def list_pages(
    handler: GatewayRequestHandler, grant: Grant, **filters: Any
) -> list[ListTasksResponse]:
    """Every page of a listing, following nextPageToken to the end."""
    pages = [await handler.on_list_tasks(ListTasksRequest(**filters), context(grant))]
    while pages[-1].next_page_token:
        request = ListTasksRequest(page_token=pages[-1].next_page_token, **filters)
        pages.append(await handler.on_list_tasks(request, context(grant)))
    return pages


async def test_list_tasks_pages_on_a_stable_cursor_and_counts_only_what_the_caller_sees(
    store_url: str, clock: VirtualClock
) -> None:
    gateway, handler = await opened(store_url, clock)
    try:
        mine = [
            as_task(await handler.on_message_send(send(f"t{n}", f"p{n % 2}"), context(MAIN))).id
            for n in range(5)
        ]
        # Another caller's tasks, between and after main's: never listed to main, nor counted.
        hidden = [
            as_task(await handler.on_message_send(send(f"h{n}", "q"), context(OTHER))).id
            for n in range(3)
        ]
        newest_first = [
            run["runId"] for run in (await gateway.runs(limit=100))["runs"] if run["runId"] in mine
        ]
        pages = await list_pages(handler, MAIN, page_size=2)
        in_one_context = await list_pages(handler, MAIN, page_size=1, context_id="p0")

        # A task started between two pages comes before the cursor: the pages after it
        # neither repeat nor skip a task.
        first = await handler.on_list_tasks(ListTasksRequest(page_size=3), context(MAIN))
        await clock.advance(1)  # recorded later than every task listed (those tie: by id)
        late = as_task(await handler.on_message_send(send("late", "p1"), context(MAIN))).id
        rest = await handler.on_list_tasks(
            ListTasksRequest(page_size=3, page_token=first.next_page_token), context(MAIN)
        )
        late_stamp = as_task(
            await handler.on_get_task(GetTaskRequest(id=late), context(MAIN))
        ).status.timestamp
        since_late = await list_pages(handler, MAIN, page_size=2, status_timestamp_after=late_stamp)
        others = await list_pages(handler, OTHER, page_size=2)
        done = TaskState.TASK_STATE_COMPLETED
        completed = await list_pages(handler, MAIN, page_size=4, status=done)
        with pytest.raises(InvalidParamsError):
            await handler.on_list_tasks(ListTasksRequest(page_token="not-ours"), context(MAIN))
    finally:
        await gateway.close()
    assert [len(page.tasks) for page in pages] == [2, 2, 1]
    assert [task.id for page in pages for task in page.tasks] == newest_first
    assert {page.total_size for page in pages} == {5}
    assert [page.next_page_token != "" for page in pages] == [True, True, False]
    assert [task.id for page in in_one_context for task in page.tasks] == [
        task_id for task_id in newest_first if task_id in mine[0::2]
    ]
    assert {page.total_size for page in in_one_context} == {3}
    assert [task.id for task in [*first.tasks, *rest.tasks]] == newest_first
    assert rest.total_size == 6  # the late task counts; it sits before the cursor
    assert rest.next_page_token == ""
    assert late not in [task.id for task in rest.tasks]
    assert [task.id for page in since_late for task in page.tasks] == [late]
    assert {page.total_size for page in since_late} == {1}
    assert {task.id for page in others for task in page.tasks} == set(hidden)
    assert {page.total_size for page in others} == {3}
    assert [len(page.tasks) for page in completed] == [4, 2]
    assert {page.total_size for page in completed} == {6}


async def test_cancel_ends_the_run_and_an_ended_task_is_not_cancelable(
    store_url: str, clock: VirtualClock
) -> None:
    gateway, handler = await opened(store_url, clock)
    try:
        task = as_task(
            await handler.on_message_send(send("slow one", "c4", wait=False), context(OPERATOR))
        )
        cancelled = await handler.on_cancel_task(CancelTaskRequest(id=task.id), context(OPERATOR))
        with pytest.raises(TaskNotCancelableError):
            await handler.on_cancel_task(CancelTaskRequest(id=task.id), context(OPERATOR))
        run = await gateway.run(task.id)
    finally:
        await gateway.close()
    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    assert cancelled is not None
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert run is not None
    assert run["status"] == "cancelled"


async def test_a_send_the_send_policy_denies_is_rejected_and_starts_nothing(
    store_url: str, clock: VirtualClock
) -> None:
    config = {
        "agents": {"list": [{"id": "main", "default": True}]},
        "session": {"sendPolicy": {"rules": [{"action": "deny", "match": {"channel": "a2a"}}]}},
    }
    gateway, handler = await opened(store_url, clock, config)
    try:
        task = as_task(await handler.on_message_send(send("no", "c5"), context(OPERATOR)))
        runs = await gateway.runs(session_key="agent:main:a2a:c5")
        timeline = await gateway.timeline("agent:main:a2a:c5")
    finally:
        await gateway.close()
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert "send policy denies" in task.status.message.parts[0].text
    assert runs["runs"] == []
    assert any("SendMessage" in e.summary and "refused" in e.summary for e in timeline.entries)


async def test_another_callers_context_is_not_joined(store_url: str, clock: VirtualClock) -> None:
    gateway, handler = await opened(store_url, clock)
    try:
        await handler.on_message_send(send("first", "c6"), context(MAIN))
        joined = as_task(await handler.on_message_send(send("second", "c6"), context(OTHER)))
        runs = await gateway.runs(session_key="agent:main:a2a:c6")
    finally:
        await gateway.close()
    assert joined.status.state == TaskState.TASK_STATE_REJECTED
    assert len(runs["runs"]) == 1


async def test_push_configs_are_kept_listed_withdrawn_and_sent_once_when_the_task_ends(
    store_url: str, clock: VirtualClock
) -> None:
    received: list[tuple[str, dict[str, Any], str | None]] = []

    def receive(request: httpx.Request) -> httpx.Response:
        # The fence connects to the address it checked: the name is in Host.
        where = f"{request.url.scheme}://{request.headers['host']}{request.url.path}"
        received.append((where, json.loads(request.content), request.headers.get(TOKEN_HEADER)))
        return httpx.Response(200)

    delivery = A2APushDelivery(
        RecordedDelivery(), transport=httpx.MockTransport(receive), resolver=public_resolver
    )
    gateway, handler = await opened(store_url, clock, delivery=delivery)
    try:
        task = as_task(
            await handler.on_message_send(send("slow push", "c7", wait=False), context(OPERATOR))
        )
        for config_id in ("p-1", "p-2"):
            await handler.on_create_task_push_notification_config(
                TaskPushNotificationConfig(
                    task_id=task.id, id=config_id, url=f"https://hooks.test/{config_id}", token="t"
                ),
                context(OPERATOR),
            )
        both = await handler.on_list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id), context(OPERATOR)
        )
        one = await handler.on_get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="p-1"), context(OPERATOR)
        )
        await handler.on_delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="p-2"), context(OPERATOR)
        )
        left = await handler.on_list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id), context(OPERATOR)
        )
        with pytest.raises(TaskNotFoundError):  # another caller: as a missing task
            await handler.on_list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id), context(MAIN)
            )
        assert received == []
        await clock.advance(60)  # the run ends
        await gateway.wait_idle()
    finally:
        await gateway.close()
    assert [c.id for c in both.configs] == ["p-1", "p-2"]
    assert one.url == "https://hooks.test/p-1"
    assert [c.id for c in left.configs] == ["p-1"]
    assert [(url, token) for url, _, token in received] == [("https://hooks.test/p-1", "t")]
    assert received[0][1]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_push_url_that_resolves_to_loopback_at_send_time_is_abandoned_unsent(
    store_url: str, clock: VirtualClock
) -> None:
    """DNS rebinding: hooks.test is public when the push is set, loopback when it is sent.
    The send resolves again, refuses, and abandons the delivery: nothing, and no token,
    reaches any receiver."""
    answers = iter(["93.184.215.14", "127.0.0.1"])
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> list[Any]:
        asked.append(host)
        return [ipaddress.ip_address(next(answers))]

    received: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        received.append(request)
        return httpx.Response(200)

    delivery = A2APushDelivery(
        RecordedDelivery(), transport=httpx.MockTransport(receive), resolver=rebinding
    )
    gateway, handler = await opened(store_url, clock, delivery=delivery)
    try:
        task = as_task(
            await handler.on_message_send(
                send("slow push", "c-rebind", wait=False), context(OPERATOR)
            )
        )
        await handler.on_create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url="https://hooks.test/p", token="t"),
            context(OPERATOR),
        )
        await clock.advance(60)  # the run ends: the push is attempted
        await gateway.wait_idle()
        timeline = await gateway.timeline("agent:main:a2a:c-rebind")
    finally:
        await gateway.close()
    assert asked == ["hooks.test", "hooks.test"]  # at set time, and again at send time
    assert received == []
    deliveries = [(e.event, e.summary) for e in timeline.entries if e.kind == "delivery"]
    assert [event for event, _ in deliveries] == ["DeliveryQueued", "DeliveryAbandoned"]
    assert "refused to send to hooks.test (127.0.0.1): a loopback address" in deliveries[-1][1]


async def test_push_urls_are_refused_when_set_on_every_store(
    store_url: str, clock: VirtualClock
) -> None:
    """The set-time fence and the token fence, on each store: nothing is recorded for a
    refused push, and the refusal is in the audit trail."""
    delivery = A2APushDelivery(
        RecordedDelivery(), transport=httpx.MockTransport(lambda _: httpx.Response(200))
    )
    gateway, handler = await opened(store_url, clock, delivery=delivery)
    try:
        task = as_task(
            await handler.on_message_send(send("slow a", "c-fence", wait=False), context(OPERATOR))
        )
        mine = as_task(
            await handler.on_message_send(send("slow b", "c-main", wait=False), context(MAIN))
        )
        with pytest.raises(InvalidParamsError, match="a cloud metadata address"):
            await handler.on_create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url="http://169.254.169.254/x"),
                context(OPERATOR),
            )
        with pytest.raises(InvalidParamsError, match="may not set push notification URLs"):
            await handler.on_create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=mine.id, url="https://93.184.215.14/x"),
                context(MAIN),
            )
        listed = await handler.on_list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id), context(OPERATOR)
        )
        timeline = await gateway.timeline("agent:main:a2a:c-fence")
    finally:
        await gateway.close()
    assert list(listed.configs) == []
    refused = [e.summary for e in timeline.entries if "refused" in e.summary]
    assert any("cloud metadata" in summary for summary in refused), refused


def test_the_command_line_shows_a2a_calls_and_pushes_in_timelines_and_events(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'cli.db'}"

    async def record() -> None:
        delivery = A2APushDelivery(
            RecordedDelivery(),
            transport=httpx.MockTransport(lambda _: httpx.Response(200)),
            resolver=public_resolver,
        )
        gateway, handler = await opened(store, VirtualClock(), delivery=delivery)
        try:
            config = TaskPushNotificationConfig(url="https://hooks.test/x")
            request = send("seen", "cli")
            request.configuration.task_push_notification_config.CopyFrom(config)
            await handler.on_message_send(request, context(OPERATOR))
            await gateway.wait_idle()
        finally:
            await gateway.close()

    asyncio.run(record())
    timeline = run_in_process("--store", store, "audit", "timeline", "agent:main:a2a:cli")
    events = run_in_process("--store", store, "events")
    assert timeline.returncode == 0, timeline.stderr
    assert events.returncode == 0, events.stderr
    for shown in (timeline.stdout, events.stdout):
        assert "RemoteCallReceived" in shown
        assert "PushRequested" in shown
        assert "DeliverySucceeded" in shown
