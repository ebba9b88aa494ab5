"""Where the gateway may send a request (contract decision 40, ADR 0040).

An address is allowed when it is public: loopback, link-local, private (and unique
local), shared (CGNAT), multicast, unspecified, reserved and documentation ranges, and
the clouds' metadata addresses (``169.254.169.254``, ``fd00:ec2::254``, ``100.100.100.200``
…) are refused unless ``http.egress.allow`` names them: by address or CIDR, by host name
(any port), or by origin (scheme, host and port). The check is made on the address a name
resolved to, the one then connected to, so a name that resolves elsewhere the next time
gains nothing. Pure: the caller resolves.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from sessionwire.domain.errors import SessionwireError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS = {"http": 80, "https": 443}
# IPv6 forms that carry an IPv4 address a host may route to: NAT64's well-known prefix.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# Named for the refusal's text; every other non-global address is "not public".
_NAMED_RANGES: tuple[tuple[str, IPNetwork], ...] = tuple(
    (name, ipaddress.ip_network(cidr))
    for name, cidr in (
        ("cloud metadata", "169.254.169.254/32"),
        ("cloud metadata", "fd00:ec2::254/128"),
        ("cloud metadata", "100.100.100.200/32"),
        ("shared (CGNAT)", "100.64.0.0/10"),
    )
)


class EgressRefused(SessionwireError, ValueError):
    """A request the address policy refuses; the text names the address and the key."""


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> Origin:
        """The origin of an absolute http(s) URL; anything else is a ValueError."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"not an http(s) URL with a host: {url!r}")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"not a valid port in {url!r}") from None
        return cls(scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme])

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def unwrapped(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (mapped, NAT64), else the address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def refused_range(address: IPAddress) -> str | None:
    """Why ``address`` is not public (the range's name), or None when it is."""
    address = unwrapped(address)
    for name, network in _NAMED_RANGES:
        if address.version == network.version and address in network:
            return name
    for name, flag in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
    ):
        if flag:
            return name
    return None if address.is_global else "not public"


@dataclass(frozen=True)
class EgressPolicy:
    """The allow list (``http.egress.allow``), parsed: addresses and CIDRs, host names,
    origins. An empty one allows public addresses only."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()
    origins: frozenset[Origin] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EgressPolicy:
        """Each entry an address, a CIDR, a host name or an origin; a bad one is a
        ValueError naming it."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        origins: set[Origin] = set()
        for entry in entries:
            text = entry.strip()
            if "://" in text:
                origin = Origin.of(text)
                if urlsplit(text).path not in ("", "/"):
                    raise ValueError(f"an origin has no path: {entry!r}")
                origins.add(origin)
                continue
            try:
                networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            if not _is_host_name(text):
                raise ValueError(
                    f"neither an address, a CIDR, a host name nor an origin: {entry!r}"
                )
            hosts.add(text.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts), frozenset(origins))

    def names(self, origin: Origin) -> bool:
        """The operator named this host (any port) or this origin."""
        return origin.host.rstrip(".") in self.hosts or origin in self.origins

    def check(self, origin: Origin, address: IPAddress) -> None:
        """Refuse ``address`` (what ``origin``'s host resolved to) unless it is public or
        the allow list names it, its host or its origin."""
        reason = refused_range(address)
        if reason is None or self.names(origin):
            return
        plain = unwrapped(address)
        if any(plain.version == net.version and plain in net for net in self.networks):
            return
        if any(address.version == net.version and address in net for net in self.networks):
            return
        shown = f"{origin.host} ({address})" if origin.host != str(address) else str(address)
        raise EgressRefused(
            f"refused to send to {shown}: a {reason} address; "
            "name it in http.egress.allow to allow it"
        )


def address_of(host: str) -> IPAddress | None:
    """``host`` as an address when it is one (brackets allowed), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _is_host_name(text: str) -> bool:
    labels = text.rstrip(".").split(".")
    return (
        bool(text)
        and len(text) <= 253
        and all(
            label and len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum()
            for label in labels
        )
    )
