"""How long the outbox waits between a failed delivery's attempts, and when it gives up.

Its own module, apart from the outbox aggregate: the config builds it, and a process
that only reads sessions loads the config but none of the outbox's classes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    first_retry_seconds: float = 10
    max_retry_seconds: float = 600
    abandon_after_seconds: float = 24 * 3600

    def wait_after(self, failed_attempts: int) -> float:
        """Seconds to wait after the ``failed_attempts``-th failure: 10, 20, 40 … ≤ max."""
        exponent = min(max(0, failed_attempts - 1), 60)
        return float(min(self.first_retry_seconds * 2**exponent, self.max_retry_seconds))
