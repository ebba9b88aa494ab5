"""The read path's composition: the event store opened by a config's key rules, and the
read tools over it without a gateway (ADR 0036).

Apart from ``bootstrap``, whose module imports every orchestration driver (and so every
aggregate) to wire a gateway: a process that lists sessions, reads a history or lists
agents loads the store, the config and the read tools only.
"""

from __future__ import annotations

from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.off_loop import open_off_loop
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.ports.clock_and_ids import Clock, IdSource, RandomIds, SystemClock
from sessionwire.application.read_tools import ReadTools


def open_event_store(
    store: str, config: GatewayConfig, *, writer: bool = False, existing: bool = False
) -> EventSourcedStore:
    """The event store at ``store``, its session rows classified by ``config``'s key rules.

    ``writer``: the caller carries on the store's work; an SQLite file then admits no
    other such caller (StoreInUse names the live one). ``existing``: only a store that
    is there (NoStore otherwise); nothing is created."""
    rules = config.key_rules
    opened = EventSourcedStore(
        store,
        kind_of=lambda state: rules.kind(state.key, state.chat_type),
        writer=writer,
        existing=existing,
    )
    # The views of the messages it writes are masked as this config masks (ADR 0054).
    opened.read_model.use_redactor(config.redaction.redactor())
    return opened


async def open_read_tools(
    config: GatewayConfig,
    store: str,
    *,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    existing: bool = False,
) -> ReadTools:
    """The read tools on ``store``, opened as ``Gateway.open(..., resume=False)`` opens
    it: off the loop, not as the store's writer (beside a live gateway too)."""
    opened = await open_off_loop(lambda: open_event_store(store, config, existing=existing))
    return ReadTools(
        store=opened, config=config, clock=clock or SystemClock(), ids=ids or RandomIds()
    )
