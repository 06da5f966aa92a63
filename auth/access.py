"""The check a server runs on every request before its handler: who sent it
(authentication) and whether they may (authorization).

**Authentication** (``authentication=True``) reads the request's ``AccessKey`` and
``Signature`` ext fields and recomputes the signature as RocketMQ 4.x clients make it
(``rocketq.auth.signature``) with the secret of the user of that name (its password), or
with the node's inner credentials. A request whose requirement's gate is ``OPEN`` passes
whatever it carries (it needs no identity: a route lookup signed with a user only the
brokers know still works on a nameserver). Any other request without an ``AccessKey`` is
refused; so is an unknown or disabled user or a signature that does not match, with
``NO_PERMISSION`` (16) and a remark starting "authentication failed" that names the access
key, never a secret. Clients up to 4.9.3 leave the
``_UNIQUE_KEY_QUERY`` field out of what they sign; for requests of those versions the
signature without it is accepted too (as RocketMQ does). A connection with a verified client
certificate and no ``AccessKey`` is a cluster node (a super identity) when the certificate
names a node (``tls_node``: it matches ``tls_node_name_pattern``,
:mod:`~remoting.node_identity`), else at most the user named by its common name: a
certificate that merely chains to the trusted CA makes nobody a node or a super user
(neither the inner access key nor a name in ``super_users`` as its name does).
With the stateful strategy (``stateful_seconds``, as
RocketMQ's StatefulAuthenticationStrategy), the sender a connection's request verified is
remembered on that connection for those seconds, and while the users and ACLs are unchanged:
its later requests naming the same access key are taken as that user without their
signature being computed again (a request naming another access key is verified), and so
are its later requests that carry no ``AccessKey`` at all (what a rocketq client sends
once ``AUTH_SESSION`` told it the server remembers it: no field to encode and decode).

A request carrying ``SignatureV2`` is held to rocketq's strong signature instead
(``rocketq.auth.strong_signature``: keys, values, code and body, HMAC-SHA256, with a
timestamp within ``signature_window_seconds`` of this server's clock, a nonce accepted once
per access key, ``rocketq.auth.replay``, and this server's ``audience``); with
``require_strong_signature`` a request signed only the RocketMQ way is refused. A
remembered connection's signed requests spend their nonces too, so none can be replayed
elsewhere.

**Authorization** (``authorization=True``) applies the request's requirement
(``rocketq.auth.request_map``): ``Gate.OPEN`` anyone; ``Gate.USER`` any authenticated
sender; ``Gate.SUPER`` super users, the names in ``super_users`` and the inner credentials;
``Gate.POLICY`` those, and a normal user whose ACL allows every (resource, action) the
requirement lists from the sender's address. A policy decides as RocketMQ 5.3's
``AclAuthorizationHandler``: the entries of the custom policy that match the resource, the
action and the source IP; when none do, those of the default policy; of the matching
entries the most specific resource wins (a literal name over a prefix, a longer prefix over
a shorter one, ``Topic:*`` over ``*``), and among equally specific ones Deny wins. No
matching entry: refused.

**Authorization without authentication** follows RocketMQ (its
``DefaultAuthorizationContextBuilder`` takes the subject from the ``AccessKey`` field as
sent, and its ``UserAuthorizationHandler`` requires that user to exist): the claimed access
key is the subject and its signature is not checked, so this mode only sorts honest clients
on a trusted network. A request that needs a subject and carries no ``AccessKey`` is refused.
Two things are stricter than RocketMQ: a disabled user is refused, and a claim to be a
super user (a Super user, a name in ``super_users``, the inner access key) counts only
with a signature that matches.

Requests from an address matching a global whitelist pattern (ACL 1.0's
``globalWhiteRemoteAddresses``) pass without any check, as in ACL 1.0.

The hot path reads no JSON and computes one HMAC; users are dict lookups and each user's
policies are compiled once into an index, rebuilt when the metadata's version changes.
"""

from __future__ import annotations

import logging
import secrets
import struct
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from rocketq.auth.credentials import Credentials
from rocketq.auth.metadata import AuthMetadata
from rocketq.auth.model import (
    Acl,
    Action,
    Decision,
    Gate,
    PolicyType,
    Requirement,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
)
from rocketq.auth.replay import NONCES_KEPT, ReplayWindow
from rocketq.auth.signature import (
    ACCESS_KEY,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    compute_signature,
    signatures_match,
)
from rocketq.auth.source_ip import IpAddress, IpTest, compile_source_ips, peer_address
from rocketq.auth.strong_signature import (
    AUDIENCE,
    SIGNATURE_V2,
    compute_strong_signature,
    parse_strong_fields,
)
from rocketq.remoting.codes import MQVersion, ResponseCode
from rocketq.remoting.command import RemotingCommand

