"""ACL 1.0's ``plain_acl.yml`` (RocketMQ 4.x) translated into users and ACL policies, as
RocketMQ 5.3's ``AuthMigrator`` translates it, for users coming from 4.x.

Each account becomes a user (``admin: true``: a super user) whose password is its secret
key, and an ACL: ``topicPerms`` and ``groupPerms`` become entries of its custom policy (one
per topic or group), ``defaultTopicPerm`` and ``defaultGroupPerm`` entries for ``Topic:*`` and
``Group:*`` in its default policy (read only when no custom entry matches). A permission reads
``PUB``, ``SUB``, ``PUB|SUB`` (or ``SUB|PUB``), ``ANY`` (publish or subscribe) or ``DENY``.

Where this differs from the migrator, it is stricter: an account's ``whiteRemoteAddress``
(which in 1.0 let that account in from those addresses without a signature or a permission
check) becomes a custom entry allowing everything on ``*`` from those addresses only — the
signature is still checked, and a more specific entry (a topic's ``DENY``) still wins. A
permission the migrator would read as "everything" (an unknown word) is an error here.

``globalWhiteRemoteAddresses`` come back as source IP patterns: requests from them pass
without credentials, as in 1.0.

A file may use at most :data:`MAX_ALIASES` YAML aliases (``*name``, ``<<: *name``), as
RocketMQ's YAML reader allows 50 for collections: an alias repeats what it names without
its text, so a small file of aliases to one long permission list would otherwise become
millions of policy entries.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from rocketq.auth.model import (
    MAX_ENTRIES_PER_ACL,
    MAX_USERS,
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    Subject,
    User,
    UserType,
)
from rocketq.auth.source_ip import compile_source_ip

MAX_FILE_CHARS: Final = 8 * 1024 * 1024
MAX_ALIASES: Final = 50
RETRY_GROUP_PREFIX: Final = "%RETRY%"

_PERMS: Final[dict[str, tuple[tuple[Action, ...], Decision]]] = {
    "PUB": ((Action.PUB,), Decision.ALLOW),
    "SUB": ((Action.SUB,), Decision.ALLOW),
    "PUB|SUB": ((Action.PUB, Action.SUB), Decision.ALLOW),
    "SUB|PUB": ((Action.PUB, Action.SUB), Decision.ALLOW),
    "ANY": ((Action.PUB, Action.SUB), Decision.ALLOW),
    "DENY": ((Action.ALL,), Decision.DENY),
    "": ((Action.ALL,), Decision.DENY),
}


class PlainAclError(ValueError):
    """A plain_acl.yml that cannot be translated; the message says where and why."""


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # (PyYAML has no types)
    """PyYAML's safe loader, refusing a document with more than MAX_ALIASES aliases."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise PlainAclError(f"the ACL file uses more than {MAX_ALIASES} YAML aliases")
        return super().compose_node(parent, index)


def _text(value: object, where: str) -> str:
    """A scalar as text (YAML reads ``secretKey: 12345678`` as a number)."""
    if isinstance(value, bool) or value is None:
        raise PlainAclError(f"{where} must be text, not {value!r}")
    if isinstance(value, str | int | float):
        return str(value)
    raise PlainAclError(f"{where} must be text, not a {type(value).__name__}")


