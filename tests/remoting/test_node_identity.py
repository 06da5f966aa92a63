"""Which client certificates prove a cluster node (``tls_node_name_pattern``): by the
subject common name, a DNS or a URI subject alternative name; nothing without a pattern or
a matching name; the names read from real certificates a TLS server verified."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st

from rocketq.common.config import ServerSecurityConfig
from rocketq.remoting.node_identity import (
    CertificateNames,
    NodePattern,
    certificate_names,
    peer_names,
)
from rocketq.remoting.tls import ServerTls, client_context, server_tls_from
from tests.remoting.tls_certs import Certs, Pem, make_certs


def cert_dict(
    common_name: str | None = None, dns: tuple[str, ...] = (), uris: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A certificate as :meth:`ssl.SSLSocket.getpeercert` gives it."""
    subject: list[tuple[tuple[str, str], ...]] = [(("organizationName", "rocketq tests"),)]
    if common_name is not None:
        subject.append((("commonName", common_name),))
    alt = [("DNS", d) for d in dns] + [("URI", u) for u in uris] + [("IP Address", "10.0.0.1")]
    return {"subject": tuple(subject), "subjectAltName": tuple(alt)}


def node(pattern: str, cert: dict[str, Any]) -> str | None:
    return NodePattern(pattern).node_name(certificate_names(cert))


def test_a_common_name_proves_a_node() -> None:
    assert node("rocketq-node", cert_dict("rocketq-node")) == "rocketq-node"
    assert node("broker-*", cert_dict("broker-a-0")) == "broker-a-0"
    assert node("rocketq-node", cert_dict("Rocketq-Node")) is None  # a CN matches exactly


def test_a_dns_name_proves_a_node_whatever_its_case() -> None:
    pattern = "*.rocketq-broker-headless.prod.svc.cluster.local"
    cert = cert_dict(
        "alice", dns=("localhost", "Broker-A-0.rocketq-broker-headless.prod.svc.cluster.local")
    )
    assert node(pattern, cert) == "Broker-A-0.rocketq-broker-headless.prod.svc.cluster.local"
    assert (
        node(pattern, cert_dict("alice", dns=("broker-a-0.other.prod.svc.cluster.local",))) is None
    )


def test_a_uri_name_proves_a_node() -> None:
    pattern = "spiffe://example.org/rocketq/node/*"
    assert node(pattern, cert_dict(uris=("spiffe://example.org/rocketq/node/n1",))) == (
        "spiffe://example.org/rocketq/node/n1"
    )
    assert node(pattern, cert_dict(uris=("spiffe://example.org/rocketq/user/alice",))) is None


def test_no_matching_name_no_certificate_or_no_pattern_proves_nothing() -> None:
    # A user's certificate from the same CA: its names match nothing.
    alice = cert_dict("alice", dns=("alice.users.example.org",), uris=("mailto-ish:alice",))
    assert node("rocketq-node", alice) is None
    # No pattern: not even a certificate naming the launcher's node proves one.
    assert node("", cert_dict("rocketq-node")) is None
    assert not NodePattern("").enabled
    # No certificate (plaintext), or one not verified (an empty dict).
    assert node("*", {}) is None
    assert NodePattern("*").node_name(None) is None
    # IP addresses and e-mail addresses name hosts and people, never a node.
    assert node("10.0.0.*", cert_dict()) is None


def test_a_pattern_with_surrounding_spaces_is_refused() -> None:
    with pytest.raises(ValueError, match="tls_node_name_pattern"):
        NodePattern(" rocketq-node")


def test_the_names_of_a_certificate() -> None:
    names = certificate_names(cert_dict("n1", dns=("a.example",), uris=("spiffe://x/y",)))
    assert names == CertificateNames(("n1",), ("a.example",), ("spiffe://x/y",))
    assert names is not None and names.all == ("n1", "a.example", "spiffe://x/y")
    assert certificate_names({}) is None
    assert certificate_names(None) is None