log = logging.getLogger(__name__)

# Clients at or below 4.9.3 sign without the _UNIQUE_KEY_QUERY field.
_OLD_SIGNER_VERSION: Final = MQVersion.V4_9_4 - 1
_SKIP_OLD: Final = (SIGNATURE, UNIQUE_MSG_QUERY_FLAG)
_REFUSE_UNKNOWN: Final = Requirement(Gate.SUPER)


def _show(name: str) -> str:
    """A name from the outside world, safe and short enough for a remark."""
    return repr(name if len(name) <= 64 else name[:64] + "...")


class _Who(NamedTuple):
    """An authenticated sender (a tuple: made for every request, so made cheaply)."""

    name: str
    super: bool


# Where a connection's session remembers its verified sender (stateful authentication).
_SESSION: Final = "auth.sender"


class _Seen(NamedTuple):
    """A sender verified on a connection: for which (access key, metadata version), until
    when."""

    key: tuple[str, int]
    until: float
    who: _Who


@dataclass(frozen=True, slots=True)
class _Entry:
    """A policy entry compiled for matching."""

    actions: frozenset[Action]
    every_action: bool
    ips: IpTest | None  # None: from anywhere
    deny: bool

    def applies(self, action: Action, addr: IpAddress | None) -> bool:
        if not (self.every_action or action in self.actions or action is Action.ANY):
            return False
        if self.ips is None:
            return True
        return addr is not None and self.ips(addr)


class _PolicyIndex:
    """One policy's entries grouped by how specific their resource is, most specific first:
    literal names, prefixes (longest first), a type's ``*``, then ``*``."""

    __slots__ = ("any", "literal", "prefixed", "star")

    def __init__(self) -> None:
        self.literal: dict[tuple[ResourceType, str], list[_Entry]] = {}
        self.prefixed: dict[ResourceType, list[tuple[str, list[_Entry]]]] = {}
        self.any: dict[ResourceType, list[_Entry]] = {}
        self.star: list[_Entry] = []

    def add(self, resource: Resource, entry: _Entry) -> None:
        if resource.type is ResourceType.ANY:
            self.star.append(entry)
        elif resource.pattern is ResourcePattern.ANY:
            self.any.setdefault(resource.type, []).append(entry)
        elif resource.pattern is ResourcePattern.PREFIXED:
            groups = self.prefixed.setdefault(resource.type, [])
            for prefix, entries in groups:
                if prefix == resource.name:
                    entries.append(entry)
                    break
            else:
                groups.append((resource.name, [entry]))
                groups.sort(key=lambda group: -len(group[0]))
        else:
            self.literal.setdefault((resource.type, resource.name), []).append(entry)

    def decide(self, wanted: Resource, action: Action, addr: IpAddress | None) -> Decision | None:
        """The decision of the most specific matching entries (Deny among equals), or None
        when no entry matches."""
        found = self._first(self.literal.get((wanted.type, wanted.name), ()), action, addr)
        if found is not None:
            return found
        groups = self.prefixed.get(wanted.type, ())
        length = -1
        matched: list[_Entry] = []
        for prefix, entries in groups:
            if len(prefix) != length:
                found = self._first(matched, action, addr)
                if found is not None:
                    return found
                matched, length = [], len(prefix)
            if wanted.name.startswith(prefix):
                matched.extend(entries)
        found = self._first(matched, action, addr)
        if found is not None:
            return found
        found = self._first(self.any.get(wanted.type, ()), action, addr)
        if found is not None:
            return found
        return self._first(self.star, action, addr)

    @staticmethod
    def _first(
        entries: Sequence[_Entry], action: Action, addr: IpAddress | None
    ) -> Decision | None:
        decision = None
        for entry in entries:
            if entry.applies(action, addr):
                if entry.deny:
                    return Decision.DENY
                decision = Decision.ALLOW
        return decision


