"""The words of RocketMQ 5.3's ACL 2.0 model: resources, the actions on them and the
decision of a policy entry.

A resource is written as RocketMQ writes it: ``Topic:orders`` (one topic), ``Topic:order*``
(every topic whose name starts with ``order``), ``Topic:*`` (every topic), ``Group:g1``,
``Cluster:DefaultCluster``, or ``*`` (anything).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from rocketq.auth.source_ip import compile_source_ip


class ResourceType(enum.Enum):
    """What a resource names (RocketMQ's ResourceType, as its JSON writes it)."""

    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


_RESOURCE_TYPES: Final = {t.value.lower(): t for t in ResourceType}


class ResourcePattern(enum.Enum):
    """How a policy's resource name matches a request's: the whole name, a prefix of it
    (written with a trailing ``*``) or anything of its type (``*``)."""

    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Action(enum.Enum):
    """What a request does to a resource (RocketMQ's Action, as its JSON writes it)."""

    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class Decision(enum.Enum):
    """What a policy entry decides for the requests it matches; Deny wins over Allow."""

    ALLOW = "Allow"
    DENY = "Deny"


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource as a policy or a request names it."""

    type: ResourceType
    name: str = ""
    pattern: ResourcePattern = ResourcePattern.LITERAL

    @classmethod
    def topic(cls, name: str) -> Resource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def group(cls, name: str) -> Resource:
        return cls(ResourceType.GROUP, name)

    @classmethod
    def cluster(cls, name: str = "") -> Resource:
        return cls(ResourceType.CLUSTER, name)

    @classmethod
    def any(cls) -> Resource:
        """``*``: every resource of every type."""
        return cls(ResourceType.ANY, "", ResourcePattern.ANY)

    @classmethod
    def parse(cls, text: object) -> Resource:
        """A resource from RocketMQ's text: ``Topic:foo``, ``Topic:foo*`` (prefix),
        ``Topic:*``, ``Group:g``, ``Cluster:c``, ``*``. The type is case-insensitive. A
        ``ValueError`` says what is wrong with anything else."""
        if not isinstance(text, str):
            raise ValueError(f"a resource must be a string, not {type(text).__name__}")
        if len(text) > MAX_NAME_CHARS:
            raise ValueError(f"a resource is longer than {MAX_NAME_CHARS} characters")
        text = text.strip()
        if text == "*":
            return cls.any()
        kind, colon, name = text.partition(":")
        rtype = _RESOURCE_TYPES.get(kind.lower())
        if not colon or rtype is None or rtype is ResourceType.ANY:
            raise ValueError(
                f"resource {text!r} is not Type:name (Type one of Cluster, Namespace, Topic, "
                "Group) or *"
            )
        if name == "*":
            return cls(rtype, "", ResourcePattern.ANY)
        if name.endswith("*"):
            name = name[: name.index("*")]
            if not name:
                return cls(rtype, "", ResourcePattern.ANY)
            return cls(rtype, name, ResourcePattern.PREFIXED)
        if not name:
            raise ValueError(f"resource {text!r} has no name after the colon")
        return cls(rtype, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        """The resource in RocketMQ's text form (the inverse of ``parse``)."""
        if self.type is ResourceType.ANY:
            return "*"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.value}:*"
        if self.pattern is ResourcePattern.PREFIXED:
            return f"{self.type.value}:{self.name}*"
        return f"{self.type.value}:{self.name}"

    def matches(self, wanted: Resource) -> bool:
        """Whether this resource, as a policy names it, covers ``wanted``, as a request
        names it: ``*`` covers everything; otherwise the types must be equal and the name
        must be equal (literal), start with this name (prefixed) or be anything (``*``)."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not wanted.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.LITERAL:
            return wanted.name == self.name
        return wanted.name.startswith(self.name)


class Gate(enum.Enum):
    """Who may make a request once authentication is on, before any policy is read."""

    # Anyone, without credentials (nothing a request of this kind reads or changes is
    # private: e.g. a route lookup on the nameserver).
    OPEN = "open"
    # Any authenticated user; no policy is consulted.
    USER = "user"
    # Super users and the cluster's inner credentials only.
    SUPER = "super"
    # Any authenticated user whose policies allow every (resource, action) of the
    # requirement; super users always.
    POLICY = "policy"


@dataclass(frozen=True, slots=True)
class Requirement:
    """What a request needs: its gate, and for ``Gate.POLICY`` each resource with the
    action on it."""

    gate: Gate
    needs: tuple[tuple[Resource, Action], ...] = ()


# ---------------------------------------------------------------------------------------
# Limits on what a user, an ACL or a decoded body may hold.

MAX_NAME_CHARS: Final = 1024  # a username, a resource text, a source IP pattern
MAX_PASSWORD_CHARS: Final = 4096
MAX_USERS: Final = 10_000
MAX_ACLS: Final = 10_000
MAX_ENTRIES_PER_ACL: Final = 1000
MAX_SOURCE_IPS: Final = 256  # per policy entry
MAX_BODY_BYTES: Final = 16 * 1024 * 1024  # a UserInfo / AclInfo body, or a list of them


def _named(kinds: type[enum.Enum], text: object, what: str) -> Any:
    """The member of ``kinds`` whose value is ``text``, ignoring case, as RocketMQ's
    ``getByName`` reads them."""
    if isinstance(text, str):
        for kind in kinds:
            if kind.value.lower() == text.lower():
                return kind
    allowed = ", ".join(k.value for k in kinds)
    raise ValueError(f"{what} {text!r} is not one of {allowed}")


class UserType(enum.Enum):
    """A super user may do anything; a normal user what its ACL allows."""

    SUPER = "Super"
    NORMAL = "Normal"

    @classmethod
    def parse(cls, text: object) -> UserType:
        """The user type named ``text`` (case-insensitive)."""
        return _named(cls, text, "user type")  # type: ignore[no-any-return]


class UserStatus(enum.Enum):
    """A disabled user's requests are refused."""

    ENABLE = "enable"
    DISABLE = "disable"

    @classmethod
    def parse(cls, text: object) -> UserStatus:
        """The user status named ``text`` (case-insensitive)."""
        return _named(cls, text, "user status")  # type: ignore[no-any-return]


