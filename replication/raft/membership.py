"""Who belongs to a Raft group, and how that changes while the group runs (DLedger's
addPeer/removePeer; the Raft dissertation's single-server changes, section 4.1).

A configuration (:class:`Members`) names the group's voters and its learners, each with
the ``host:port`` of its Raft port. A change is an entry of the Raft log, so every member
sees the changes in the same order; each member uses the newest configuration its log holds
from the moment the entry is appended (committed or not), and goes back to the one before
when that entry is cut from its log. A leader makes one change at a time: the next is
refused until the previous one is committed.

- Adding a member makes it a learner: the leader sends it the log, but it neither votes
  nor counts for a commit. Once its log matches the leader's up to the entry that added it,
  the leader promotes it to a voter with a second entry. Until then the group's quorum is
  the old one, so a new, empty member never stalls commits.
- Removing a member takes it out of the voters at once. A leader that removes itself goes
  on leading (without counting itself) until the entry is committed, then tells the most
  up-to-date voter to stand at once and steps down.
- Each voter set differs from the one before by one member, so a majority of the old set
  and a majority of the new one always share a member: no two leaders in one term.

A change entry's data is :data:`CONFIG_PREFIX` followed by the configuration as JSON. Every
other entry's data is a CommitLog byte range, which starts with a record's size, never 0:
the prefix cannot be mistaken for messages. The CommitLog never holds a change entry; its
raft index unit covers no bytes, and the member keeps the data in :class:`MemberHistory`
(``members.json`` in the Raft directory), written and fsynced before the entry is appended.

On a restart, the newest configuration of that history the log still holds wins over the
broker's ``dledger_peers``, which only gives the group it started with.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rocketq.common.exceptions import RocketqSystemError, StoreCorruptError
from rocketq.common.json_file import read_json, write_json_atomic
from rocketq.storage.checkpoint import fsync_dir

log = logging.getLogger(__name__)

CONFIG_PREFIX: Final = b"\x00\x00\x00\x00RQMEMBERS1\n"
MAX_MEMBERS: Final = 32  # voters and learners together
MAX_CONFIG_BYTES: Final = 16 * 1024  # a change entry's data, prefix included
MAX_HISTORY: Final = 1024  # configurations a member keeps (the oldest are forgotten)
_ID: Final = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_HOST: Final = re.compile(r"^[^:;\s/]{1,253}$")


class MembershipError(RocketqSystemError):
    """A membership change that cannot be made (its message says why), or a change entry
    whose data is not a configuration."""


def check_member_id(member: str) -> str:
    """``member`` if it is a valid member id (letters, digits, _; as in dledger_peers)."""
    if not isinstance(member, str) or not _ID.match(member):
        raise MembershipError(f"member id {member!r} is not 1-64 letters, digits or _ (e.g. n3)")
    return member


def check_address(address: str) -> str:
    """``address`` if it is a ``host:port`` with a port of 1-65535."""
    host, sep, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
    if not sep or not _HOST.match(host) or not port.isdigit() or not 0 < int(port) < 65536:
        raise MembershipError(
            f"member address {address!r} is not host:port with a port of 1-65535 "
            "(the member's Raft port, e.g. 10.0.0.7:40911)"
        )
    return address


def is_config(data: bytes) -> bool:
    """Whether an entry's data is a membership change (not a CommitLog range)."""
    return data[: len(CONFIG_PREFIX)] == CONFIG_PREFIX