class _CompiledAcl:
    """A user's custom and default policies, compiled."""

    __slots__ = ("custom", "default", "needs_address")

    def __init__(self, acl: Acl | None) -> None:
        self.custom = _PolicyIndex()
        self.default = _PolicyIndex()
        self.needs_address = False
        if acl is None:
            return
        for policy in acl.policies:
            index = self.custom if policy.policy_type is PolicyType.CUSTOM else self.default
            for e in policy.entries:
                ips = compile_source_ips(e.source_ips) if e.source_ips else None
                self.needs_address = self.needs_address or ips is not None
                compiled = _Entry(
                    frozenset(e.actions), Action.ALL in e.actions, ips, e.decision is Decision.DENY
                )
                index.add(e.resource, compiled)

    def decide(self, wanted: Resource, action: Action, addr: IpAddress | None) -> Decision | None:
        decision = self.custom.decide(wanted, action, addr)
        if decision is None:
            decision = self.default.decide(wanted, action, addr)
        return decision


class AccessControl:
    """Authentication and authorization of the requests one server answers; see the module
    docstring for the rules. ``requirement`` says what each request needs (the request map);
    ``inner`` are the credentials the cluster's nodes sign their own requests with (a super
    identity); ``super_users`` are names treated as super users; ``whitelist`` holds source
    IP patterns whose requests pass unchecked (ACL 1.0's global whitelist)."""

    def __init__(
        self,
        *,
        authentication: bool,
        authorization: bool,
        metadata: AuthMetadata | None,
        requirement: Callable[[RemotingCommand], Requirement],
        inner: Credentials | None = None,
        super_users: Collection[str] = (),
        whitelist: Sequence[str] = (),
        stateful_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        signature_window_seconds: float = 900.0,
        require_strong_signature: bool = False,
        wall_clock: Callable[[], float] = time.time,
        nonces_kept: int = NONCES_KEPT,
        audience: str | None = None,
    ) -> None:
        self.authentication = authentication
        # Stateful authentication (RocketMQ's StatefulAuthenticationStrategy): a verified
        # sender is remembered on its connection for this many seconds (0: every request
        # is verified, the stateless strategy).
        self.stateful_seconds = stateful_seconds
        self._clock = clock
        self.authorization = authorization
        self.metadata = metadata
        self._requirement = requirement
        self.inner = inner
        self.super_users = frozenset(super_users)
        self._whitelist: IpTest | None = compile_source_ips(whitelist) if whitelist else None
        self._compiled: dict[str, _CompiledAcl] = {}
        self._compiled_version = -1
        # rocketq's strong signature: its timestamps and nonces (a replay is refused), and
        # whether RocketMQ's legacy signature is refused.
        self.require_strong_signature = require_strong_signature
        self._wall_clock = wall_clock
        self.replay = ReplayWindow(signature_window_seconds, nonces_kept)
        # What a strong signature must name as its audience: drawn at each start, so that
        # a request signed for another server, or for this one before it restarted (and
        # forgot the nonces it saw), is refused.
        self.audience = secrets.token_urlsafe(12) if audience is None else audience

    # -- the check -----------------------------------------------------------------------

    def check(
        self,
        cmd: RemotingCommand,
        peer_ip: str,
        tls_identity: str | None = None,
        session: dict[str, object] | None = None,
        tls_node: bool = False,
    ) -> RemotingCommand | None:
        """None when the request may go on to its handler; else the refusal to answer it
        with (``NO_PERMISSION``, a remark saying why). ``session`` is the connection's own
        state (its attrs): with a stateful strategy the sender verified there is
        remembered. ``tls_identity`` is the common name of the connection's verified
        client certificate, ``tls_node`` whether that certificate proves a cluster node."""
        if not (self.authentication or self.authorization):
            return None
        if self._whitelist is not None:
            addr = peer_address(peer_ip)
            if addr is not None and self._whitelist(addr):
                return None
        ext = cmd.ext
        access_key = ext.get(ACCESS_KEY) if ext else None
        who: _Who | str | None = None
        if access_key:
            assert ext is not None
            if session is not None and self.stateful_seconds:
                who = self._remembered(cmd, ext, access_key, session)
            else:
                who = self._sender(cmd, ext, access_key)
        elif session is not None and self.stateful_seconds and _SESSION in session:
            # A request without an AccessKey on a connection whose sender is remembered
            # is that sender's (the client was told so by AUTH_SESSION: ``keyless``).
            who = self.remembered(session)
            if who is None and tls_identity:
                who = self._certificate(tls_identity, tls_node)
        elif tls_identity:
            who = self._certificate(tls_identity, tls_node)
        if isinstance(who, _Who) and (who.super or not self.authorization):
            # A super user (or anyone authenticated, without authorization) passes every
            # gate, so what the request requires need not be read.
            return None
        try:
            need = self._requirement(cmd)
        except Exception:  # a request map that fails must not let the request through
            log.exception("the requirement of request code %s could not be read", cmd.code)
            need = _REFUSE_UNKNOWN
        if need.gate is Gate.OPEN:
            return None
        if who is None and self.authentication:
            who = (
                "authentication failed: the request carries no AccessKey; sign it with a "
                "user's access key and secret key"
            )
        elif who is None:
            who = (
                "authorization failed: the request carries no AccessKey to say which user sends it"
            )
        if isinstance(who, str):
            return self._refuse(cmd, who)
        if not self.authorization or who.super or need.gate is Gate.USER:
            return None
        if need.gate is Gate.SUPER:
            return self._refuse(
                cmd,
                f"authorization failed: User:{who.name} is not a super user; "
                "this request needs one",
            )
        return self._authorize(cmd, who, need, peer_ip)

    def check_signed(
        self,
        access_key: str,
        verify: Callable[[str], bool],
        need: Requirement,
        peer_ip: str,
    ) -> str | None:
        """The check of a request that is not a RemotingCommand (the apache.rocketmq.v2
        endpoint): ``access_key`` from its credential ("" when none), ``verify`` tells
        whether its signature was made with a secret, ``need`` what it requires. None when
        it may go on, else why not (a text starting "authentication failed" or
        "authorization failed")."""
        if not (self.authentication or self.authorization):
            return None
        if self._whitelist is not None:
            addr = peer_address(peer_ip)
            if addr is not None and self._whitelist(addr):
                return None
        who: _Who | str
        inner = self.inner
        if not access_key:
            if need.gate is Gate.OPEN:
                return None
            what = "authentication" if self.authentication else "authorization"
            return (
                f"{what} failed: the request carries no credential; give the client a user's "
                "access key and secret key"
            )
        if inner is not None and access_key == inner.access_key:
            who = (
                _Who(access_key, True)
                if verify(inner.secret_key)
                else f"authentication failed: the signature of access key {_show(access_key)} "
                "does not match"
            )
        else:
            user = self._user(access_key)
            if user is None:
                who = f"authentication failed: access key {_show(access_key)} is not a user"
            elif not user.enabled:
                who = f"authentication failed: user {_show(access_key)} is disabled"
            else:
                is_super = user.is_super or access_key in self.super_users
                if (self.authentication or is_super) and not verify(user.password):
                    who = (
                        f"authentication failed: the signature of access key "
                        f"{_show(access_key)} does not match (check the secret key)"
                    )
                else:
                    who = _Who(access_key, is_super)
        if isinstance(who, str):
            return who
        if who.super or not self.authorization or need.gate in (Gate.OPEN, Gate.USER):
            return None
        if need.gate is Gate.SUPER:
            return f"authorization failed: User:{who.name} is not a super user"
        return self._denial(who.name, need, peer_ip)

    def identity(self, cmd: RemotingCommand) -> str | None:
        """The access key a request is signed with when its signature verifies (with a
        user's secret or the inner credentials), else None; None when authentication is
        off. A request the check let through already: a strong signature's nonce is not
        looked up (the check accepted it once), its time still is."""
        if not self.authentication:
            return None
        ext = cmd.ext
        access_key = ext.get(ACCESS_KEY) if ext else None
        if not access_key or ext is None:
            return None
        who = self._sender(cmd, ext, access_key, once=False)
        return None if isinstance(who, str) else who.name

    # -- authentication ------------------------------------------------------------------

    def _verify(
        self,
        cmd: RemotingCommand,
        ext: Mapping[str, str],
        access_key: str,
        secret: str,
        *,
        once: bool = True,
        hint: str = "",
    ) -> str | None:
        """None when the request is signed with ``secret``, else the refusal's remark.

        A request carrying ``SignatureV2`` is held to rocketq's strong signature only (its
        fields well formed, its time within the window, its audience this server's, its
        HMAC-SHA256 matching and, with ``once``, its nonce new for this access key, then
        remembered); any other to RocketMQ's, unless ``require_strong_signature`` refuses
        that. ``hint`` follows a mismatch's remark."""
        shown = _show(access_key)
        if SIGNATURE_V2 in ext:
            fields = parse_strong_fields(ext)
            if isinstance(fields, str):
                return f"authentication failed: the request of access key {shown} {fields}"
            now_ms = int(self._wall_clock() * 1000)
            late = self.replay.timely(access_key, fields.timestamp_ms, now_ms)
            if late is not None:
                return f"authentication failed: the request of access key {shown} {late}"
            if ext.get(AUDIENCE) != self.audience:
                return (
                    f"authentication failed: the request of access key {shown} is signed for "
                    "another server, or for this one before it restarted (its Audience is not "
                    "the one this server announces); sign it again"
                )
            try:
                expected = compute_strong_signature(secret, cmd.code, cmd.version, ext, cmd.body)
            except struct.error:  # a code or version no decoder gives: nothing signs it
                expected = ""
            if not signatures_match(expected, fields.signature):
                return (
                    f"authentication failed: the strong signature of access key {shown} "
                    f"does not match{hint}"
                )
            if once:
                replayed = self.replay.admit(access_key, fields.nonce, fields.timestamp_ms, now_ms)
                if replayed is not None:
                    return f"authentication failed: the request of access key {shown} {replayed}"
            return None
        given = ext.get(SIGNATURE)
        if self.require_strong_signature:
            what = "is signed with RocketMQ's Signature" if given else "carries no SignatureV2"
            return (
                f"authentication failed: the request of access key {shown} {what}; this "
                "server takes only rocketq's strong signature "
                "(authentication_require_strong_signature = true), which rocketq's clients "
                "send to a server that announces it"
            )
        if not given:
            return f"authentication failed: the request of access key {shown} carries no Signature"
        if signatures_match(compute_signature(secret, ext, cmd.body), given):
            return None
        if UNIQUE_MSG_QUERY_FLAG in ext and cmd.version <= _OLD_SIGNER_VERSION:
            expected = compute_signature(secret, ext, cmd.body, skip=_SKIP_OLD)
            if signatures_match(expected, given):
                return None
        return f"authentication failed: the signature of access key {shown} does not match{hint}"

    def _remembered(
        self,
        cmd: RemotingCommand,
        ext: Mapping[str, str],
        access_key: str,
        session: dict[str, object],
    ) -> _Who | str:
        """The sender as first verified on this connection, while the users and ACLs are
        as they were then and for at most ``stateful_seconds``; else verified now (and
        remembered when it verifies).

        A request the remembered sender signs anyway with the strong signature spends its
        nonce here too, unverified (it is that connection's either way), so its signature
        cannot be replayed on another connection; one whose nonce is spent or time is out
        is verified, and so refused."""
        version = -1 if self.metadata is None else self.metadata.version
        now = self._clock()
        seen = session.get(_SESSION)
        if (
            isinstance(seen, _Seen)
            and seen.key == (access_key, version)
            and now < seen.until
            and (SIGNATURE_V2 not in ext or self._spend(ext, access_key))
        ):
            return seen.who
        who = self._sender(cmd, ext, access_key)
        if isinstance(who, _Who):
            session[_SESSION] = _Seen((access_key, version), now + self.stateful_seconds, who)
        return who

    def _spend(self, ext: Mapping[str, str], access_key: str) -> bool:
        """Whether a strong signature's fields are well formed, timely and its nonce new
        (then remembered as spent), without computing the signature."""
        fields = parse_strong_fields(ext)
        if isinstance(fields, str):
            return False
        now_ms = int(self._wall_clock() * 1000)
        return self.replay.admit(access_key, fields.nonce, fields.timestamp_ms, now_ms) is None

    def remembered(self, session: dict[str, object]) -> _Who | None:
        """The sender remembered on the connection of ``session`` now, if any (stateful
        authentication, while the users and ACLs are unchanged)."""
        seen = session.get(_SESSION)
        if not isinstance(seen, _Seen):
            return None
        version = -1 if self.metadata is None else self.metadata.version
        if seen.key[1] != version or self._clock() >= seen.until:
            return None
        return seen.who

    def remembered_name(self, session: dict[str, object]) -> str | None:
        """The access key of the sender remembered on that connection now, or None."""
        who = self.remembered(session)
        return None if who is None else who.name

    def remembers(self, session: dict[str, object], access_key: str) -> bool:
        """Whether the connection of ``session`` has a verified sender of this access key
        remembered now (stateful authentication)."""
        seen = session.get(_SESSION)
        version = -1 if self.metadata is None else self.metadata.version
        return (
            isinstance(seen, _Seen)
            and seen.key == (access_key, version)
            and self._clock() < seen.until
        )

    def _user(self, name: str) -> User | None:
        return None if self.metadata is None else self.metadata.get_user(name)

    def _sender(
        self, cmd: RemotingCommand, ext: Mapping[str, str], access_key: str, *, once: bool = True
    ) -> _Who | str:
        """Who sent a request carrying this access key, or why they are refused (``once``:
        see :meth:`_verify`)."""
        inner = self.inner
        verify = self.authentication
        if inner is not None and access_key == inner.access_key:
            why = self._verify(cmd, ext, access_key, inner.secret_key, once=once)
            return _Who(access_key, True) if why is None else why
        user = self._user(access_key)
        if user is None:
            return f"authentication failed: access key {_show(access_key)} is not a user"
        if not user.enabled:
            return f"authentication failed: user {_show(access_key)} is disabled"
        is_super = user.is_super or access_key in self.super_users
        if verify or is_super:
            why = self._verify(
                cmd, ext, access_key, user.password, once=once, hint=" (check the secret key)"
            )
            if why is not None:
                return why
        return _Who(access_key, is_super)

    def _certificate(self, name: str, node: bool) -> _Who | str:
        """The sender of a connection with a verified client certificate whose common name
        is ``name``: a node (super) when the certificate proves one (``node``), else the
        user of that name, if one exists and is enabled (super only when the user is)."""
        if node:
            return _Who(name, True)
        user = self._user(name)
        if user is None:
            return f"authentication failed: certificate name {_show(name)} is not a user"
        if not user.enabled:
            return f"authentication failed: user {_show(name)} is disabled"
        return _Who(name, user.is_super)

    # -- authorization -------------------------------------------------------------------

    def _compiled_acl(self, name: str) -> _CompiledAcl:
        metadata = self.metadata
        version = -1 if metadata is None else metadata.version
        if version != self._compiled_version:
            self._compiled.clear()
            self._compiled_version = version
        compiled = self._compiled.get(name)
        if compiled is None:
            acl = None if metadata is None else metadata.acl_of(name)
            compiled = self._compiled[name] = _CompiledAcl(acl)
        return compiled

    def _authorize(
        self, cmd: RemotingCommand, who: _Who, need: Requirement, peer_ip: str
    ) -> RemotingCommand | None:
        why = self._denial(who.name, need, peer_ip)
        return None if why is None else self._refuse(cmd, why)

    def _denial(self, name: str, need: Requirement, peer_ip: str) -> str | None:
        """Why user ``name``'s policies do not allow every (resource, action) ``need``
        lists from ``peer_ip``, or None when they do."""
        compiled = self._compiled_acl(name)
        addr = peer_address(peer_ip) if compiled.needs_address else None
        for resource, action in need.needs:
            decision = compiled.decide(resource, action, addr)
            if decision is not Decision.ALLOW:
                why = "no matched policies" if decision is None else "the decision is deny"
                return (
                    f"authorization failed: User:{name} has no permission to {action.value} "
                    f"on {resource.key} from {peer_ip or 'an unknown address'} ({why})"
                )
        return None

    def may(
        self, name: str | None, need: Requirement, peer_ip: str, *, certificate: bool = False
    ) -> str | None:
        """Whether a sender already authenticated as ``name`` (the access key, the inner
        access key or certificate name a request's check verified; None: the request
        carried none) also passes ``need`` from ``peer_ip``: None when it does, else why
        not (a text starting "authorization failed"). For what a handler finds it would do
        beyond what its request's requirement covered (creating a topic a send names).
        ``certificate``: the name is a user certificate's (not a node's), which is that user
        at most: neither the inner access key nor a ``super_users`` name makes it super."""
        if not self.authorization:
            return None
        if self._whitelist is not None:
            addr = peer_address(peer_ip)
            if addr is not None and self._whitelist(addr):
                return None
        if need.gate is Gate.OPEN:
            return None
        if not name:
            return "authorization failed: the request names no user"
        inner = self.inner
        user = self._user(name)
        named_super = (inner is not None and name == inner.access_key) or name in self.super_users
        if named_super and not certificate:
            return None
        if user is not None and user.is_super:
            return None
        if need.gate is Gate.USER:
            return None
        if need.gate is Gate.SUPER:
            return f"authorization failed: User:{name} is not a super user"
        return self._denial(name, need, peer_ip)

    @staticmethod
    def _refuse(cmd: RemotingCommand, why: str) -> RemotingCommand:
        log.debug("refused request code %s: %s", cmd.code, why)
        return cmd.response(ResponseCode.NO_PERMISSION, remark=why)