class PolicyType(enum.Enum):
    """An ACL's custom policy is read first; its default policy only when no custom entry
    matches a request (ACL 1.0's default topic and group permissions land there)."""

    CUSTOM = "Custom"
    DEFAULT = "Default"

    @classmethod
    def parse(cls, text: object) -> PolicyType:
        """The policy type named ``text`` (case-insensitive)."""
        return _named(cls, text, "policy type")  # type: ignore[no-any-return]


def _action(text: object) -> Action:
    return _named(Action, text, "action")  # type: ignore[no-any-return]


def _decision(text: object) -> Decision:
    return _named(Decision, text, "decision")  # type: ignore[no-any-return]


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"the {what} is empty")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"the {what} is longer than {MAX_NAME_CHARS} characters")
    return name


@dataclass(frozen=True, slots=True)
class Subject:
    """Who an ACL is about: a user, written ``User:alice``."""

    name: str

    @property
    def key(self) -> str:
        """RocketMQ's text for the subject: ``User:<name>``."""
        return f"User:{self.name}"

    @classmethod
    def parse(cls, text: object) -> Subject:
        """A subject from ``User:<name>`` (the type is case-insensitive)."""
        if not isinstance(text, str):
            raise ValueError(f"a subject must be a string like User:alice, not {text!r}")
        kind, colon, name = text.partition(":")
        if not colon or kind.lower() != "user":
            raise ValueError(f"subject {text[:100]!r} is not User:<username>")
        return cls(_check_name(name, "subject's username"))


