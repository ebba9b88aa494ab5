"""sessionwire: event-sourced session tools for AI agents.

The public API (contract §6 decision 19) is this module and ``sessionwire.testing``;
every other module path is internal and may move::

    from sessionwire import Gateway, GatewayConfig
    gw = await Gateway.open(config=..., store="sqlite:///sessions.db")

Each name is imported on first use (PEP 562): every ``sessionwire.*`` module, the
command line's included, is imported through this package, and ``sessionwire --help``
should not pay for the gateway, nor a script for a web server, MCP, httpx or the
PostgreSQL driver it does not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessionwire.adapters.bootstrap import Gateway, SyncGateway
    from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime
    from sessionwire.application.config.gateway_config import ConfigError, GatewayConfig
    from sessionwire.application.ports.runtime import (
        AgentRuntime,
        ChannelDelivery,
        Delivery,
        DeliveryRejected,
        InputRequest,
        RunReply,
        RunRequest,
    )
    from sessionwire.domain.errors import SessionwireError
    from sessionwire.domain.keys import InvalidSessionKey

    __version__: str

# Public name -> the internal module that defines it.
_HOMES = {
    "Gateway": "sessionwire.adapters.bootstrap",
    "SyncGateway": "sessionwire.adapters.bootstrap",
    "GatewayConfig": "sessionwire.application.config.gateway_config",
    "ConfigError": "sessionwire.application.config.gateway_config",
    "AgentRuntime": "sessionwire.application.ports.runtime",
    "RunRequest": "sessionwire.application.ports.runtime",
    "RunReply": "sessionwire.application.ports.runtime",
    "InputRequest": "sessionwire.application.ports.runtime",
    "ChannelDelivery": "sessionwire.application.ports.runtime",
    "Delivery": "sessionwire.application.ports.runtime",
    "DeliveryRejected": "sessionwire.application.ports.runtime",
    "InvalidSessionKey": "sessionwire.domain.keys",
    "SessionwireError": "sessionwire.domain.errors",
    "OpenAIRuntime": "sessionwire.adapters.runtimes.openai_compatible",
}


def _version() -> str:
    # importlib.metadata costs about as much as click to import: only when asked.
    from importlib import metadata

    try:
        return metadata.version("sessionwire")
    except metadata.PackageNotFoundError:
        # A source tree that was never installed: say so rather than guess.
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return _version()
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sessionwire' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "AgentRuntime",
    "ChannelDelivery",
    "ConfigError",
    "Delivery",
    "DeliveryRejected",
    "Gateway",
    "GatewayConfig",
    "InputRequest",
    "InvalidSessionKey",
    "OpenAIRuntime",
    "RunReply",
    "RunRequest",
    "SessionwireError",
    "SyncGateway",
    "__version__",
]
