"""Tool parameters: pydantic models that read what an agent sends the way OpenClaw does.

Strings are trimmed and an empty one counts as missing; numbers are floored and clamped;
a wrong type is an error with a message naming the parameter. Unknown parameters are
refused, so a misspelt one never silently does nothing.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import SESSION_KINDS, has_control_characters
from sessionwire.domain.transcript import MAX_TEXT_BYTES, text_json_bytes
from sessionwire.domain.transcript_search import words_of

MAX_STRING_PARAM = 1024
# A window longer than any session has existed lists everything, like +inf; larger values
# would overflow the store's 64-bit timestamp arithmetic.
MAX_ACTIVE_MINUTES = 1_000_000_000
# How much of an unknown parameter's name an error message quotes.
MAX_QUOTED_NAME = 64


def wire(description: str, **schema: Any) -> Any:
    """What a parameter's JSON Schema says of it (``schemas.py`` generates the schemas from
    these models): its description and ``schema``'s keywords (``minimum``, ``maxLength``,
    ``enum``, ``items``), written to the schema only. The field's validator enforces or
    clamps them, with OpenClaw's messages, so pydantic is not given them as constraints."""
    return Field(description=description, json_schema_extra=schema or None)


class ToolInputError(SessionwireError, ValueError):
    """A parameter an agent got wrong; the message says which and how."""


def number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number")
    if isinstance(value, float) and math.isnan(value):
        raise ValueError(f"{name} must be a number, not NaN")
    try:
        return float(value)
    except OverflowError:  # an int beyond float range (JSON allows 1e400 written out)
        return math.inf if value > 0 else -math.inf


def clamped_int(name: str, value: Any, *, low: int, high: int | None = None) -> int:
    """``max(low, floor(x))``, capped at ``high``; infinities clamp to the ends."""
    x = number(name, value)
    if math.isinf(x):
        if x < 0 or high is None:
            if high is None and x > 0:
                raise ValueError(f"{name} must be a finite number")
            return low
        return high
    result = max(low, math.floor(x))
    return result if high is None else min(high, result)


def within_message_cap(name: str, value: str | None) -> str | None:
    """A text that becomes a transcript message must fit the store's message cap as JSON
    (a million control characters are six million bytes once escaped)."""
    if value is not None and (size := text_json_bytes(value)) > MAX_TEXT_BYTES:
        raise ValueError(f"{name} is too large ({size} bytes as JSON, max {MAX_TEXT_BYTES})")
    return value


def text(name: str, value: Any, *, max_length: int = MAX_STRING_PARAM) -> str | None:
    """A trimmed string, or None when missing, empty or whitespace."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string")
    trimmed = value.strip()
    if len(trimmed) > max_length:
        raise ValueError(f"{name} is too long ({len(trimmed)} characters, max {max_length})")
    try:
        trimmed.encode()
    except UnicodeEncodeError:  # JSON's "\ud800" decodes to a lone surrogate
        raise ValueError(
            f"{name} is not valid Unicode text (it contains a lone surrogate)"
        ) from None
    return trimmed or None


def require(data: Any, name: str, *, max_length: int = MAX_STRING_PARAM) -> Any:
    """OpenClaw's ``<name> required``: the parameter is missing, empty or whitespace."""
    if isinstance(data, dict) and text(name, data.get(name), max_length=max_length) is None:
        raise ValueError(f"{name} required")
    return data


def flag(name: str, value: Any) -> bool:
    """A true-or-false parameter, false when missing."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false")
    return value


def quoted_name(name: object) -> str:
    text = str(name)
    if len(text) <= MAX_QUOTED_NAME:
        return repr(text)
    return f"{text[:MAX_QUOTED_NAME]!r}... ({len(text)} characters)"


class ToolParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    tool: ClassVar[str]

    @classmethod
    def parse(cls, raw: Any) -> Any:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ToolInputError("parameters must be a JSON object")
        fields = cls.__pydantic_fields__
        # The keys compared as sets (in C): ``model_fields`` is a property, slower.
        if not raw.keys() <= fields.keys():
            unknown = sorted(str(k) for k in raw if k not in fields)
            allowed = ", ".join(fields) or "none"
            raise ToolInputError(
                f"unknown parameter {quoted_name(unknown[0])} (accepted: {allowed})"
            )
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            raise ToolInputError(friendly(error)) from error


def friendly(error: ValidationError) -> str:
    first = error.errors()[0]
    context = first.get("ctx") or {}
    cause = context.get("error")
    if isinstance(cause, ValueError):
        return str(cause)
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def session_kinds(value: Any) -> frozenset[str] | None:
    """A ``kinds`` filter: the known kinds named (one, or a list)."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise ValueError("kinds must be a list of strings")
    if any(not isinstance(item, str) for item in items):
        raise ValueError("kinds must be a list of strings")
    # OpenClaw drops unknown kinds; no valid kind left means no filter.
    kinds = {item.strip().lower() for item in items} & set(SESSION_KINDS)
    return frozenset(kinds) or None


