"""The access check: who may make which request, with authentication and authorization on
and off."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.auth.access import AccessControl
from rocketq.auth.credentials import Credentials
from rocketq.auth.metadata import AuthMetadata
from rocketq.auth.model import (
    Acl,
    Action,
    Decision,
    Gate,
    Policy,
    PolicyEntry,
    PolicyType,
    Requirement,
    Resource,
    Subject,
    User,
    UserStatus,
    UserType,
)
from rocketq.auth.signature import UNIQUE_MSG_QUERY_FLAG
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand

OPEN, USER, SUPER, PUB, SUB_BOTH = 1, 2, 3, 4, 5
ORDERS = Resource.topic("orders")
REQUIREMENTS = {
    OPEN: Requirement(Gate.OPEN),
    USER: Requirement(Gate.USER),
    SUPER: Requirement(Gate.SUPER),
    PUB: Requirement(Gate.POLICY, ((ORDERS, Action.PUB),)),
    SUB_BOTH: Requirement(Gate.POLICY, ((ORDERS, Action.SUB), (Resource.group("g"), Action.SUB))),
}
INNER = Credentials("inner-node", "inner-secret")


def requirement(cmd: RemotingCommand) -> Requirement:
    return REQUIREMENTS.get(cmd.code, Requirement(Gate.SUPER))


def entry(
    resource: str, *actions: Action, decision: Decision = Decision.ALLOW, ips: tuple[str, ...] = ()
) -> PolicyEntry:
    return PolicyEntry(Resource.parse(resource), actions, ips, decision)


@pytest.fixture
def meta(tmp_path: Path) -> AuthMetadata:
    m = AuthMetadata(tmp_path)
    m.load()
    m.create_user(User("alice", "alice-secret"))
    m.create_user(User("bob", "bob-secret"))
    m.create_user(User("root", "root-secret", UserType.SUPER))
    m.update_acl(
        Acl(
            Subject("alice"),
            (
                Policy(
                    PolicyType.CUSTOM,
                    (entry("Topic:orders", Action.PUB, Action.SUB), entry("Group:g", Action.SUB)),
                ),
            ),
        )
    )
    m.update_acl(
        Acl(Subject("bob"), (Policy(PolicyType.CUSTOM, (entry("Topic:other", Action.ALL),)),))
    )
    return m


def control(
    meta: AuthMetadata, authentication: bool = True, authorization: bool = True, **kw: object
) -> AccessControl:
    return AccessControl(
        authentication=authentication,
        authorization=authorization,
        metadata=meta,
        requirement=requirement,
        inner=INNER,
        **kw,  # type: ignore[arg-type]
    )


def request(code: int, creds: Credentials | None, body: bytes = b"payload") -> RemotingCommand:
    cmd = RemotingCommand(code, ext={"topic": "orders", "queueId": "0"}, body=body, opaque=7)
    if creds is not None:
        creds.sign(cmd)
    return cmd


CALLERS: dict[str, Credentials | None] = {
    "none": None,
    "wrong_secret": Credentials("alice", "not-alice-secret"),
    "unknown": Credentials("mallory", "whatever"),
    "without": Credentials("bob", "bob-secret"),
    "with": Credentials("alice", "alice-secret"),
    "super": Credentials("root", "root-secret"),
    "inner": INNER,
}

# For each mode (authentication, authorization): for each code, the callers let through.
EVERYONE = set(CALLERS)
SIGNED = {"without", "with", "super", "inner"}
MATRIX: dict[tuple[bool, bool], dict[int, set[str]]] = {
    (True, True): {
        OPEN: EVERYONE,
        USER: SIGNED,
        SUPER: {"super", "inner"},
        PUB: {"with", "super", "inner"},
        SUB_BOTH: {"with", "super", "inner"},
    },
    (True, False): {code: (EVERYONE if code == OPEN else SIGNED) for code in REQUIREMENTS},
    (False, False): {code: EVERYONE for code in REQUIREMENTS},
    # Authorization alone trusts the claimed access key (as RocketMQ does): a wrong secret
    # for alice still acts as alice; claims of super users must still verify.
    (False, True): {
        OPEN: EVERYONE,
        USER: SIGNED | {"wrong_secret"},
        SUPER: {"super", "inner"},
        PUB: {"with", "wrong_secret", "super", "inner"},
        SUB_BOTH: {"with", "wrong_secret", "super", "inner"},
    },
}


@pytest.mark.parametrize("mode", list(MATRIX), ids=lambda m: f"authn={m[0]}-authz={m[1]}")
@pytest.mark.parametrize("code", list(REQUIREMENTS))
@pytest.mark.parametrize("caller", list(CALLERS))
def test_access_matrix(meta: AuthMetadata, mode: tuple[bool, bool], code: int, caller: str) -> None:
    access = control(meta, *mode)
    cmd = request(code, CALLERS[caller])
    refusal = access.check(cmd, "10.0.0.1")
    allowed = caller in MATRIX[mode][code]
    if allowed:
        assert refusal is None, refusal.remark if refusal else ""
    else:
        assert refusal is not None
        assert refusal.code == ResponseCode.NO_PERMISSION
        assert refusal.opaque == 7 and refusal.is_response
        assert refusal.remark and refusal.remark.startswith(
            ("authentication failed", "authorization failed")
        )


def test_remarks_name_the_access_key_never_the_secret(meta: AuthMetadata) -> None:
    access = control(meta)
    wrong = access.check(request(PUB, Credentials("alice", "not-alice-secret")), "1.2.3.4")
    assert wrong is not None and wrong.remark is not None
    assert "'alice'" in wrong.remark and "secret" not in wrong.remark.replace("secret key", "")
    assert "alice-secret" not in wrong.remark and "not-alice-secret" not in wrong.remark
    unknown = access.check(request(PUB, Credentials("mallory", "x")), "1.2.3.4")
    assert unknown is not None and "'mallory' is not a user" in (unknown.remark or "")
    none = access.check(request(PUB, None), "1.2.3.4")
    assert none is not None and "no AccessKey" in (none.remark or "")
    denied = access.check(request(PUB, Credentials("bob", "bob-secret")), "1.2.3.4")
    assert denied is not None
    assert denied.remark == (
        "authorization failed: User:bob has no permission to Pub on Topic:orders from 1.2.3.4 "
        "(no matched policies)"
    )


def test_a_tampered_request_is_refused(meta: AuthMetadata) -> None:
    access = control(meta)
    cmd = request(PUB, Credentials("alice", "alice-secret"))
    assert access.check(cmd, "1.2.3.4") is None
    assert cmd.ext is not None
    cmd.ext["topic"] = "other"
    assert access.check(cmd, "1.2.3.4") is not None
    cmd = request(PUB, Credentials("alice", "alice-secret"))
    cmd.body = b"payloaX"
    assert access.check(cmd, "1.2.3.4") is not None
    cmd = request(PUB, Credentials("alice", "alice-secret"))
    assert cmd.ext is not None
    del cmd.ext["Signature"]
    refusal = access.check(cmd, "1.2.3.4")
    assert refusal is not None and "carries no Signature" in (refusal.remark or "")


def test_disabled_user_is_refused(meta: AuthMetadata) -> None:
    access = control(meta)
    meta.update_user("alice", user_status=UserStatus.DISABLE)
    refusal = access.check(request(PUB, Credentials("alice", "alice-secret")), "1.2.3.4")
    assert refusal is not None and "disabled" in (refusal.remark or "")
    assert (
        control(meta, False, True).check(request(PUB, Credentials("alice", "x")), "1.2.3.4")
        is not None
    )


def test_old_clients_sign_without_the_unique_key_query_flag(meta: AuthMetadata) -> None:
    access = control(meta)
    for version, accepted in ((400, True), (401, False)):
        cmd = RemotingCommand(PUB, ext={"topic": "orders"}, body=b"x", version=version)
        Credentials("alice", "alice-secret").sign(cmd)  # signed without the flag
        assert cmd.ext is not None
        cmd.ext[UNIQUE_MSG_QUERY_FLAG] = "true"  # added after signing, as 4.9.3 clients do
        assert (access.check(cmd, "1.2.3.4") is None) is accepted
    cmd = RemotingCommand(PUB, ext={"topic": "orders", UNIQUE_MSG_QUERY_FLAG: "true"}, version=300)
    Credentials("alice", "alice-secret").sign(cmd)  # signed with it: accepted at any version
    assert access.check(cmd, "1.2.3.4") is None


def test_inner_credentials_and_super_user_names(meta: AuthMetadata) -> None:
    access = control(meta, super_users=["bob"])
    assert access.check(request(SUPER, INNER), "1.2.3.4") is None
    assert access.check(request(SUPER, Credentials("inner-node", "guess")), "1.2.3.4") is not None
    assert access.check(request(SUPER, Credentials("bob", "bob-secret")), "1.2.3.4") is None
    assert access.check(request(SUPER, Credentials("bob", "guess")), "1.2.3.4") is not None
    # Without inner credentials configured, the inner access key is just an unknown user.
    plain = AccessControl(
        authentication=True, authorization=True, metadata=meta, requirement=requirement
    )
    assert plain.check(request(SUPER, INNER), "1.2.3.4") is not None


def test_no_metadata_only_inner_credentials_pass(tmp_path: Path) -> None:
    access = AccessControl(
        authentication=True, authorization=True, metadata=None, requirement=requirement, inner=INNER
    )
    assert access.check(request(PUB, INNER), "1.2.3.4") is None
    assert access.check(request(PUB, Credentials("alice", "alice-secret")), "1.2.3.4") is not None


def test_tls_identity_without_an_access_key(meta: AuthMetadata) -> None:
    access = control(meta, super_users=["node-1"])
    # A node's certificate (its name matches the node pattern) is a super identity.
    assert (
        access.check(request(SUPER, None), "1.2.3.4", tls_identity="node-1", tls_node=True) is None
    )
    assert access.check(request(PUB, None), "1.2.3.4", tls_identity="alice") is None
    assert access.check(request(SUPER, None), "1.2.3.4", tls_identity="alice") is not None
    refusal = access.check(request(USER, None), "1.2.3.4", tls_identity="stranger")
    assert refusal is not None and "certificate name 'stranger'" in (refusal.remark or "")
    # A signed request is its signer, whatever the certificate says.
    assert (
        access.check(
            request(SUPER, Credentials("alice", "alice-secret")), "1.2.3.4", "node-1", tls_node=True
        )
        is not None
    )


def test_a_certificate_that_names_no_node_is_at_most_its_user(meta: AuthMetadata) -> None:
    """A certificate from the trusted CA that does not prove a node makes nobody super: not
    with a name in super_users, not with the inner access key as its name, and a name that
    is no user is refused."""
    access = control(meta, super_users=["node-1"])
    for name in ("node-1", INNER.access_key):
        refusal = access.check(request(SUPER, None), "1.2.3.4", tls_identity=name)
        assert refusal is not None, name
        assert "is not a user" in (refusal.remark or ""), refusal.remark
    assert access.check(request(PUB, None), "1.2.3.4", tls_identity="alice") is None
    refusal = access.check(request(SUPER, None), "1.2.3.4", tls_identity="alice")
    assert refusal is not None and "not a super user" in (refusal.remark or "")


def test_global_whitelist(meta: AuthMetadata) -> None:
    access = control(meta, whitelist=["192.168.0.*"])
    assert access.check(request(SUPER, None), "192.168.0.9") is None
    assert access.check(request(SUPER, None), "192.168.1.9") is not None


def test_policy_changes_take_effect_at_once(meta: AuthMetadata) -> None:
    access = control(meta)
    bob = Credentials("bob", "bob-secret")
    assert access.check(request(PUB, bob), "1.2.3.4") is not None
    meta.update_acl(
        Acl(Subject("bob"), (Policy(PolicyType.CUSTOM, (entry("Topic:ord*", Action.PUB),)),))
    )
    assert access.check(request(PUB, bob), "1.2.3.4") is None
    meta.delete_acl("User:bob")
    assert access.check(request(PUB, bob), "1.2.3.4") is not None
    meta.update_user("bob", user_type=UserType.SUPER)
    assert access.check(request(SUPER, bob), "1.2.3.4") is None
    meta.delete_user("bob")
    assert access.check(request(USER, bob), "1.2.3.4") is not None


def test_a_failing_requirement_needs_a_super_user(meta: AuthMetadata) -> None:
    def broken(cmd: RemotingCommand) -> Requirement:
        raise KeyError("boom")

    access = AccessControl(
        authentication=True, authorization=True, metadata=meta, requirement=broken
    )
    assert access.check(request(OPEN, Credentials("alice", "alice-secret")), "1.2.3.4") is not None
    assert access.check(request(OPEN, Credentials("root", "root-secret")), "1.2.3.4") is None


def test_identity(meta: AuthMetadata) -> None:
    access = control(meta)
    assert access.identity(request(PUB, Credentials("alice", "alice-secret"))) == "alice"
    assert access.identity(request(PUB, INNER)) == "inner-node"
    assert access.identity(request(PUB, Credentials("alice", "wrong"))) is None
    assert access.identity(request(PUB, None)) is None
    assert control(meta, False, True).identity(request(PUB, INNER)) is None


# --- policy evaluation --------------------------------------------------------------------


def decide(
    meta: AuthMetadata,
    entries: list[PolicyEntry],
    resource: Resource,
    action: Action,
    ip: str = "10.0.0.1",
    default: list[PolicyEntry] | None = None,
) -> bool:
    """Whether carol may take ``action`` on ``resource`` under these policies."""
    if meta.get_user("carol") is None:
        meta.create_user(User("carol", "carol-secret"))
    if meta.acl_of("carol") is not None:
        meta.delete_acl("User:carol")
    policies = []
    if entries:
        policies.append(Policy(PolicyType.CUSTOM, tuple(entries)))
    if default:
        policies.append(Policy(PolicyType.DEFAULT, tuple(default)))
    if policies:
        meta.update_acl(Acl(Subject("carol"), tuple(policies)))

    def reqs(cmd: RemotingCommand) -> Requirement:
        return Requirement(Gate.POLICY, ((resource, action),))

    access = AccessControl(authentication=True, authorization=True, metadata=meta, requirement=reqs)
    return access.check(request(PUB, Credentials("carol", "carol-secret")), ip) is None


def test_most_specific_entry_wins(meta: AuthMetadata) -> None:
    t = Resource.topic("orders-eu")
    allow_prefix = entry("Topic:orders*", Action.PUB)
    deny_literal = entry("Topic:orders-eu", Action.PUB, decision=Decision.DENY)
    assert decide(meta, [allow_prefix], t, Action.PUB)
    assert not decide(meta, [allow_prefix, deny_literal], t, Action.PUB)
    # A longer prefix beats a shorter one, whichever decides what.
    deny_short = entry("Topic:or*", Action.PUB, decision=Decision.DENY)
    assert decide(meta, [deny_short, allow_prefix], t, Action.PUB)
    assert not decide(
        meta,
        [
            entry("Topic:or*", Action.PUB),
            entry("Topic:orders*", Action.PUB, decision=Decision.DENY),
        ],
        t,
        Action.PUB,
    )
    # A type's * beats *, a prefix beats a type's *.
    assert decide(
        meta,
        [entry("*", Action.ALL, decision=Decision.DENY), entry("Topic:*", Action.PUB)],
        t,
        Action.PUB,
    )
    assert decide(
        meta, [entry("Topic:*", Action.PUB, decision=Decision.DENY), allow_prefix], t, Action.PUB
    )
    assert not decide(
        meta, [entry("Topic:orders-eu", Action.ALL, decision=Decision.DENY)], t, Action.PUB
    )


def test_the_longest_matching_prefix_decides(meta: AuthMetadata) -> None:
    t = Resource.topic("orders-eu")
    # Prefixes of one length that do not match the name do not count.
    entries = [entry("Topic:orders*", Action.PUB), entry("Topic:ordert*", Action.PUB)]
    assert decide(meta, entries, t, Action.PUB)
    entries = [
        entry("Topic:orders-*", Action.PUB),
        entry("Topic:orders-e*", Action.PUB, decision=Decision.DENY),
        entry("Topic:orders-eu*", Action.PUB),
    ]
    assert decide(meta, entries, t, Action.PUB)  # the longest prefix allows


def test_action_and_source_ip_must_match(meta: AuthMetadata) -> None:
    t = Resource.topic("orders")
    assert not decide(meta, [entry("Topic:orders", Action.SUB)], t, Action.PUB)
    assert decide(meta, [entry("Topic:orders", Action.ALL)], t, Action.DELETE)
    only_lan = entry("Topic:orders", Action.PUB, ips=("10.0.0.0/8", "192.168.1.1-9"))
    assert decide(meta, [only_lan], t, Action.PUB, ip="10.1.1.1")
    assert decide(meta, [only_lan], t, Action.PUB, ip="192.168.1.5")
    assert not decide(meta, [only_lan], t, Action.PUB, ip="8.8.8.8")
    assert not decide(meta, [only_lan], t, Action.PUB, ip="")
    # An entry that does not apply from this address leaves the less specific one to decide.
    deny_outside = entry("Topic:orders", Action.PUB, decision=Decision.DENY, ips=("8.8.8.8",))
    assert decide(meta, [deny_outside, entry("Topic:*", Action.PUB)], t, Action.PUB)
    assert not decide(
        meta, [deny_outside, entry("Topic:*", Action.PUB)], t, Action.PUB, ip="8.8.8.8"
    )


def test_default_policy_only_when_no_custom_entry_matches(meta: AuthMetadata) -> None:
    t = Resource.topic("orders")
    default = [entry("Topic:*", Action.PUB)]
    assert decide(meta, [], t, Action.PUB, default=default)
    assert decide(
        meta, [entry("Topic:x", Action.PUB, decision=Decision.DENY)], t, Action.PUB, default=default
    )
    assert not decide(
        meta, [entry("*", Action.PUB, decision=Decision.DENY)], t, Action.PUB, default=default
    )
    assert not decide(meta, [], t, Action.PUB)


def test_every_need_must_be_allowed(meta: AuthMetadata) -> None:
    access = control(meta)
    alice = Credentials("alice", "alice-secret")
    assert access.check(request(SUB_BOTH, alice), "1.2.3.4") is None
    meta.update_acl(
        Acl(
            Subject("alice"),
            (Policy(PolicyType.CUSTOM, (entry("Group:g", Action.SUB, decision=Decision.DENY),)),),
        )
    )
    refusal = access.check(request(SUB_BOTH, alice), "1.2.3.4")
    assert (
        refusal is not None
        and "Group:g" in (refusal.remark or "")
        and "deny" in (refusal.remark or "")
    )


def test_deny_wins_among_equally_specific_entries() -> None:
    # Metadata keeps one entry per resource, so equal ties only come from a policy built
    # by hand; the index still resolves them to Deny, as RocketMQ's comparator does.
    from rocketq.auth.access import _CompiledAcl

    allow = entry("Topic:t", Action.PUB)
    deny = entry("Topic:t", Action.ALL, decision=Decision.DENY)
    for entries in ((allow, deny), (deny, allow)):
        compiled = _CompiledAcl(Acl(Subject("x"), (Policy(PolicyType.CUSTOM, entries),)))
        assert compiled.decide(Resource.topic("t"), Action.PUB, None) is Decision.DENY


def test_stateful_remembers_a_verified_sender_on_its_connection(meta: AuthMetadata) -> None:
    """As RocketMQ's StatefulAuthenticationStrategy: once a connection's request verifies,
    its later requests naming the same access key are not verified again, until the
    users or ACLs change or the time runs out; other connections and keys are verified."""
    now = [100.0]
    access = control(meta, stateful_seconds=60.0, clock=lambda: now[0])
    alice = Credentials("alice", "alice-secret")
    session: dict[str, object] = {}
    assert access.check(request(PUB, alice), "10.0.0.1", session=session) is None
    forged = request(PUB, Credentials("alice", "not-alice-secret"))
    assert access.check(forged, "10.0.0.1", session=session) is None  # remembered
    # Another connection, another access key, no session: verified and refused.
    assert access.check(forged, "10.0.0.1", session={}) is not None
    assert access.check(forged, "10.0.0.1") is not None
    root = request(PUB, Credentials("root", "not-root-secret"))
    assert access.check(root, "10.0.0.1", session=session) is not None
    # Policies still apply to every request of a remembered sender.
    other = request(SUPER, alice)
    assert access.check(other, "10.0.0.1", session=session) is not None
    # Expired: verified again.
    now[0] += 61.0
    assert access.check(forged, "10.0.0.1", session=session) is not None
    assert access.check(request(PUB, alice), "10.0.0.1", session=session) is None
    # A change to the users forgets every remembered sender.
    meta.update_user("alice", password="alice-new-secret")
    assert access.check(request(PUB, alice), "10.0.0.1", session=session) is not None
    # A refused request is never remembered.
    assert access.check(forged, "10.0.0.1", session=session) is not None
    assert access.check(request(PUB, alice), "10.0.0.1", session=session) is not None


def test_stateless_verifies_every_request(meta: AuthMetadata) -> None:
    access = control(meta)  # stateful_seconds 0
    session: dict[str, object] = {}
    alice = Credentials("alice", "alice-secret")
    assert access.check(request(PUB, alice), "10.0.0.1", session=session) is None
    forged = request(PUB, Credentials("alice", "not-alice-secret"))
    assert access.check(forged, "10.0.0.1", session=session) is not None
