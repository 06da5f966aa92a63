"""A server's security keys turned into what its ports and its own calls use: the access
check before every handler, the TLS of its listening ports, and how its calls to other
nodes are signed and encrypted. The broker and the nameserver both build theirs here.

Once its users are loaded, with ``init_authentication_user`` set, that super user is
created unless a user of its name exists (an existing user keeps the password it has: change it with
``rocketq admin user update``), so a cluster with auth on is never left with nobody who
may manage it; with ``acl_v1_file`` set, the ACL 1.0 accounts that are not users yet become
users with their policies, and its global whitelist applies. With authentication or
authorization on and neither an init user, an inner credential nor any user able to
manage the cluster, the server refuses to start: it could never be administered.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocketq.auth.access import AccessControl
from rocketq.auth.credentials import Credentials
from rocketq.auth.metadata import AuthMetadata
from rocketq.auth.model import Acl, Requirement, User, UserType
from rocketq.auth.plain_acl import translate_plain_acl
from rocketq.auth.request_map import create_requirement
from rocketq.common.config import ServerSecurityConfig
from rocketq.common.exceptions import ConfigError
from rocketq.remoting.bounds import FORBIDDEN, UNAUTHENTICATED
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.tls import ClientSecurity, ServerTls, client_tls_from, server_tls_from
from rocketq.remoting.transport import Connection

log = logging.getLogger(__name__)

# A connection's attr: the node its client certificate proves ("": none).
_NODE_CERTIFICATE = "tls.node"


@dataclass
class ServerSecurity:
    """What one server process applies."""

    # The check before every handler; None: authentication and authorization are off.
    access: AccessControl | None
    # The remoting port's TLS (and the HA and Raft ports'); None: plaintext only.
    tls: ServerTls | None
    # The metrics port's TLS (metrics_tls_enable); None: plain HTTP.
    metrics_tls: ServerTls | None
    # How the server's own calls go: signed with the inner credentials, over TLS.
    client: ClientSecurity | None
    inner: Credentials | None
    metadata: AuthMetadata
    init_user: User | None = None
    # ACL 1.0's accounts (acl_v1_file), added by ``seed``.
    v1_users: tuple[User, ...] = ()
    v1_acls: tuple[Acl, ...] = ()
    v1_file: str = ""

    def seed(self) -> None:
        """Once the metadata is loaded: create the init super user and the ACL 1.0 accounts
        that do not exist yet; refuse a server with auth on that nobody could manage."""
        metadata = self.metadata
        if self.init_user is not None and metadata.ensure_user(self.init_user):
            log.info("created the initial super user %r", self.init_user.username)
        if self.v1_users:
            added = metadata.add_missing(self.v1_users, self.v1_acls)
            if added:
                log.info("took %d users and their policies from %s", added, self.v1_file)
        if (
            self.access is not None
            and self.inner is None
            and not any(u.is_super for u in metadata.list_users())
        ):
            raise ConfigError(
                "authentication or authorization is on but no super user exists and neither "
                "init_authentication_user nor inner_client_authentication_credentials is set: "
                "nobody could manage this server; set init_authentication_user = "
                '{"username": "...", "password": "..."}'
            )

    def check(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """The remoting server's access hook: a refusal is counted in the port's
        ``rocketq_remoting_rejected_total{reason="unauthenticated"|"forbidden"}`` and
        logged at most once a minute per address and reason."""
        assert self.access is not None
        node = self.node_certificate(conn)
        refusal = self.access.check(
            cmd, conn.peer_ip, conn.tls_identity or node, conn.attrs, tls_node=node is not None
        )
        if refusal is not None and conn.guard is not None:
            remark = refusal.remark or ""
            reason = UNAUTHENTICATED if remark.startswith("authentication") else FORBIDDEN
            conn.guard.reject(conn, reason, f"request code {cmd.code}: {remark}")
        return refusal

    def node_certificate(self, conn: Connection) -> str | None:
        """The cluster node the connection's verified client certificate proves (its name
        matching ``tls_node_name_pattern``), else None; read once per connection (kept in
        its attrs)."""
        tls = self.tls
        if tls is None or not tls.nodes.enabled or conn.transport is None:
            return None
        node = conn.attrs.get(_NODE_CERTIFICATE)
        if node is None:
            node = conn.attrs[_NODE_CERTIFICATE] = tls.node_name(conn.transport) or ""
        return str(node) or None

    @property
    def hook(self) -> Callable[[Connection, RemotingCommand], RemotingCommand | None] | None:
        """The hook to give the remoting server (None: nothing to check)."""
        return self.check if self.access is not None else None

    def session(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """AUTH_SESSION: how long this server remembers the sender a connection's signed
        request verified (stateful authentication), so a client may send its access key
        alone meanwhile, or (``keyless``) no AccessKey at all; 0 when it remembers nothing
        (stateless, or authentication off).

        Asked without any AccessKey (anyone may ask), it tells what a client needs before
        it signs: ``strongSignature`` ("accepted", or "required" with
        ``authentication_require_strong_signature``) announces rocketq's strong signature,
        ``signatureAudience`` (with auth on) the audience it must name, and
        ``statefulSeconds`` (stateful authentication) how long a connection's sender is
        remembered once one of its signed requests verifies."""
        access = self.access
        ttl = 0
        access_key = (cmd.ext or {}).get("AccessKey", "")
        fields = {"ttlSeconds": "0", "strongSignature": "accepted"}
        if access is not None:
            fields["signatureAudience"] = access.audience
            if access.require_strong_signature:
                fields["strongSignature"] = "required"
            if access.authentication and access.stateful_seconds:
                fields["statefulSeconds"] = str(int(access.stateful_seconds))
                if access_key and access.remembers(conn.attrs, access_key):
                    ttl = int(access.stateful_seconds)
                    fields["ttlSeconds"] = str(ttl)
        if ttl:
            # keyless: meanwhile the connection's requests may leave the AccessKey out too.
            fields["keyless"] = "true"
        return cmd.response(ResponseCode.SUCCESS, fields)

    def identity(self, conn: Connection, cmd: RemotingCommand) -> str | None:
        """Who sent a request that passed the check: its access key, else the sender
        remembered on its connection, else its certificate's name."""
        access_key = (cmd.ext or {}).get("AccessKey")
        if access_key:
            return access_key
        if self.access is not None and self.access.stateful_seconds:
            name = self.access.remembered_name(conn.attrs)
            if name:
                return name
        return conn.tls_identity or self.node_certificate(conn)

    def creation_refused(self, conn: Connection, cmd: RemotingCommand, topic: str) -> str | None:
        """Why the sender of a request that would auto-create ``topic`` may not create it
        (with authorization on, Create on the topic is needed besides what the request
        itself needs), or None when it may."""
        return self.refused_beyond(conn, cmd, create_requirement(topic))

    def refused_beyond(
        self, conn: Connection, cmd: RemotingCommand, need: Requirement
    ) -> str | None:
        """Why the sender of a request that passed its check may not also do what ``need``
        says (found by its handler), or None when it may: its verified access key, else
        the sender remembered on its connection, else its certificate (a node's is super,
        a user's is that user at most)."""
        access = self.access
        if access is None or not access.authorization:
            return None
        access_key = (cmd.ext or {}).get("AccessKey")
        if access_key:  # verified by the check before the handler
            return access.may(access_key, need, conn.peer_ip)
        if access.stateful_seconds:
            name = access.remembered_name(conn.attrs)
            if name:
                return access.may(name, need, conn.peer_ip)
        if self.node_certificate(conn):
            return None  # a node's certificate: a super identity
        return access.may(conn.tls_identity, need, conn.peer_ip, certificate=True)


