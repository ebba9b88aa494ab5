"""Transcript lines read two ways (adapters/importers/openclaw.py): the one pydantic pass
from the line's text, and the checked way (json.loads, the reader's checks, then the
model). Whatever the first takes must come out exactly as the second gives it; what it
refuses goes the checked way, which gives the reason, in line order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from sessionwire.adapters.importers.history_import import Problem
from sessionwire.adapters.importers.openclaw import (
    CHECK_BATCH,
    MAX_DEPTH,
    TranscriptLines,
    _message_data,
    _one_pass,
    read_transcript,
)
from sessionwire.domain.transcript import TranscriptMessage

M = '"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":5'
MAX_MILLIS_PLUS_ONE = 253_402_300_800_000


def with_m(text: str) -> str:
    return text.replace("<M>", M)


LINES = [
    with_m('{"message":{<M>}}'),
    with_m('{"type":"message","id":"m1","message":{<M>},"timestamp":"2026-01-01T00:00:00Z"}'),
    with_m('{"message":{<M>,"role":"bogus"}}'),
    with_m('{"message":{"role":"bogus",<M>}}'),
    with_m('{"message":{<M>},"message":{"role":"bogus"}}'),
    with_m('{"message":{"role":"x"},"message":{<M>}}'),
    '{"message":{"role":"user","content":[{"type":"text","text":"\\ud800"}],"timestamp":5}}',
    with_m('{"message":{<M>,"x":"\\ud800"}}'),
    with_m('{"message":{<M>,"x":"\\udc00"}}'),
    with_m('{"message":{<M>,"x":"\\ud83d\\ude00 \\u00e9 é 😀 \\u0000\\/\\"\\\\"}}'),
    with_m('{"message":{<M>,"x":NaN,"y":Infinity,"z":-Infinity,"w":1e400}}'),
    with_m('{"message":{<M>,"x":-0.0,"y":-0,"z":0.1,"w":5e-324,"v":2.2250738585072014e-308}}'),
    with_m('{"message":{<M>,"x":1.00000000000000011102230246251565404236316680908203125}}'),
    with_m('{"message":{<M>,"x":1E5,"y":1e-7,"z":1.5E+3,"w":9e15}}'),
    with_m('{"message":{<M>,"x":123456789012345678901234567890}}'),
    with_m('{"message":{<M>,"x":' + "1" * 4300 + "}}"),
    with_m('{"message":{<M>,"x":' + "1" * 4301 + "}}"),
    with_m('{"message":{<M>,"x":"a\tb"}}'),
    with_m('{"message":{<M>,"x":"a\x01b"}}'),
    with_m('{"message":{<M>,"x":"a\x7fb"}}'),
    with_m('{"message":{<M>,"x":"\\x41"}}'),
    with_m('{"message":{<M>,"x":01}}'),
    with_m('{"message":{<M>,"x":.5}}'),
    with_m('{"message":{<M>,"x":true,"y":false,"z":null,"a":{"b":[[[[1]]]]}}}'),
    with_m('{"message":{<M>,"d":{"a":1,"b":2,"a":3}}}'),
    with_m('\ufeff{"message":{<M>}}'),
    with_m('{"message":{<M>}}\r\n'),
    with_m('  {"message":{<M>}}  '),
    with_m('{"message":{<M>}} x'),
    with_m('{"message":{<M>}}{}'),
    with_m('{"message":{<M>},}'),
    with_m('{"message":{<M>,}}'),
    "{'message':{}}",
    '{"message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":5.0}}',
    '{"message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":"5"}}',
    '{"message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":true}}',
    '{"message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1e3}}',
    '{"message":{"role":"user","content":[],"timestamp":-1},"timestamp":7}',
    '{"message":{"role":"user","content":[],"timestamp":'
    + str(MAX_MILLIS_PLUS_ONE)
    + '},"timestamp":7}',
    '{"message":{"role":"user","content":[],"timestamp":' + str(MAX_MILLIS_PLUS_ONE - 1) + "}}",
    '{"message":{"role":"user","content":[]},"timestamp":"2026-01-01T00:00:00"}',
    '{"message":{"role":"user","content":"hi","timestamp":5}}',
    '{"message":{"role":"user","timestamp":5}}',
    '{"message":{"role":"user","content":[1],"timestamp":5}}',
    '{"message":{"role":"user","content":[{"type":"image","data":"x","n":1.5}],"timestamp":5}}',
    '{"message":{"role":"user","content":[{"type":"text","text":"hi","k":[1,{"a":null}]}],'
    '"timestamp":5}}',
    '{"message":{"role":"user","content":[{"type":"text"}],"timestamp":5}}',
    '{"message":{"role":"user","content":[{"text":"hi"}],"timestamp":5}}',
    '{"message":{"role":"assistant","content":[],"timestamp":5,'
    '"usage":{"input":1,"output":2,"cost":{"total":0.5}},"model":"m","stopReason":"stop"}}',
    '{"message":{"role":"assistant","content":[],"timestamp":5,"usage":{"input":1.0}}}',
    '{"message":{"role":"assistant","content":[],"timestamp":5,"usage":{"input":-1}}}',
    '{"message":{"role":"assistant","content":[],"timestamp":5,"usage":null,"model":null}}',
    '{"message":{"role":"assistant","content":[],"timestamp":5,"model":5}}',
    '{"message":{"role":"toolResult","content":[],"timestamp":5,"toolCallId":"c","isError":false}}',
    '{"message":{"role":"user","content":[],"timestamp":5,"\\ud800":1}}',
    '{"message":{"role":"user","content":[],"timestamp":5,"x":' + "[" * 70 + "]" * 70 + "}}",
    '{"message":{"role":"user","content":[],"timestamp":5,"x":' + "[" * 60 + "]" * 60 + "}}",
    '{"message":null}',
    '{"message":[]}',
    '{"type":"session","version":3}',
    "[1]",
    "null",
]


def checked(text: str) -> TranscriptMessage | str | None:
    """The checked way: the message, the reason the line is refused, or None (no message)."""
    try:
        data = _message_data(text)
        return None if data is None else TranscriptMessage.model_validate(data)
    except (ValueError, ValidationError) as error:
        return str(error)


def same(a: TranscriptMessage, b: TranscriptMessage) -> bool:
    # repr: NaN is not equal to itself; the fields set decide what a dump leaves out.
    return (
        repr(a) == repr(b)
        and a.model_fields_set == b.model_fields_set
        and repr(a.model_extra) == repr(b.model_extra)
        and repr(a.model_dump(exclude_none=True)) == repr(b.model_dump(exclude_none=True))
    )


@pytest.mark.parametrize("text", LINES)
def test_one_pass_gives_what_the_checked_way_gives(text: str) -> None:
    fast = _one_pass(text)
    if fast is None:
        return  # the checked way alone decides
    slow = checked(text)
    assert isinstance(slow, TranscriptMessage), f"one pass took a line the checks refuse: {slow}"
    assert same(fast, slow)


def test_the_one_pass_takes_ordinary_lines_and_refuses_the_odd_ones() -> None:
    taken = [text for text in LINES if _one_pass(text) is not None]
    assert with_m('{"message":{<M>}}') in taken
    # What json.loads refuses, the reader's checks refuse, or needs a conversion:
    for text in (
        with_m('{"message":{<M>,"x":"a\tb"}}'),
        with_m('{"message":{<M>}} x'),
        '{"message":{"role":"user","content":[],"timestamp":' + str(MAX_MILLIS_PLUS_ONE) + "}}",
        '{"message":{"role":"user","content":"hi","timestamp":5}}',
        with_m('{"message":{<M>,"x":' + "1" * 4301 + "}}"),
        '{"message":{"role":"user","content":[],"timestamp":5,"x":'
        + "[" * (MAX_DEPTH + 1)
        + "]" * (MAX_DEPTH + 1)
        + "}}",
    ):
        assert _one_pass(text) is None, text


def test_problems_and_messages_keep_line_order_across_batches(tmp_path: Path) -> None:
    """Lines either way, bad ones among them, over more than one validation batch: each
    problem names its line, in order, and every good line is imported once, in order."""
    good = '{"message":{"role":"user","content":[{"type":"text","text":"n%d"}],"timestamp":5}}'
    converted = '{"message":{"role":"assistant","content":"c%d","timestamp":5}}'
    bad_model = '{"message":{"role":"user","content":[{"type":"text"}],"timestamp":5}}'
    lines: list[str] = []
    expected_problems: list[tuple[int, str]] = []
    for n in range(1, CHECK_BATCH * 2 + 10):
        if n % 700 == 0:
            lines.append(bad_model)
            expected_problems.append((n, "invalid message: content block 0 is a text block"))
        elif n % 501 == 0:
            lines.append("{not json")
            expected_problems.append((n, "not JSON"))
        elif n % 3 == 0:
            lines.append(converted % n)
        else:
            lines.append(good % n)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    problems: list[Problem] = []
    messages = read_transcript(path, problems)
    assert len(problems) == len(expected_problems)
    for problem, (line, why) in zip(problems, expected_problems, strict=True):
        assert (problem.line, problem.reason[: len(why)]) == (line, why)
    bad = {line for line, _ in expected_problems}
    assert [m.line for m in messages] == [n for n in range(1, len(lines) + 1) if n not in bad]
    for m in messages:
        assert m.message.text() in (f"n{m.line}", f"c{m.line}")
        expected = json.loads(lines[m.line - 1])["message"]
        assert m.message.role == expected["role"]


def test_a_line_the_one_pass_refuses_is_still_checked(tmp_path: Path) -> None:
    problems: list[Problem] = []
    lines = TranscriptLines("f", problems)
    lines.add(1, '{"message":{"role":"user","content":"plain","timestamp":5}}')
    lines.add(2, '{"message":{"role":"nobody","content":[],"timestamp":5}}')
    lines.add(3, "   ")
    lines.add(4, '{"type":"session"}')
    messages = lines.finish()
    assert [(m.line, m.message.text()) for m in messages] == [(1, "plain")]
    assert [(p.line, p.reason) for p in problems] == [
        (2, "role 'nobody' is not one of user, assistant, toolResult")
    ]


def test_a_file_line_that_is_not_utf8_is_read_with_replacement_characters(
    tmp_path: Path,
) -> None:
    """The one pass takes valid UTF-8 alone; other bytes are decoded as before (each bad
    byte a U+FFFD) and checked."""
    good = '{"message":{"role":"user","content":[{"type":"text","text":"é"}],"timestamp":5}}'
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        good.encode()
        + b"\n"
        + good.encode().replace("é".encode(), b"\xff\xc3")
        + b"\n"
        + b'{"message":{"role":"user","content":[],"timestamp":5},"x":"\xed\xa0\x80"}\n'
        + b"  \n"
    )
    assert _one_pass(path.read_bytes().splitlines()[1]) is None
    problems: list[Problem] = []
    messages = read_transcript(path, problems)
    assert problems == []
    assert [(m.line, m.message.text()) for m in messages] == [
        (1, "é"),
        (2, "\ufffd\ufffd"),
        (3, ""),
    ]
