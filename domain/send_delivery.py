"""What became of the message a ``sessions_send`` delivered (decision 29), read off the
record: the busy decision the send made, or none because the session was idle.

A model told only "accepted" reads it as "the other agent is on it" while nothing runs
(OpenClaw #96020). The answer says which it was instead:

- ``started``: no run of the target was ahead of the message, so its run is the next the
  session runs (an idle session records no busy decision; an interrupt that cancelled
  every run ahead records ``runs_ahead`` 0);
- ``queued``: ``position`` runs of the session were in flight ahead of it when it was
  sent (the recorded ``runs_ahead``);
- ``refused``: the busy policy refused it (``reject``): no run was started;
- ``steered``: injected into a running turn. No busy policy steers yet, so no send is
  answered ``steered``; the value is part of the contract's shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sessionwire.domain.busy_decision import BusyOutcome

DeliveryStatus = Literal["started", "queued", "steered", "refused"]


@dataclass(frozen=True)
class SendDelivery:
    status: DeliveryStatus
    position: int | None = None

    @classmethod
    def of(cls, decision: BusyOutcome | None, runs_ahead: int | None) -> SendDelivery:
        """From the send's recorded busy decision (``None``: the session was idle)."""
        if decision is None:
            return cls("started")
        if decision == "rejected":
            return cls("refused")
        if runs_ahead == 0:
            return cls("started")
        # None: a decision recorded before positions were; queued, place unknown.
        return cls("queued", position=runs_ahead)

    def to_json(self) -> dict[str, Any]:
        """``delivery`` as the send answers it. ``mode`` keeps saying how the reply comes
        back (OpenClaw's ``announce``) whenever a run was started."""
        shown: dict[str, Any] = {"status": self.status}
        if self.position is not None:
            shown["position"] = self.position
        if self.status != "refused":
            shown["mode"] = "announce"
        return shown