def _init_user(config: ServerSecurityConfig) -> User | None:
    text = config.init_authentication_user.strip()
    if not text:
        return None
    doc = json.loads(text)  # checked when the config was built
    return User(str(doc["username"]), str(doc["password"]), UserType.SUPER)


def inner_credentials(config: ServerSecurityConfig) -> Credentials | None:
    """The inner credentials a config names, or None."""
    text = config.inner_client_authentication_credentials.strip()
    if not text:
        return None
    try:
        return Credentials.from_json(text)
    except ValueError as exc:
        raise ConfigError(f"inner_client_authentication_credentials: {exc}") from None


def server_security(
    config: ServerSecurityConfig,
    metadata: AuthMetadata,
    requirement: Callable[[RemotingCommand], Requirement],
) -> ServerSecurity:
    """What ``config``'s security keys ask for, over ``metadata`` (call ``seed`` once it is
    loaded); ``requirement`` is the server's request map. A bad key or ACL 1.0 file is a
    ConfigError."""
    inner = inner_credentials(config)
    whitelist: list[str] = []
    users: list[User] = []
    acls: list[Acl] = []
    if config.acl_v1_file:
        path = Path(config.acl_v1_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"acl_v1_file {path}: cannot read it ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"acl_v1_file {path}: not UTF-8 text ({exc.reason})") from None
        try:
            users, acls, whitelist = translate_plain_acl(text)
        except ValueError as exc:
            raise ConfigError(f"acl_v1_file {path}: {exc}") from None
    on = config.authentication_enabled or config.authorization_enabled
    access = None
    if on:
        access = AccessControl(
            authentication=config.authentication_enabled,
            authorization=config.authorization_enabled,
            metadata=metadata,
            requirement=requirement,
            inner=inner,
            whitelist=whitelist,
            stateful_seconds=(
                float(config.stateful_authentication_cache_expired_second)
                if config.authentication_strategy == "stateful"
                else 0.0
            ),
            signature_window_seconds=config.authentication_signature_window_seconds,
            require_strong_signature=config.authentication_require_strong_signature,
        )
    tls = server_tls_from(config)
    metrics_tls = None
    if config.metrics_tls_enable:
        # HTTPS only, asking for no client certificate: Prometheus and the Kubernetes
        # probes show none, whatever the remoting port requires of its clients.
        metrics_tls = ServerTls(
            "enforcing",
            config.tls_server_cert_path,
            config.tls_server_key_path,
            config.tls_server_trust_cert_path,
            "none",
            config.tls_cert_reload_interval_seconds,
        )
    client_ssl = client_tls_from(config)
    client = None
    if client_ssl is not None or inner is not None:
        # The node's own calls sign with the strong signature where the server announces
        # it (AUTH_SESSION), RocketMQ's elsewhere.
        client = ClientSecurity(
            ssl=client_ssl,
            sign=inner.sign if inner is not None else None,
            sign_strong=inner.sign_strong if inner is not None else None,
        )
    return ServerSecurity(
        access,
        tls,
        metrics_tls,
        client,
        inner,
        metadata,
        _init_user(config),
        tuple(users),
        tuple(acls),
        config.acl_v1_file,
    )


class MemoryAuthMetadata(AuthMetadata):
    """Users and ACLs kept in memory only: a nameserver's (its init user, its inner
    credentials and an ACL 1.0 file's accounts, read again at every start)."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent-rocketq-auth"))

    def load(self) -> None:
        pass

    def _save_users(self) -> None:
        pass

    def _save_acls(self) -> None:
        pass
