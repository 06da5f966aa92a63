"""Source IP patterns: addresses, CIDR blocks and ACL 1.0's IPv4 patterns."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.auth.source_ip import source_ip_matches


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("192.168.1.5", ["192.168.1.5", "::ffff:192.168.1.5"], ["192.168.1.6", "::1"]),
        ("10.0.0.0/8", ["10.1.2.3", "10.255.255.255"], ["11.0.0.1"]),
        ("192.168.*.*", ["192.168.0.1", "192.168.255.9"], ["192.169.0.1"]),
        ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.101", "192.168.2.1"]),
        ("192.168.1.{1,2}", ["192.168.1.1", "192.168.1.2"], ["192.168.1.3"]),
        ("1.1.1.1,2.2.2.2", ["1.1.1.1", "2.2.2.2"], ["3.3.3.3"]),
        ("*", ["1.2.3.4", "::1", "not-an-ip"], []),
        ("::1", ["::1", "[::1]"], ["127.0.0.1"]),
        ("fe80::/10", ["fe80::1%eth0"], ["::1"]),
    ],
)
def test_source_ip_patterns(pattern: str, inside: list[str], outside: list[str]) -> None:
    for peer in inside:
        assert source_ip_matches([pattern], peer), (pattern, peer)
    for peer in outside:
        assert not source_ip_matches([pattern], peer), (pattern, peer)


def test_no_source_ips_match_anyone_and_bad_peers_match_only_star() -> None:
    assert source_ip_matches([], "1.2.3.4")
    assert source_ip_matches([], "")
    assert not source_ip_matches(["10.0.0.0/8"], "")
    assert not source_ip_matches(["10.0.0.0/8", "1.2.3.4"], "garbage")


@pytest.mark.parametrize(
    "pattern",
    ["", "x", "1.2.3", "1.2.3.256", "1.2.3.5-4", "1.2.3.{1,x}", "1.2.{1}.3", "10.0.0.0/33"],
)
def test_bad_source_ip_patterns(pattern: str) -> None:
    with pytest.raises(ValueError):
        source_ip_matches([pattern], "1.2.3.4")


@given(st.text(max_size=30), st.ip_addresses())
def test_source_ip_patterns_are_total(pattern: str, addr: object) -> None:
    with contextlib.suppress(ValueError):
        source_ip_matches([pattern], str(addr))
