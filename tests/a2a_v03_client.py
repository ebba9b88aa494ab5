"""An A2A 0.3 client, the official SDK's (a2a-sdk 0.3.x), driving one sessionwire agent.

Run by the interpreter of a virtual environment of its own (tests/e2e/test_a2a_clients.py
builds it: the suite's own a2a-sdk is 1.x), never by pytest. Its one argument is JSON:
``{"agent": URL, "token": T, "other": T2, "binding": "JSONRPC" | "HTTP+JSON", "push":
URL, "jwk": KEY}`` (``jwk``, optional: the card's signature must verify with it). It
prints what it saw as one JSON object; the test asserts on that.

Every call goes through the SDK's client as an application would make it: the card read
from ``/.well-known/agent-card.json`` and the transport chosen from it; a send that waits,
a task read back, a stream left mid-task and subscribed to again, a cancel, a push
config, and another caller's read of a task it may not see.
"""

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    GetTaskPushNotificationConfigParams,
    Message,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskQueryParams,
    TextPart,
)


def message(text: str, context_id: str) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        context_id=context_id,
    )


def texts(task: Task) -> list[str]:
    return [part.root.text for m in task.history or [] for part in m.parts]


def refusal(error: Exception) -> str:
    """What a refused call said: the error's kind and words (an id it names left out,
    so a hidden task's answer and a missing one's compare)."""
    return f"{type(error).__name__}: {error}"


async def client_for(
    args: dict[str, Any],
    token: str,
    *,
    streaming: bool,
    push: PushNotificationConfig | None = None,
) -> tuple[Any, httpx.AsyncClient]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    config = ClientConfig(
        httpx_client=http,
        streaming=streaming,
        supported_transports=[args["binding"]],
        # A push config rides on the client's config: 0.3.26's REST transport cannot
        # send one given per call (its configuration merge leaves it a dict).
        push_notification_configs=[push] if push else [],
        polling=push is not None,
    )
    verifier = None
    if "jwk" in args:
        # Imported here: only a signed card's check needs the signing extra.
        from a2a.utils.signing import create_signature_verifier
        from jwt import PyJWK

        verifier = create_signature_verifier(lambda kid, jku: PyJWK(args["jwk"]), ["EdDSA"])
    client = await ClientFactory.connect(
        args["agent"], client_config=config, signature_verifier=verifier
    )
    return client, http


async def first_of(events: Any) -> Any:
    async for event in events:
        return event
    raise AssertionError("the stream ended before its first event")


async def main(args: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    context_id = f"ctx-03-{args['binding'].replace('+', '-').lower()}"
    client, http = await client_for(args, args["token"], streaming=False)
    card = await client.get_card()
    seen["card"] = {
        "protocolVersion": card.protocol_version,
        "preferredTransport": card.preferred_transport,
        "url": card.url,
        "transports": sorted(i.transport for i in card.additional_interfaces or []),
        "skills": [skill.id for skill in card.skills],
        # Connecting raised unless a signature verified, when a key was given.
        "verified": "jwk" in args and bool(card.signatures),
    }

    # A send that waits for its task to end, then the task read back.
    async for task, _ in client.send_message(message("hi", context_id)):
        sent = task
    seen["sent"] = {
        "state": sent.status.state.value,
        "contextId": sent.context_id,
        "artifact": sent.artifacts[0].parts[0].root.text,
    }
    got = await client.get_task(TaskQueryParams(id=sent.id))
    seen["got"] = {"id": got.id == sent.id, "state": got.status.state.value, "texts": texts(got)}

    # A stream left mid-task, the task subscribed to again, then cancelled.
    streamer, streamer_http = await client_for(args, args["token"], streaming=True)
    stream = streamer.send_message(message("wait for me", context_id))
    first, _ = await first_of(stream)
    await stream.aclose()
    resubscribed = streamer.resubscribe(TaskIdParams(id=first.id))
    again, _ = await first_of(resubscribed)
    cancelled = await client.cancel_task(TaskIdParams(id=first.id))
    rest = [update for _, update in [event async for event in resubscribed]]
    seen["streamed"] = {
        "first": first.status.state.value,
        "resubscribed": again.id == first.id,
        "cancelled": cancelled.status.state.value,
        "last": rest[-1].status.state.value if rest else None,
    }

    # A push config given with the message: the task's end is POSTed to the receiver.
    push = PushNotificationConfig(id="p-03", url=args["push"], token="receiver-03")
    pusher, pusher_http = await client_for(args, args["token"], streaming=False, push=push)
    async for task, _ in pusher.send_message(message("push me", context_id)):
        pushed = task
    kept = await pusher.get_task_callback(
        GetTaskPushNotificationConfigParams(id=pushed.id, push_notification_config_id="p-03")
    )
    seen["push"] = {"taskId": pushed.id, "url": kept.push_notification_config.url}

    # Another session's token: the task it may not see answers as a missing one.
    other, other_http = await client_for(args, args["other"], streaming=False)
    answers = []
    for task_id in (sent.id, str(uuid.uuid4())):
        try:
            await other.get_task(TaskQueryParams(id=task_id))
            answers.append("answered")
        except Exception as error:  # the SDK's error for the transport in use
            answers.append(refusal(error).replace(task_id, "<id>"))
    seen["hidden"], seen["missing"] = answers

    for opened in (http, streamer_http, pusher_http, other_http):
        await opened.aclose()
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
