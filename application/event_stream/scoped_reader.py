"""What one requester may read of the event stream: the events of sessions whose history
it may read (the ``sessions_history`` policy), with other sessions' secrets masked as
``sessions_history`` masks them."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from sessionwire.application.context import ToolContext
from sessionwire.application.event_stream.public_event import StreamEvent

REMEMBERED = 1_000


class ScopedReader:
    def __init__(self, context: ToolContext) -> None:
        self.context = context
        self.key = context.requester.key
        self.redactor = context.config.redaction.redactor()
        self._seen: OrderedDict[str, bool] = OrderedDict()

    def sees(self, sessions: tuple[str, ...]) -> bool:
        """Every session the event belongs to must be readable: an exchange into a
        session the requester may not see says what happened there."""
        return bool(sessions) and all(self._sees(key) for key in sessions)

    def _sees(self, key: str) -> bool:
        known = self._seen.get(key)
        if known is not None:
            return known
        stored = self.context.store.session(key)
        if stored is None:
            return False  # not remembered: it may be opened later
        refusal = self.context.access.reach_refusal(
            stored.state.policy_target(self.context.rules),
            key,
            access="history",
            target_agent=stored.state.agent_id,
        )
        seen = self._seen[key] = refusal is None
        if len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
        return seen

    def view(self, event: StreamEvent) -> dict[str, Any]:
        shown = dict(event.public)
        if self.redactor is not None and any(key != self.key for key in event.sessions):
            shown["summary"] = self.redactor.mask_text(shown["summary"])
            shown["data"] = self.redactor.mask(shown["data"])
        return shown
