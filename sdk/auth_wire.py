"""The admin requests for users and ACLs (RocketMQ 5.3's ACL 2.0, mqadmin's ``createUser``
... ``listAcl``), as pure functions: each request with RocketMQ's code (AUTH_CREATE_USER,
3001, to AUTH_LIST_ACL, 3010), header fields and JSON body, and each answer read back into
frozen dataclasses. No I/O here.

A user travels as RocketMQ's ``UserInfo`` (``{"username", "password", "userType",
"userStatus"}``); an ACL as its ``AclInfo``: a subject (``User:alice``) and its policies,
each a policy type and entries of a resource (``Topic:orders``, ``Group:g*``, ``*``), actions
(``Pub``, ``Sub``, ``Create``, ``Update``, ``Delete``, ``Get``, ``List``, ``All``), source IPs
(addresses or CIDR blocks) and a decision (``Allow`` or ``Deny``). Fields left None are left
out of a body, so an update changes only what it names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.auth.model import Action, Decision, Resource, Subject
from rocketq.common.exceptions import ConfigError
from rocketq.remoting import fastjson
from rocketq.remoting.answer import check, malformed, text_field
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import RemotingCommand

USER_TYPES: Final = ("Super", "Normal")
"""A user's types as RocketMQ spells them: a super user may do anything."""
USER_STATUSES: Final = ("enable", "disable")
"""A user's statuses as RocketMQ spells them: a disabled user is refused everything."""
DECISIONS: Final = tuple(d.value for d in Decision)
"""A policy entry's decisions: ``Allow`` or ``Deny`` (Deny wins)."""
ACTIONS: Final = tuple(a.value for a in Action if a is not Action.ANY)
"""The actions a policy entry may name."""


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A user as a broker gives it back.

    Attributes:
        username: The user's name (its access key).
        password: Its password (its secret key), when the broker sends it; never shown by
            ``repr``.
        user_type: ``Super`` or ``Normal``.
        user_status: ``enable`` or ``disable``.
    """

    username: str
    password: str = field(default="", repr=False)
    user_type: str = ""
    user_status: str = ""


@dataclass(frozen=True, slots=True)
class PolicyEntryInfo:
    """One entry of a policy: what it decides for which requests.

    Attributes:
        resource: The resource it covers: ``Topic:orders``, ``Topic:order*`` (a prefix),
            ``Group:*``, ``Cluster:name`` or ``*``.
        actions: The actions it covers (``Pub``, ``Sub``, ... or ``All``).
        source_ips: The client addresses it covers (addresses or CIDR blocks); empty: any.
        decision: ``Allow`` or ``Deny``.
    """

    resource: str
    actions: tuple[str, ...] = ()
    source_ips: tuple[str, ...] = ()
    decision: str = "Allow"


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """A subject's policy of one type.

    Attributes:
        policy_type: ``Custom`` (what admins write) or ``Default``.
        entries: Its entries, one per resource.
    """

    policy_type: str = "Custom"
    entries: tuple[PolicyEntryInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class AclInfo:
    """A subject's ACL as a broker gives it back.

    Attributes:
        subject: Whom it is for: ``User:alice``.
        policies: Its policies.
    """

    subject: str
    policies: tuple[PolicyInfo, ...] = ()

    @property
    def entries(self) -> tuple[PolicyEntryInfo, ...]:
        """Every entry of every policy, in order."""
        return tuple(e for p in self.policies for e in p.entries)


# -- checking what an admin asks for ------------------------------------------------------


def _one_of(value: str, allowed: Sequence[str], what: str) -> str:
    """``value`` spelled as RocketMQ spells it (matched regardless of case)."""
    for known in allowed:
        if value.strip().lower() == known.lower():
            return known
    raise ConfigError(f"{what} {value!r} is not one of {', '.join(allowed)}")


def user_type(value: str) -> str:
    """``Super`` or ``Normal``, whatever the case given (ConfigError for anything else)."""
    return _one_of(value, USER_TYPES, "user type")


def user_status(value: str) -> str:
    """``enable`` or ``disable``, whatever the case given (ConfigError for anything else)."""
    return _one_of(value, USER_STATUSES, "user status")


def decision(value: str) -> str:
    """``Allow`` or ``Deny``, whatever the case given (ConfigError for anything else)."""
    return _one_of(value, DECISIONS, "decision")


def actions(values: Iterable[str]) -> tuple[str, ...]:
    """Actions spelled as RocketMQ spells them (ConfigError for an unknown one or none)."""
    out = tuple(_one_of(v, ACTIONS, "action") for v in values if v.strip())
    if not out:
        raise ConfigError(f"an ACL needs at least one action: {', '.join(ACTIONS)}")
    return out


def resource(value: str) -> str:
    """A resource as RocketMQ writes it: ``Kind:name`` (``Topic:orders``, ``Group:g*``,
    ``Cluster:c``) or ``*``, read as the brokers read it (``rocketq.auth.model``); the
    kind's case is fixed (ConfigError for anything else)."""
    try:
        return Resource.parse(value).key
    except ValueError as exc:
        raise ConfigError(f"{exc} (e.g. Topic:orders, Group:g1, Topic:order*, *)") from None


