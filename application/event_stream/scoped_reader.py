"""What one requester may read of the event stream: the events of sessions whose history
it may read (the ``sessions_history`` policy), with other sessions' secrets masked as
``sessions_history`` masks them."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from sessionwire.application.context import ToolContext
from sessionwire.application.event_stream.public_event import StreamEvent
from sessionwire.application.ports.session_read_model import StoredSession
from sessionwire.application.ports.store import Store

REMEMBERED = 1_000


class ScopedReader:
    def __init__(self, context: ToolContext) -> None:
        self.context = context
        self.key = context.requester.key
        self.redactor = context.config.redaction.redactor()
        self._seen: OrderedDict[str, bool] = OrderedDict()

    async def prepare(self, page: list[StreamEvent]) -> None:
        """Read, in one trip off the loop, the sessions of ``page`` not decided yet."""
        unknown = {key for event in page for key in event.sessions if key not in self._seen}
        if not unknown:
            return

        def sessions(store: Store) -> dict[str, StoredSession | None]:
            return {key: store.session(key) for key in unknown}

        for key, stored in (await self.context.store.read(sessions)).items():
            self._decide(key, stored)

    def sees(self, sessions: tuple[str, ...]) -> bool:
        """Every session the event belongs to must be readable: an exchange into a
        session the requester may not see says what happened there. (``prepare`` has
        read them; one it did not find is not readable.)"""
        return bool(sessions) and all(self._seen.get(key, False) for key in sessions)

    def _decide(self, key: str, stored: StoredSession | None) -> None:
        if stored is None:
            return  # not remembered: it may be opened later
        refusal = self.context.access.reach_refusal(
            stored.state.policy_target(self.context.rules),
            key,
            access="history",
            target_key=key,
            target_agent=stored.state.agent_id,
        )
        self._seen[key] = refusal is None
        if len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)

    def view(self, event: StreamEvent) -> dict[str, Any]:
        shown = dict(event.public)
        if self.redactor is not None and any(key != self.key for key in event.sessions):
            shown["summary"] = self.redactor.mask_text(shown["summary"])
            shown["data"] = self.redactor.mask(shown["data"])
        return shown
