"""The agent-to-agent conversation's words: context texts, skip tokens, replies, targets.

Exact texts of openclaw-behaviour.md §6.3, §6.6 and §6.8; a line whose value is missing
is left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REPLY_SKIP = "REPLY_SKIP"
ANNOUNCE_SKIP = "ANNOUNCE_SKIP"
NO_REPLY = "NO_REPLY"
ANNOUNCE_MESSAGE = "Agent-to-agent announce step."


def is_reply_skip(text: str | None) -> bool:
    return (text or "").strip() == REPLY_SKIP


def is_announce_skip(text: str | None) -> bool:
    return (text or "").strip() == ANNOUNCE_SKIP


def is_silent(reply: str | None) -> bool:
    """A reply that says nothing: none, or only ``REPLY_SKIP`` or OpenClaw's silent token
    ``NO_REPLY`` (decision 37: a waited send answers ``no_reply`` for it)."""
    return reply is None or reply.strip() in (REPLY_SKIP, NO_REPLY) or not reply.strip()


def _lines(*lines: tuple[str, str | None] | str) -> str:
    out: list[str] = []
    for line in lines:
        if isinstance(line, str):
            out.append(line)
        else:
            template, value = line
            if value:
                out.append(template.format(value))
    return "\n".join(out)


def message_context(
    *, requester_key: str | None, requester_channel: str | None, target_display: str
) -> str:
    """Injected into the primary run of a ``sessions_send``."""
    return _lines(
        "Agent-to-agent message context:",
        ("Agent 1 (requester) session: {}.", requester_key),
        ("Agent 1 (requester) channel: {}.", requester_channel),
        ("Agent 2 (target) session: {}.", target_display),
    )


def reply_step_context(
    *,
    speaker_is_requester: bool,
    turn: int,
    max_turns: int,
    requester_key: str | None,
    requester_channel: str | None,
    target_display: str,
    target_channel: str | None,
) -> str:
    current = "Agent 1 (requester)" if speaker_is_requester else "Agent 2 (target)"
    return _lines(
        "Agent-to-agent reply step:",
        f"Current agent: {current}.",
        f"Turn {turn} of {max_turns}.",
        ("Agent 1 (requester) session: {}.", requester_key),
        ("Agent 1 (requester) channel: {}.", requester_channel),
        ("Agent 2 (target) session: {}.", target_display),
        ("Agent 2 (target) channel: {}.", target_channel),
        'If you want to stop the ping-pong, reply exactly "REPLY_SKIP".',
    )


def announce_step_context(
    *,
    requester_key: str | None,
    requester_channel: str | None,
    target_display: str,
    target_channel: str | None,
    original_message: str,
    round_one_reply: str | None,
    latest_reply: str | None,
) -> str:
    return _lines(
        "Agent-to-agent announce step:",
        ("Agent 1 (requester) session: {}.", requester_key),
        ("Agent 1 (requester) channel: {}.", requester_channel),
        ("Agent 2 (target) session: {}.", target_display),
        ("Agent 2 (target) channel: {}.", target_channel),
        f"Original request: {original_message}",
        f"Round 1 reply: {round_one_reply}"
        if round_one_reply
        else "Round 1 reply: (not available).",
        f"Latest reply: {latest_reply}" if latest_reply else "Latest reply: (not available).",
        'If you want to remain silent, reply exactly "ANNOUNCE_SKIP".',
        "Any other reply will be posted to the target channel.",
        "After this reply, the agent-to-agent conversation is over.",
    )


_THINKING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_MINIMAX_CALL = re.compile(r"<invoke\b.*?</invoke>|</?minimax:tool_call>", re.DOTALL)
# A downgraded tool call, and the blanks after it up to and across one line break, as
# OpenClaw's stripDowngradedToolCallText removes them ("Hello  [Tool Call: x] world" →
# "Hello  world", not "Hello   world").
_TOOL_MARKER = re.compile(r"\[Tool Call:[^\]]*\][ \t]*(?:\r\n|\r|\n)?[ \t]*", re.IGNORECASE)


def _strip_tool_calls(text: str) -> str:
    out: list[str] = []
    cursor = 0
    for match in _TOOL_MARKER.finditer(text):
        out.append(text[cursor : match.start()])
        cursor = match.end()
        # A marker on a line of its own leaves no blank line behind.
        kept = "".join(out)
        if text[cursor : cursor + 1] in {"\n", "\r"} and (not kept or kept.endswith(("\n", "\r"))):
            cursor += 2 if text[cursor : cursor + 2] == "\r\n" else 1
    out.append(text[cursor:])
    return "".join(out)


def reply_text(text: str | None) -> str | None:
    """What a reader sees of an agent's reply: no thinking, no tool-call markup (§6.8)."""
    if text is None:
        return None
    cleaned = _strip_tool_calls(_MINIMAX_CALL.sub("", _THINKING.sub("", text))).strip()
    return cleaned or None


