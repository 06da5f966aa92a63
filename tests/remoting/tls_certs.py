"""Test certificates written to files, made by trustme: a CA, a server certificate for the
loopback addresses, client certificates with a common name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass
class Pem:
    """A certificate chain and its key, as files."""

    cert: str
    key: str


@dataclass
class Certs:
    """A CA (its certificate in ``ca``) and what it signed; ``issue`` makes more."""

    authority: trustme.CA
    directory: Path
    ca: str
    server: Pem

    def issue(self, name: str, *hosts: str, common_name: str | None = None) -> Pem:
        """A leaf certificate for ``hosts`` (``common_name`` as its subject CN), written as
        ``name``.crt and ``name``.key."""
        return write_leaf(
            self.authority.issue_cert(*(hosts or ("client.test",)), common_name=common_name),
            self.directory,
            name,
        )


def write_leaf(leaf: trustme.LeafCert, directory: Path, name: str) -> Pem:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.write_bytes(leaf.private_key_pem.bytes())
    return Pem(str(cert), str(key))


def make_certs(directory: Path, name: str = "ca") -> Certs:
    """A new CA in ``directory`` (``name``.pem) and a server certificate for 127.0.0.1 and
    localhost signed by it."""
    directory.mkdir(parents=True, exist_ok=True)
    authority = trustme.CA()
    ca = directory / f"{name}.pem"
    authority.cert_pem.write_to_path(str(ca))
    server = write_leaf(
        authority.issue_cert("127.0.0.1", "localhost", common_name="server"),
        directory,
        f"{name}-server",
    )
    return Certs(authority, directory, str(ca), server)
