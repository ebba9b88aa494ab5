"""An export's event line read in one pydantic pass (application/audit/export.py
``_event_line``) gives what json.loads and validation give, or steps aside for them."""

from __future__ import annotations

import json

import pytest
from sessionwire.application.audit.export import ExportedEvent, _event_line

LINE = {
    "type": "event",
    "notification_id": 1,
    "originator_id": "d811266e-e5ad-5a7e-a339-4bb87b2e8991",
    "originator_version": 1,
    "topic": "sessionwire.domain.session:Session.SessionOpened",
    "state": '{"timestamp":"2026-05-01T12:00:00Z"}',
    "stream_hash": "82" * 32,
    "log_hash": "67" * 32,
    "log_seq": 1,
}


def text(**changes: object) -> str:
    return json.dumps({**LINE, **changes}, separators=(",", ":"))


CASES = [
    text(),
    text() + "\n",
    text(notification_id=1.0),
    text(notification_id="1"),
    text(originator_version=True),
    text(state=None, state_base64="e30="),
    text(state=None),
    text(state="a\ud800b"),
    text(log_hash=None),
    text(log_hash=None, log_seq=None),
    text(stream_hash="zz"),
    text(extra=1),
    text(originator_id="D811266E-E5AD-5A7E-A339-4BB87B2E8991"),
    text(originator_id="d811266ee5ad5a7ea3394bb87b2e8991"),
    text()[:-1] + ',"log_seq":2}',
    text() + " x",
    text().replace('"state":', '"state" :'),
]


def checked(line: str) -> object:
    try:
        return ExportedEvent.model_validate(json.loads(line)).to_record()
    except ValueError as error:
        return f"refused: {error}"


@pytest.mark.parametrize("line", CASES)
def test_one_pass_gives_what_the_checked_way_gives(line: str) -> None:
    fast = _event_line(line)
    if fast is not None:
        assert fast == checked(line)


def test_the_one_pass_takes_an_ordinary_line() -> None:
    assert _event_line(text()) is not None
    assert _event_line(text(notification_id=1.0)) is None
