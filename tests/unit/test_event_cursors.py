"""Session-bound subscribers' event ids (issue 27): sealed positions that resume exactly
and tell a subscriber nothing about the events it may not see."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sessionwire.adapters.cli.checkpoint_key import KEY_ENV, event_cursor_key
from sessionwire.adapters.cli.context import CommandFailed
from sessionwire.adapters.http.event_cursors import EventCursors

SECRET = bytes(range(32))


def test_a_sealed_id_opens_to_the_cursor_it_seals_for_its_own_session_only() -> None:
    cursors = EventCursors(SECRET)
    for cursor in ("0", "7", "12.3", str(2**63 - 1)):
        sealed = cursors.seal("agent:work:main", cursor)
        assert len(sealed) == 22
        assert cursors.open("agent:work:main", sealed) == cursor
        with pytest.raises(ValueError, match="not an event id"):
            cursors.open("agent:other:main", sealed)


def test_neighbouring_positions_seal_to_unrelated_ids() -> None:
    cursors = EventCursors(SECRET)
    sealed = [cursors.seal("agent:work:main", str(position)) for position in range(1, 50)]
    assert len(set(sealed)) == len(sealed)
    # Nothing of the order survives: sorting the ids does not sort the positions.
    assert sorted(sealed) != sealed


def test_the_same_secret_opens_ids_across_restarts_and_another_does_not() -> None:
    sealed = EventCursors(SECRET).seal("agent:work:main", "41")
    assert EventCursors(SECRET).open("agent:work:main", sealed) == "41"
    with pytest.raises(ValueError, match="not an event id"):
        EventCursors(bytes(32)).open("agent:work:main", sealed)


@pytest.mark.parametrize("garbled", ["", "41", "not base64 at all!!!!!", "A" * 22, "A" * 23])
def test_anything_not_sealed_here_is_refused(garbled: str) -> None:
    with pytest.raises(ValueError, match="not an event id"):
        EventCursors(SECRET).open("agent:work:main", garbled)


def test_serve_keeps_its_cursor_secret_private_beside_the_checkpoint_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "keys" / "checkpoint.key"))
    made = event_cursor_key()
    path = tmp_path / "keys" / "event-cursors.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert event_cursor_key() == made  # kept: ids resume across restarts
    os.chmod(path, 0o644)
    with pytest.raises(CommandFailed, match="open to other users"):
        event_cursor_key()
