"""Source IP patterns of policy entries and whitelists: exact addresses and CIDR blocks (ACL
2.0's ``sourceIps``), and ACL 1.0's IPv4 forms ``*``, ``192.168.*.*``, ``192.168.1.1-100``,
``192.168.1.{1,2}`` and comma lists of these (its ``whiteRemoteAddress`` patterns)."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Sequence
from typing import Final

MAX_PATTERN_CHARS: Final = 1024

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpTest = Callable[[IpAddress], bool]


@functools.lru_cache(maxsize=4096)
def peer_address(peer_ip: str) -> IpAddress | None:
    """A peer's address as a connection reports it (an IPv4-mapped IPv6 address counts as
    its IPv4 address; a zone or brackets are dropped); None when it is not an address."""
    text = peer_ip.strip().strip("[]").split("%", 1)[0]
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _any(_addr: IpAddress) -> bool:
    return True


def _octet_range(part: str, pattern: str) -> tuple[int, int]:
    if part == "*":
        return (0, 255)
    lo_text, dash, hi_text = part.partition("-")
    try:
        lo = int(lo_text)
        hi = int(hi_text) if dash else lo
    except ValueError:
        raise ValueError(f"source IP pattern {pattern!r}: {part!r} is not 0-255") from None
    digits = (lo_text + hi_text).isascii() and lo_text.isdigit() and (not dash or hi_text.isdigit())
    if not digits or not 0 <= lo <= hi <= 255:
        raise ValueError(f"source IP pattern {pattern!r}: {part!r} is not a number or range 0-255")
    return (lo, hi)


def _octets(pattern: str) -> IpTest:
    parts = pattern.split(".")
    if len(parts) != 4:
        raise ValueError(f"source IP pattern {pattern!r} does not have four parts")
    ranges = [_octet_range(p, pattern) for p in parts]

    def test(addr: IpAddress) -> bool:
        if addr.version != 4:
            return False
        packed = addr.packed
        return all(lo <= b <= hi for b, (lo, hi) in zip(packed, ranges, strict=True))

    return test


def _one_source_ip(pattern: str) -> IpTest:
    if pattern in ("*", "*.*.*.*"):
        return _any
    if "{" in pattern:
        prefix, brace, rest = pattern.partition("{")
        listed, close, tail = rest.partition("}")
        if not brace or not close or tail or not prefix.endswith("."):
            raise ValueError(f"source IP pattern {pattern!r} is not like 192.168.1.{{1,2}}")
        tests = [_octets(prefix + item.strip()) for item in listed.split(",")]
        return lambda addr: any(t(addr) for t in tests)
    if ("*" in pattern or "-" in pattern) and ":" not in pattern:
        return _octets(pattern)
    try:
        net = ipaddress.ip_network(pattern, strict=False)
    except ValueError:
        raise ValueError(
            f"source IP pattern {pattern!r} is not an IP address, a CIDR block or an ACL 1.0 "
            "pattern (192.168.*.*, 192.168.1.1-100, 192.168.1.{1,2})"
        ) from None
    return lambda addr: addr in net


def compile_source_ip(pattern: str) -> IpTest:
    """A test for peer addresses from one source IP pattern; ``ValueError`` when the pattern
    means nothing."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise ValueError("a source IP pattern is empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"a source IP pattern is longer than {MAX_PATTERN_CHARS} characters")
    pattern = pattern.strip()
    if "," in pattern and "{" not in pattern:
        tests = [_one_source_ip(p.strip()) for p in pattern.split(",")]
        return lambda addr: any(t(addr) for t in tests)
    return _one_source_ip(pattern)


def compile_source_ips(patterns: Sequence[str]) -> IpTest:
    """A test that a peer address matches any of ``patterns`` (no patterns: any address)."""
    if not patterns:
        return _any
    tests = [compile_source_ip(p) for p in patterns]
    if len(tests) == 1:
        return tests[0]
    return lambda addr: any(t(addr) for t in tests)


def source_ip_matches(patterns: Sequence[str], peer_ip: str) -> bool:
    """Whether ``peer_ip`` matches any of ``patterns``; no patterns match every peer, an
    unreadable peer address matches only ``*``."""
    test = compile_source_ips(patterns)
    if test is _any:
        return True
    addr = peer_address(peer_ip)
    return addr is not None and test(addr)