@dataclass(frozen=True, slots=True)
class User:
    """A user: its name is the access key it signs with, its password the secret key (kept
    as given: checking a signature needs it). ``repr`` never shows the password."""

    username: str
    password: str = field(repr=False)
    user_type: UserType = UserType.NORMAL
    user_status: UserStatus = UserStatus.ENABLE

    def __post_init__(self) -> None:
        _check_name(self.username, "username")
        if not isinstance(self.password, str) or not self.password.strip():
            raise ValueError(f"user {self.username!r}: the password is empty")
        if len(self.password) > MAX_PASSWORD_CHARS:
            raise ValueError(
                f"user {self.username!r}: the password is longer than {MAX_PASSWORD_CHARS} "
                "characters"
            )

    @property
    def is_super(self) -> bool:
        """Whether the user is a super user."""
        return self.user_type is UserType.SUPER

    @property
    def enabled(self) -> bool:
        """Whether the user may make requests at all."""
        return self.user_status is UserStatus.ENABLE


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    """One rule of a policy: the actions on a resource it decides, from which source IPs
    (none: from anywhere), and its decision."""

    resource: Resource
    actions: tuple[Action, ...]
    source_ips: tuple[str, ...] = ()
    decision: Decision = Decision.ALLOW

    def __post_init__(self) -> None:
        if not self.actions:
            raise ValueError(f"policy entry for {self.resource.key}: the actions are empty")
        if Action.ANY in self.actions:
            raise ValueError(f"policy entry for {self.resource.key}: an action can not be Any")
        if len(self.source_ips) > MAX_SOURCE_IPS:
            raise ValueError(
                f"policy entry for {self.resource.key}: more than {MAX_SOURCE_IPS} source IPs"
            )
        for pattern in self.source_ips:
            compile_source_ip(pattern)

    def allows_action(self, wanted: Action) -> bool:
        """Whether this entry speaks about ``wanted`` (``All`` covers every action; a
        request for ``Any`` is covered by any action)."""
        if wanted is Action.ANY:
            return True
        return wanted in self.actions or Action.ALL in self.actions


@dataclass(frozen=True, slots=True)
class Policy:
    """The entries of one policy type of an ACL, at most one per resource."""

    policy_type: PolicyType
    entries: tuple[PolicyEntry, ...]

    def merged(self, entries: Iterable[PolicyEntry]) -> Policy:
        """This policy with ``entries`` added; an entry for a resource that already has one
        replaces its actions, source IPs and decision (RocketMQ's ``updateEntry``)."""
        out = list(self.entries)
        where = {e.resource: i for i, e in enumerate(out)}
        for entry in entries:
            at = where.get(entry.resource)
            if at is None:
                where[entry.resource] = len(out)
                out.append(entry)
            else:
                out[at] = entry
        return replace(self, entries=tuple(out))

    def without(self, resource: Resource) -> Policy:
        """This policy without its entry for ``resource``."""
        return replace(self, entries=tuple(e for e in self.entries if e.resource != resource))


@dataclass(frozen=True, slots=True)
class Acl:
    """A subject's policies: at most one custom and one default policy."""

    subject: Subject
    policies: tuple[Policy, ...]

    def policy(self, policy_type: PolicyType) -> Policy | None:
        """The policy of that type, if the ACL has one."""
        for policy in self.policies:
            if policy.policy_type is policy_type:
                return policy
        return None

    @property
    def entry_count(self) -> int:
        """How many entries all its policies hold."""
        return sum(len(p.entries) for p in self.policies)

    def merged(self, policies: Iterable[Policy]) -> Acl:
        """This ACL with ``policies`` merged in: a policy of a new type is added, one of a
        type it has merges entries by resource (RocketMQ's ``updatePolicy``)."""
        out = list(self.policies)
        for policy in policies:
            for i, old in enumerate(out):
                if old.policy_type is policy.policy_type:
                    out[i] = old.merged(policy.entries)
                    break
            else:
                out.append(Policy(policy.policy_type, ()).merged(policy.entries))
        return replace(self, policies=tuple(out))

    def without(self, policy_type: PolicyType, resource: Resource) -> Acl:
        """This ACL without the entry for ``resource`` in its policy of that type; a policy
        left empty goes too."""
        out = []
        for policy in self.policies:
            if policy.policy_type is policy_type:
                policy = policy.without(resource)
                if not policy.entries:
                    continue
            out.append(policy)
        return replace(self, policies=tuple(out))