def subject(value: str) -> str:
    """A subject as RocketMQ writes it: ``User:name`` (ConfigError for anything else)."""
    try:
        return Subject.parse(value.strip()).key
    except ValueError as exc:
        raise ConfigError(f"{exc} (e.g. User:alice)") from None


# -- requests -----------------------------------------------------------------------------


def _body(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def user_doc(
    username: str,
    password: str | None = None,
    user_type: str | None = None,
    user_status: str | None = None,
) -> dict[str, Any]:
    """RocketMQ's UserInfo JSON, the fields given (None: left out)."""
    doc: dict[str, Any] = {"username": username}
    for key, value in (
        ("password", password),
        ("userType", user_type),
        ("userStatus", user_status),
    ):
        if value is not None:
            doc[key] = value
    return doc


def create_user_request(user: dict[str, Any]) -> RemotingCommand:
    """AUTH_CREATE_USER (CreateUserRequestHeader: username; body: UserInfo)."""
    return RemotingCommand(
        RequestCode.AUTH_CREATE_USER, {"username": str(user["username"])}, body=_body(user)
    )


def update_user_request(user: dict[str, Any]) -> RemotingCommand:
    """AUTH_UPDATE_USER (UpdateUserRequestHeader: username; body: UserInfo)."""
    return RemotingCommand(
        RequestCode.AUTH_UPDATE_USER, {"username": str(user["username"])}, body=_body(user)
    )


def delete_user_request(username: str) -> RemotingCommand:
    """AUTH_DELETE_USER (DeleteUserRequestHeader: username)."""
    return RemotingCommand(RequestCode.AUTH_DELETE_USER, {"username": username})


def get_user_request(username: str) -> RemotingCommand:
    """AUTH_GET_USER (GetUserRequestHeader: username)."""
    return RemotingCommand(RequestCode.AUTH_GET_USER, {"username": username})


def list_users_request(filter: str = "") -> RemotingCommand:
    """AUTH_LIST_USER (ListUsersRequestHeader: filter, a part of the names to list)."""
    return RemotingCommand(RequestCode.AUTH_LIST_USER, {"filter": filter} if filter else {})


def acl_doc(
    subject: str,
    resources: Iterable[str],
    actions: Iterable[str],
    source_ips: Iterable[str] = (),
    decision: str = "Allow",
) -> dict[str, Any]:
    """RocketMQ's AclInfo JSON (``AclInfo.of``): one Custom policy with an entry per
    resource, each with the same actions, source IPs and decision."""
    entry = {"actions": list(actions), "decision": decision}
    ips = list(source_ips)
    if ips:
        entry["sourceIps"] = ips
    return {
        "subject": subject,
        "policies": [
            {"policyType": "Custom", "entries": [{"resource": r, **entry} for r in resources]}
        ],
    }


def create_acl_request(acl: dict[str, Any]) -> RemotingCommand:
    """AUTH_CREATE_ACL (CreateAclRequestHeader: subject; body: AclInfo)."""
    return RemotingCommand(
        RequestCode.AUTH_CREATE_ACL, {"subject": str(acl["subject"])}, body=_body(acl)
    )


def update_acl_request(acl: dict[str, Any]) -> RemotingCommand:
    """AUTH_UPDATE_ACL (UpdateAclRequestHeader: subject; body: AclInfo)."""
    return RemotingCommand(
        RequestCode.AUTH_UPDATE_ACL, {"subject": str(acl["subject"])}, body=_body(acl)
    )


def delete_acl_request(
    subject: str, resource: str | None = None, policy_type: str | None = None
) -> RemotingCommand:
    """AUTH_DELETE_ACL (DeleteAclRequestHeader: subject, and optionally policyType and the
    one resource to drop; without a resource the subject's whole ACL goes)."""
    ext = {"subject": subject}
    if resource:
        ext["resource"] = resource
    if policy_type:
        ext["policyType"] = policy_type
    return RemotingCommand(RequestCode.AUTH_DELETE_ACL, ext)


def get_acl_request(subject: str) -> RemotingCommand:
    """AUTH_GET_ACL (GetAclRequestHeader: subject)."""
    return RemotingCommand(RequestCode.AUTH_GET_ACL, {"subject": subject})


def list_acls_request(subject_filter: str = "", resource_filter: str = "") -> RemotingCommand:
    """AUTH_LIST_ACL (ListAclsRequestHeader: subjectFilter, resourceFilter)."""
    ext = {}
    if subject_filter:
        ext["subjectFilter"] = subject_filter
    if resource_filter:
        ext["resourceFilter"] = resource_filter
    return RemotingCommand(RequestCode.AUTH_LIST_ACL, ext)


# -- answers ------------------------------------------------------------------------------


def _json(answer: RemotingCommand, what: str) -> Any:
    check(answer)
    try:
        return fastjson.loads(bytes(answer.body or b"null"))
    except (ValueError, RecursionError) as exc:
        raise malformed(what, f"is not JSON: {exc}") from None


def _texts(doc: dict[Any, Any], key: str, what: str) -> tuple[str, ...]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise malformed(what, f"has a {key} that is not an array")
    return tuple(str(v) for v in value)


def _list(doc: dict[Any, Any], key: str, what: str) -> list[Any]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise malformed(what, f"has a {key} that is not an array")
    return value


def _object(doc: Any, what: str) -> dict[Any, Any]:
    if not isinstance(doc, dict):
        raise malformed(what, f"has {doc!r:.80} where an object belongs")
    return doc


def user_from_doc(doc: Any, what: str = "user") -> UserInfo:
    """A UserInfo JSON object as a :class:`UserInfo`."""
    doc = _object(doc, what)
    name = text_field(doc, "username")
    if not name:
        raise malformed(what, "has a user without a username")
    return UserInfo(
        name,
        text_field(doc, "password"),
        text_field(doc, "userType"),
        text_field(doc, "userStatus"),
    )


def acl_from_doc(doc: Any, what: str = "ACL") -> AclInfo:
    """An AclInfo JSON object as an :class:`AclInfo`."""
    doc = _object(doc, what)
    policies = []
    for p in _list(doc, "policies", what):
        p = _object(p, what)
        entries = []
        for e in _list(p, "entries", what):
            e = _object(e, what)
            entries.append(
                PolicyEntryInfo(
                    text_field(e, "resource"),
                    _texts(e, "actions", what),
                    _texts(e, "sourceIps", what),
                    text_field(e, "decision"),
                )
            )
        policies.append(PolicyInfo(text_field(p, "policyType", "Custom"), tuple(entries)))
    return AclInfo(text_field(doc, "subject"), tuple(policies))


def parse_user(answer: RemotingCommand) -> UserInfo | None:
    """AUTH_GET_USER's answer: the user, or None when the broker has no such user (an
    empty body)."""
    doc = _json(answer, "user")
    return None if doc is None else user_from_doc(doc)


def parse_users(answer: RemotingCommand) -> list[UserInfo]:
    """AUTH_LIST_USER's answer: the users, by name."""
    doc = _json(answer, "user list")
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise malformed("user list", "is not a JSON array")
    return sorted((user_from_doc(d, "user list") for d in doc), key=lambda u: u.username)


def parse_acl(answer: RemotingCommand) -> AclInfo | None:
    """AUTH_GET_ACL's answer: the subject's ACL, or None when it has none (an empty body)."""
    doc = _json(answer, "ACL")
    return None if doc is None else acl_from_doc(doc)


def parse_acls(answer: RemotingCommand) -> list[AclInfo]:
    """AUTH_LIST_ACL's answer: the ACLs, by subject."""
    doc = _json(answer, "ACL list")
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise malformed("ACL list", "is not a JSON array")
    return sorted((acl_from_doc(d, "ACL list") for d in doc), key=lambda a: a.subject)