_junk = st.recursive(
    st.none() | st.text(max_size=8) | st.integers() | st.binary(max_size=4),
    lambda inner: st.lists(inner, max_size=4).map(tuple) | st.lists(inner, max_size=4),
    max_leaves=12,
)


@given(
    st.dictionaries(
        st.sampled_from(["subject", "subjectAltName", "issuer", "version"]), _junk, max_size=4
    ),
    st.text(max_size=6),
)
def test_a_malformed_certificate_dict_is_never_a_crash(cert: dict[str, Any], pattern: str) -> None:
    """Whatever shape the dict has, the names come out (or None) without an exception, and
    only str names are ever matched."""
    names = certificate_names(cert)
    if names is not None:
        assert all(isinstance(n, str) for n in names.all)
    if pattern == pattern.strip():
        NodePattern(pattern).node_name(names)


# -- real certificates ------------------------------------------------------------------------


def uri_leaf(certs: Certs, name: str, uri: str) -> Pem:
    """A client certificate with no common name and one URI subject alternative name (what
    SPIFFE issues), signed by ``certs``' CA (trustme makes DNS names only)."""
    authority = certs.authority
    ca_key = serialization.load_pem_private_key(authority.private_key_pem.bytes(), None)
    ca_cert = x509.load_pem_x509_certificate(authority.cert_pem.bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "workloads")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(uri)]), critical=True
        )
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    cert_file, key_file = certs.directory / f"{name}.crt", certs.directory / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return Pem(str(cert_file), str(key_file))


async def node_seen(tls: ServerTls, client: ssl.SSLContext) -> str | None:
    """What ``tls.node_name`` says of a connection made with ``client``."""
    seen: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if not seen.done():
                seen.set_result(tls.node_name(transport))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, "127.0.0.1", 0, ssl=tls.context)
    try:
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="127.0.0.1"
        )
        try:
            return await asyncio.wait_for(seen, 5)
        finally:
            writer.close()
    finally:
        server.close()


async def test_a_server_reads_the_node_from_a_verified_certificate(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    config = ServerSecurityConfig(
        tls_server_mode="enforcing",
        tls_server_cert_path=certs.server.cert,
        tls_server_key_path=certs.server.key,
        tls_server_trust_cert_path=certs.ca,
        tls_server_need_client_auth="optional",
        tls_node_name_pattern="spiffe://rocketq/node/*",
    )
    tls = server_tls_from(config)
    assert tls is not None and tls.nodes.pattern == "spiffe://rocketq/node/*"
    n1 = uri_leaf(certs, "n1", "spiffe://rocketq/node/n1")
    alice = certs.issue("alice", common_name="alice")
    posing = uri_leaf(certs, "posing", "spiffe://rocketq/user/n1")
    assert await node_seen(tls, client_context(certs.ca, n1.cert, n1.key)) == (
        "spiffe://rocketq/node/n1"
    )
    assert await node_seen(tls, client_context(certs.ca, alice.cert, alice.key)) is None
    assert await node_seen(tls, client_context(certs.ca, posing.cert, posing.key)) is None
    assert await node_seen(tls, client_context(certs.ca)) is None  # no certificate shown
    by_name = ServerTls(
        "enforcing",
        certs.server.cert,
        certs.server.key,
        certs.ca,
        client_auth="require",
        node_pattern="broker-*",
    )
    broker = certs.issue("broker", "broker-a-0.nodes.test", common_name="broker-a-0")
    assert await node_seen(by_name, client_context(certs.ca, broker.cert, broker.key)) == (
        "broker-a-0"
    )
    assert await node_seen(by_name, client_context(certs.ca, alice.cert, alice.key)) is None


def test_peer_names_of_a_plaintext_transport() -> None:
    class Plain:
        def get_extra_info(self, name: str) -> Any:
            return None

    assert peer_names(Plain()) is None