@dataclass(frozen=True, slots=True)
class Members:
    """One configuration of a group: voters and learners, id -> Raft ``host:port``."""

    voters: tuple[tuple[str, str], ...]
    learners: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, voters: dict[str, str], learners: dict[str, str] | None = None) -> Members:
        """Checked: ids and addresses valid, at least one voter, no id twice, no address
        shared by two members, at most MAX_MEMBERS."""
        learners = learners or {}
        for member, address in [*voters.items(), *learners.items()]:
            check_member_id(member)
            check_address(address)
        if not voters:
            raise MembershipError("a configuration needs at least one voter")
        both = set(voters) & set(learners)
        if both:
            raise MembershipError(f"{', '.join(sorted(both))} is both a voter and a learner")
        if len(voters) + len(learners) > MAX_MEMBERS:
            raise MembershipError(f"a group has at most {MAX_MEMBERS} members")
        addresses = [*voters.values(), *learners.values()]
        shared = sorted({a for a in addresses if addresses.count(a) > 1})
        if shared:
            raise MembershipError(f"address {shared[0]} is given to two members")
        return cls(tuple(sorted(voters.items())), tuple(sorted(learners.items())))

    @classmethod
    def bootstrap(cls, peers: dict[str, str]) -> Members:
        """The configuration a group starts with (every member a voter), unchecked: the
        broker's config checked dledger_peers already, and the simulated groups of the
        tests name no addresses."""
        return cls(tuple(sorted(peers.items())))

    @property
    def voter_ids(self) -> frozenset[str]:
        return frozenset(m for m, _ in self.voters)

    @property
    def learner_ids(self) -> frozenset[str]:
        return frozenset(m for m, _ in self.learners)

    @property
    def addresses(self) -> dict[str, str]:
        """Every member, voter or learner, id -> address."""
        return dict([*self.voters, *self.learners])

    def role_of(self, member: str) -> str:
        """``voter``, ``learner`` or ``removed`` (not in this configuration)."""
        if member in self.voter_ids:
            return "voter"
        return "learner" if member in self.learner_ids else "removed"

    # -- changes -----------------------------------------------------------------------

    def with_learner(self, member: str, address: str) -> Members:
        """This configuration and ``member`` as a learner (MembershipError for an id or an
        address already in it)."""
        check_member_id(member)
        check_address(address)
        if member in self.addresses:
            raise MembershipError(
                f"{member} is a member already ({self.role_of(member)} at {self.addresses[member]})"
            )
        holder = next((m for m, a in self.addresses.items() if a == address), None)
        if holder is not None:
            raise MembershipError(f"address {address} is member {holder}'s already")
        if len(self.addresses) >= MAX_MEMBERS:
            raise MembershipError(f"a group has at most {MAX_MEMBERS} members")
        return Members(self.voters, tuple(sorted([*self.learners, (member, address)])))

    def promoted(self, member: str) -> Members:
        """This configuration with learner ``member`` a voter."""
        learners = dict(self.learners)
        address = learners.pop(member)
        return Members(
            tuple(sorted([*self.voters, (member, address)])), tuple(sorted(learners.items()))
        )

    def without(self, member: str) -> Members:
        """This configuration without ``member`` (MembershipError for an unknown member or
        the last voter)."""
        if member not in self.addresses:
            known = ", ".join(sorted(self.addresses))
            raise MembershipError(f"{member!r} is not a member of this group (members: {known})")
        voters = {m: a for m, a in self.voters if m != member}
        if not voters:
            raise MembershipError(
                f"{member} is the group's last voter; a group cannot remove its last member"
            )
        learners = {m: a for m, a in self.learners if m != member}
        return Members(tuple(sorted(voters.items())), tuple(sorted(learners.items())))

    # -- bytes -------------------------------------------------------------------------

    def to_doc(self) -> dict[str, Any]:
        return {"voters": dict(self.voters), "learners": dict(self.learners)}

    @classmethod
    def from_doc(cls, doc: object) -> Members:
        """From :meth:`to_doc`'s form (MembershipError naming what is wrong)."""
        if not isinstance(doc, dict):
            raise MembershipError(f"a configuration is an object, not {type(doc).__name__}")
        voters, learners = doc.get("voters"), doc.get("learners", {})
        for name, part in (("voters", voters), ("learners", learners)):
            if not isinstance(part, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in part.items()
            ):
                raise MembershipError(f"a configuration's {name} is not an object of id: address")
        assert isinstance(voters, dict) and isinstance(learners, dict)
        return cls.of(voters, learners)

    def encode(self) -> bytes:
        """A change entry's data."""
        return CONFIG_PREFIX + json.dumps(self.to_doc(), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Members:
        """A change entry's data back (MembershipError for anything else)."""
        if not is_config(data):
            raise MembershipError("entry data does not start with the membership prefix")
        if len(data) > MAX_CONFIG_BYTES:
            raise MembershipError(
                f"a membership entry of {len(data)} bytes (at most {MAX_CONFIG_BYTES})"
            )
        try:
            doc = json.loads(bytes(data[len(CONFIG_PREFIX) :]))
        except (ValueError, RecursionError) as exc:
            raise MembershipError(f"a membership entry that is not JSON: {exc}") from None
        return cls.from_doc(doc)


class MemberHistory:
    """The configurations of a member's log, by the raft index of their entries (index 0:
    the one the group started with). Kept in ``path`` (None: in memory only), written and
    fsynced before each change entry is appended, so on a restart it knows at least every
    change the log holds; those past the log's end (a crash in between) are dropped."""

    def __init__(self, bootstrap: Members, path: Path | None = None) -> None:
        self.path = path
        self.bootstrap = bootstrap
        # (index, term, configuration), index ascending, every index > 0.
        self.configs: list[tuple[int, int, Members]] = []
        self._payloads: dict[int, bytes] = {}
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        doc = read_json(path, "raft group members")
        if doc is None:
            return
        try:
            if not isinstance(doc, dict) or doc.get("version") != 1:
                raise ValueError("expected {'version': 1, 'configs': [...]}")
            last = 0
            for item in doc["configs"]:
                index, term = item["index"], item["term"]
                if type(index) is not int or type(term) is not int or index <= last or term < 0:
                    raise ValueError(f"index {index!r} term {term!r} after index {last}")
                self._put(index, term, Members.from_doc(item))
                last = index
        except (KeyError, TypeError, ValueError, MembershipError) as exc:
            raise StoreCorruptError(
                f"{path}: the raft group's members are unreadable ({exc}); restore the file "
                "(moving it away makes the member use dledger_peers, the group it started with)"
            ) from None

    def _put(self, index: int, term: int, members: Members) -> None:
        self.configs.append((index, term, members))
        self._payloads[index] = members.encode()

    def _save(self) -> None:
        if self.path is None:
            return
        doc = {
            "version": 1,
            "configs": [{"index": i, "term": t, **m.to_doc()} for i, t, m in self.configs],
        }
        write_json_atomic(self.path, doc)
        fsync_dir(self.path.parent)

    def latest(self) -> tuple[int, Members]:
        """The newest configuration and the index of its entry (0: the bootstrap one)."""
        if self.configs:
            index, _, members = self.configs[-1]
            return index, members
        return 0, self.bootstrap

    def previous(self) -> Members:
        """The configuration before the newest one."""
        if len(self.configs) >= 2:
            return self.configs[-2][2]
        return self.bootstrap

    def payload(self, index: int) -> bytes | None:
        """The data of the change entry at ``index``, None when there is none there."""
        return self._payloads.get(index)

    def between(self, first: int, last: int) -> dict[int, bytes]:
        """The data of the change entries at ``first``..``last``, by index."""
        if not self.configs or self.configs[-1][0] < first:
            return {}  # the common case: no change among the entries sent
        return {i: self._payloads[i] for i, _, _ in self.configs if first <= i <= last}

    def ever_member(self, member: str) -> bool:
        """Whether ``member`` belongs to any configuration kept (ids are not reused)."""
        return member in self.bootstrap.addresses or any(
            member in m.addresses for _, _, m in self.configs
        )

    def record(self, index: int, term: int, members: Members) -> None:
        """The change entry at ``index`` (anything recorded from there on is replaced),
        durable when this returns."""
        self._drop_from(index)
        self._put(index, term, members)
        if len(self.configs) > MAX_HISTORY:
            old = self.configs.pop(0)
            self._payloads.pop(old[0], None)
            self.bootstrap = old[2]
        self._save()

    def truncate_after(self, index: int) -> bool:
        """Forget the changes after ``index`` (their entries were cut from the log);
        -> whether there were any."""
        if not self.configs or self.configs[-1][0] <= index:
            return False
        self._drop_from(index + 1)
        self._save()
        return True

    def _drop_from(self, index: int) -> None:
        while self.configs and self.configs[-1][0] >= index:
            self._payloads.pop(self.configs.pop()[0], None)
