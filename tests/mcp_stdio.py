"""``sessionwire mcp`` started through the real CLI, as an MCP host starts it, and the
official ``mcp`` client connected to it over stdio: the e2e MCP tests' set-up."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.session import MessageHandlerFnT
from mcp.client.stdio import stdio_client


def server_command(store: str, *args: str, config: Path | None = None) -> list[str]:
    """The interpreter's arguments that serve ``mcp`` (with ``args``) on ``store``."""
    settings = ["--config", str(config)] if config else []
    return ["-m", "sessionwire.adapters.cli.main", "--store", store, *settings, "mcp", *args]


def server_parameters(store: str, *args: str, config: Path | None = None) -> StdioServerParameters:
    """The server as a stdio client starts it, in this test's environment."""
    return StdioServerParameters(
        command=sys.executable,
        args=server_command(store, *args, config=config),
        env=dict(os.environ),
    )


@asynccontextmanager
async def stdio_session(
    store: str,
    *args: str,
    config: Path | None = None,
    message_handler: MessageHandlerFnT | None = None,
) -> AsyncIterator[ClientSession]:
    """A client session with a server started for it, initialized (the server's answer
    is its ``initialize_result``); the server's stderr is dropped."""
    params = server_parameters(store, *args, config=config)
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, message_handler=message_handler) as session,
        ):
            await session.initialize()
            yield session


def payload(result: types.CallToolResult) -> dict[str, Any]:
    """The JSON a tool answered, read from the text content (what every client sees), which
    the structured content equals."""
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    data = json.loads(block.text)
    assert result.structured_content == data
    assert isinstance(data, dict)
    return data
