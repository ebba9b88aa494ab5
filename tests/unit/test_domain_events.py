"""Domain events carry the time they happened, given by the caller: no clock default."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import pytest
from pydantic import ValidationError
from sessionwire.domain.run import Run
from sessionwire.domain.session import MessageOrigin


def test_an_event_without_a_timestamp_is_refused() -> None:
    with pytest.raises(ValidationError, match="timestamp"):
        Run.RunFailed(originator_id=UUID(int=1), originator_version=2, error="x")  # type: ignore[call-arg]


def test_an_event_keeps_the_timestamp_it_was_given() -> None:
    moment = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    event = Run.RunFailed(
        originator_id=UUID(int=1), originator_version=2, error="x", timestamp=moment
    )
    assert event.timestamp == moment


@pytest.mark.parametrize("field", sorted(MessageOrigin.model_fields))
def test_an_origin_with_any_one_routing_field_is_not_empty(field: str) -> None:
    # is_empty names the fields one by one: a field added later must be named there too.
    assert MessageOrigin().is_empty()
    assert not MessageOrigin(**{field: "x"}).is_empty()