class SessionsListParams(ToolParams):
    tool: ClassVar[str] = "sessions_list"

    kinds: Annotated[
        frozenset[str] | None,
        wire(
            "Only sessions of these kinds.",
            items={"type": "string", "enum": list(SESSION_KINDS)},
        ),
    ] = None
    limit: Annotated[int, wire("Max rows (default 50, clamped to 200).", minimum=1)] = 50
    activeMinutes: Annotated[
        int | None, wire("Only sessions updated within N minutes.", minimum=1)
    ] = None
    messageLimit: Annotated[
        int, wire("Include the last N messages of each session (0-20, default 0).", minimum=0)
    ] = 0
    label: Annotated[str | None, wire("Only sessions with exactly this label.", maxLength=64)] = (
        None
    )
    agentId: Annotated[str | None, wire("Only sessions of this agent.", maxLength=64)] = None
    search: Annotated[
        str | None,
        wire(
            "Only sessions whose key, sessionId, label or display name contains "
            "this text (any case)."
        ),
    ] = None
    archived: Annotated[
        bool, wire("List archived sessions instead of active ones (default false).")
    ] = False

    @field_validator("kinds", mode="before")
    @classmethod
    def _kinds(cls, value: Any) -> frozenset[str] | None:
        return session_kinds(value)

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, value: Any) -> int:
        return 50 if value is None else clamped_int("limit", value, low=1, high=200)

    @field_validator("activeMinutes", mode="before")
    @classmethod
    def _active(cls, value: Any) -> int | None:
        if value is None:
            return None
        x = number("activeMinutes", value)
        if x > MAX_ACTIVE_MINUTES:  # +inf too: no time filter
            return None
        return clamped_int("activeMinutes", x, low=1)

    @field_validator("messageLimit", mode="before")
    @classmethod
    def _message_limit(cls, value: Any) -> int:
        return 0 if value is None else clamped_int("messageLimit", value, low=0, high=20)

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: Any) -> str | None:
        return text("label", value, max_length=64)

    @field_validator("agentId", mode="before")
    @classmethod
    def _agent(cls, value: Any) -> str | None:
        return text("agentId", value, max_length=64)

    @field_validator("search", mode="before")
    @classmethod
    def _search(cls, value: Any) -> str | None:
        return text("search", value)

    @field_validator("archived", mode="before")
    @classmethod
    def _archived(cls, value: Any) -> bool:
        return flag("archived", value)


# Any offset at or past a session's first message reads an empty page; an infinite one
# (JSON allows 1e400) is read as this, which no transcript reaches.
MAX_HISTORY_OFFSET = 2**63 - 1


class SessionsHistoryParams(ToolParams):
    tool: ClassVar[str] = "sessions_history"

    sessionKey: Annotated[str, wire("A session key or a sessionId from sessions_list.")]
    limit: Annotated[int, wire("Max messages (default 200, clamped to 1000).", minimum=1)] = 200
    offset: Annotated[
        int | None,
        wire(
            "Page back through older messages: skip this many of the newest "
            "(0 = the newest page); pass the returned nextOffset for the next page.",
            minimum=0,
        ),
    ] = None
    includeTools: Annotated[bool, wire("Include toolResult messages (default false).")] = False

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        return require(data, "sessionKey")

    @field_validator("sessionKey", mode="before")
    @classmethod
    def _key(cls, value: Any) -> str | None:
        return text("sessionKey", value)

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, value: Any) -> int:
        return 200 if value is None else clamped_int("limit", value, low=1, high=1000)

    @field_validator("offset", mode="before")
    @classmethod
    def _offset(cls, value: Any) -> int | None:
        # OpenClaw refuses a negative offset; a fraction is floored like every number here.
        if value is None:
            return None
        x = number("offset", value)
        if x < 0:
            raise ValueError("offset must be a non-negative integer")
        return MAX_HISTORY_OFFSET if math.isinf(x) else min(math.floor(x), MAX_HISTORY_OFFSET)

    @field_validator("includeTools", mode="before")
    @classmethod
    def _include_tools(cls, value: Any) -> bool:
        return flag("includeTools", value)


MAX_SEARCH_QUERY_CHARS = 512
MAX_SEARCH_WORDS = 16
MAX_SEARCH_RESULTS = 100


class SessionsSearchParams(ToolParams):
    tool: ClassVar[str] = "sessions_search"

    query: Annotated[
        str,
        wire(
            "Words to find in the transcripts you may see (every word must be in a "
            "message; any case).",
            maxLength=MAX_SEARCH_QUERY_CHARS,
        ),
    ]
    limit: Annotated[
        int, wire(f"Max results (default 20, clamped to {MAX_SEARCH_RESULTS}).", minimum=1)
    ] = 20
    sessionKey: Annotated[str | None, wire("Search only this session (a key or a sessionId).")] = (
        None
    )
    kinds: Annotated[
        frozenset[str] | None,
        wire(
            "Only sessions of these kinds.",
            items={"type": "string", "enum": list(SESSION_KINDS)},
        ),
    ] = None
    includeTools: Annotated[bool, wire("Search toolResult messages too (default false).")] = False

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        return require(data, "query", max_length=MAX_SEARCH_QUERY_CHARS)

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, value: Any) -> str | None:
        query = text("query", value, max_length=MAX_SEARCH_QUERY_CHARS)
        found = words_of(query or "")
        if not found:
            raise ValueError("query has no words to search for (letters or digits)")
        if len(found) > MAX_SEARCH_WORDS:
            raise ValueError(f"query has too many words ({len(found)}, max {MAX_SEARCH_WORDS})")
        return query

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, value: Any) -> int:
        return 20 if value is None else clamped_int("limit", value, low=1, high=MAX_SEARCH_RESULTS)

    @field_validator("sessionKey", mode="before")
    @classmethod
    def _key(cls, value: Any) -> str | None:
        return text("sessionKey", value)

    @field_validator("kinds", mode="before")
    @classmethod
    def _kinds(cls, value: Any) -> frozenset[str] | None:
        return session_kinds(value)

    @field_validator("includeTools", mode="before")
    @classmethod
    def _include_tools(cls, value: Any) -> bool:
        return flag("includeTools", value)


class AgentsListParams(ToolParams):
    tool: ClassVar[str] = "agents_list"


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
