"""A steer: a message injected into a run in flight (``RunSteered`` on the run, the
message in its session with the sender's provenance), one transaction. The ``subagents``
tool steers a child this way, and a ``sessions_send`` under the busy policy ``steer``
steers the busy session's run (saving its busy decision in the same transaction).

A steer is a hop on its sender's chain (ADR 0034): the message carries the sending run's
hop + 1, the steered run goes on at the deeper of its hop and the steer's, and the
sending run records the steer (``RunSteerSent``), which its trace counts (``maxSteers``).
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from sessionwire.application.context import ToolContext
from sessionwire.application.unit_of_work import retrying
from sessionwire.domain.base import Aggregate
from sessionwire.domain.causality import Causality
from sessionwire.domain.run import Run, RunAlreadyEnded, RunState
from sessionwire.domain.session import SessionClosed
from sessionwire.domain.transcript import TranscriptMessage


async def steer_run(
    context: ToolContext,
    run_id: UUID,
    message: str,
    *,
    chain: Causality,
    recorded_with: Callable[[], Aggregate] | None = None,
) -> RunState | None:
    """Steer run ``run_id`` with ``message`` from the requester, on the steer's chain
    ``chain`` (the sender's next hop); the run's state after it, or None when the run
    has ended or its session is closed (a steer racing the run's end loses, and records
    nothing). ``recorded_with`` makes a new aggregate saved in the same transaction
    (called once per attempt, so a retried attempt saves a fresh one)."""
    steered_by = context.requester.key
    sender = context.caller_run
    # From outside any run a steer has no chain of its own (its hop, 1, raises nothing):
    # it is recorded on the steered run's, as before steers counted.
    on_chain = chain if sender is not None else None
    async for uow in retrying(context.store, f"run {run_id}"):
        with uow:
            run = await uow.work(run_id, Run, RunState)
            if run is None or run.state.ended:
                return None
            session = await uow.session(run.state.session_key)
            if session is None or not session.is_active:
                return None
            now = context.clock.now()
            try:
                run.steer(message=message, steered_by=steered_by, at=now, causality=on_chain)
                session.append_message(
                    TranscriptMessage(
                        role="user",
                        content=[{"type": "text", "text": message}],
                        timestamp=int(now.timestamp() * 1000),
                    ),
                    at=now,
                    provenance=run.steer_provenance(steered_by, on_chain),
                )
            except (RunAlreadyEnded, SessionClosed):
                return None
            if sender is not None and sender.run_id != str(run_id):
                # The sending run counts the steer in its trace, in the same transaction.
                sending = await uow.work(UUID(sender.run_id), Run, RunState)
                if sending is not None:
                    sending.steer_sent(steered_run_id=str(run_id), hops=chain.hops, at=now)
            if recorded_with is not None:
                uow.add(recorded_with())
            await uow.commit()
            return run.state
    return None
