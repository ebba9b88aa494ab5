"""Transcript messages in OpenClaw's raw format: ``{role, content: [blocks], timestamp, ...}``."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sessionwire.domain.keys import is_encodable

Role = Literal["user", "assistant", "toolResult"]
ROLES: tuple[Role, ...] = ("user", "assistant", "toolResult")

# One message's JSON may not exceed this; sessions_history caps whole answers at 6 MiB,
# so a single message larger than the cap could never be read back whole.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# What a message's text may take of that, leaving room for the message's other fields.
MAX_TEXT_BYTES = MAX_MESSAGE_BYTES - 4096


def text_json_bytes(text: str) -> int:
    """The size of ``text`` as a JSON string in a stored message (escapes counted)."""
    # JSON-escaping makes a character at most 6 bytes: only a long text pays for encoding.
    if 6 * len(text) + 2 <= MAX_TEXT_BYTES:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))


class Usage(BaseModel):
    """Token usage of one assistant message (OpenClaw field names)."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    input: int = Field(default=0, ge=0)
    output: int = Field(default=0, ge=0)
    cacheRead: int | None = Field(default=None, ge=0)
    cacheWrite: int | None = Field(default=None, ge=0)
    totalTokens: int | None = Field(default=None, ge=0)


class TranscriptMessage(BaseModel):
    """One message; unknown fields (toolCallId, stopReason, ...) are kept as recorded."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    role: Role
    content: list[dict[str, Any]]
    timestamp: int = Field(ge=0, description="milliseconds since the epoch")
    usage: Usage | None = None
    model: str | None = None

    @field_validator("content")
    @classmethod
    def _blocks_are_typed(cls, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, block in enumerate(blocks):
            if _plain_text(block):
                continue
            kind = block.get("type")
            if not isinstance(kind, str) or not kind:
                raise ValueError(f"content block {index} needs a string 'type'")
            if kind == "text" and not isinstance(block.get("text"), str):
                raise ValueError(f"content block {index} is a text block without a string 'text'")
            problem = _not_json(block)
            if problem:
                raise ValueError(f"content block {index} {problem}")
        return blocks

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)

    def text(self) -> str:
        """The text blocks joined, as a reader would see them."""
        return "".join(b["text"] for b in self.content if b.get("type") == "text")


def _plain_text(block: dict[str, Any]) -> bool:
    """A block of exactly ``type: text`` and valid text: most blocks, checked without the
    general walk below (this runs for every recorded message)."""
    if len(block) != 2 or block.get("type") != "text":
        return False
    text = block.get("text")
    return type(text) is str and is_encodable(text)


def _not_json(value: Any) -> str | None:
    """Why ``value`` cannot be stored as JSON text, or None: transcripts are JSON."""
    if isinstance(value, float):
        return None if math.isfinite(value) else "holds NaN or Infinity, which JSON has not"
    if isinstance(value, str):
        return None if is_encodable(value) else "holds text that is not valid Unicode"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return "has a key that is not a string"
            problem = _not_json(key) or _not_json(item)
            if problem:
                return problem
        return None
    if isinstance(value, list | tuple):
        return next((p for p in map(_not_json, value) if p), None)
    if value is None or isinstance(value, bool | int):
        return None
    return f"holds a {type(value).__name__}, which is not JSON"


def content_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A string becomes one text block; a list of blocks is taken as it is."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(isinstance(block, dict) for block in content):
        return [dict(block) for block in content]
    raise ValueError("content must be a string or a list of content blocks (objects with 'type')")


_ENVELOPE = re.compile(r"^\[([^\]\n]{1,200})\] ")
_ENVELOPE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2})")
_CHANNEL_LABELS = (
    "WebChat ",
    "WhatsApp ",
    "Telegram ",
    "Signal ",
    "Slack ",
    "Discord ",
    "iMessage ",
    "Teams ",
    "Matrix ",
)
_MESSAGE_ID_LINE = re.compile(r"^\s*\[message_id:[^\]]*\]\s*$")


def strip_envelope(text: str) -> str:
    """Remove a channel envelope header and ``[message_id: …]`` lines from user text."""
    match = _ENVELOPE.match(text)
    if match:
        header = match.group(1)
        if _ENVELOPE_TIME.search(header) or header.startswith(_CHANNEL_LABELS):
            text = text[match.end() :]
    if "[message_id:" in text:
        text = "\n".join(line for line in text.split("\n") if not _MESSAGE_ID_LINE.match(line))
    return text


def clean_for_reader(message: dict[str, Any]) -> dict[str, Any]:
    """A stored message as ``chat.history`` returns it: user text without channel envelopes."""
    if message.get("role") != "user":
        return message
    content = message.get("content")
    if not isinstance(content, list):
        return message
    cleaned = [
        {**block, "text": strip_envelope(block["text"])}
        if block.get("type") == "text" and isinstance(block.get("text"), str)
        else block
        for block in content
    ]
    return {**message, "content": cleaned}
