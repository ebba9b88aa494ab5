"""Transcript messages and chat.history's user-message cleaning (openclaw-behaviour.md §5)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from sessionwire.domain.transcript import (
    TranscriptMessage,
    clean_for_reader,
    content_blocks,
    strip_envelope,
)

TEXT_HI = [{"type": "text", "text": "hi"}]


# --- TranscriptMessage validation -----------------------------------------------------


@pytest.mark.parametrize("role", ["user", "assistant", "toolResult"])
def test_message_roles_accepted(role: str) -> None:
    message = TranscriptMessage(role=role, content=TEXT_HI, timestamp=0)  # type: ignore[arg-type]
    assert message.role == role


@pytest.mark.parametrize(
    ("fields", "error_fragment"),
    [
        pytest.param({"role": "system"}, "role", id="role-system"),
        pytest.param({"role": "User"}, "role", id="role-case-sensitive"),
        pytest.param({"role": "tool"}, "role", id="role-tool"),
        pytest.param(
            {"content": [{"text": "x"}]}, "content block 0 needs a string 'type'", id="no-type"
        ),
        pytest.param(
            {"content": [{"type": 5}]},
            "content block 0 needs a string 'type'",
            id="type-not-string",
        ),
        pytest.param(
            {"content": [{"type": ""}]}, "content block 0 needs a string 'type'", id="type-empty"
        ),
        pytest.param(
            {"content": [{"type": "text", "text": "a"}, {"type": "text"}]},
            "content block 1 is a text block without a string 'text'",
            id="text-missing",
        ),
        pytest.param(
            {"content": [{"type": "text", "text": 5}]},
            "content block 0 is a text block without a string 'text'",
            id="text-not-string",
        ),
        pytest.param({"content": "hi"}, "content", id="content-string-not-list"),
        pytest.param({"content": ["hi"]}, "content", id="block-not-object"),
        pytest.param({"timestamp": -1}, "timestamp", id="negative-timestamp"),
        pytest.param({"timestamp": None}, "timestamp", id="missing-timestamp"),
        pytest.param({"usage": {"input": -1}}, "usage.input", id="negative-usage"),
    ],
)
def test_message_rejects(fields: dict[str, Any], error_fragment: str) -> None:
    data: dict[str, Any] = {"role": "user", "content": TEXT_HI, "timestamp": 1, **fields}
    with pytest.raises(ValidationError) as raised:
        TranscriptMessage.model_validate(data)
    assert error_fragment in str(raised.value)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param([], id="no-blocks"),
        pytest.param([{"type": "text", "text": ""}], id="empty-text"),
        pytest.param([{"type": "image", "data": "b64", "mimeType": "image/png"}], id="image"),
        pytest.param(
            [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}], id="tool-call"
        ),
        pytest.param([{"type": "thinking", "thinking": "hmm"}], id="thinking"),
    ],
)
def test_message_accepts_blocks(content: list[dict[str, Any]]) -> None:
    message = TranscriptMessage(role="assistant", content=content, timestamp=0)
    assert message.content == content


def test_message_keeps_unknown_fields_and_serialises_compactly() -> None:
    message = TranscriptMessage.model_validate(
        {
            "role": "toolResult",
            "content": [{"type": "text", "text": "é"}],
            "timestamp": 1700000000000,
            "toolCallId": "call-1",
            "isError": False,
        }
    )
    assert message.to_json() == (
        '{"role":"toolResult","content":[{"type":"text","text":"é"}],'
        '"timestamp":1700000000000,"toolCallId":"call-1","isError":false}'
    )


def test_message_text_joins_text_blocks_only() -> None:
    message = TranscriptMessage(
        role="assistant",
        content=[
            {"type": "text", "text": "a"},
            {"type": "toolCall", "id": "c", "name": "x", "arguments": {}},
            {"type": "text", "text": "b"},
        ],
        timestamp=0,
    )
    assert message.text() == "ab"


# --- content_blocks ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("hi", [{"type": "text", "text": "hi"}], id="string"),
        pytest.param("", [{"type": "text", "text": ""}], id="empty-string"),
        pytest.param([], [], id="empty-list"),
        pytest.param(
            [{"type": "image", "data": "x"}, {"type": "text", "text": "y"}],
            [{"type": "image", "data": "x"}, {"type": "text", "text": "y"}],
            id="list-kept",
        ),
    ],
)
def test_content_blocks(content: Any, expected: list[dict[str, Any]]) -> None:
    assert content_blocks(content) == expected


def test_content_blocks_copies_the_blocks() -> None:
    original = [{"type": "text", "text": "x"}]
    blocks = content_blocks(original)
    blocks[0]["text"] = "changed"
    assert original == [{"type": "text", "text": "x"}]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(None, id="none"),
        pytest.param(5, id="int"),
        pytest.param({"type": "text", "text": "x"}, id="single-block-not-in-list"),
        pytest.param(["hi"], id="list-of-strings"),
        pytest.param([{"type": "text", "text": "x"}, 3], id="mixed-list"),
        pytest.param(b"hi", id="bytes"),
    ],
)
def test_content_blocks_rejects(content: Any) -> None:
    with pytest.raises(ValueError, match="content must be a string or a list of content blocks"):
        content_blocks(content)


# --- strip_envelope ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "[WhatsApp +1555 2026-01-27T10:00Z] hello", "hello", id="channel-and-iso-time"
        ),
        pytest.param("[2026-01-27T10:00:00.000Z] hello", "hello", id="iso-timestamp"),
        pytest.param("[Alice 2026-01-27 10:00] hello", "hello", id="space-separated-time"),
        pytest.param("[WhatsApp +1555 …] hello", "hello", id="whatsapp-label"),
        pytest.param("[WebChat user] hi", "hi", id="webchat-label"),
        pytest.param("[Telegram Bob (@bob)] hi", "hi", id="telegram-label"),
        pytest.param("[Discord #dev] hi", "hi", id="discord-label"),
        pytest.param("[Signal +44] hi", "hi", id="signal-label"),
        pytest.param("[Slack #general] hi", "hi", id="slack-label"),
        pytest.param("[iMessage +1] hi", "hi", id="imessage-label"),
        pytest.param(
            "[Discord #dev] line one\nline two", "line one\nline two", id="rest-kept-verbatim"
        ),
        pytest.param(
            "[Discord #dev] [WhatsApp +1] hi", "[WhatsApp +1] hi", id="only-one-header-removed"
        ),
        pytest.param("[note] hello", "[note] hello", id="no-timestamp-no-label-kept"),
        pytest.param("[Bob] hello", "[Bob] hello", id="name-only-kept"),
        pytest.param("[WhatsApp] hi", "[WhatsApp] hi", id="label-needs-trailing-space"),
        pytest.param("[whatsapp +1] hi", "[whatsapp +1] hi", id="label-case-sensitive"),
        pytest.param("[Unknown +1] hi", "[Unknown +1] hi", id="unknown-label-kept"),
        pytest.param(
            "hi [WhatsApp +1555 2026-01-27T10:00Z] x",
            "hi [WhatsApp +1555 2026-01-27T10:00Z] x",
            id="header-must-lead",
        ),
        pytest.param(
            "[WhatsApp +1555 2026-01-27T10:00Z]hello",
            "[WhatsApp +1555 2026-01-27T10:00Z]hello",
            id="header-needs-space-after",
        ),
        pytest.param("plain text", "plain text", id="plain"),
        pytest.param("", "", id="empty"),
        pytest.param("hello\n[message_id: 123]", "hello", id="message-id-line"),
        pytest.param("hello\n  [message_id: abc-1]  \nbye", "hello\nbye", id="indented-id-line"),
        pytest.param("[message_id: 1]\nhello", "hello", id="leading-id-line"),
        pytest.param("a\n[message_id: 1]\nb\n[message_id: 2]", "a\nb", id="every-message-id-line"),
        pytest.param("see [message_id: 1] above", "see [message_id: 1] above", id="inline-id-kept"),
        pytest.param(
            "[message_id: 1] and more", "[message_id: 1] and more", id="id-line-with-text-kept"
        ),
        pytest.param(
            "[WhatsApp +1555 2026-01-27T10:00Z] hi\n[message_id: ABC]",
            "hi",
            id="header-and-message-id",
        ),
    ],
)
def test_strip_envelope(text: str, expected: str) -> None:
    assert strip_envelope(text) == expected


# --- clean_for_reader -------------------------------------------------------------------


def _msg(role: str, content: Any) -> dict[str, Any]:
    return {"role": role, "content": content, "timestamp": 5}


ENVELOPED = "[WhatsApp +1555 2026-01-27T10:00Z] hello\n[message_id: 9]"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(
            _msg("user", [{"type": "text", "text": ENVELOPED}]),
            _msg("user", [{"type": "text", "text": "hello"}]),
            id="user-text-cleaned",
        ),
        pytest.param(
            _msg(
                "user",
                [
                    {"type": "text", "text": "[Discord #dev] a"},
                    {"type": "image", "data": "x"},
                    {"type": "text", "text": "[Discord #dev] b"},
                ],
            ),
            _msg(
                "user",
                [
                    {"type": "text", "text": "a"},
                    {"type": "image", "data": "x"},
                    {"type": "text", "text": "b"},
                ],
            ),
            id="every-text-block-other-blocks-kept",
        ),
        pytest.param(
            {**_msg("user", [{"type": "text", "text": "[Discord #dev] a", "x": 1}]), "id": "m1"},
            {**_msg("user", [{"type": "text", "text": "a", "x": 1}]), "id": "m1"},
            id="other-fields-kept",
        ),
        pytest.param(
            _msg("assistant", [{"type": "text", "text": ENVELOPED}]),
            _msg("assistant", [{"type": "text", "text": ENVELOPED}]),
            id="assistant-untouched",
        ),
        pytest.param(
            _msg("toolResult", [{"type": "text", "text": ENVELOPED}]),
            _msg("toolResult", [{"type": "text", "text": ENVELOPED}]),
            id="tool-result-untouched",
        ),
        pytest.param(
            _msg("user", ENVELOPED), _msg("user", ENVELOPED), id="string-content-untouched"
        ),
        pytest.param(
            _msg("user", [{"type": "text", "text": 5}]),
            _msg("user", [{"type": "text", "text": 5}]),
            id="non-string-text-untouched",
        ),
    ],
)
def test_clean_for_reader(message: dict[str, Any], expected: dict[str, Any]) -> None:
    assert clean_for_reader(message) == expected


def test_clean_for_reader_does_not_change_the_stored_message() -> None:
    stored = _msg("user", [{"type": "text", "text": ENVELOPED}])
    clean_for_reader(stored)
    assert stored == _msg("user", [{"type": "text", "text": ENVELOPED}])


def test_clean_for_reader_returns_assistant_message_itself() -> None:
    message = _msg("assistant", [{"type": "text", "text": ENVELOPED}])
    assert clean_for_reader(message) is message
