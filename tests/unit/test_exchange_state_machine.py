"""The agent-to-agent exchange driven event by event (domain/exchange.py): what
``Exchange.next_step`` asks for after each recorded event, with no store and no clock.

await the primary run → up to ``max_turns`` reply-back turns, requester first, unless
the loop ends early (REPLY_SKIP, an empty reply, a failed run, a blocked sender, the same
session on both sides) → one announce run in the target → deliver its reply, or skip it
(ANNOUNCE_SKIP, empty), or record a suppressed or failed delivery → closed. Each example
checks that replaying the recorded events gives the same state.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid5

import pytest
from event_replay import event_names, replayed
from sessionwire.domain.agent_to_agent import ANNOUNCE_MESSAGE
from sessionwire.domain.exchange import (
    AwaitPrimary,
    Close,
    Deliver,
    EndLoop,
    Exchange,
    SkipAnnounce,
    StartRun,
    exchange_id_for,
)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
PRIMARY = UUID(int=1)
REQUESTER = "agent:main:discord:group:dev"
TARGET = "agent:main:main"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def opened(max_turns: int = 2, target: str = TARGET) -> Exchange:
    return Exchange.open(
        primary_run_id=PRIMARY,
        requester_key=REQUESTER,
        requester_display="discord:group:dev",
        requester_channel="discord",
        target_key=target,
        target_display="main",
        target_channel="whatsapp",
        original_message="status?",
        max_turns=max_turns,
        at=T0,
    )


class Recorder:
    """An exchange and every event it recorded, collected as it goes."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.events: list[object] = []

    def new_events(self) -> list[str]:
        fresh = self.exchange.collect_events()
        self.events.extend(fresh)
        return event_names(fresh)

    def assert_replays(self) -> None:
        self.new_events()
        assert replayed(self.events, Exchange).state == self.exchange.state


def step(exchange: Exchange) -> StartRun:
    next_step = exchange.next_step()
    assert isinstance(next_step, StartRun), next_step
    return next_step


def after_round_one(reply: str | None = "all good", max_turns: int = 2) -> Recorder:
    recorder = Recorder(opened(max_turns))
    recorder.exchange.record_round_one(reply, at=at(1))
    return recorder


def at_announce(reply: str | None = "all good") -> Recorder:
    recorder = after_round_one(reply, max_turns=0)
    exchange = recorder.exchange
    end = exchange.next_step()
    assert isinstance(end, EndLoop)
    exchange.end_loop(end.reason, at=at(2))
    return recorder


def announce_replied(reply: str | None) -> Recorder:
    recorder = at_announce()
    exchange = recorder.exchange
    announce = step(exchange)
    exchange.request_announce(announce.run_id, at=at(3))
    exchange.record_announce_reply(reply, at=at(4))
    return recorder


# Opening and round one ---------------------------------------------------------------


def test_an_opened_exchange_waits_for_the_primary_run() -> None:
    recorder = Recorder(opened())
    exchange = recorder.exchange
    assert recorder.new_events() == ["ExchangeOpened"]
    assert exchange.id == exchange_id_for(PRIMARY)
    assert exchange.state.status == "open"
    assert exchange.next_step() == AwaitPrimary(run_id=str(PRIMARY))
    recorder.assert_replays()


def test_the_same_primary_run_always_names_the_same_exchange() -> None:
    assert opened().id == opened().id == exchange_id_for(PRIMARY)
    assert exchange_id_for(UUID(int=2)) != exchange_id_for(PRIMARY)


@pytest.mark.parametrize("reply", [None, ""])
def test_a_primary_run_without_a_reply_closes_the_exchange(reply: str | None) -> None:
    recorder = after_round_one(reply)
    assert recorder.new_events() == ["ExchangeOpened", "RoundOneReplied"]
    assert recorder.exchange.next_step() == Close(reason="the target gave no reply")
    recorder.assert_replays()


def test_a_late_second_round_one_is_ignored() -> None:
    recorder = after_round_one("first")
    recorder.new_events()
    recorder.exchange.record_round_one("second", at=at(2))
    assert recorder.new_events() == []
    assert recorder.exchange.state.round_one_reply == "first"
    recorder.assert_replays()


# The ping-pong loop --------------------------------------------------------------------


def test_turn_one_is_the_requester_answering_the_targets_reply() -> None:
    recorder = after_round_one("all good", max_turns=2)
    exchange = recorder.exchange
    turn = step(exchange)
    assert (turn.step, turn.turn, turn.session_key, turn.message) == (
        "reply_back",
        1,
        REQUESTER,
        "all good",
    )
    assert turn.run_id == uuid5(exchange.id, "turn-1")
    assert "Current agent: Agent 1 (requester).\nTurn 1 of 2." in turn.context
    recorder.assert_replays()


def test_the_next_step_is_the_same_until_its_outcome_is_recorded() -> None:
    """A gateway restarted mid-turn derives the same run id, so the run never starts twice."""
    exchange = after_round_one().exchange
    assert exchange.next_step() == exchange.next_step()
    assert replayed(exchange.collect_events(), Exchange).next_step() == exchange.next_step()


