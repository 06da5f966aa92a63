"""TLS on the v2 endpoint, from the broker's ``tls_server_*`` keys (the remoting port's).

gRPC serves a port either in TLS or in plaintext, so the endpoint has no permissive mode:
``permissive`` and ``enforcing`` both serve TLS only (a plaintext client gets a failed
handshake); ``disabled`` serves plaintext. ``tls_server_need_client_auth`` ``require``
requires a client certificate that chains to the trust file; gRPC knows no optional client
certificate, so ``optional`` (like ``none``) does not ask for one.

The certificate, key and trust files are re-read when they change, as the remoting port's
are (:class:`rocketq.remoting.tls.ServerTls`, checked at most every ``reload_interval``
seconds as handshakes arrive): a new handshake gets the new certificate, and files that
do not load leave the previous one in use.
"""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

from rocketq.remoting.tls import ServerTls

log = logging.getLogger(__name__)


def _configuration(tls: ServerTls) -> grpc.ServerCertificateConfiguration:
    key, cert = Path(tls.key).read_bytes(), Path(tls.cert).read_bytes()
    trust = Path(tls.trust).read_bytes() if tls.trust else None
    return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=trust)


def server_credentials(tls: ServerTls) -> grpc.ServerCredentials:
    """The endpoint's credentials: ``tls``'s certificate, reloaded as it changes."""
    seen = tls.reloads

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        nonlocal seen
        tls.context  # noqa: B018 - re-reads and checks the files when they are due
        if tls.reloads == seen:
            return None  # unchanged (or the changed files do not load)
        try:
            configuration = _configuration(tls)
        except OSError as exc:
            log.error("v2 endpoint: the certificate files changed but cannot be read: %s", exc)
            return None
        seen = tls.reloads
        log.info("v2 endpoint: serving the changed certificate")
        return configuration

    return grpc.dynamic_ssl_server_credentials(
        _configuration(tls), fetch, require_client_authentication=tls.client_auth == "require"
    )
