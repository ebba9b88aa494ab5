"""Agent Cards (A2A v1.0): one per configured agent, its skills from the agent's config
(``agents.list[].a2a``), signed with the audit checkpoint key (Ed25519, ADR 0016) as a
JWS over the card's canonical JSON (RFC 8785), as the spec's ``signatures`` provide.

A card declares every binding and version the agent's endpoint answers (decision 38,
ADR 0046): JSON-RPC and HTTP+JSON (REST), each at 1.0 and at 0.3, all at one URL (the
JSON-RPC methods and the REST paths of the two versions do not overlap). Served through
the SDK's ``agent_card_to_dict``, the card also carries the 0.3 fields (``url``,
``preferredTransport``, ``additionalInterfaces``) from its 0.3 interfaces, so a 0.3
client reads it too."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import jwt
from a2a.compat.v0_3 import types as types_v03
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from a2a.utils.signing import ProtectedHeader, create_agent_card_signer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from sessionwire.application.config.gateway_config import A2ASkill, AgentEntry, GatewayConfig
from sessionwire.domain.keys import DEFAULT_AGENT_ID, normalize_agent_id

A2A_PREFIX = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
BEARER = "bearer"
TEXT = "text/plain"
# What the endpoint answers, in the order a client should prefer: the current version
# first; JSON-RPC (what every client speaks) before REST within each. A 0.3 client
# takes the first 0.3 interface as the card's ``url``/``preferredTransport``.
INTERFACES = (
    (TransportProtocol.JSONRPC, PROTOCOL_VERSION_1_0),
    (TransportProtocol.HTTP_JSON, PROTOCOL_VERSION_1_0),
    (TransportProtocol.JSONRPC, PROTOCOL_VERSION_0_3),
    (TransportProtocol.HTTP_JSON, PROTOCOL_VERSION_0_3),
)


def served_agents(config: GatewayConfig) -> dict[str, AgentEntry]:
    """The agents served over A2A: every configured one (the default agent alone when
    the config lists none), by normalized id."""
    listed = config.agents.list or [AgentEntry(id=DEFAULT_AGENT_ID)]
    return {normalize_agent_id(agent.id): agent for agent in listed}


def agent_path(agent_id: str) -> str:
    return f"{A2A_PREFIX}/{agent_id}"


def is_card_path(path: str) -> bool:
    """Cards are public, as the spec's discovery expects: no token needed to read one."""
    return path.startswith(A2A_PREFIX + "/") and path.endswith(CARD_PATH)


def key_id(key: Ed25519PrivateKey) -> str:
    """The key's id in the signature header: its public key's SHA-256, short (the same
    key signs the audit checkpoints, so an auditor can match the two)."""
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def public_jwk(key: Ed25519PrivateKey) -> dict[str, str]:
    """The verification key as a JWK (OKP, Ed25519), for a client that checks the card."""
    return jwk_of(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def jwk_of(raw_public_key: bytes) -> dict[str, str]:
    """A raw Ed25519 public key (what ``ed25519:BASE64`` holds) as a JWK."""
    return {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": base64.urlsafe_b64encode(raw_public_key).rstrip(b"=").decode("ascii"),
        "kid": hashlib.sha256(raw_public_key).hexdigest()[:16],
    }


def _conversation(agent_id: str) -> A2ASkill:
    """The skill of an agent configured with none: a card must list one (spec §5.7)."""
    return A2ASkill(id="chat", name=f"Chat with {agent_id}", description="a conversation turn")


def agent_card(
    agent_id: str,
    entry: AgentEntry,
    *,
    base_url: str,
    push_notifications: bool,
    signing_key: Ed25519PrivateKey | None = None,
) -> AgentCard:
    """The agent's card at ``base_url`` (scheme and host the client reached us by)."""
    a2a = entry.a2a
    card = AgentCard(
        name=entry.name or agent_id,
        description=(
            a2a.description if a2a and a2a.description else f"sessionwire agent {agent_id}"
        ),
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"{base_url.rstrip('/')}{agent_path(agent_id)}",
                protocol_binding=binding,
                protocol_version=protocol_version,
            )
            for binding, protocol_version in INTERFACES
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=push_notifications),
        security_schemes={
            BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="a token given to `sessionwire serve`"
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList()})],
        default_input_modes=[TEXT],
        default_output_modes=[TEXT],
        skills=[
            AgentSkill(
                id=skill.id,
                name=skill.name,
                description=skill.description or skill.name,
                tags=skill.tags or [agent_id],
                examples=skill.examples,
            )
            for skill in (a2a.skills if a2a and a2a.skills else [_conversation(agent_id)])
        ],
    )
    if signing_key is not None:
        sign = create_agent_card_signer(
            signing_key=signing_key.private_bytes(
                Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
            ),
            protected_header=ProtectedHeader(
                kid=key_id(signing_key), alg="EdDSA", jku=None, typ="JOSE"
            ),
        )
        card = sign(card)
    return card


def card_document(card: AgentCard, signing_key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
    """The card as served: the SDK's JSON of it, which adds the 0.3 fields. Signed (the
    card carries the 1.0 signature then), it also carries one over the card as a 0.3
    client reads it: a 0.3 verifier canonicalizes its own model of the card (the 0.3
    fields only), which the 1.0 signature does not cover. A verifier accepts a card when
    any one signature verifies, so each version finds its own."""
    document = agent_card_to_dict(card)
    if signing_key is not None:
        document.setdefault("signatures", []).append(_v03_signature(document, signing_key))
    return document


def _v03_signature(document: dict[str, Any], signing_key: Ed25519PrivateKey) -> dict[str, str]:
    """A JWS (EdDSA, detached payload) over the 0.3 canonical form of ``document``: what
    a2a-sdk 0.3's ``canonicalize_agent_card`` makes of the card it parses from it."""
    unsigned = {name: value for name, value in document.items() if name != "signatures"}
    seen = types_v03.AgentCard.model_validate(unsigned).model_dump(
        exclude={"signatures"}, exclude_defaults=True, exclude_none=True, by_alias=True
    )
    payload = json.dumps(_without_empty(seen), separators=(",", ":"), sort_keys=True)
    token = jwt.PyJWS().encode(
        payload.encode(),
        signing_key,
        algorithm="EdDSA",
        headers={"kid": key_id(signing_key), "typ": "JOSE"},
    )
    protected, _, signature = token.split(".")
    return {"protected": protected, "signature": signature}


def _without_empty(value: Any) -> Any:
    """``value`` without empty strings, lists and objects, at any depth (as 0.3's
    canonical form drops them); None when nothing is left."""
    if isinstance(value, dict):
        kept = {k: v for k, item in value.items() if (v := _without_empty(item)) is not None}
        return kept or None
    if isinstance(value, list):
        items = [v for item in value if (v := _without_empty(item)) is not None]
        return items or None
    return None if value == "" else value