def test_turns_alternate_and_each_answers_the_latest_reply() -> None:
    recorder = after_round_one("all good", max_turns=3)
    exchange = recorder.exchange
    first = step(exchange)
    exchange.record_turn(first, reply="thanks, anything else?", failed=None, at=at(2))
    second = step(exchange)
    assert (second.turn, second.session_key, second.message) == (
        2,
        TARGET,
        "thanks, anything else?",
    )
    assert "Current agent: Agent 2 (target).\nTurn 2 of 3." in second.context
    assert second.run_id == uuid5(exchange.id, "turn-2")
    exchange.record_turn(second, reply="no, that is all", failed=None, at=at(3))
    third = step(exchange)
    assert (third.turn, third.session_key, third.message) == (3, REQUESTER, "no, that is all")
    assert recorder.new_events()[-2:] == ["PingPongTurn", "PingPongTurn"]
    turns = exchange.state.turns
    assert [(t.turn, t.speaker, t.session_key) for t in turns] == [
        (1, "requester", REQUESTER),
        (2, "target", TARGET),
    ]
    assert exchange.state.latest_reply == "no, that is all"
    recorder.assert_replays()


def test_the_loop_ends_at_the_turn_limit() -> None:
    recorder = after_round_one(max_turns=2)
    exchange = recorder.exchange
    for seconds in (2, 3):
        exchange.record_turn(step(exchange), reply=f"reply {seconds}", failed=None, at=at(seconds))
    assert exchange.next_step() == EndLoop(reason="reached maxPingPongTurns (2)")
    exchange.end_loop("reached maxPingPongTurns (2)", at=at(4))
    assert recorder.new_events()[-1] == "LoopEnded"
    assert exchange.state.loop_end == "reached maxPingPongTurns (2)"
    assert step(exchange).step == "announce"
    recorder.assert_replays()


def test_no_loop_when_the_turn_limit_is_zero() -> None:
    exchange = after_round_one(max_turns=0).exchange
    assert exchange.next_step() == EndLoop(reason="maxPingPongTurns is 0")


def test_no_loop_when_requester_and_target_are_one_session() -> None:
    exchange = Recorder(opened(max_turns=5, target=REQUESTER)).exchange
    exchange.record_round_one("hi", at=at(1))
    assert exchange.next_step() == EndLoop(reason="requester and target are the same session")


def test_a_second_loop_end_is_ignored() -> None:
    recorder = at_announce()
    recorder.new_events()
    recorder.exchange.end_loop("again", at=at(3))
    assert recorder.new_events() == []
    assert recorder.exchange.state.loop_end == "maxPingPongTurns is 0"


@pytest.mark.parametrize(
    ("reply", "failed", "reason"),
    [
        ("REPLY_SKIP", None, "REPLY_SKIP"),
        ("  REPLY_SKIP\n", None, "REPLY_SKIP"),
        ("", None, "empty reply"),
        (None, None, "empty reply"),
        (None, "run timed out after 30s", "run timed out after 30s"),
        ("half an answer", "RuntimeError: boom", "RuntimeError: boom"),
    ],
    ids=["skip-token", "skip-token-padded", "empty", "none", "timed-out", "failed"],
)
def test_a_turn_that_skips_says_nothing_or_fails_ends_the_loop(
    reply: str | None, failed: str | None, reason: str
) -> None:
    recorder = after_round_one(max_turns=4)
    exchange = recorder.exchange
    first = step(exchange)
    exchange.record_turn(first, reply=reply, failed=failed, at=at(2))
    events = recorder.exchange.collect_events()
    recorder.events.extend(events)
    assert event_names(events) == ["ExchangeOpened", "RoundOneReplied", "ReplySkipped"]
    skipped = events[-1]
    assert (skipped.turn, skipped.speaker, skipped.reason) == (1, "requester", reason)  # type: ignore[attr-defined]
    assert skipped.run_id == str(first.run_id)  # type: ignore[attr-defined]
    assert (exchange.state.loop_done, exchange.state.loop_end) == (True, reason)
    assert exchange.state.turns == []
    assert step(exchange).step == "announce"
    recorder.assert_replays()


def test_a_target_that_skips_on_turn_two_is_the_target_speaking() -> None:
    exchange = after_round_one(max_turns=4).exchange
    exchange.record_turn(step(exchange), reply="more?", failed=None, at=at(2))
    exchange.record_turn(step(exchange), reply="REPLY_SKIP", failed=None, at=at(3))
    skipped = exchange.collect_events()[-1]
    assert isinstance(skipped, Exchange.ReplySkipped)
    assert (skipped.turn, skipped.speaker) == (2, "target")


def test_a_blocked_speaker_ends_the_loop_before_its_turn() -> None:
    recorder = after_round_one(max_turns=4)
    exchange = recorder.exchange
    first = step(exchange)
    exchange.block_turn(first, rule="channel=discord deny", at=at(2))
    assert recorder.new_events()[-1] == "TurnBlocked"
    assert exchange.state.loop_end == "send blocked by session policy (channel=discord deny)"
    assert step(exchange).step == "announce"
    recorder.assert_replays()


