"""The session aggregate: one agent conversation, its row fields and its lifecycle.

The aggregate holds the row state only (no transcript): appending a message applies one
small event, so it never needs the session's history in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from uuid import UUID

from eventsourcing.domain import OriginatorIDError, OriginatorVersionError
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sessionwire.domain.base import Aggregate, Immutable
from sessionwire.domain.causality import Provenance
from sessionwire.domain.control_commands import SendCommand
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import KeyRules, has_control_characters, is_encodable
from sessionwire.domain.policy import BUSY_ACTIONS, PolicyTarget, normalize_chat_type
from sessionwire.domain.session_ids import session_uuid as session_uuid
from sessionwire.domain.session_ids import to_millis as to_millis
from sessionwire.domain.transcript import TranscriptMessage

E = TypeVar("E")

SessionStatus = Literal["active", "archived", "deleted"]

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
VERBOSE_LEVELS = ("off", "on", "full")
SEND_POLICIES = ("allow", "deny")
MAX_LABEL_LENGTH = 64
PATCHABLE_FIELDS = ("label", "model", "thinkingLevel", "verboseLevel", "sendPolicy", "busy")


class SessionClosed(SessionwireError):
    """A command on a session that was archived or deleted."""


class InvalidPatch(SessionwireError, ValueError):
    """A session patch with an unknown field or a value the field does not take."""


class MessageOrigin(Immutable):
    """Where a recorded message came from; updates the row's routing fields."""

    channel: str | None = None
    chat_type: str | None = None
    display_name: str | None = None
    to: str | None = None
    account_id: str | None = None

    def is_empty(self) -> bool:
        # Every field by name: this runs on every append, and a dump costs ten times more.
        return not (
            self.channel or self.chat_type or self.display_name or self.to or self.account_id
        )


class ForkPoint(Immutable):
    """Where a fork's history branches off its source (decision 34): a reference to the
    source's chain, never a copy of its rows."""

    source_key: str
    version: int
    """The source's stream version the fork inherits up to (its transcript lines with
    that seq or lower)."""
    record_version: int
    """The version of the stored record holding ``version``: itself, or for a batch of
    messages the batch's last version (a batch is one chain link)."""
    stream_hash: str | None
    """That record's stream hash in the source's chain (hex); None when the record was
    written before the store kept a chain."""
    messages: int
    """How many transcript lines the fork inherits (tool results included)."""
    tool_results: int = 0
    """How many of them are tool results (a reader without tools inherits the others)."""


def fork_point_mismatch(
    version: int, recorded_hash: str | None, first: int, record_version: int, held: bytes | None
) -> str | None:
    """Why the source's record at a fork point's ``record_version`` (holding versions
    ``first`` to ``record_version``, chained with stream hash ``held``, None when it is
    unchained) does not bear out the point's ``version`` and ``recorded_hash``; None when
    it does. One rule for the store's ``audit verify`` and a file's (decision 34,
    docs/evidence-format.md §5.2 step 7): a stream hash commits to its whole prefix, so an
    equal hash fixes exactly the lines the fork inherits."""
    if not first <= version <= record_version:
        return f"its source's record at version {record_version} does not hold version {version}"
    chained = None if held is None else held.hex()
    if chained != recorded_hash:
        return (
            f"its source's chain has {chained or 'no stream hash'} there, the fork recorded "
            f"{recorded_hash or 'none'}"
        )
    return None


