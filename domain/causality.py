"""Causality: which chain a run or a message belongs to, what caused it, how deep it is.

A chain starts with a message from outside any run (a user's message, a send made by a
person or a program): its ``trace_id`` is that message's id. Every run records the chain
it belongs to, the run that caused it (``parent_run_id``) and its hop count: the number of
``sessions_send``/``sessions_spawn`` calls from the chain's start to it. The steps an
exchange or a spawn runs by itself (reply-back turns, announce steps) stay on their hop;
only an agent's own send or spawn adds one. A send or spawn from a run already
``maxHops`` deep is refused (contract §6 decision 17), so agent loops end.

Provenance (decision 18) says who wrote each transcript line; it carries the chain too.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, ConfigDict, Field
from sessionwire.domain.base import Immutable

DEFAULT_MAX_HOPS = 6

ProvenanceKind = Literal[
    "user", "agent", "a2a", "a2a-remote", "subagent_report", "announce", "system"
]


class Causality(Immutable):
    """Where a run sits in its chain. Runs recorded before causality have none."""

    trace_id: str
    parent_run_id: str | None = None
    hops: int = 1

    @classmethod
    def root(cls, trace_id: str) -> Causality:
        """The first send of a chain: made from outside any run."""
        return cls(trace_id=trace_id, parent_run_id=None, hops=1)

    def next_hop(self, run_id: str) -> Causality:
        """A send or spawn made from inside run ``run_id`` (which sits here)."""
        return Causality(trace_id=self.trace_id, parent_run_id=run_id, hops=self.hops + 1)

    def same_hop(self, parent_run_id: str) -> Causality:
        """A step the gateway runs itself for the run ``parent_run_id`` (reply, announce)."""
        return Causality(trace_id=self.trace_id, parent_run_id=parent_run_id, hops=self.hops)


def _reader(name: str) -> AliasChoices:
    """A field read by its own name or by the reader's camelCase one."""
    head, *rest = name.split("_")
    return AliasChoices(name, head + "".join(part.title() for part in rest))


def hop_limit_reached(hops: int, max_hops: int) -> bool:
    """A run ``hops`` deep may not send or spawn once the chain has ``max_hops`` hops."""
    return hops >= max_hops


def hop_limit_message(max_hops: int) -> str:
    return f"agent-to-agent hop limit reached ({max_hops} hops in this chain)"


class Provenance(Immutable):
    """Who wrote one transcript line, and in which chain.

    Also read in the reader's shape (``for_reader``: camelCase names): a message stored
    in storage v3 keeps its provenance that way, beside its line (ADR 0036)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, populate_by_name=True)

    kind: ProvenanceKind
    session_key: str | None = Field(default=None, validation_alias=_reader("session_key"))
    """The session whose agent (or person) wrote it, when not this session's own user."""
    run_id: str | None = Field(default=None, validation_alias=_reader("run_id"))
    trace_id: str | None = Field(default=None, validation_alias=_reader("trace_id"))
    parent_run_id: str | None = Field(default=None, validation_alias=_reader("parent_run_id"))
    hops: int | None = None

    def for_reader(self) -> dict[str, Any]:
        """The shape ``sessions_history`` returns (decision 18): empty fields left out."""
        shown: dict[str, Any] = {"kind": self.kind}
        if self.session_key:
            shown["sessionKey"] = self.session_key
        if self.run_id:
            shown["runId"] = self.run_id
        if self.trace_id:
            shown["traceId"] = self.trace_id
        # Additive to decision 18: the run that caused the writing run, and its hop.
        if self.parent_run_id:
            shown["parentRunId"] = self.parent_run_id
        if self.hops is not None:
            shown["hops"] = self.hops
        return shown


def default_provenance(role: str) -> Provenance:
    """Provenance of a line recorded without one (before decision 18, or imported)."""
    return Provenance(kind="user" if role == "user" else "agent")


def with_provenance(message: dict[str, Any]) -> dict[str, Any]:
    """A transcript line as readers get it: with provenance, a default for older lines."""
    if isinstance(message.get("provenance"), dict):
        return message
    return {**message, "provenance": default_provenance_shown(message.get("role"))}


def default_provenance_shown(role: Any) -> dict[str, Any]:
    """``default_provenance(role).for_reader()``, without building a model per line read."""
    return {"kind": "user" if role == "user" else "agent"}
