"""A local cluster's secrets and certificates: what ``rocketq cluster up --auth --tls`` gives
its nodes and prints for its clients.

With auth, every node of the cluster gets authentication and authorization on, one super
user (``rocketq``, created by each broker at its first start) and the inner credentials
the nodes sign their own calls with (registrations, HA, Raft, replica sync). The super
user's credentials are written to ``<data_dir>/secrets/admin.credentials`` (the TOML file
``ROCKETQ_CREDENTIALS_FILE`` names for the SDK and the CLI); the inner credentials to
``<data_dir>/secrets/inner.json``; the bearer token every node's metrics port asks for
(``metrics_bearer_token``: metrics name topics and groups) to
``<data_dir>/secrets/metrics.token``, which the Prometheus of ``--monitor`` reads. All are
made once, readable by their owner only, and kept across restarts (the brokers keep their
users in their stores).

With TLS, a certificate authority made by trustme signs one certificate for 127.0.0.1 and
localhost: every remoting port enforces TLS, every metrics port and the console serve
HTTPS only, the nodes' own connections verify it, and clients trust
``<data_dir>/tls/ca.pem``. These are local certificates for trying a
secured cluster out, not for production: production certificates come from the
operator's own CA (the Helm chart takes them from a Secret or cert-manager).

The certificate is the nodes' own too: its common name is :data:`NODE_NAME`, and the nodes
set ``tls_node_name_pattern`` to it and show it as their client certificate, so that with
client certificates asked for (``tls_server_need_client_auth``) it proves a node, while a
certificate the same CA issues a user proves only that user (the CA's key is kept in
``<data_dir>/tls/ca.key``, readable by its owner only, to issue those).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocketq.common.exceptions import ConfigError
from rocketq.common.file_modes import private_dir

SUPER_USER: Final = "rocketq"
INNER_ACCESS_KEY: Final = "rocketq-inner"
# The common name of a local cluster's node certificate (the nodes' tls_node_name_pattern).
NODE_NAME: Final = "rocketq-node"


@dataclass(frozen=True)
class ClusterSecrets:
    """Where a local cluster's credentials are, and what they are."""

    admin_file: Path  # TOML: access_key, secret_key (the super user)
    inner_file: Path  # JSON: {"accessKey", "secretKey"} (the nodes' own)
    username: str
    password: str = field(repr=False)
    inner_json: str = field(repr=False)
    # The bearer token of the nodes' metrics ports, and the file that holds it.
    metrics_token_file: Path = Path()
    metrics_token: str = field(default="", repr=False)

    def console_users_line(self) -> str:
        """The super user as a line of the console's users file (``name:scrypt$...``, the
        form ``rocketq console --hash-password`` writes), so its login is the super
        user's name and password."""
        salt = secrets.token_bytes(16)
        n, r, p = 2**14, 8, 1
        digest = hashlib.scrypt(self.password.encode(), salt=salt, n=n, r=r, p=p)
        return f"{self.username}:scrypt${n}${r}${p}${salt.hex()}${digest.hex()}\n"

    def node_env(self) -> dict[str, str]:
        """The environment that turns auth on in a node (kept out of its command line, which
        any local user may read)."""
        return {
            "ROCKETQ_AUTHENTICATION_ENABLED": "true",
            "ROCKETQ_AUTHORIZATION_ENABLED": "true",
            "ROCKETQ_INIT_AUTHENTICATION_USER": json.dumps(
                {"username": self.username, "password": self.password}
            ),
            "ROCKETQ_INNER_CLIENT_AUTHENTICATION_CREDENTIALS": self.inner_json,
            "ROCKETQ_METRICS_BEARER_TOKEN": self.metrics_token,
        }


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read, atomically."""
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def cluster_secrets(data_dir: Path) -> ClusterSecrets:
    """The cluster's secrets, made at the first call and read back afterwards."""
    folder = data_dir / "secrets"
    admin_file, inner_file = folder / "admin.credentials", folder / "inner.json"
    token_file = folder / "metrics.token"
    if not admin_file.exists() or not inner_file.exists():
        password = secrets.token_urlsafe(24)
        _write_private(
            admin_file,
            f"# The super user of the cluster in {data_dir}\n"
            f'access_key = "{SUPER_USER}"\nsecret_key = "{password}"\n',
        )
        _write_private(
            inner_file,
            json.dumps({"accessKey": INNER_ACCESS_KEY, "secretKey": secrets.token_urlsafe(24)}),
        )
    if not token_file.exists():  # also for secrets made before the metrics asked for one
        _write_private(token_file, secrets.token_urlsafe(32))
    try:
        import tomllib

        admin = tomllib.loads(admin_file.read_text())
        inner = json.loads(inner_file.read_text())
        username, password = str(admin["access_key"]), str(admin["secret_key"])
        inner_json = json.dumps({"accessKey": inner["accessKey"], "secretKey": inner["secretKey"]})
        token = token_file.read_text().strip()
        if not token:
            raise ValueError(f"{token_file.name} is empty")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"the cluster's secrets in {folder} cannot be read ({exc!r}); remove the folder "
            "to make new ones (the brokers' stores keep the old super user)"
        ) from None
    return ClusterSecrets(admin_file, inner_file, username, password, inner_json, token_file, token)


