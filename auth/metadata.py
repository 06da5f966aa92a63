"""Users and ACLs as a broker keeps them: two JSON files in its config directory
(``users.json``, ``acls.json``), written atomically on every change and read at start, with
RocketMQ's rules for creating, updating and deleting them
(``AuthenticationMetadataManager``, ``AuthorizationMetadataManager``).

Passwords are stored as given, because checking a request's signature needs the secret; the
files are created readable by their owner only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

from rocketq.auth.model import (
    MAX_ACLS,
    MAX_BODY_BYTES,
    MAX_ENTRIES_PER_ACL,
    MAX_USERS,
    Acl,
    Policy,
    PolicyType,
    Resource,
    Subject,
    User,
    UserStatus,
    UserType,
    acl_from_doc,
    acl_to_doc,
    user_info_from_doc,
    user_to_doc,
)
from rocketq.common.exceptions import StoreCorruptError
from rocketq.common.json_file import read_json, write_json_atomic

log = logging.getLogger(__name__)

USERS_FILE: Final = "users.json"
ACLS_FILE: Final = "acls.json"


class AuthMetadataError(ValueError):
    """A change to users or ACLs that RocketMQ's rules refuse (a user that exists already or
    does not exist, an empty policy, too many users or entries)."""


def _version(doc: dict[str, Any]) -> int:
    version = doc.get("version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"version {version!r} is not a count")
    return version


class AuthMetadata:
    """The users and ACLs of one node, persisted under ``directory``.

    ``version`` counts the changes (a replica compares it with its master's); ``on_change``
    is called after every change, including a ``restore``.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.users_path = self.directory / USERS_FILE
        self.acls_path = self.directory / ACLS_FILE
        self._users: dict[str, User] = {}
        self._acls: dict[str, Acl] = {}  # by username
        self.version = 0
        self.on_change: Callable[[], None] = lambda: None

    # -- loading and saving --------------------------------------------------------------

    def load(self) -> None:
        """Read both files (absent files: nothing). A file that is not such a table raises
        ``StoreCorruptError`` naming it, and nothing already loaded changes; one bad entry
        of a table is logged and skipped."""
        users, users_version = self._read(self.users_path, "users", "users", self._user_of)
        acls, acls_version = self._read(self.acls_path, "ACLs", "acls", self._acl_of)
        self._users = {u.username: u for u in users}
        self._acls = {a.subject.name: a for a in acls}
        self.version = max(users_version, acls_version)

    @staticmethod
    def _user_of(doc: object) -> User:
        return user_info_from_doc(doc).to_user()

    @staticmethod
    def _acl_of(doc: object) -> Acl:
        return acl_from_doc(doc)

    @staticmethod
    def _read(
        path: Path, what: str, key: str, parse: Callable[[object], Any]
    ) -> tuple[list[Any], int]:
        doc = read_json(path, what)
        if doc is None:
            return [], 0
        try:
            if not isinstance(doc, dict) or not isinstance(doc.get(key, []), list):
                raise ValueError(f'the file holds no JSON object with a "{key}" list')
            version = _version(doc)
        except (ValueError, TypeError) as exc:
            raise StoreCorruptError(
                f"{path}: cannot read the {what} ({exc}); restore it from a backup or move it "
                "away to start without it"
            ) from None
        found = []
        for i, item in enumerate(doc.get(key, [])):
            # One bad entry is skipped, not the server's start: a user or ACL left out is
            # refused everything (a subject's ACL is skipped whole, its Deny entries with
            # its Allow ones), so skipping fails closed.
            try:
                found.append(parse(item))
            except (ValueError, TypeError) as exc:
                log.warning(
                    "%s: skipping entry %d of the %s: %s (fix it, or recreate it with "
                    "`rocketq admin user|acl`)",
                    path, i, what, str(exc)[:200],
                )  # fmt: skip
        return found, version

    def _save_users(self) -> None:
        users = [user_to_doc(u) for u in self._users.values()]
        write_json_atomic(self.users_path, {"version": self.version, "users": users})

    def _save_acls(self) -> None:
        acls = [acl_to_doc(a) for a in self._acls.values()]
        write_json_atomic(self.acls_path, {"version": self.version, "acls": acls})

    def _changed(self, *, users: bool, acls: bool) -> None:
        self.version += 1
        if acls:
            self._save_acls()
        if users:
            self._save_users()
        self.on_change()

    # -- replicas ------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Every user and ACL with the version, as bytes a replica passes to ``restore``."""
        doc = {
            "version": self.version,
            "users": [user_to_doc(u) for u in self._users.values()],
            "acls": [acl_to_doc(a) for a in self._acls.values()],
        }
        return json.dumps(doc).encode()

    def restore(self, data: bytes | memoryview) -> None:
        """Replace everything with a ``snapshot`` (a replica following its master); a bad
        snapshot is a ``ValueError`` and changes nothing."""
        if len(data) > 4 * MAX_BODY_BYTES:
            raise ValueError("the auth snapshot is too large")
        try:
            doc = json.loads(bytes(data))
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"the auth snapshot is not JSON ({str(exc)[:200]})") from None
        if not isinstance(doc, dict):
            raise ValueError("the auth snapshot is not a JSON object")
        users_doc, acls_doc = doc.get("users", []), doc.get("acls", [])
        if not isinstance(users_doc, list) or not isinstance(acls_doc, list):
            raise ValueError("the auth snapshot's users and acls must be lists")
        if len(users_doc) > MAX_USERS or len(acls_doc) > MAX_ACLS:
            raise ValueError("the auth snapshot holds too many users or ACLs")
        users = [self._user_of(d) for d in users_doc]
        acls = [self._acl_of(d) for d in acls_doc]
        version = _version(doc)
        self._users = {u.username: u for u in users}
        self._acls = {a.subject.name: a for a in acls}
        self.version = version
        self._save_acls()
        self._save_users()
        self.on_change()

    # -- users ---------------------------------------------------------------------------

    def get_user(self, username: str) -> User | None:
        """The user of that name, if any."""
        return self._users.get(username)

    def list_users(self, filter: str = "") -> list[User]:
        """The users whose names contain ``filter`` (all when it is empty)."""
        return [u for name, u in self._users.items() if not filter or filter in name]

    def create_user(self, user: User) -> None:
        """Add a user; one of that name already existing is an error."""
        if user.username in self._users:
            raise AuthMetadataError(f"user {user.username!r} already exists")
        if len(self._users) >= MAX_USERS:
            raise AuthMetadataError(f"there are {MAX_USERS} users already; delete some first")
        self._users[user.username] = user
        self._changed(users=True, acls=False)

    def ensure_user(self, user: User) -> bool:
        """Add the user unless one of that name exists (an initial super user, a user from
        an ACL 1.0 file); whether it was added."""
        if user.username in self._users:
            return False
        self.create_user(user)
        return True

    def update_user(
        self,
        username: str,
        *,
        password: str | None = None,
        user_type: UserType | None = None,
        user_status: UserStatus | None = None,
    ) -> User:
        """Change what is given of an existing user; the updated user."""
        old = self._users.get(username)
        if old is None:
            raise AuthMetadataError(f"user {username!r} does not exist")
        new = User(
            username,
            password if password and password.strip() else old.password,
            user_type or old.user_type,
            user_status or old.user_status,
        )
        if new != old:
            self._users[username] = new
            self._changed(users=True, acls=False)
        return new

    def delete_user(self, username: str) -> bool:
        """Remove a user and its ACL; whether there was one."""
        if not username.strip():
            raise AuthMetadataError("the username is empty")
        had_user = self._users.pop(username, None) is not None
        had_acl = self._acls.pop(username, None) is not None
        if had_user or had_acl:
            self._changed(users=had_user, acls=had_acl)
        return had_user

    # -- ACLs ----------------------------------------------------------------------------

    def get_acl(self, subject: Subject | str) -> Acl | None:
        """The ACL of a subject (``User:alice`` or a Subject), if it has one."""
        if isinstance(subject, str):
            subject = Subject.parse(subject)
        return self._acls.get(subject.name)

    def acl_of(self, username: str) -> Acl | None:
        """The ACL of the user of that name, if it has one."""
        return self._acls.get(username)

    def list_acls(self, subject_filter: str = "", resource_filter: str = "") -> list[Acl]:
        """The ACLs whose subject contains ``subject_filter``, keeping only the entries
        whose resource contains ``resource_filter`` (RocketMQ's list semantics)."""
        out = []
        for acl in self._acls.values():
            key = acl.subject.key
            if subject_filter and subject_filter not in key:
                continue
            policies = list(acl.policies)
            if resource_filter and resource_filter not in key:
                policies = [
                    Policy(
                        p.policy_type,
                        tuple(e for e in p.entries if resource_filter in e.resource.key),
                    )
                    for p in policies
                ]
            policies = [p for p in policies if p.entries]
            if policies:
                out.append(Acl(acl.subject, tuple(policies)))
        return out

    def _subject_user(self, subject: Subject) -> User:
        user = self._users.get(subject.name)
        if user is None:
            raise AuthMetadataError(
                f"the subject {subject.key} does not exist (create the user first)"
            )
        return user

    def update_acl(self, acl: Acl) -> Acl:
        """Merge ``acl`` into the subject's ACL (creating it): a policy of a type it lacks is
        added, entries of a policy it has replace those for the same resource. The subject
        must be an existing user and every policy must have entries. The merged ACL."""
        self._subject_user(acl.subject)
        if not acl.policies:
            raise AuthMetadataError(f"{acl.subject.key}: the policies are empty")
        for policy in acl.policies:
            if not policy.entries:
                raise AuthMetadataError(
                    f"{acl.subject.key}: the {policy.policy_type.value} policy has no entries"
                )
        old = self._acls.get(acl.subject.name) or Acl(acl.subject, ())
        new = old.merged(acl.policies)
        if new.entry_count > MAX_ENTRIES_PER_ACL:
            raise AuthMetadataError(
                f"{acl.subject.key}: more than {MAX_ENTRIES_PER_ACL} policy entries"
            )
        if new != old:
            self._acls[acl.subject.name] = new
            self._changed(users=False, acls=True)
        return new

    def create_acl(self, acl: Acl) -> Acl:
        """As ``update_acl``: RocketMQ merges into an existing ACL on create too."""
        return self.update_acl(acl)

    def delete_acl(
        self,
        subject: Subject | str,
        policy_type: PolicyType | None = None,
        resource: Resource | None = None,
    ) -> None:
        """Delete a subject's ACL, or with ``resource`` only that resource's entry from its
        policy of ``policy_type`` (Custom by default); an ACL left without entries goes."""
        if isinstance(subject, str):
            subject = Subject.parse(subject)
        self._subject_user(subject)
        old = self._acls.get(subject.name)
        if old is None:
            raise AuthMetadataError(f"{subject.key} has no ACL")
        if resource is None:
            del self._acls[subject.name]
        else:
            new = old.without(policy_type or PolicyType.CUSTOM, resource)
            if new == old:
                return
            if new.policies:
                self._acls[subject.name] = new
            else:
                del self._acls[subject.name]
        self._changed(users=False, acls=True)

    # -- bulk ----------------------------------------------------------------------------

    def add_missing(self, users: Iterable[User], acls: Iterable[Acl]) -> int:
        """Add the users that do not exist yet, with their ACLs (as RocketMQ migrates an
        ACL 1.0 file: an existing user keeps what it has); how many users were added."""
        by_name = {a.subject.name: a for a in acls}
        added = 0
        for user in users:
            if user.username in self._users:
                continue
            if len(self._users) >= MAX_USERS:
                raise AuthMetadataError(f"there are {MAX_USERS} users already")
            self._users[user.username] = user
            acl = by_name.get(user.username)
            if acl is not None and acl.policies:
                self._acls[user.username] = acl
            added += 1
        if added:
            self._changed(users=True, acls=True)
        return added