# ---------------------------------------------------------------------------------------
# RocketMQ's JSON bodies: UserInfo {username, password, userType, userStatus} and AclInfo
# {subject, policies: [{policyType, entries: [{resource, actions, sourceIps, decision}]}]}.


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A UserInfo body as a request carries it: anything but the username may be missing
    (an update changes only what it gives)."""

    username: str
    password: str | None = field(default=None, repr=False)
    user_type: UserType | None = None
    user_status: UserStatus | None = None

    def to_user(self) -> User:
        """The user this body creates (Normal and enabled unless it says otherwise)."""
        if not self.password:
            raise ValueError(f"user {self.username!r}: the password is empty")
        return User(
            self.username,
            self.password,
            self.user_type or UserType.NORMAL,
            self.user_status or UserStatus.ENABLE,
        )


def _loads(data: bytes | memoryview | str, what: str) -> Any:
    if len(data) > MAX_BODY_BYTES:
        raise ValueError(f"the {what} body is larger than {MAX_BODY_BYTES} bytes")
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        return json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"the {what} body is not JSON: {str(exc)[:200]}") from None


def _object(doc: object, what: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ValueError(f"{what} must be a JSON object, not {type(doc).__name__}")
    return doc


def _list(doc: object, what: str, limit: int) -> list[Any]:
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise ValueError(f"{what} must be a JSON list, not {type(doc).__name__}")
    if len(doc) > limit:
        raise ValueError(f"{what} has more than {limit} items")
    return doc


def _optional_str(doc: dict[str, Any], key: str, what: str) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what}: {key} must be a string")
    return value


def user_info_from_doc(doc: object) -> UserInfo:
    """A UserInfo from its decoded JSON object."""
    obj = _object(doc, "a UserInfo")
    username = _check_name(obj.get("username"), "username")
    password = _optional_str(obj, "password", f"user {username!r}")
    if password is not None and len(password) > MAX_PASSWORD_CHARS:
        raise ValueError(f"user {username!r}: the password is longer than {MAX_PASSWORD_CHARS}")
    kind = _optional_str(obj, "userType", f"user {username!r}")
    status = _optional_str(obj, "userStatus", f"user {username!r}")
    return UserInfo(
        username,
        password or None,
        None if not kind else UserType.parse(kind),
        None if not status else UserStatus.parse(status),
    )


def user_to_doc(user: User, *, with_password: bool = True) -> dict[str, Any]:
    """RocketMQ's UserInfo JSON object for a user."""
    doc: dict[str, Any] = {"username": user.username}
    if with_password:
        doc["password"] = user.password
    doc["userType"] = user.user_type.value
    doc["userStatus"] = user.user_status.value
    return doc


def decode_user_info(data: bytes | memoryview | str) -> UserInfo:
    """A UserInfo body from outside bytes; ``ValueError`` saying what is wrong."""
    return user_info_from_doc(_loads(data, "UserInfo"))


def decode_user_infos(data: bytes | memoryview | str) -> list[UserInfo]:
    """A JSON list of UserInfo (a list_users answer)."""
    docs = _list(_loads(data, "UserInfo list"), "the user list", MAX_USERS)
    return [user_info_from_doc(d) for d in docs]


def encode_user_info(user: User, *, with_password: bool = True) -> bytes:
    """A user as a UserInfo body."""
    return json.dumps(user_to_doc(user, with_password=with_password)).encode()


