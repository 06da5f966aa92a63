"""TLS for the remoting ports and the links between nodes: RocketMQ's server modes, client
certificates, certificates reloaded when their files change, and what a client connection
adds to its requests.

A server's :class:`ServerTls` is one of RocketMQ's modes:

- ``disabled``: plaintext only;
- ``permissive``: TLS and plaintext on one port, told apart by the connection's first byte
  (0x16 begins a TLS handshake; no RocketMQ frame begins with it in practice: it would be a
  frame over 369 MB);
- ``enforcing``: TLS only; a plaintext connection is closed.

Its :attr:`ServerTls.context` is rebuilt from the certificate, key and trust files when
their contents change (checked at most every ``reload_interval`` seconds as connections
arrive, and by :meth:`ServerTls.watch` while a server runs); a connection keeps the context
it was accepted with, so rotating a certificate drops nothing. Files that do not load are
logged and the previous context stays in use.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.node_identity import NodePattern, peer_names

log = logging.getLogger(__name__)

Mode: TypeAlias = Literal["disabled", "permissive", "enforcing"]
ClientAuth: TypeAlias = Literal["none", "optional", "require"]
MODES: Final = ("disabled", "permissive", "enforcing")
CLIENT_AUTH: Final = {
    "none": ssl.CERT_NONE,
    "optional": ssl.CERT_OPTIONAL,
    "require": ssl.CERT_REQUIRED,
}
# The most bytes of a certificate, key or trust file compared to see whether it changed.
MAX_PEM: Final = 4 * 1024 * 1024
# The first byte of a TLS record carrying a handshake (a ClientHello).
HANDSHAKE: Final = 0x16

# The digest of each file a context is built from; None for a file that cannot be read.
# (Contents, not modification times: a file rewritten within the file system's clock tick
# at the same size would look unchanged.)
_Stamp: TypeAlias = tuple[bytes | None, ...]


@dataclass(frozen=True)
class ClientSecurity:
    """What a client connection adds: ``ssl`` wraps it in TLS (the server's name checked
    against the host connected to, if the context checks host names); ``sign`` is called
    on every request sent on it (never on responses), just before it is written.

    With ``access_key`` (the key ``sign`` signs with) and ``sessions``, a connection asks
    the server at its start whether it remembers a verified sender (AUTH_SESSION: a server
    with stateful authentication does); while it does, requests carry only the AccessKey
    and are not signed, and one the server refuses for that is signed and sent again.

    With ``sign_strong`` (rocketq's strong signature, the same credentials as ``sign``), a
    connection first asks the server, unsigned, which signatures it accepts (AUTH_SESSION's
    ``strongSignature``); against one that announces the strong signature its requests are
    signed with ``sign_strong``, given the audience the server announced (its
    ``signatureAudience``, "" when none), against any other (a stock RocketMQ) with
    ``sign``."""

    ssl: ssl.SSLContext | None = None
    sign: Callable[[RemotingCommand], None] | None = None
    access_key: str = ""
    sessions: bool = False
    sign_strong: Callable[[RemotingCommand, str], None] | None = None


def files_stamp(paths: tuple[str, ...]) -> _Stamp:
    """What the files hold now, to tell a change (a digest each; None: unreadable)."""
    stamps: list[bytes | None] = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                stamps.append(hashlib.blake2b(f.read(MAX_PEM)).digest())
        except OSError:
            stamps.append(None)
    return tuple(stamps)


class ServerTls:
    """A server's TLS settings and its current :class:`ssl.SSLContext` (TLS 1.2 or newer),
    rebuilt when the certificate, key or trust file changes."""

    def __init__(
        self,
        mode: Mode,
        cert: str,
        key: str,
        trust: str = "",
        client_auth: ClientAuth = "none",
        reload_interval: float = 5.0,
        node_pattern: str = "",
    ) -> None:
        """``node_pattern``: the names a client certificate proves a cluster node with
        (``tls_node_name_pattern``, :mod:`~remoting.node_identity`; "" none)."""
        if mode not in MODES:
            raise ValueError(f"TLS mode {mode!r}: expected one of {', '.join(MODES)}")
        if client_auth not in CLIENT_AUTH:
            raise ValueError(
                f"TLS client auth {client_auth!r}: expected one of {', '.join(CLIENT_AUTH)}"
            )
        if client_auth != "none" and not trust:
            raise ValueError(
                f"TLS client auth {client_auth!r} needs a trust file: the CA certificates "
                "a client certificate must chain to"
            )
        self.mode: Mode = mode
        self.cert = cert
        self.key = key
        self.trust = trust
        self.client_auth: ClientAuth = client_auth
        self.reload_interval = reload_interval
        self.nodes = NodePattern(node_pattern)
        self.reloads = 0  # times the context was rebuilt after the first
        self._paths = tuple(p for p in (cert, key, trust) if p)
        self._lock = threading.Lock()  # the metrics port reads the context from threads
        self._checked = time.monotonic()
        self._stamp = files_stamp(self._paths)
        # Files that did not load (as they were then), and whether that was logged.
        self._failed: _Stamp | None = None
        self._reported = False
        self._context: ssl.SSLContext | None = None
        if mode != "disabled":
            if not cert or not key:
                raise ValueError(f"TLS mode {mode!r} needs a certificate and a key file")
            self._context = self._build()

    @property
    def enabled(self) -> bool:
        """TLS is served (permissive or enforcing)."""
        return self.mode != "disabled"

    @property
    def context(self) -> ssl.SSLContext:
        """The context for a connection accepted now (files re-read if they changed and
        the last check is ``reload_interval`` seconds old)."""
        if time.monotonic() - self._checked >= self.reload_interval:
            self.check()
        ctx = self._context
        if ctx is None:
            raise ValueError("TLS is disabled: there is no server context")
        return ctx

    def check(self) -> bool:
        """Rebuild the context if a file changed since it was last loaded; True if it was.
        Files that do not load are tried again at each check and the current context kept;
        they are logged once they stay unchanged and bad for a check (a certificate whose
        key is not written yet is a rotation under way, not an error)."""
        with self._lock:
            self._checked = time.monotonic()
            stamp = files_stamp(self._paths)
            if stamp == self._stamp or self.mode == "disabled":
                return False
            try:
                ctx = self._build()
            except (OSError, ValueError) as exc:
                if stamp != self._failed:
                    self._failed, self._reported = stamp, False
                elif not self._reported:
                    self._reported = True
                    log.error(
                        "TLS: the changed certificate files (%s) do not load, so the "
                        "previous certificate stays in use: %s",
                        ", ".join(self._paths),
                        exc,
                    )
                return False
            self._stamp, self._failed = stamp, None
            self._context = ctx
            self.reloads += 1
        log.info("TLS: loaded the changed certificate files (%s)", ", ".join(self._paths))
        return True

    def node_name(self, transport: Any) -> str | None:
        """The node a connection's verified client certificate proves (its name that
        matches the node pattern), else None: a user's certificate, or none."""
        if not self.nodes.enabled:
            return None
        return self.nodes.node_name(peer_names(transport))

    async def watch(self) -> None:
        """Check the files every ``reload_interval`` seconds until cancelled (a server runs
        this while it listens)."""
        while True:
            await asyncio.sleep(self.reload_interval)
            await asyncio.to_thread(self.check)

    def _build(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as exc:
            raise ValueError(
                f"certificate {self.cert} and key {self.key} do not load: {exc}"
            ) from None
        ctx.verify_mode = CLIENT_AUTH[self.client_auth]
        if self.trust:
            try:
                ctx.load_verify_locations(cafile=self.trust)
            except ssl.SSLError as exc:
                raise ValueError(f"trust file {self.trust} does not load: {exc}") from None
        return ctx

    def __repr__(self) -> str:
        return (
            f"ServerTls(mode={self.mode!r}, cert={self.cert!r}, client_auth={self.client_auth!r})"
        )


def client_context(
    trust: str = "", cert: str = "", key: str = "", verify_hostname: bool = True
) -> ssl.SSLContext:
    """A client's TLS context (TLS 1.2 or newer): the server's certificate must chain to
    ``trust`` (the system's CA certificates when empty) and, with ``verify_hostname``, name
    the host connected to; ``cert`` and ``key`` are shown to a server that asks for them."""
    ctx = ssl.create_default_context(cafile=trust or None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = verify_hostname
    if cert or key:
        if not (cert and key):
            raise ValueError("a TLS client certificate needs both its certificate and key file")
        ctx.load_cert_chain(cert, key)
    return ctx


def server_tls_from(config: Any) -> ServerTls | None:
    """The server TLS a config asks for (its ``tls_server_*`` keys); None when disabled."""
    mode: Mode = getattr(config, "tls_server_mode", "disabled")
    if mode == "disabled":
        return None
    return ServerTls(
        mode,
        getattr(config, "tls_server_cert_path", ""),
        getattr(config, "tls_server_key_path", ""),
        getattr(config, "tls_server_trust_cert_path", ""),
        getattr(config, "tls_server_need_client_auth", "none"),
        getattr(config, "tls_cert_reload_interval_seconds", 5.0),
        getattr(config, "tls_node_name_pattern", ""),
    )


def client_tls_from(config: Any) -> ssl.SSLContext | None:
    """The TLS context a server's own connections use (its ``tls_client_*`` keys); None
    when ``tls_client_enable`` is off."""
    if not getattr(config, "tls_client_enable", False):
        return None
    return client_context(
        getattr(config, "tls_client_trust_cert_path", ""),
        getattr(config, "tls_client_cert_path", ""),
        getattr(config, "tls_client_key_path", ""),
        getattr(config, "tls_client_verify_hostname", True),
    )


def peer_identity(transport: Any) -> str | None:
    """The subject common name of the certificate a TLS peer showed and that was verified,
    else None (plaintext, no certificate, or not verified)."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    return identity_of(ssl_object.getpeercert())


def identity_of(cert: Any) -> str | None:
    """The subject common name of a certificate as :meth:`ssl.SSLSocket.getpeercert` gives
    it (an empty dict, an unverified certificate, has none)."""
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