@dataclass(frozen=True)
class ClusterCertificates:
    """A local cluster's CA and its one server certificate."""

    ca_file: Path
    cert_file: Path
    key_file: Path
    # The CA's key, to issue users' certificates (None: the certificates found in the
    # folder were put there by someone else).
    ca_key_file: Path | None = None

    def node_settings(self) -> dict[str, str]:
        """The config keys of a node serving TLS only (its metrics port HTTPS only), its
        own connections verifying the others against the cluster's CA."""
        return {
            "tls_server_mode": "enforcing",
            "metrics_tls_enable": "true",
            "tls_server_cert_path": str(self.cert_file),
            "tls_server_key_path": str(self.key_file),
            "tls_client_enable": "true",
            "tls_client_trust_cert_path": str(self.ca_file),
            # Client certificates (when tls_server_need_client_auth asks for them) chain
            # to the cluster's CA; a node shows the node certificate.
            "tls_server_trust_cert_path": str(self.ca_file),
            "tls_client_cert_path": str(self.cert_file),
            "tls_client_key_path": str(self.key_file),
            "tls_node_name_pattern": NODE_NAME,
        }


def cluster_certificates(data_dir: Path, hosts: tuple[str, ...] = ()) -> ClusterCertificates:
    """The cluster's certificates, made at the first call (needs trustme: the ``tls``
    extra) and kept afterwards; the server certificate names 127.0.0.1, localhost and
    ``hosts`` (the addresses nodes listen on elsewhere, e.g. in network namespaces)."""
    folder = data_dir / "tls"
    ca_key = folder / "ca.key"
    certs = ClusterCertificates(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    if certs.ca_file.exists() and certs.cert_file.exists() and certs.key_file.exists():
        if ca_key.exists():
            return ClusterCertificates(certs.ca_file, certs.cert_file, certs.key_file, ca_key)
        return certs
    try:
        import trustme
    except ImportError:
        raise ConfigError(
            "making a local cluster's TLS certificates needs trustme (the tls extra): "
            "pip install 'rocketq[tls]'"
        ) from None
    ca = trustme.CA(organization_name="rocketq local cluster")
    leaf = ca.issue_cert("127.0.0.1", "localhost", *hosts, common_name=NODE_NAME)
    private_dir(folder)
    certs.ca_file.write_bytes(ca.cert_pem.bytes())
    certs.cert_file.write_bytes(b"".join(pem.bytes() for pem in leaf.cert_chain_pems))
    _write_private(certs.key_file, leaf.private_key_pem.bytes().decode())
    _write_private(ca_key, ca.private_key_pem.bytes().decode())
    return ClusterCertificates(certs.ca_file, certs.cert_file, certs.key_file, ca_key)