def _texts(value: object, where: str) -> list[str]:
    """A list of scalars; a single scalar with ``;`` or ``,`` separators is split."""
    if value is None:
        return []
    if isinstance(value, list):
        return [_text(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return [p for p in _text(value, where).replace(";", ",").split(",") if p.strip()]


def _perm(text: str, where: str) -> tuple[tuple[Action, ...], Decision]:
    perm = _PERMS.get(text.strip().upper().replace(" ", ""))
    if perm is None:
        raise PlainAclError(f"{where}: permission {text!r} is not PUB, SUB, PUB|SUB, ANY or DENY")
    return perm


def _patterns(value: object, where: str) -> list[str]:
    patterns = [p.strip() for p in _texts(value, where)]
    for pattern in patterns:
        try:
            compile_source_ip(pattern)
        except ValueError as exc:
            raise PlainAclError(f"{where}: {exc}") from None
    return patterns


def _bool(value: object, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise PlainAclError(f"{where} must be true or false, not {value!r}")


def _named_perms(value: object, kind: ResourceType, where: str) -> list[PolicyEntry]:
    entries = []
    for i, item in enumerate(_texts(value, where)):
        name, equals, perm = item.partition("=")
        name = name.strip()
        if not equals or not name:
            raise PlainAclError(f"{where}[{i}]: {item!r} is not name=PERM")
        if kind is ResourceType.GROUP and name.startswith(RETRY_GROUP_PREFIX):
            name = name[len(RETRY_GROUP_PREFIX) :]
        actions, decision = _perm(perm, f"{where}[{i}]")
        entries.append(PolicyEntry(Resource(kind, name), actions, (), decision))
    return entries


def _account(doc: object, index: int) -> tuple[User, Acl | None]:
    where = f"accounts[{index}]"
    if not isinstance(doc, dict):
        raise PlainAclError(f"{where} must be a mapping with accessKey, secretKey, ...")
    access_key = _text(doc.get("accessKey"), f"{where}.accessKey").strip()
    where = f"account {access_key!r}"
    secret_key = _text(doc.get("secretKey"), f"{where}: secretKey")
    admin = _bool(doc.get("admin"), f"{where}: admin")
    try:
        user = User(access_key, secret_key, UserType.SUPER if admin else UserType.NORMAL)
    except ValueError as exc:
        raise PlainAclError(f"{where}: {exc}") from None
    custom: list[PolicyEntry] = []
    custom += _named_perms(doc.get("topicPerms"), ResourceType.TOPIC, f"{where}: topicPerms")
    custom += _named_perms(doc.get("groupPerms"), ResourceType.GROUP, f"{where}: groupPerms")
    white = _patterns(doc.get("whiteRemoteAddress"), f"{where}: whiteRemoteAddress")
    if white:
        custom.append(PolicyEntry(Resource.any(), (Action.ALL,), tuple(white), Decision.ALLOW))
    default: list[PolicyEntry] = []
    for key, kind in (
        ("defaultTopicPerm", ResourceType.TOPIC),
        ("defaultGroupPerm", ResourceType.GROUP),
    ):
        value = doc.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        actions, decision = _perm(_text(value, f"{where}: {key}"), f"{where}: {key}")
        default.append(PolicyEntry(Resource(kind, "", ResourcePattern.ANY), actions, (), decision))
    policies = []
    if custom:
        policies.append(Policy(PolicyType.CUSTOM, ()).merged(custom))
    if default:
        policies.append(Policy(PolicyType.DEFAULT, tuple(default)))
    if not policies:
        return user, None
    acl = Acl(Subject(access_key), ()).merged(policies)
    if acl.entry_count > MAX_ENTRIES_PER_ACL:
        raise PlainAclError(f"{where}: more than {MAX_ENTRIES_PER_ACL} permissions")
    return user, acl


def translate_plain_acl(text: str) -> tuple[list[User], list[Acl], list[str]]:
    """The users, ACLs and global whitelist patterns of a plain_acl.yml's text; a
    ``PlainAclError`` (a ``ValueError``) saying what is wrong with a bad file."""
    if len(text) > MAX_FILE_CHARS:
        raise PlainAclError(f"the ACL file is larger than {MAX_FILE_CHARS} characters")
    try:
        loader = _Loader(text)
        try:
            doc: Any = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise PlainAclError(f"the ACL file is not YAML: {exc}") from None
    except RecursionError:
        raise PlainAclError("the ACL file is nested too deep") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise PlainAclError(
            "the ACL file must be a mapping with accounts and globalWhiteRemoteAddresses"
        )
    patterns = _patterns(doc.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")
    accounts = doc.get("accounts") or []
    if not isinstance(accounts, list):
        raise PlainAclError("accounts must be a list")
    if len(accounts) > MAX_USERS:
        raise PlainAclError(f"the ACL file has more than {MAX_USERS} accounts")
    users: list[User] = []
    acls: list[Acl] = []
    seen: set[str] = set()
    for index, account in enumerate(accounts):
        user, acl = _account(account, index)
        if user.username in seen:
            raise PlainAclError(f"account {user.username!r} appears twice")
        seen.add(user.username)
        users.append(user)
        if acl is not None:
            acls.append(acl)
    return users, acls, patterns
