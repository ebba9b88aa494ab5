"""Posts made whose record is not saved yet: a step tried again never posts twice.

A driver posts (a sub-agent's report, an agent-to-agent announce), then saves the event
that records the post. When that save fails (a transient store error), the driver tries
the step again after a back-off, and the step posts again. Across a crash that repeat is
expected and the channel drops it by its idempotency key; within one process it is a
duplicate the gateway made (exactly once, decision 13), so the outcome of a post is kept
here, by idempotency key, until the driver says it is recorded.
"""

from __future__ import annotations

from collections import OrderedDict

from sessionwire.application.ports.runtime import ChannelDelivery, Delivery

# Outcomes kept at most: one whose record never comes in this process (another gateway
# recorded it, or the driver gave up) is dropped oldest first; forgetting one costs at
# worst a repeat the channel drops by its key, never a lost post.
KEPT = 1024


class UnrecordedPosts(ChannelDelivery):
    """``delivery``, with each post's outcome (posted, or the failure) replayed for the
    same idempotency key until ``recorded``."""

    def __init__(self, delivery: ChannelDelivery) -> None:
        self.delivery = delivery
        self._outcomes: OrderedDict[str, BaseException | None] = OrderedDict()

    async def deliver(self, delivery: Delivery) -> None:
        key = delivery.idempotency_key
        if not key:
            await self.delivery.deliver(delivery)
            return
        if key in self._outcomes:
            failure = self._outcomes[key]
        else:
            try:
                await self.delivery.deliver(delivery)
            except Exception as error:  # replayed to the retry as it was first raised
                failure = error
            else:
                failure = None
            self._outcomes[key] = failure
            while len(self._outcomes) > KEPT:
                self._outcomes.popitem(last=False)
        if failure is not None:
            raise failure

    def recorded(self, idempotency_key: str) -> None:
        """The post under this key is in the store: a later post of it is a new one."""
        self._outcomes.pop(idempotency_key, None)


__all__ = ["UnrecordedPosts"]