class SessionState(BaseModel):
    """Everything a session row shows; kept current in the read model with the events."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    key: str
    session_id: str
    agent_id: str
    spawned_by: str | None = None
    lineage: tuple[str, ...] = ()
    """The spawn tree above ``spawned_by``, nearest first: empty unless the session that
    spawned this one was spawned itself (nested spawns)."""
    status: SessionStatus = "active"
    created_at: int
    updated_at: int
    message_count: int = 0
    channel: str | None = None
    chat_type: str | None = None
    display_name: str | None = None
    label: str | None = None
    last_channel: str | None = None
    last_to: str | None = None
    last_account_id: str | None = None
    model: str | None = None
    context_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    thinking_level: str | None = None
    verbose_level: str | None = None
    system_sent: bool = False
    aborted_last_run: bool = False
    send_policy: str | None = None
    busy_policy: str | None = None
    """This session's override of ``session.agentToAgent.busy`` (ADR 0022); None inherits."""
    # Written only when set, so rows stored before forks equal a rebuild (ADR 0048).
    forked_from: ForkPoint | None = Field(default=None, exclude_if=lambda point: point is None)
    """The source and position this session's history was forked from (ADR 0048)."""

    def spawn_ancestors(self) -> tuple[str, ...]:
        """Every session above this one in its spawn tree, nearest first."""
        if self.spawned_by is None:
            return ()
        return (self.spawned_by, *self.lineage)

    def policy_target(self, rules: KeyRules) -> PolicyTarget:
        """What the policy rules look at (openclaw-behaviour.md §7 step 3)."""
        rest = rules.rest_of(self.key)
        chat_type = normalize_chat_type(self.chat_type)
        if chat_type is None:
            chat_type = "group" if ":group:" in f":{rest}" else None
            chat_type = chat_type or ("channel" if ":channel:" in f":{rest}" else None)
        channel = self.channel or self.last_channel or rules.group_channel(self.key)
        return PolicyTarget(
            key=self.key,
            rest=rest,
            agent_id=self.agent_id,
            spawned_by=self.spawned_by,
            ancestors=self.spawn_ancestors(),
            send_override=self.send_policy,
            busy_override=self.busy_policy,
            channel=channel.strip().lower() if channel else None,
            chat_type=chat_type,
        )


# Row fields an import may set; keys, ids, status and counts come from the events.
IMPORTABLE_FIELDS = (
    "channel",
    "chat_type",
    "display_name",
    "label",
    "last_channel",
    "last_to",
    "last_account_id",
    "model",
    "context_tokens",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "thinking_level",
    "verbose_level",
    "system_sent",
    "aborted_last_run",
    "send_policy",
)

_PATCH_TO_STATE = {
    "label": "label",
    "model": "model",
    "thinkingLevel": "thinking_level",
    "verboseLevel": "verbose_level",
    "sendPolicy": "send_policy",
    "busy": "busy_policy",
}


def validate_patch(changes: dict[str, Any]) -> dict[str, str | None]:
    """Check a ``sessions.patch`` body; ``None`` clears a field. Raises InvalidPatch."""
    checked: dict[str, str | None] = {}
    for name, value in changes.items():
        if name not in _PATCH_TO_STATE:
            raise InvalidPatch(
                f"unknown session field {name!r} (patchable: {', '.join(PATCHABLE_FIELDS)})"
            )
        if value is None:
            checked[name] = None
            continue
        if not isinstance(value, str):
            raise InvalidPatch(f"invalid {name}: must be a string or null")
        text = value.strip()
        if name == "label":
            if not text:
                raise InvalidPatch("invalid label: empty")
            if has_control_characters(text) or not is_encodable(text):
                raise InvalidPatch("invalid label: contains control characters")
            if len(text) > MAX_LABEL_LENGTH:
                raise InvalidPatch(f"invalid label: too long (max {MAX_LABEL_LENGTH})")
        elif name == "model" and not text:
            raise InvalidPatch("invalid model: empty")
        elif name == "thinkingLevel" and text.lower() not in THINKING_LEVELS:
            raise InvalidPatch(f"invalid thinkingLevel (use {'|'.join(THINKING_LEVELS)})")
        elif name == "verboseLevel" and text.lower() not in VERBOSE_LEVELS:
            raise InvalidPatch(f"invalid verboseLevel (use {'|'.join(VERBOSE_LEVELS)})")
        elif name == "sendPolicy" and text.lower() not in SEND_POLICIES:
            raise InvalidPatch('invalid sendPolicy (use "allow"|"deny")')
        elif name == "busy" and text.lower() not in BUSY_ACTIONS:
            raise InvalidPatch(f"invalid busy (use {'|'.join(BUSY_ACTIONS)})")
        checked[name] = (
            text.lower()
            if name in {"thinkingLevel", "verboseLevel", "sendPolicy", "busy"}
            else text
        )
    return checked


def single_appends(events: Iterable[tuple[int, E]]) -> Iterator[tuple[int, E | Any]]:
    """``(position, event)`` pairs with every MessagesAppended spread into the single
    appends it stands for (each at the batch's position): for readers that show lines."""
    for position, event in events:
        if isinstance(event, Session.MessagesAppended):
            for single in event.as_single_appends():
                yield position, single
        else:
            yield position, event