# The announce step ---------------------------------------------------------------------


def test_the_announce_runs_in_the_target_with_the_whole_story() -> None:
    recorder = after_round_one("all good", max_turns=1)
    exchange = recorder.exchange
    exchange.record_turn(step(exchange), reply="thanks", failed=None, at=at(2))
    exchange.end_loop("reached maxPingPongTurns (1)", at=at(3))
    announce = step(exchange)
    assert (announce.step, announce.turn, announce.session_key, announce.message) == (
        "announce",
        None,
        TARGET,
        ANNOUNCE_MESSAGE,
    )
    assert announce.run_id == uuid5(exchange.id, "announce")
    assert "Original request: status?" in announce.context
    assert "Round 1 reply: all good" in announce.context
    assert "Latest reply: thanks" in announce.context
    recorder.assert_replays()


def test_the_announce_run_is_requested_once() -> None:
    recorder = at_announce()
    exchange = recorder.exchange
    announce = step(exchange)
    exchange.request_announce(announce.run_id, at=at(3))
    exchange.request_announce(announce.run_id, at=at(4))
    assert recorder.new_events()[-2:] == ["LoopEnded", "AnnounceRequested"]
    assert exchange.state.announce_run_id == str(announce.run_id)
    # Requested but not replied: the step stays the announce run (to await after a restart).
    assert exchange.next_step() == announce
    recorder.assert_replays()


def test_an_announce_reply_is_delivered_trimmed() -> None:
    recorder = announce_replied("  Deploy 42 is green.\n")
    assert recorder.exchange.next_step() == Deliver(reply="Deploy 42 is green.")
    recorder.assert_replays()


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("ANNOUNCE_SKIP", "ANNOUNCE_SKIP"),
        (" ANNOUNCE_SKIP \n", "ANNOUNCE_SKIP"),
        ("", "empty announce reply"),
        ("   ", "empty announce reply"),
        (None, "empty announce reply"),
    ],
)
def test_an_announce_that_skips_or_says_nothing_is_skipped(reply: str | None, reason: str) -> None:
    recorder = announce_replied(reply)
    exchange = recorder.exchange
    assert exchange.next_step() == SkipAnnounce(reason=reason)
    exchange.skip_announce(reason, at=at(5))
    assert exchange.state.announce_outcome == "skipped"
    assert exchange.next_step() == Close(reason="announce skipped")
    recorder.assert_replays()


def test_a_delivered_announce_closes_the_exchange() -> None:
    recorder = announce_replied("Deploy 42 is green.")
    exchange = recorder.exchange
    exchange.delivered(
        channel="whatsapp", to="+1555", account_id=None, message="Deploy 42 is green.", at=at(5)
    )
    assert exchange.next_step() == Close(reason="announce delivered")
    exchange.close("announce delivered", at=at(5))
    assert recorder.new_events()[-2:] == ["AnnounceDelivered", "ExchangeClosed"]
    assert (exchange.state.status, exchange.state.close_reason) == ("closed", "announce delivered")
    assert exchange.next_step() is None
    recorder.assert_replays()


def test_a_failed_delivery_closes_the_exchange_saying_so() -> None:
    recorder = announce_replied("Deploy 42 is green.")
    exchange = recorder.exchange
    exchange.delivery_failed("ConnectionError: channel down", at=at(5))
    assert recorder.new_events()[-1] == "AnnounceFailed"
    assert exchange.next_step() == Close(reason="announce failed")
    recorder.assert_replays()


@pytest.mark.parametrize("stage", ["run", "delivery"])
def test_a_suppressed_announce_closes_the_exchange(stage: str) -> None:
    # "run": the target takes no sends, so no announce run; "delivery": its reply is kept
    # but not posted to the channel.
    recorder = at_announce() if stage == "run" else announce_replied("Deploy 42 is green.")
    exchange = recorder.exchange
    exchange.suppress_announce(
        stage=stage,  # type: ignore[arg-type]
        rule="sendPolicy deny",
        message=None if stage == "run" else "Deploy 42 is green.",
        at=at(5),
    )
    assert recorder.new_events()[-1] == "AnnounceSuppressed"
    assert (exchange.state.announce_done, exchange.state.announce_outcome) == (True, "suppressed")
    assert exchange.next_step() == Close(reason="announce suppressed")
    recorder.assert_replays()


# Closed ------------------------------------------------------------------------------


def test_a_closed_exchange_has_nothing_left_to_do_and_closes_once() -> None:
    recorder = after_round_one(None)
    exchange = recorder.exchange
    exchange.close("the target gave no reply", at=at(2))
    exchange.close("again", at=at(3))
    assert recorder.new_events() == ["ExchangeOpened", "RoundOneReplied", "ExchangeClosed"]
    assert exchange.state.close_reason == "the target gave no reply"
    assert exchange.next_step() is None
    # A late round one (a restarted gateway's duplicate) changes nothing either.
    exchange.record_round_one("late", at=at(4))
    assert exchange.next_step() is None
    recorder.assert_replays()
