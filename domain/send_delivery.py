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
- ``steered``: the busy policy ``steer`` injected it into the run in flight, whose id
  ``runId`` names (the decision's ``steered_run_id``, saved in the transaction that
  recorded the run's ``RunSteered``): no run was started for it. A steer that found the
  run ended by then was recorded ``enqueued`` instead, and is answered as a queued send.
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
    run_id: str | None = None
    """Only when ``steered``: the run the message joined."""

    @classmethod
    def of(
        cls,
        decision: BusyOutcome | None,
        runs_ahead: int | None,
        steered_run_id: str | None = None,
    ) -> SendDelivery:
        """From the send's recorded busy decision (``None``: the session was idle)."""
        if decision is None:
            return cls("started")
        if decision == "rejected":
            return cls("refused")
        if decision == "steered":
            assert steered_run_id is not None, "a steered decision names its run"
            return cls("steered", run_id=steered_run_id)
        if runs_ahead == 0:
            return cls("started")
        # None: a decision recorded before positions were; queued, place unknown.
        return cls("queued", position=runs_ahead)

    def to_json(self) -> dict[str, Any]:
        """``delivery`` as the send answers it. ``mode`` keeps saying how the reply comes
        back (OpenClaw's ``announce``) whenever a run was started; a steered send started
        none and opened no exchange, so nothing is announced for it."""
        shown: dict[str, Any] = {"status": self.status}
        if self.position is not None:
            shown["position"] = self.position
        if self.run_id is not None:
            shown["runId"] = self.run_id
        if self.status in ("started", "queued"):
            shown["mode"] = "announce"
        return shown