class Session(Aggregate):
    state: SessionState

    class SessionOpened(Aggregate.Created):
        key: str
        session_id: str
        agent_id: str
        spawned_by: str | None = None
        lineage: tuple[str, ...] = ()

    class MessageAppended(Aggregate.Event):
        message: TranscriptMessage
        origin: MessageOrigin | None = None
        sender_is_owner: bool = False
        # Who wrote the line and in which chain (decisions 17, 18); absent before them.
        provenance: Provenance | None = None

        def apply(self, aggregate: Session) -> None:
            aggregate.state = aggregate._with_message(self)

        def transcript_message(self) -> TranscriptMessage:
            """The line as the transcript keeps it: the raw message plus its provenance."""
            if self.provenance is None:
                return self.message
            return self.message.model_copy(update={"provenance": self.provenance.for_reader()})

    class MessagesAppended(Aggregate.Event):
        """Many transcript lines in one stored event (``record_many``, imports).

        It takes one stream version per message, as single appends would: it is stored
        at the version of its last message, so the event after it follows at the next
        version, and message ``i`` has version (its transcript seq)
        ``first_version + i``. The session state is updated once for the whole batch.
        """

        # First, so a reader of the stored bytes finds how many versions the event takes
        # without parsing the messages (domain.hash_chain.first_version).
        count: int
        messages: list[TranscriptMessage]
        origin: MessageOrigin | None = None
        provenance: Provenance | None = None

        @model_validator(mode="after")
        def _counted(self) -> Session.MessagesAppended:
            if self.count != len(self.messages) or not self.messages:
                raise ValueError(f"count {self.count} for {len(self.messages)} message(s)")
            return self

        @property
        def first_version(self) -> int:
            return self.originator_version - len(self.messages) + 1

        def mutate(self, aggregate: Any) -> Any:
            # As eventsourcing's mutate, for an event that spans len(messages) versions.
            if self.originator_id != aggregate.id:
                raise OriginatorIDError(self.originator_id, aggregate.id)
            if not self.messages or self.first_version != aggregate.version + 1:
                raise OriginatorVersionError(self.first_version, aggregate.version + 1)
            self.apply(aggregate)
            aggregate.version = self.originator_version
            aggregate.modified_on = self.timestamp
            return aggregate

        def apply(self, aggregate: Session) -> None:
            aggregate.state = aggregate._with_messages(self, len(self.messages), self.timestamp)

        def apply_first(self, aggregate: Session, count: int) -> None:
            """Apply only the first ``count`` messages (a replay to a version or an
            instant inside the batch), as single appends of them would stand then."""
            if self.first_version != aggregate.version + 1:
                raise OriginatorVersionError(self.first_version, aggregate.version + 1)
            moment = self.timestamp
            if count < len(self.messages):
                # Single appends at each message's time, never going backwards (imports).
                latest = max(m.timestamp for m in self.messages[:count]) if count else 0
                moment = min(
                    self.timestamp,
                    max(aggregate.modified_on, datetime.fromtimestamp(latest / 1000, tz=UTC)),
                )
            aggregate.state = aggregate._with_messages(self, count, moment)
            aggregate.version = self.first_version + count - 1
            aggregate.modified_on = moment

        def as_single_appends(self) -> list[Session.MessageAppended]:
            """The batch as the single appends it stands for (what readers show)."""
            first, last = self.first_version, to_millis(self.timestamp)
            singles, latest = [], 0
            for index, message in enumerate(self.messages):
                # Each at its message's time, never going backwards, at most the batch's
                # (an import keeps each message's own time; record_many's are all one).
                latest = max(latest, message.timestamp)
                moment = (
                    self.timestamp
                    if latest >= last
                    else datetime.fromtimestamp(latest / 1000, tz=UTC)
                )
                singles.append(
                    Session.MessageAppended.model_construct(
                        originator_id=self.originator_id,
                        originator_version=first + index,
                        timestamp=moment,
                        message=message,
                        origin=self.origin,
                        sender_is_owner=False,
                        provenance=self.provenance,
                    )
                )
            return singles

        def transcript_messages(self) -> list[TranscriptMessage]:
            """The lines as the transcript keeps them (each as a single append's)."""
            if self.provenance is None:
                return self.messages
            reader = self.provenance.for_reader()
            return [m.model_copy(update={"provenance": reader}) for m in self.messages]

    class SessionPatched(Aggregate.Event):
        changes: dict[str, str | None]

        def apply(self, aggregate: Session) -> None:
            updates: dict[str, Any] = {_PATCH_TO_STATE[k]: v for k, v in self.changes.items()}
            updates["updated_at"] = to_millis(self.timestamp)
            aggregate.state = aggregate.state.model_copy(update=updates)

    class SendCommandHandled(Aggregate.Event):
        """An owner's ``/send on|off|inherit`` (applied), or someone else's (ignored)."""

        mode: Literal["allow", "deny", "inherit"] | None
        applied: bool
        reason: str
        reply: str | None = None

        def apply(self, aggregate: Session) -> None:
            if self.applied and self.mode is not None:
                override = None if self.mode == "inherit" else self.mode
                aggregate.state = aggregate.state.model_copy(
                    update={"send_policy": override, "updated_at": to_millis(self.timestamp)}
                )

    class SessionImported(Aggregate.Event):
        """Row fields taken from another system's record (an OpenClaw session entry)."""

        source: str
        fields: dict[str, Any]

        def apply(self, aggregate: Session) -> None:
            updates = {k: v for k, v in self.fields.items() if k in IMPORTABLE_FIELDS}
            updates["updated_at"] = to_millis(self.timestamp)
            aggregate.state = aggregate.state.model_copy(update=updates)

    class SessionForked(Aggregate.Event):
        """The session's history starts with its source's up to ``point`` (decision 34):
        recorded right after it opens, before any line of its own."""

        point: ForkPoint

        def apply(self, aggregate: Session) -> None:
            aggregate.state = aggregate.state.model_copy(
                update={"forked_from": self.point, "updated_at": to_millis(self.timestamp)}
            )

    class SessionArchived(Aggregate.Event):
        reason: str

        def apply(self, aggregate: Session) -> None:
            aggregate.state = aggregate.state.model_copy(update={"status": "archived"})

    class SessionDeleted(Aggregate.Event):
        reason: str

        def apply(self, aggregate: Session) -> None:
            aggregate.state = aggregate.state.model_copy(update={"status": "deleted"})

    def __init__(
        self,
        key: str,
        session_id: str,
        agent_id: str,
        spawned_by: str | None = None,
        lineage: tuple[str, ...] = (),
    ) -> None:
        # Runs as the SessionOpened event's apply(); timestamps come from the event.
        created = to_millis(self.created_on)
        self.state = SessionState(
            key=key,
            session_id=session_id,
            agent_id=agent_id,
            spawned_by=spawned_by,
            lineage=tuple(lineage),
            created_at=created,
            updated_at=created,
        )

    @classmethod
    def open(
        cls,
        *,
        key: str,
        session_id: UUID,
        agent_id: str,
        at: datetime,
        spawned_by: str | None = None,
        lineage: tuple[str, ...] = (),
    ) -> Session:
        return cls._create(
            cls.SessionOpened,
            id=session_uuid(key),
            timestamp=at,
            key=key,
            session_id=str(session_id),
            agent_id=agent_id,
            spawned_by=spawned_by,
            lineage=lineage,
        )

    @property
    def is_active(self) -> bool:
        return self.state.status == "active"

    def _require_active(self) -> None:
        if not self.is_active:
            raise SessionClosed(
                f"Session {self.state.key} was {self.state.status}; its history is kept "
                "but it takes no new messages"
            )

    def append_message(
        self,
        message: TranscriptMessage,
        *,
        at: datetime,
        origin: MessageOrigin | None = None,
        sender_is_owner: bool = False,
        provenance: Provenance | None = None,
    ) -> None:
        self._require_active()
        # Made and applied as trigger_event would, without its per-call checks and
        # copies (this runs on every append). Validated, not ``model_construct``-ed:
        # pydantic-core validates these (models already validated, kept as they are)
        # faster than pydantic's Python ``model_construct`` builds them.
        event = self.MessageAppended(
            originator_id=self.id,
            originator_version=self.version + 1,
            timestamp=at,
            message=message,
            origin=None if origin is None or origin.is_empty() else origin,
            sender_is_owner=sender_is_owner,
            provenance=provenance,
        )
        event.mutate(self)
        self._pending_events.append(event)

    def append_messages(
        self,
        messages: list[TranscriptMessage],
        *,
        at: datetime,
        origin: MessageOrigin | None = None,
        provenance: Provenance | None = None,
    ) -> None:
        """Append ``messages`` as one MessagesAppended event (see there)."""
        self._require_active()
        if not messages:
            return
        event = self.MessagesAppended(
            originator_id=self.id,
            originator_version=self.version + len(messages),
            timestamp=at,
            count=len(messages),
            messages=messages,
            origin=None if origin is None or origin.is_empty() else origin,
            provenance=provenance,
        )
        event.mutate(self)
        self._pending_events.append(event)

    def fork_from(self, point: ForkPoint, *, at: datetime) -> None:
        """Take ``point``'s history as this session's start: only before anything else
        happened in it (its history would otherwise not be the source's then its own)."""
        self._require_active()
        if self.version != 1 or self.state.forked_from is not None:
            raise ValueError("only a session just opened can start from a fork point")
        self.trigger_event(self.SessionForked, timestamp=at, point=point)

    def patch(self, changes: dict[str, Any], *, at: datetime) -> None:
        self._require_active()
        checked = validate_patch(changes)
        if checked:
            self.trigger_event(self.SessionPatched, timestamp=at, changes=checked)

    def handle_send_command(
        self, command: SendCommand, *, sender_is_owner: bool, at: datetime
    ) -> None:
        """Apply ``/send`` from an owner; record, and otherwise ignore, anyone else's."""
        self._require_active()
        if not sender_is_owner:
            self.trigger_event(
                self.SendCommandHandled,
                timestamp=at,
                mode=command.mode,
                applied=False,
                reason="ignored: the sender is not an owner",
            )
            return
        self.trigger_event(
            self.SendCommandHandled,
            timestamp=at,
            mode=command.mode,
            applied=command.mode is not None,
            reason="owner command" if command.mode is not None else "usage: no mode given",
            reply=command.reply,
        )

    def import_fields(self, fields: dict[str, Any], *, source: str, at: datetime) -> None:
        unknown = set(fields) - set(IMPORTABLE_FIELDS)
        if unknown:
            raise ValueError(f"fields that cannot be imported: {', '.join(sorted(unknown))}")
        self.trigger_event(self.SessionImported, timestamp=at, source=source, fields=fields)

    def archive(self, *, reason: str, at: datetime) -> None:
        if self.is_active:
            self.trigger_event(self.SessionArchived, timestamp=at, reason=reason)

    def delete(self, *, reason: str, at: datetime) -> None:
        if self.state.status != "deleted":
            self.trigger_event(self.SessionDeleted, timestamp=at, reason=reason)

    def _with_message(self, event: MessageAppended) -> SessionState:
        state = self.state
        updates: dict[str, Any] = {
            "updated_at": to_millis(event.timestamp),
            "message_count": state.message_count + 1,
        }
        updates.update(_origin_updates(state, event.origin))
        message = event.message
        if message.model:
            updates["model"] = message.model
        usage = message.usage
        if usage is not None:
            input_tokens = (state.input_tokens or 0) + usage.input
            output_tokens = (state.output_tokens or 0) + usage.output
            updates["input_tokens"] = input_tokens
            updates["output_tokens"] = output_tokens
            updates["total_tokens"] = (
                (state.total_tokens or 0) + usage.totalTokens
                if usage.totalTokens is not None
                else input_tokens + output_tokens
            )
        return state.model_copy(update=updates)

    def _with_messages(self, event: MessagesAppended, count: int, moment: datetime) -> SessionState:
        """The state after the first ``count`` messages of a batch: what ``count`` single
        appends with the batch's origin would leave, the last at ``moment``."""
        state = self.state
        updates: dict[str, Any] = {
            "updated_at": to_millis(moment),
            "message_count": state.message_count + count,
        }
        updates.update(_origin_updates(state, event.origin))
        input_tokens, output_tokens, total_tokens = (
            state.input_tokens,
            state.output_tokens,
            state.total_tokens,
        )
        for message in event.messages[:count]:
            if message.model:
                updates["model"] = message.model
            usage = message.usage
            if usage is not None:
                input_tokens = (input_tokens or 0) + usage.input
                output_tokens = (output_tokens or 0) + usage.output
                total_tokens = (
                    (total_tokens or 0) + usage.totalTokens
                    if usage.totalTokens is not None
                    else input_tokens + output_tokens
                )
                updates["input_tokens"] = input_tokens
                updates["output_tokens"] = output_tokens
                updates["total_tokens"] = total_tokens
        return state.model_copy(update=updates)


def _origin_updates(state: SessionState, origin: MessageOrigin | None) -> dict[str, Any]:
    """What a message's origin (channel, route, display name) changes on the session
    row: one rule for single appends and batches."""
    updates: dict[str, Any] = {}
    if origin is None:
        return updates
    if origin.channel:
        updates["last_channel"] = origin.channel
        if state.channel is None and origin.chat_type in {"group", "channel"}:
            updates["channel"] = origin.channel
    if origin.chat_type:
        updates["chat_type"] = origin.chat_type
    if origin.display_name:
        updates["display_name"] = origin.display_name
    if origin.to:
        updates["last_to"] = origin.to
    if origin.account_id:
        updates["last_account_id"] = origin.account_id
    return updates
