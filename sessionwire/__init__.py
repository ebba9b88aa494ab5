"""sessionwire: event-sourced session tools for AI agents.

The public API (contract §2)::

    from sessionwire import Gateway, GatewayConfig
    gw = await Gateway.open(config=..., store="sqlite:///sessions.db")
"""

from sessionwire.application.config import ConfigError, GatewayConfig
from sessionwire.domain.keys import InvalidSessionKey
from sessionwire.gateway import Gateway, SyncGateway

__all__ = ["ConfigError", "Gateway", "GatewayConfig", "InvalidSessionKey", "SyncGateway"]
