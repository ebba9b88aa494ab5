"""A run as an A2A task (contract decision 32): states from run states, the message and
the reply as its history, the reply as its one artifact."""

from __future__ import annotations

from datetime import UTC, datetime

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.timestamp_pb2 import Timestamp
from sessionwire.application.remote_tasks import context_of
from sessionwire.domain.run import RunState

# A task is a run: its state is the run's status. A run refused by the send policy never
# exists; the adapter answers such a send with a REJECTED task that is not kept.
TASK_STATES: dict[str, TaskState] = {
    "queued": TaskState.TASK_STATE_SUBMITTED,
    "running": TaskState.TASK_STATE_WORKING,
    # A run waiting for a person (decision 33): a message on the task is its answer.
    "input_required": TaskState.TASK_STATE_INPUT_REQUIRED,
    "ok": TaskState.TASK_STATE_COMPLETED,
    "error": TaskState.TASK_STATE_FAILED,
    "timeout": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}
TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
REPLY_ARTIFACT = "reply"


def task_state(state: RunState) -> TaskState:
    return TASK_STATES.get(state.status, TaskState.TASK_STATE_UNSPECIFIED)


def context_id_of(state: RunState) -> str:
    return context_of(state.session_key) or ""


def _timestamp(millis: int | None) -> Timestamp:
    stamp = Timestamp()
    if millis is not None:
        stamp.FromDatetime(datetime.fromtimestamp(millis / 1000, tz=UTC))
    return stamp


def text_message(text: str, *, role: Role, task_id: str, context_id: str, id: str) -> Message:
    return Message(
        message_id=id,
        role=role,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def task_status(state: RunState) -> TaskStatus:
    """The status: its state, when it last changed, and the reply or the error as its
    message once the run has ended."""
    status = TaskStatus(
        state=task_state(state),
        timestamp=_timestamp(state.ended_at or state.started_at),
    )
    words = state.reply if state.status == "ok" else state.error
    asked = state.input_request
    if state.status == "input_required" and asked is not None:
        # What the run asks is the status's message, as A2A's input-required carries it.
        options = f"\n(answer one of: {', '.join(asked.options)})" if asked.options else ""
        words = asked.prompt + options
    if (state.ended or asked is not None) and words:
        status.message.CopyFrom(
            text_message(
                words,
                role=Role.ROLE_AGENT,
                task_id=state.run_id,
                context_id=context_id_of(state),
                id=f"{state.run_id}:status",
            )
        )
    return status


def reply_artifact(state: RunState) -> Artifact | None:
    if state.status != "ok" or not state.reply:
        return None
    return Artifact(artifact_id=REPLY_ARTIFACT, name=REPLY_ARTIFACT, parts=[Part(text=state.reply)])


def task_of(state: RunState, *, history_length: int | None = None) -> Task:
    """The run as a task. ``history_length``: at most that many of the newest messages
    (0: none); None: all (the caller's message, and the agent's reply once it is in)."""
    context_id = context_id_of(state)
    history = [
        text_message(
            state.message,
            role=Role.ROLE_USER,
            task_id=state.run_id,
            context_id=context_id,
            id=f"{state.run_id}:message",
        )
    ]
    if state.status == "ok" and state.reply:
        history.append(
            text_message(
                state.reply,
                role=Role.ROLE_AGENT,
                task_id=state.run_id,
                context_id=context_id,
                id=f"{state.run_id}:reply",
            )
        )
    if history_length is not None:
        history = history[len(history) - history_length :] if history_length > 0 else []
    artifact = reply_artifact(state)
    return Task(
        id=state.run_id,
        context_id=context_id,
        status=task_status(state),
        history=history,
        artifacts=[artifact] if artifact is not None else [],
    )


def status_update(state: RunState) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=state.run_id, context_id=context_id_of(state), status=task_status(state)
    )


def artifact_update(state: RunState) -> TaskArtifactUpdateEvent | None:
    artifact = reply_artifact(state)
    if artifact is None:
        return None
    return TaskArtifactUpdateEvent(
        task_id=state.run_id,
        context_id=context_id_of(state),
        artifact=artifact,
        last_chunk=True,
    )


def rejected_task(*, task_id: str, context_id: str, text: str, reason: str) -> Task:
    """A send the gateway refused (send policy): no run exists, nothing to fetch later."""
    return Task(
        id=task_id,
        context_id=context_id,
        status=TaskStatus(
            state=TaskState.TASK_STATE_REJECTED,
            message=text_message(
                reason,
                role=Role.ROLE_AGENT,
                task_id=task_id,
                context_id=context_id,
                id=f"{task_id}:status",
            ),
        ),
        history=[
            text_message(
                text,
                role=Role.ROLE_USER,
                task_id=task_id,
                context_id=context_id,
                id=f"{task_id}:message",
            )
        ],
    )