@dataclass(frozen=True)
class AnnounceTarget:
    channel: str
    to: str
    account_id: str | None = None
    thread_id: str | None = None


_THREAD_SUFFIX = re.compile(r"^(?P<id>.+?):(?:topic|thread):(?P<thread>\d+)$")
# Channels whose plugins prefer the session's stored route (it carries the account).
_PREFER_SESSION_ROUTE = frozenset({"whatsapp"})
_KNOWN_CHANNELS = frozenset(
    {"whatsapp", "telegram", "discord", "slack", "signal", "imessage", "webchat", "msteams"}
)


def parse_announce_target(key: str) -> AnnounceTarget | None:
    """The chat a group or channel key names (§6.7 step 1); None for direct/main keys."""
    parts = key.split(":")
    if len(parts) >= 3 and parts[0] == "agent":
        parts = parts[2:]
    if len(parts) < 3 or parts[1] not in {"group", "channel"}:
        return None
    channel, kind, rest = parts[0].lower(), parts[1], ":".join(parts[2:])
    thread_id = None
    match = _THREAD_SUFFIX.match(rest)
    if match:
        rest, thread_id = match.group("id"), match.group("thread")
    if channel not in _KNOWN_CHANNELS:
        to = rest
    elif channel in {"discord", "slack"} or kind == "channel":
        to = f"channel:{rest}"
    elif channel == "whatsapp":
        to = rest
    else:
        to = f"group:{rest}"
    return AnnounceTarget(channel=channel, to=to, thread_id=thread_id)


def resolve_announce_target(
    key: str,
    *,
    stored_channel: str | None,
    stored_to: str | None,
    stored_account_id: str | None,
) -> AnnounceTarget | None:
    """§6.7: the key's own chat, or the session's stored route when the key has none."""
    parsed = parse_announce_target(key)
    if parsed is not None and parsed.channel not in _PREFER_SESSION_ROUTE:
        return parsed
    if stored_channel and stored_to:
        return AnnounceTarget(channel=stored_channel, to=stored_to, account_id=stored_account_id)
    return parsed


def report_route(
    requester_key: str,
    *,
    channel: str | None,
    to: str | None,
    account_id: str | None,
) -> AnnounceTarget | None:
    """Where a sub-agent's report goes (decisions 14, 15): the requester's recorded route;
    a group or channel requester with no recorded ``to`` is routed from its key, as the
    agent-to-agent announce is. The key's thread/topic id is kept either way."""
    parsed = parse_announce_target(requester_key)
    thread_id = parsed.thread_id if parsed else None
    if channel and to:
        return AnnounceTarget(channel=channel, to=to, account_id=account_id, thread_id=thread_id)
    if parsed is None:
        return None
    return AnnounceTarget(
        channel=parsed.channel, to=parsed.to, account_id=account_id, thread_id=thread_id
    )
