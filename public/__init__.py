"""sessionwire: event-sourced session tools for AI agents.

The public API (contract §2)::

    from sessionwire import Gateway, GatewayConfig
    gw = await Gateway.open(config=..., store="sqlite:///sessions.db")
"""

from sessionwire.adapters.bootstrap import Gateway, SyncGateway
from sessionwire.application.config.gateway_config import ConfigError, GatewayConfig
from sessionwire.domain.keys import InvalidSessionKey

__all__ = ["ConfigError", "Gateway", "GatewayConfig", "InvalidSessionKey", "SyncGateway"]
