"""Calling a gateway's A2A request handler in process, as a remote caller would."""

from __future__ import annotations

import uuid

from a2a.server.context import ServerCallContext
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest
from sessionwire import Gateway
from sessionwire.adapters.a2a.agent_cards import agent_card, served_agents
from sessionwire.adapters.a2a.server import GRANT, GatewayRequestHandler
from sessionwire.adapters.access.tokens import Grant


def handler_for(gateway: Gateway, agent_id: str = "main") -> GatewayRequestHandler:
    """The A2A handler of the gateway's agent ``agent_id``."""
    entry = served_agents(gateway.served.config)[agent_id]
    card = agent_card(agent_id, entry, base_url="http://test", push_notifications=False)
    return GatewayRequestHandler(gateway, agent_id, card)


def a2a_message(text: str, context_id: str = "c1", *, wait: bool = True) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            context_id=context_id,
            parts=[Part(text=text)],
        ),
        configuration=SendMessageConfiguration(return_immediately=not wait),
    )


def called_by(grant: Grant) -> ServerCallContext:
    """The call context of a caller holding ``grant``."""
    return ServerCallContext(state={GRANT: grant})