def encode_user_infos(users: Iterable[User], *, with_password: bool = True) -> bytes:
    """Users as a JSON list of UserInfo."""
    return json.dumps([user_to_doc(u, with_password=with_password) for u in users]).encode()


def _strings(doc: object, what: str, limit: int) -> list[str]:
    items = _list(doc, what, limit)
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"{what} must hold strings, not {type(item).__name__}")
    return items


def entry_from_doc(doc: object) -> PolicyEntry:
    """A policy entry from its decoded JSON object."""
    obj = _object(doc, "a policy entry")
    resource = Resource.parse(obj.get("resource"))
    where = f"policy entry for {resource.key}"
    actions = tuple(dict.fromkeys(_action(a) for a in _strings(obj.get("actions"), where, 16)))
    source_ips = tuple(_strings(obj.get("sourceIps"), f"{where}: sourceIps", MAX_SOURCE_IPS))
    decision = obj.get("decision")
    if decision is None:
        raise ValueError(f"{where}: the decision is missing (Allow or Deny)")
    return PolicyEntry(resource, actions, source_ips, _decision(decision))


def entry_to_doc(entry: PolicyEntry) -> dict[str, Any]:
    """RocketMQ's PolicyEntryInfo JSON object for an entry."""
    doc: dict[str, Any] = {
        "resource": entry.resource.key,
        "actions": [a.value for a in entry.actions],
    }
    if entry.source_ips:
        doc["sourceIps"] = list(entry.source_ips)
    doc["decision"] = entry.decision.value
    return doc


def acl_from_doc(doc: object, subject: str | None = None) -> Acl:
    """An ACL from its decoded AclInfo JSON object. ``subject`` (a request header's) is used
    when the body names none. Policies of one type are merged; a missing type is Custom."""
    obj = _object(doc, "an AclInfo")
    text = obj.get("subject") or subject
    acl = Acl(Subject.parse(text), ())
    policies = []
    count = 0
    for item in _list(obj.get("policies"), "policies", 16):
        pobj = _object(item, "a policy")
        kind = pobj.get("policyType")
        ptype = PolicyType.CUSTOM if kind is None or kind == "" else PolicyType.parse(kind)
        entries = [
            entry_from_doc(e)
            for e in _list(pobj.get("entries"), "policy entries", MAX_ENTRIES_PER_ACL)
        ]
        count += len(entries)
        if count > MAX_ENTRIES_PER_ACL:
            raise ValueError(f"{acl.subject.key}: more than {MAX_ENTRIES_PER_ACL} policy entries")
        policies.append(Policy(ptype, tuple(entries)))
    return acl.merged(policies)


def acl_to_doc(acl: Acl) -> dict[str, Any]:
    """RocketMQ's AclInfo JSON object for an ACL."""
    return {
        "subject": acl.subject.key,
        "policies": [
            {"policyType": p.policy_type.value, "entries": [entry_to_doc(e) for e in p.entries]}
            for p in acl.policies
        ],
    }


def decode_acl_info(data: bytes | memoryview | str, subject: str | None = None) -> Acl:
    """An AclInfo body from outside bytes; ``ValueError`` saying what is wrong."""
    return acl_from_doc(_loads(data, "AclInfo"), subject)


def decode_acl_infos(data: bytes | memoryview | str) -> list[Acl]:
    """A JSON list of AclInfo (a list_acls answer)."""
    docs = _list(_loads(data, "AclInfo list"), "the ACL list", MAX_ACLS)
    return [acl_from_doc(d) for d in docs]


def encode_acl_info(acl: Acl) -> bytes:
    """An ACL as an AclInfo body."""
    return json.dumps(acl_to_doc(acl)).encode()


def encode_acl_infos(acls: Iterable[Acl]) -> bytes:
    """ACLs as a JSON list of AclInfo."""
    return json.dumps([acl_to_doc(a) for a in acls]).encode()
