"""What a test reaches behind the public gateway: its service and its blocking store.

Not public API (``sessionwire.testing`` is): the project's own tests check what was
recorded with these. A test's blocking reads pass the loop guard (they are the test's,
not the gateway's; ``adapters/store/loop_guard.py``).
"""

from __future__ import annotations

from sessionwire.adapters.bootstrap import Gateway, SyncGateway
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.adapters.store.off_loop import OffLoopStore
from sessionwire.application.gateway import GatewayService


def internals(gateway: Gateway | SyncGateway | GatewayService) -> GatewayService:
    """The service under a gateway (its run engine, in-flight registry, resume...).

    The one place that reaches under a public ``Gateway``, for tests and the simulator
    only: the transports take the ``Gateway`` itself (ADR 0043)."""
    if isinstance(gateway, GatewayService):
        return gateway
    if isinstance(gateway, SyncGateway):
        gateway = gateway._gateway
    return gateway._service


def store_of(gateway: Gateway | SyncGateway | GatewayService) -> EventSourcedStore:
    """The blocking store under a gateway, as the store's own threads use it."""
    store = internals(gateway).store
    assert isinstance(store, OffLoopStore)
    return store.event_store
