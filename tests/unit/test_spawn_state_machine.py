"""The sub-agent spawn driven event by event (domain/spawn.py): what ``Spawn.next_step``
asks for after each recorded event, with no store and no clock.

spawned (the child's task run started) → the run ends once: ok, error or timeout → an
announce run in the child → its reply announced to the requester, or skipped
(ANNOUNCE_SKIP) → the child is deleted at once (cleanup "delete"), archived
``archive_after_minutes`` after its run ended (cleanup "keep"), or kept for good
(archiving off). Each example checks that replaying the recorded events gives the same
state.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid5

import pytest
from event_replay import event_names, replayed
from sessionwire.domain.session import to_millis
from sessionwire.domain.spawn import (
    Announce,
    ArchiveAt,
    AwaitChildRun,
    Cleanup,
    DeleteChild,
    Spawn,
    StartAnnounceRun,
    spawn_id_for,
)
from sessionwire.domain.subagent_announce import SUBAGENT_ANNOUNCE_MESSAGE
from sessionwire.domain.transcript import Usage

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
RUN_ID = UUID(int=3)
CHILD = "agent:main:subagent:0b5e"
REQUESTER = "agent:main:main"
MINUTE_MS = 60_000


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Recorder:
    """A spawn and every event it recorded, collected as it goes."""

    def __init__(self, spawn: Spawn) -> None:
        self.spawn = spawn
        self.events: list[object] = []

    def new_events(self) -> list[str]:
        fresh = self.spawn.collect_events()
        self.events.extend(fresh)
        return event_names(fresh)

    def assert_replays(self) -> None:
        self.new_events()
        assert replayed(self.events, Spawn).state == self.spawn.state


def spawned(cleanup: Cleanup = "keep", archive_after_minutes: float | None = 60) -> Recorder:
    return Recorder(
        Spawn.spawn(
            run_id=RUN_ID,
            child_key=CHILD,
            agent_id="main",
            requester_key=REQUESTER,
            requester_display="main",
            task="sum up   the\nlogs",
            label="logs",
            model=None,
            run_timeout_seconds=0,
            cleanup=cleanup,
            archive_after_minutes=archive_after_minutes,
            at=T0,
        )
    )


def run_ended(recorder: Recorder, outcome: str = "ok", error: str | None = None) -> None:
    recorder.spawn.run_ended(
        outcome=outcome,  # type: ignore[arg-type]
        error=error,
        started_at=None,
        ended_at=to_millis(at(10)),
        usage=None,
        at=at(10),
    )


def announce_replied(
    reply: str | None = "Result: done\nNotes: none",
    cleanup: Cleanup = "keep",
    archive_after_minutes: float | None = 60,
) -> Recorder:
    recorder = spawned(cleanup, archive_after_minutes)
    run_ended(recorder)
    step = recorder.spawn.next_step()
    assert isinstance(step, StartAnnounceRun)
    recorder.spawn.request_announce(step.run_id, at=at(11))
    recorder.spawn.record_announce_reply(reply, at=at(12))
    return recorder


def announced(cleanup: Cleanup = "keep", archive_after_minutes: float | None = 60) -> Recorder:
    recorder = announce_replied(cleanup=cleanup, archive_after_minutes=archive_after_minutes)
    recorder.spawn.announced(
        message="Status: ok\nResult: done", channel="whatsapp", to="+1", account_id=None, at=at(13)
    )
    return recorder


# Spawned and the child's run -----------------------------------------------------------


def test_a_spawn_records_the_child_run_starting_and_waits_for_it() -> None:
    recorder = spawned()
    spawn = recorder.spawn
    assert recorder.new_events() == ["SubagentSpawned", "SubagentRunStarted"]
    assert spawn.id == spawn_id_for(CHILD)
    state = spawn.state
    assert (state.status, state.outcome, state.started_at) == ("running", None, to_millis(T0))
    assert (state.child_key, state.requester_key, state.cleanup) == (CHILD, REQUESTER, "keep")
    assert spawn.next_step() == AwaitChildRun(run_id=str(RUN_ID))
    recorder.assert_replays()


@pytest.mark.parametrize(
    ("outcome", "error"),
    [("ok", None), ("error", "RuntimeError: boom"), ("timeout", "run timed out after 30s")],
)
def test_the_child_run_ending_in_any_way_leads_to_the_announce_run(
    outcome: str, error: str | None
) -> None:
    recorder = spawned()
    spawn = recorder.spawn
    usage = Usage(input=3, output=2, totalTokens=5)
    spawn.run_ended(
        outcome=outcome,  # type: ignore[arg-type]
        error=error,
        started_at=to_millis(at(1)),
        ended_at=to_millis(at(10)),
        usage=usage,
        at=at(10),
    )
    assert recorder.new_events()[-1] == "SubagentRunEnded"
    state = spawn.state
    assert (state.status, state.outcome, state.error, state.usage) == (
        "announcing",
        outcome,
        error,
        usage,
    )
    assert (state.started_at, state.ended_at) == (to_millis(at(1)), to_millis(at(10)))
    assert spawn.next_step() == StartAnnounceRun(
        run_id=uuid5(spawn.id, "announce"),
        session_key=CHILD,
        message=SUBAGENT_ANNOUNCE_MESSAGE,
        context=(
            "Sub-agent announce step:\nTask: sum up the logs\nLabel: logs\n"
            "Requester session: main.\n"
            "Reply with the outcome in two sections:\n"
            "Result: what you accomplished or found.\n"
            "Notes: anything the requester should know (or none).\n"
            'Reply exactly "ANNOUNCE_SKIP" only if the task failed completely and there is '
            "nothing to report.\nYour reply will be posted to the requester's chat."
        ),
    )
    recorder.assert_replays()


def test_a_run_end_without_a_start_time_keeps_the_recorded_one() -> None:
    recorder = spawned()
    run_ended(recorder)  # started_at=None
    assert recorder.spawn.state.started_at == to_millis(T0)
    recorder.assert_replays()


def test_a_late_second_run_end_is_ignored() -> None:
    """A timeout noticed after the run completed changes nothing."""
    recorder = spawned()
    run_ended(recorder, "ok")
    recorder.new_events()
    recorder.spawn.run_ended(
        outcome="timeout",
        error="run timed out after 30s",
        started_at=None,
        ended_at=to_millis(at(40)),
        usage=None,
        at=at(40),
    )
    assert recorder.new_events() == []
    assert (recorder.spawn.state.outcome, recorder.spawn.state.ended_at) == (
        "ok",
        to_millis(at(10)),
    )
    recorder.assert_replays()


# The announce run ----------------------------------------------------------------------


def test_the_announce_run_is_requested_once_and_awaited_until_it_replies() -> None:
    recorder = spawned()
    run_ended(recorder)
    spawn = recorder.spawn
    step = spawn.next_step()
    assert isinstance(step, StartAnnounceRun)
    spawn.request_announce(step.run_id, at=at(11))
    spawn.request_announce(step.run_id, at=at(12))
    assert recorder.new_events()[-2:] == ["SubagentRunEnded", "SubagentAnnounceRequested"]
    assert spawn.state.announce_run_id == str(step.run_id)
    assert spawn.next_step() == step
    recorder.assert_replays()


def test_the_first_announce_reply_counts() -> None:
    recorder = announce_replied("Result: first")
    recorder.new_events()
    recorder.spawn.record_announce_reply("Result: second", at=at(20))
    assert recorder.new_events() == []
    assert recorder.spawn.state.announce_reply == "Result: first"
    recorder.assert_replays()


@pytest.mark.parametrize(
    ("reply", "skip"),
    [
        ("Result: done\nNotes: none", False),
        ("ANNOUNCE_SKIP", True),
        ("  ANNOUNCE_SKIP\n", True),
        (None, False),  # no reply: the report says so (status and stats still go out)
    ],
)
def test_the_reply_is_announced_unless_it_is_the_skip_token(reply: str | None, skip: bool) -> None:
    recorder = announce_replied(reply)
    assert recorder.spawn.next_step() == Announce(reply=reply, skip=skip)
    recorder.assert_replays()


# After the announce: keep, archive or delete -------------------------------------------


def test_a_kept_child_is_archived_its_minutes_after_its_run_ended() -> None:
    recorder = announced("keep", 60)
    spawn = recorder.spawn
    assert recorder.new_events()[-1] == "SubagentAnnounced"
    due = to_millis(at(10)) + 60 * MINUTE_MS  # from the run's end, not the announce
    assert (spawn.state.announced, spawn.state.status, spawn.state.archive_at) == (
        True,
        "waiting_archive",
        due,
    )
    assert spawn.next_step() == ArchiveAt(due_ms=due)
    recorder.assert_replays()


def test_the_archive_time_is_recorded_so_a_replay_keeps_it() -> None:
    recorder = announced("keep", 60)
    restored = replayed(recorder.spawn.collect_events(), Spawn)
    assert restored.next_step() == ArchiveAt(due_ms=to_millis(at(10)) + 60 * MINUTE_MS)


def test_a_skipped_announce_still_schedules_the_archive() -> None:
    recorder = announce_replied("ANNOUNCE_SKIP", "keep", 5)
    spawn = recorder.spawn
    spawn.skip_announce("ANNOUNCE_SKIP", at=at(13))
    assert recorder.new_events()[-1] == "AnnounceSkipped"
    due = to_millis(at(10)) + 5 * MINUTE_MS
    assert (spawn.state.announced, spawn.state.archive_at) == (True, due)
    assert spawn.next_step() == ArchiveAt(due_ms=due)
    recorder.assert_replays()


def test_archiving_closes_the_spawn_once() -> None:
    recorder = announced("keep", 60)
    spawn = recorder.spawn
    spawn.archived(at=at(3610))
    spawn.archived(at=at(3611))
    spawn.deleted(at=at(3612))
    assert recorder.new_events()[-1:] == ["SubagentArchived"]
    assert (spawn.state.status, spawn.state.closed_as) == ("closed", "archived")
    assert spawn.next_step() is None
    recorder.assert_replays()


def test_a_child_with_cleanup_delete_is_deleted_once_announced() -> None:
    recorder = announced("delete", 60)
    spawn = recorder.spawn
    assert spawn.archive_time() is None
    assert spawn.state.archive_at is None
    assert spawn.next_step() == DeleteChild()
    spawn.deleted(at=at(14))
    spawn.deleted(at=at(15))
    assert recorder.new_events()[-2:] == ["SubagentAnnounced", "SubagentDeleted"]
    assert (spawn.state.status, spawn.state.closed_as) == ("closed", "deleted")
    assert spawn.next_step() is None
    recorder.assert_replays()


def test_a_kept_child_with_archiving_off_has_nothing_left_to_do() -> None:
    recorder = announced("keep", None)
    spawn = recorder.spawn
    assert spawn.state.archive_at is None
    assert spawn.next_step() is None
    # Finished, so no longer pending work: a reopened gateway does not pick it up again.
    assert (spawn.state.status, spawn.state.closed_as) == ("closed", "kept")
    recorder.assert_replays()


def test_the_archive_time_counts_fractions_of_a_minute() -> None:
    recorder = spawned("keep", 1.5)
    assert recorder.spawn.archive_time() is None  # the run has not ended yet
    run_ended(recorder)
    assert recorder.spawn.archive_time() == to_millis(at(10)) + 90_000


def test_a_suppressed_delivery_is_recorded_and_changes_no_step() -> None:
    # The requester's send policy denies: the report is recorded, then announced with no
    # channel (the driver records both together).
    recorder = announce_replied()
    spawn = recorder.spawn
    before = spawn.state
    spawn.suppress_delivery(rule="sendPolicy deny", at=at(13))
    assert recorder.new_events()[-1] == "SubagentAnnounceSuppressed"
    assert spawn.state == before
    spawn.announced(message="Status: ok", channel=None, to=None, account_id=None, at=at(13))
    assert spawn.next_step() == ArchiveAt(due_ms=to_millis(at(10)) + 60 * MINUTE_MS)
    recorder.assert_replays()
