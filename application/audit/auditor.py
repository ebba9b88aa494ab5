"""The auditor's questions about a store, asked with the gateway's key rules.

It only reads recorded events: it never starts a run, calls the agent runtime or
delivers to a channel, so auditing a store (even one with unfinished work) changes
nothing in it.
"""

from __future__ import annotations

from datetime import datetime

from sessionwire.application.audit.state import SessionAsOf, session_as_of
from sessionwire.application.audit.timeline import Timeline, session_timeline
from sessionwire.application.audit.trace import Trace, trace_chain
from sessionwire.application.ports.store import Store
from sessionwire.domain.keys import KeyRules


class Auditor:
    def __init__(self, store: Store, rules: KeyRules) -> None:
        self.store = store
        self.rules = rules

    def session_as_of(
        self, session_key: str, *, version: int | None = None, at: datetime | None = None
    ) -> SessionAsOf:
        """The session's row and transcript at ``version`` or instant ``at`` (else now)."""
        key = self.rules.canonical(session_key)
        return session_as_of(self.store, key, version=version, at=at)

    def timeline(self, session_key: str) -> Timeline:
        """Every event of the session and of the runs, exchanges and spawns it took part in."""
        return session_timeline(self.store, self.rules.canonical(session_key))

    def trace(self, trace_id: str) -> Trace:
        """The chain of trace ``trace_id``: its runs, exchanges, spawns, refusals and
        deliveries, each under the one that caused it."""
        return trace_chain(self.store, trace_id.strip())
