"""A client that sends its request headers slowly is cut off (issue 16, finding 5).

A real uvicorn server in this process with a tiny header deadline, and a raw socket that
sends part of a request's headers, then more, and never the end. The test waits for the
server to close the connection (a read that returns at EOF, bounded by a generous
timeout): it waits on an event, not for a stretch of time.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
import uvicorn
from fastapi import FastAPI
from sessionwire.adapters.access.header_deadline import header_deadline

DEADLINE = 0.2
# Far beyond the deadline: reached only if the server never closes the connection.
GENEROUS = 30.0


@pytest.fixture
async def port() -> AsyncIterator[int]:
    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            lifespan="off",
            log_config=None,
            log_level="warning",
            timeout_keep_alive=GENEROUS,
            http=header_deadline(DEADLINE),
        )
    )
    # Our own listening socket: connections wait in its backlog until the server runs.
    listening = socket.create_server(("127.0.0.1", 0))
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    yield listening.getsockname()[1]
    server.should_exit = True
    await serving


async def read_until_closed(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(GENEROUS):
        return await reader.read()  # returns at EOF: when the server closes


async def test_headers_that_never_end_are_cut_off(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        await writer.drain()
        writer.write(b"X-Slow: a")  # more bytes do not extend the deadline
        await writer.drain()
        answer = await read_until_closed(reader)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 ")


async def test_a_slow_second_request_on_a_kept_alive_connection_is_cut_off(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        first = await reader.readuntil(b'{"status":"ok"}')
        assert first.startswith(b"HTTP/1.1 200 ")
        writer.write(b"GET /healthz HTTP/1.1\r\nHo")
        await writer.drain()
        answer = await read_until_closed(reader)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 ")


async def test_a_connection_that_sends_nothing_is_cut_off(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        answer = await read_until_closed(reader)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 ")
