"""A deadline on request headers for uvicorn's HTTP/1.1 server (issue 16, finding 5).

uvicorn bounds the idle time between requests (``timeout_keep_alive``) but not the time a
client takes to send a request's headers: one that sends them a byte at a time, forever,
holds its connection (and a place under ``limit_concurrency``) forever. With this
protocol a connection gets ``seconds`` from its opening, or from the first byte of each
later request, to complete the request's headers; past that it is answered 408 and
closed. More bytes do not extend the deadline. The body has its own bound (the
Gatekeeper's ``BODY_READ_SECONDS``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from sessionwire.application.library_logging import library_logger
from uvicorn.protocols.http.h11_impl import H11Protocol

# Headers are a few hundred bytes: a client that needs longer is broken or hostile.
HEADER_READ_SECONDS = 10.0
TIMEOUT_ANSWER = b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"

log = library_logger("sessionwire.http")


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's headers."""

    header_seconds: float = HEADER_READ_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(self.header_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _waiting_for_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_headers():
            self._arm()  # the first byte of a later request starts its deadline
        super().data_received(data)
        if not self._waiting_for_headers():
            self._disarm()

    def on_response_complete(self) -> None:
        # Between requests the keep-alive timeout applies, until the next byte arrives.
        self._disarm()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _too_slow(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing() or not self._waiting_for_headers():
            return
        log.info("request headers too slow: connection closed", seconds=self.header_seconds)
        self.transport.write(TIMEOUT_ANSWER)
        self.transport.close()


def header_deadline(seconds: float = HEADER_READ_SECONDS) -> type[HeaderDeadlineProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)`` with this deadline."""
    attributes: dict[str, Any] = {"header_seconds": seconds}
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), attributes)
