"""Tool parameters: pydantic models that read what an agent sends the way OpenClaw does.

Strings are trimmed and an empty one counts as missing; numbers are floored and clamped;
a wrong type is an error with a message naming the parameter. Unknown parameters are
refused, so a misspelt one never silently does nothing.

This module holds what every tool's parameters share and the reading tools' models (list,
history, search, agents); the models of the tools that start or steer runs are
``run_params.py``'s, built only where such a tool is called (issue 38 item 7).
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
from sessionwire.domain.keys import SESSION_KINDS
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
