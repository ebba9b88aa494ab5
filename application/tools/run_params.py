"""The parameters of the tools that start or steer runs (send, spawn, yield, sub-agents,
status, run input), read as ``params.py`` reads the others.

Apart from the reading tools' parameters (``params.py``): the registry names each model by
topic, so a process that only reads (the CLI's ``sessions list``) builds none of these
(issue 38 item 7), as it loads none of their handlers or result models (ADR 0036).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import field_validator, model_validator
from sessionwire.application.tools.params import (
    MAX_STRING_PARAM,
    ToolParams,
    clamped_int,
    require,
    text,
    wire,
    within_message_cap,
)
from sessionwire.domain.keys import has_control_characters

MAX_SEND_MESSAGE_CHARS = 1_000_000
MAX_SEND_TIMEOUT_SECONDS = 86_400


class SessionsSendParams(ToolParams):
    tool: ClassVar[str] = "sessions_send"

    sessionKey: Annotated[str | None, wire("Target session key or sessionId (or use label).")] = (
        None
    )
    label: Annotated[
        str | None, wire("Target session label (instead of sessionKey).", maxLength=64)
    ] = None
    agentId: Annotated[
        str | None,
        wire(
            "With label: the agent whose sessions the label is looked up in; "
            "alone: that agent's main session.",
            maxLength=64,
        ),
    ] = None
    message: Annotated[str, wire("The message to send.")]
    timeoutSeconds: Annotated[
        int,
        wire("Seconds to wait for the reply (default 30; 0 = do not wait).", minimum=0),
    ] = 30

    @model_validator(mode="before")
    @classmethod
    def _message_required(cls, data: Any) -> Any:
        return require(data, "message", max_length=MAX_SEND_MESSAGE_CHARS)

    @field_validator("message", mode="before")
    @classmethod
    def _message(cls, value: Any) -> str | None:
        return within_message_cap(
            "message", text("message", value, max_length=MAX_SEND_MESSAGE_CHARS)
        )

    @field_validator("sessionKey", mode="before")
    @classmethod
    def _key(cls, value: Any) -> str | None:
        return text("sessionKey", value)

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: Any) -> str | None:
        return text("label", value, max_length=64)

    @field_validator("agentId", mode="before")
    @classmethod
    def _agent(cls, value: Any) -> str | None:
        return text("agentId", value, max_length=64)

    @field_validator("timeoutSeconds", mode="before")
    @classmethod
    def _timeout(cls, value: Any) -> int:
        if value is None:
            return 30
        return clamped_int("timeoutSeconds", value, low=0, high=MAX_SEND_TIMEOUT_SECONDS)


class RunInputParams(ToolParams):
    """The answer to a run waiting for input (decision 33)."""

    tool: ClassVar[str] = "run_input"

    runId: Annotated[str, wire("The run waiting for input (its runId).")]
    text: Annotated[str, wire("The answer: one of the run's options when it gave some.")]

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        require(data, "runId", max_length=64)
        return require(data, "text", max_length=MAX_SEND_MESSAGE_CHARS)

    @field_validator("runId", mode="before")
    @classmethod
    def _run_id(cls, value: Any) -> str | None:
        return text("runId", value, max_length=64)

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str | None:
        # The message bound: an answer becomes the run's next message.
        return within_message_cap("text", text("text", value, max_length=MAX_SEND_MESSAGE_CHARS))


class SessionsYieldParams(ToolParams):
    tool: ClassVar[str] = "sessions_yield"

    waitFor: Annotated[
        str,
        wire("Wake when all sub-agents have finished (default) or any has.", enum=["all", "any"]),
    ] = "all"
    timeoutSeconds: Annotated[
        int | None,
        wire(
            "Wake after N seconds at the latest (default: your run's own deadline).",
            minimum=1,
        ),
    ] = None
    message: Annotated[str | None, wire("A private note the woken turn receives.")] = None

    @field_validator("waitFor", mode="before")
    @classmethod
    def _wait_for(cls, value: Any) -> str:
        wait_for = text("waitFor", value, max_length=64)
        if wait_for is None:
            return "all"
        if wait_for.lower() not in {"all", "any"}:
            raise ValueError(f'waitFor must be "all" or "any", not {wait_for!r}')
        return wait_for.lower()

    @field_validator("timeoutSeconds", mode="before")
    @classmethod
    def _timeout(cls, value: Any) -> int | None:
        if value is None:
            return None
        return clamped_int("timeoutSeconds", value, low=1, high=MAX_SEND_TIMEOUT_SECONDS)

    @field_validator("message", mode="before")
    @classmethod
    def _message(cls, value: Any) -> str | None:
        return within_message_cap(
            "message", text("message", value, max_length=MAX_SEND_MESSAGE_CHARS)
        )


MAX_TASK_CHARS = 1_000_000
THINKING_ALIASES = {
    "off": "off",
    "on": "low",
    "enable": "low",
    "enabled": "low",
    "min": "minimal",
    "minimal": "minimal",
    "think": "minimal",
    "low": "low",
    "thinkhard": "low",
    "mid": "medium",
    "med": "medium",
    "medium": "medium",
    "harder": "medium",
    "high": "high",
    "ultra": "high",
    "max": "high",
    "highest": "high",
    "xhigh": "xhigh",
}


SPAWN_CONTEXTS = ("isolated", "fork")


class SessionsSpawnParams(ToolParams):
    tool: ClassVar[str] = "sessions_spawn"

    task: Annotated[str, wire("What the sub-agent should do.")]
    label: Annotated[str | None, wire("For logs and UI.", maxLength=64)] = None
    agentId: Annotated[str | None, wire("Spawn under another agent id (see agents_list).")] = None
    model: Annotated[str | None, wire("Model for the sub-agent.")] = None
    thinking: Annotated[str | None, wire("Thinking level for the sub-agent.")] = None
    runTimeoutSeconds: Annotated[
        int | None,
        wire("Abort the sub-agent run after N seconds (0 = no limit).", minimum=0),
    ] = None
    timeoutSeconds: Annotated[int | None, wire("Older name of runTimeoutSeconds.", minimum=0)] = (
        None
    )
    cleanup: Annotated[
        str,
        wire(
            "Delete the child session after it reports (default keep).",
            enum=["keep", "delete"],
        ),
    ] = "keep"
    context: Annotated[
        str,
        wire(
            "isolated (default): the child starts with no history; fork: it starts "
            "with this session's transcript as its context.",
            enum=list(SPAWN_CONTEXTS),
        ),
    ] = "isolated"

    @model_validator(mode="before")
    @classmethod
    def _task_required(cls, data: Any) -> Any:
        return require(data, "task", max_length=MAX_TASK_CHARS)

    @field_validator("context", mode="before")
    @classmethod
    def _context(cls, value: Any) -> str:
        chosen = text("context", value, max_length=64) or "isolated"
        if chosen not in SPAWN_CONTEXTS:
            raise ValueError(f'invalid context {chosen!r} (use "isolated"|"fork")')
        return chosen

    @field_validator("task", mode="before")
    @classmethod
    def _task(cls, value: Any) -> str | None:
        return within_message_cap("task", text("task", value, max_length=MAX_TASK_CHARS))

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: Any) -> str | None:
        label = text("label", value, max_length=MAX_STRING_PARAM)
        if label is not None and len(label) > 64:
            raise ValueError("invalid label: too long (max 64)")
        if label is not None and has_control_characters(label):
            raise ValueError("invalid label: contains control characters")
        return label

    @field_validator("agentId", "model", mode="before")
    @classmethod
    def _short_text(cls, value: Any, info: Any) -> str | None:
        return text(info.field_name, value, max_length=256)

    @field_validator("thinking", mode="before")
    @classmethod
    def _thinking(cls, value: Any) -> str | None:
        raw = text("thinking", value, max_length=64)
        if raw is None:
            return None
        level = THINKING_ALIASES.get(raw.lower())
        if level is None:
            levels = "off, minimal, low, medium, high, xhigh"
            raise ValueError(f'Invalid thinking level "{raw}". Use one of: {levels}.')
        return level

    @field_validator("runTimeoutSeconds", "timeoutSeconds", mode="before")
    @classmethod
    def _timeout(cls, value: Any, info: Any) -> int | None:
        if value is None:
            return None
        return clamped_int(info.field_name, value, low=0, high=MAX_SEND_TIMEOUT_SECONDS)

    @field_validator("cleanup", mode="before")
    @classmethod
    def _cleanup(cls, value: Any) -> str:
        # OpenClaw reads anything but "delete" as "keep"; a non-string is still a mistake.
        cleanup = text("cleanup", value, max_length=64)
        return "delete" if cleanup == "delete" else "keep"

    @property
    def run_timeout(self) -> int:
        if self.runTimeoutSeconds is not None:
            return self.runTimeoutSeconds
        return self.timeoutSeconds or 0


SUBAGENT_ACTIONS = ("list", "cancel", "steer")
# OpenClaw's earlier name of the cancel action.
ACTION_ALIASES = {"kill": "cancel"}
MAX_RECENT_MINUTES = 10_080
DEFAULT_RECENT_MINUTES = 30
MAX_STEER_CHARS = 100_000


class SubagentsParams(ToolParams):
    """``subagents``: list the caller's spawn tree, cancel or steer a run in it."""

    tool: ClassVar[str] = "subagents"

    action: Annotated[
        str,
        wire(
            "list (default), cancel (with what it caused) or steer.",
            enum=list(SUBAGENT_ACTIONS),
        ),
    ] = "list"
    target: Annotated[
        str | None,
        wire(
            "For cancel and steer: a runId from list, or a child sessionKey or "
            'label; "all" cancels every sub-agent run in flight.'
        ),
    ] = None
    message: Annotated[
        str | None, wire("For steer: what the running sub-agent reads at its next step.")
    ] = None
    recentMinutes: Annotated[
        int, wire("For list: ended runs within N minutes (default 30).", minimum=1)
    ] = DEFAULT_RECENT_MINUTES
    reason: Annotated[str | None, wire("For cancel: why (recorded).")] = None

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> str:
        raw = text("action", value, max_length=64)
        if raw is None:
            return "list"
        action = ACTION_ALIASES.get(raw.lower(), raw.lower())
        if action not in SUBAGENT_ACTIONS:
            raise ValueError(f"action must be one of {', '.join(SUBAGENT_ACTIONS)}, not {raw!r}")
        return action

    @field_validator("target", mode="before")
    @classmethod
    def _target(cls, value: Any) -> str | None:
        return text("target", value, max_length=512)

    @field_validator("message", mode="before")
    @classmethod
    def _message(cls, value: Any) -> str | None:
        return within_message_cap("message", text("message", value, max_length=MAX_STEER_CHARS))

    @field_validator("reason", mode="before")
    @classmethod
    def _reason(cls, value: Any) -> str | None:
        return text("reason", value, max_length=MAX_STRING_PARAM)

    @field_validator("recentMinutes", mode="before")
    @classmethod
    def _recent(cls, value: Any) -> int:
        if value is None:
            return DEFAULT_RECENT_MINUTES
        return clamped_int("recentMinutes", value, low=1, high=MAX_RECENT_MINUTES)

    @model_validator(mode="after")
    def _what_each_action_needs(self) -> SubagentsParams:
        if self.action in ("cancel", "steer") and self.target is None:
            raise ValueError(f"target required for action {self.action}")
        if self.action == "steer" and self.message is None:
            raise ValueError("message required for action steer")
        if self.action != "steer" and self.message is not None:
            raise ValueError("message is only for action steer")
        return self


class SessionStatusParams(ToolParams):
    """``session_status``: the calling session's own status card."""

    tool: ClassVar[str] = "session_status"

    sessionKey: Annotated[
        str | None, wire('Omit, or "current": this session (the only one it reports).')
    ] = None

    @field_validator("sessionKey", mode="before")
    @classmethod
    def _key(cls, value: Any) -> str | None:
        return text("sessionKey", value, max_length=512)
