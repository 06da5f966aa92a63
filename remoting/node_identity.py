"""Which client certificates prove a cluster node: the one place that decides it.

A certificate that chains to the trusted CA proves only that the CA issued it; a CA that
issues users' certificates too would otherwise make every user a node. So a verified
certificate proves a node only when one of its names matches ``tls_node_name_pattern``: its
subject common name, or one of its DNS or URI subject alternative names. The pattern is a
glob (:func:`fnmatch.fnmatchcase`: ``*`` is any run of characters, dots and slashes
included, ``?`` one character, ``[...]`` a set); a DNS name is matched without regard to
case, as DNS compares names, a common name or a URI exactly. An empty pattern: no
certificate proves a node (the nodes sign with their inner credentials instead).

``rocketq cluster up --tls`` issues its nodes' certificate with the common name
``rocketq-node`` and sets the pattern to it; a deployment with its own CA picks its own
(``spiffe://example.org/rocketq/node/*`` for SPIFFE identities,
``*.rocketq-broker-headless.prod.svc.cluster.local`` for the pods' DNS names).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CertificateNames:
    """The names a certificate gives its holder: its subject common names and its DNS and
    URI subject alternative names (other kinds, IP addresses and e-mail addresses, name
    hosts and people, never a node's role)."""

    common_names: tuple[str, ...] = ()
    dns_names: tuple[str, ...] = ()
    uris: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        """Every name, common names first."""
        return (*self.common_names, *self.dns_names, *self.uris)


def certificate_names(cert: Any) -> CertificateNames | None:
    """The names of a certificate as :meth:`ssl.SSLSocket.getpeercert` gives it; None for
    no certificate (an empty dict: none was shown, or it was not verified). Entries that
    are not what the ssl module makes (a malformed dict) are left out."""
    if not cert or not isinstance(cert, dict):
        return None
    common: list[str] = []
    for rdn in _sequence(cert.get("subject")):
        for key, value in _pairs(rdn):
            if key == "commonName":
                common.append(value)
    dns: list[str] = []
    uris: list[str] = []
    for kind, value in _pairs(cert.get("subjectAltName")):
        if kind == "DNS":
            dns.append(value)
        elif kind == "URI":
            uris.append(value)
    return CertificateNames(tuple(common), tuple(dns), tuple(uris))


def _sequence(value: Any) -> tuple[Any, ...] | list[Any]:
    return value if isinstance(value, tuple | list) else ()


def _pairs(value: Any) -> list[tuple[str, str]]:
    """The (key, value) pairs of strings in a tuple of pairs; anything else left out."""
    return [
        (pair[0], pair[1])
        for pair in _sequence(value)
        if isinstance(pair, tuple | list)
        and len(pair) == 2
        and isinstance(pair[0], str)
        and isinstance(pair[1], str)
    ]


def peer_names(transport: Any) -> CertificateNames | None:
    """The names of the certificate a TLS peer showed and that was verified, else None
    (plaintext, no certificate, or not verified)."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    return certificate_names(ssl_object.getpeercert())


class NodePattern:
    """``tls_node_name_pattern`` compiled: :meth:`node_name` says whether a certificate's
    names prove a node."""

    def __init__(self, pattern: str) -> None:
        if pattern != pattern.strip():
            raise ValueError(
                f"tls_node_name_pattern {pattern!r}: leading or trailing spaces match no "
                "certificate name"
            )
        self.pattern = pattern
        self._folded = pattern.lower()

    @property
    def enabled(self) -> bool:
        """Some certificate may prove a node (the pattern is not empty)."""
        return bool(self.pattern)

    def node_name(self, names: CertificateNames | None) -> str | None:
        """The first of the certificate's names that matches the pattern (the node it
        proves), else None: no certificate, no pattern, or no name matching."""
        if names is None or not self.pattern:
            return None
        for name in names.common_names:
            if fnmatch.fnmatchcase(name, self.pattern):
                return name
        for name in names.dns_names:
            if fnmatch.fnmatchcase(name.lower(), self._folded):
                return name
        for name in names.uris:
            if fnmatch.fnmatchcase(name, self.pattern):
                return name
        return None

    def __repr__(self) -> str:
        return f"NodePattern({self.pattern!r})"
