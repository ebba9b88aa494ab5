"""The address policy (domain/egress.py), against ranges written out by hand: what is
refused and why, and what each kind of allow entry lets through."""

from __future__ import annotations

import ipaddress
import re

import pytest
from sessionwire.domain.egress import EgressPolicy, EgressRefused, Origin, refused_range


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("192.168.0.1", "private"),
        ("fc00::1", "private"),
        ("100.64.0.1", "shared (CGNAT)"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("93.184.215.14", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_each_range_is_refused_by_name_and_public_addresses_pass(
    address: str, expected: str | None
) -> None:
    assert refused_range(ipaddress.ip_address(address)) == expected


def test_allow_entries_name_an_address_a_network_a_host_or_an_origin() -> None:
    policy = EgressPolicy.parse(
        ["127.0.0.1", "10.1.0.0/16", "llm.internal", "http://192.168.1.5:8080"]
    )
    loopback = ipaddress.ip_address("127.0.0.1")
    policy.check(Origin.of("http://127.0.0.1:9/"), loopback)
    policy.check(Origin.of("http://anything.test/"), ipaddress.ip_address("10.1.200.3"))
    policy.check(Origin.of("https://LLM.internal:8443/v1"), ipaddress.ip_address("10.9.9.9"))
    policy.check(Origin.of("http://192.168.1.5:8080/x"), ipaddress.ip_address("192.168.1.5"))
    for url, address in (
        ("http://127.0.0.2/", "127.0.0.2"),  # the entry is one address
        ("http://10.2.0.1/", "10.2.0.1"),  # outside the network
        ("http://192.168.1.5:8081/", "192.168.1.5"),  # the origin's port only
        ("https://192.168.1.5:8080/", "192.168.1.5"),  # and its scheme
        ("http://other.internal/", "10.9.9.9"),
    ):
        with pytest.raises(EgressRefused, match=r"name it in http\.egress\.allow"):
            policy.check(Origin.of(url), ipaddress.ip_address(address))


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "not a host", "http://x/with/path", "ftp://x"])
def test_a_bad_entry_is_refused_naming_it(entry: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(entry))):
        EgressPolicy.parse([entry])
