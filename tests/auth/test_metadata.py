"""Users and ACLs kept in a node's directory: RocketMQ's rules for changing them, the files,
snapshots for replicas."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.auth.metadata import AuthMetadata, AuthMetadataError
from rocketq.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    Subject,
    User,
    UserStatus,
    UserType,
)
from rocketq.common.exceptions import StoreCorruptError


def entry(resource: str, *actions: Action, decision: Decision = Decision.ALLOW) -> PolicyEntry:
    return PolicyEntry(Resource.parse(resource), actions or (Action.PUB,), (), decision)


def acl(name: str, *entries: PolicyEntry, kind: PolicyType = PolicyType.CUSTOM) -> Acl:
    return Acl(Subject(name), (Policy(kind, entries),))


@pytest.fixture
def meta(tmp_path: Path) -> AuthMetadata:
    m = AuthMetadata(tmp_path / "auth")
    m.load()
    return m


def reloaded(meta: AuthMetadata) -> AuthMetadata:
    again = AuthMetadata(meta.directory)
    again.load()
    return again


def test_users_crud_survives_a_restart(meta: AuthMetadata) -> None:
    changes: list[int] = []
    meta.on_change = lambda: changes.append(meta.version)
    meta.create_user(User("alice", "pw"))
    meta.create_user(User("bob", "pw2", UserType.SUPER))
    with pytest.raises(AuthMetadataError, match="already exists"):
        meta.create_user(User("alice", "other"))
    updated = meta.update_user("alice", user_status=UserStatus.DISABLE)
    assert updated == User("alice", "pw", UserType.NORMAL, UserStatus.DISABLE)
    assert meta.update_user("alice", password="new").password == "new"
    with pytest.raises(AuthMetadataError, match="does not exist"):
        meta.update_user("carol", password="x")
    assert changes == [1, 2, 3, 4]
    again = reloaded(meta)
    assert again.version == 4
    assert again.get_user("alice") == User("alice", "new", UserType.NORMAL, UserStatus.DISABLE)
    assert again.get_user("bob") == User("bob", "pw2", UserType.SUPER)
    assert [u.username for u in again.list_users("ali")] == ["alice"]
    assert len(again.list_users()) == 2


def test_files_are_private(meta: AuthMetadata) -> None:
    meta.create_user(User("alice", "pw"))
    mode = stat.S_IMODE(os.stat(meta.users_path).st_mode)
    assert mode & 0o077 == 0
    assert json.loads(meta.users_path.read_text())["users"][0]["password"] == "pw"


def test_delete_user_deletes_its_acl(meta: AuthMetadata) -> None:
    meta.create_user(User("alice", "pw"))
    meta.update_acl(acl("alice", entry("Topic:t")))
    assert meta.delete_user("alice")
    assert meta.get_user("alice") is None and meta.acl_of("alice") is None
    assert not meta.delete_user("alice")
    again = reloaded(meta)
    assert again.get_user("alice") is None and again.list_acls() == []


def test_acl_needs_an_existing_user_and_entries(meta: AuthMetadata) -> None:
    with pytest.raises(AuthMetadataError, match="does not exist"):
        meta.update_acl(acl("ghost", entry("Topic:t")))
    meta.create_user(User("alice", "pw"))
    with pytest.raises(AuthMetadataError, match="policies are empty"):
        meta.update_acl(Acl(Subject("alice"), ()))
    with pytest.raises(AuthMetadataError, match="no entries"):
        meta.update_acl(acl("alice"))


def test_update_acl_merges_by_resource(meta: AuthMetadata) -> None:
    meta.create_user(User("alice", "pw"))
    meta.create_acl(acl("alice", entry("Topic:t", Action.PUB), entry("Group:g", Action.SUB)))
    merged = meta.update_acl(
        acl("alice", entry("Topic:t", Action.SUB, decision=Decision.DENY), entry("Topic:u*"))
    )
    custom = merged.policy(PolicyType.CUSTOM)
    assert custom is not None
    assert [e.resource.key for e in custom.entries] == ["Topic:t", "Group:g", "Topic:u*"]
    assert custom.entries[0].decision is Decision.DENY
    meta.create_acl(acl("alice", entry("*", Action.GET), kind=PolicyType.DEFAULT))
    again = reloaded(meta)
    assert again.get_acl("User:alice") == meta.get_acl(Subject("alice"))
    assert again.get_acl("User:alice") is not None
    got = again.get_acl("User:alice")
    assert got is not None and len(got.policies) == 2


def test_delete_acl_by_subject_type_and_resource(meta: AuthMetadata) -> None:
    meta.create_user(User("alice", "pw"))
    with pytest.raises(AuthMetadataError, match="has no ACL"):
        meta.delete_acl("User:alice")
    meta.update_acl(acl("alice", entry("Topic:t"), entry("Topic:u")))
    meta.update_acl(acl("alice", entry("Topic:t"), kind=PolicyType.DEFAULT))
    version = meta.version
    meta.delete_acl("User:alice", resource=Resource.topic("nope"))
    assert meta.version == version
    meta.delete_acl("User:alice", resource=Resource.topic("t"))  # Custom by default
    got = meta.get_acl("User:alice")
    assert got is not None
    custom = got.policy(PolicyType.CUSTOM)
    assert custom is not None and [e.resource.key for e in custom.entries] == ["Topic:u"]
    assert got.policy(PolicyType.DEFAULT) is not None
    meta.delete_acl("User:alice", PolicyType.DEFAULT, Resource.topic("t"))
    got = meta.get_acl("User:alice")
    assert got is not None and got.policy(PolicyType.DEFAULT) is None
    meta.delete_acl("User:alice", PolicyType.CUSTOM, Resource.topic("u"))
    assert meta.get_acl("User:alice") is None  # the last entry took the ACL with it
    meta.update_acl(acl("alice", entry("Topic:t")))
    meta.delete_acl(Subject("alice"))
    assert reloaded(meta).get_acl("User:alice") is None
    with pytest.raises(AuthMetadataError, match="does not exist"):
        meta.delete_acl("User:ghost")


def test_list_acls_filters_as_rocketmq(meta: AuthMetadata) -> None:
    for name in ("alice", "bob"):
        meta.create_user(User(name, "pw"))
    meta.update_acl(acl("alice", entry("Topic:orders"), entry("Group:audit")))
    meta.update_acl(acl("bob", entry("Topic:orders-eu")))
    assert [a.subject.name for a in meta.list_acls()] == ["alice", "bob"]
    assert [a.subject.name for a in meta.list_acls(subject_filter="ali")] == ["alice"]
    found = meta.list_acls(resource_filter="orders")
    assert [a.subject.name for a in found] == ["alice", "bob"]
    assert [e.resource.key for e in found[0].policies[0].entries] == ["Topic:orders"]
    assert [a.subject.name for a in meta.list_acls(resource_filter="audit")] == ["alice"]


def test_limits(meta: AuthMetadata, monkeypatch: pytest.MonkeyPatch) -> None:
    import rocketq.auth.metadata as metadata

    monkeypatch.setattr(metadata, "MAX_USERS", 2)
    monkeypatch.setattr(metadata, "MAX_ENTRIES_PER_ACL", 2)
    meta.create_user(User("a", "pw"))
    meta.create_user(User("b", "pw"))
    with pytest.raises(AuthMetadataError, match="2 users already"):
        meta.create_user(User("c", "pw"))
    meta.update_acl(acl("a", entry("Topic:1"), entry("Topic:2")))
    meta.update_acl(acl("a", entry("Topic:1", Action.SUB)))  # replaces, still two
    with pytest.raises(AuthMetadataError, match="more than 2"):
        meta.update_acl(acl("a", entry("Topic:3")))


def test_snapshot_and_restore(meta: AuthMetadata, tmp_path: Path) -> None:
    meta.create_user(User("alice", "pw", UserType.SUPER))
    meta.update_acl(acl("alice", entry("Topic:t")))
    replica = AuthMetadata(tmp_path / "replica")
    replica.load()
    replica.create_user(User("stale", "pw"))
    seen: list[int] = []
    replica.on_change = lambda: seen.append(replica.version)
    replica.restore(meta.snapshot())
    assert seen == [meta.version]
    assert replica.list_users() == meta.list_users()
    assert replica.list_acls() == meta.list_acls()
    assert reloaded(replica).list_acls() == meta.list_acls()
    assert reloaded(replica).get_user("stale") is None
    for bad in (b"", b"[]", b'{"users": 3}', b'{"users": [{"username": "x"}]}'):
        with pytest.raises(ValueError):
            replica.restore(bad)
    assert replica.list_users() == meta.list_users()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("users.json", "{not json"),
        ("users.json", '{"users": {}}'),
        ("acls.json", '{"version": -1, "acls": []}'),
    ],
)
def test_a_corrupt_file_is_named_and_changes_nothing(
    meta: AuthMetadata, name: str, text: str
) -> None:
    meta.create_user(User("alice", "pw"))
    meta.update_acl(acl("alice", entry("Topic:t")))
    (meta.directory / name).write_text(text)
    with pytest.raises(StoreCorruptError, match=name):
        meta.load()
    assert meta.get_user("alice") == User("alice", "pw")
    assert meta.acl_of("alice") is not None


def test_a_bad_entry_is_skipped_and_the_rest_loads(
    meta: AuthMetadata, caplog: pytest.LogCaptureFixture
) -> None:
    meta.create_user(User("alice", "pw"))
    meta.create_user(User("bob", "pw"))
    meta.update_acl(acl("alice", entry("Topic:t")))
    meta.update_acl(acl("bob", entry("Topic:u")))
    users = json.loads((meta.directory / "users.json").read_text())
    users["users"].insert(0, {"username": "a", "password": ""})
    (meta.directory / "users.json").write_text(json.dumps(users))
    acls = json.loads((meta.directory / "acls.json").read_text())
    acls["acls"].append({"subject": "nobody"})
    (meta.directory / "acls.json").write_text(json.dumps(acls))
    meta.load()
    assert {u.username for u in meta.list_users()} == {"alice", "bob"}
    assert meta.acl_of("alice") is not None and meta.acl_of("bob") is not None
    assert "skipping entry 0 of the users" in caplog.text
    assert "skipping entry 2 of the ACLs" in caplog.text


def test_add_missing_keeps_existing_users(meta: AuthMetadata) -> None:
    meta.create_user(User("alice", "mine"))
    added = meta.add_missing(
        [User("alice", "theirs"), User("bob", "pw")],
        [acl("alice", entry("Topic:x")), acl("bob", entry("Topic:y"))],
    )
    assert added == 1
    assert meta.get_user("alice") == User("alice", "mine")
    assert meta.acl_of("alice") is None
    assert meta.acl_of("bob") is not None
    assert meta.add_missing([User("bob", "pw")], []) == 0
    assert meta.ensure_user(User("carol", "pw")) and not meta.ensure_user(User("carol", "x"))


snapshot_docs = st.fixed_dictionaries(
    {},
    optional={
        "version": st.integers(-2, 5) | st.text(max_size=3) | st.none(),
        "users": st.lists(
            st.fixed_dictionaries(
                {"username": st.sampled_from(["a", "b", "", 3])},
                optional={
                    "password": st.sampled_from(["pw", "", None, 1]),
                    "userType": st.sampled_from(["Super", "normal", "x"]),
                },
            ),
            max_size=3,
        )
        | st.integers(),
        "acls": st.lists(
            st.fixed_dictionaries(
                {"subject": st.sampled_from(["User:a", "a", 1])},
                optional={
                    "policies": st.lists(
                        st.fixed_dictionaries(
                            {
                                "entries": st.lists(
                                    st.fixed_dictionaries(
                                        {
                                            "resource": st.sampled_from(["Topic:t", "*", "x"]),
                                            "actions": st.sampled_from([["Pub"], [], ["Any"]]),
                                            "decision": st.sampled_from(["Allow", "Deny", None]),
                                        }
                                    ),
                                    max_size=2,
                                )
                            }
                        ),
                        max_size=2,
                    )
                },
            ),
            max_size=2,
        ),
    },
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(snapshot_docs | st.binary(max_size=40).map(lambda b: b.decode("latin-1")))
def test_restore_is_total_and_all_or_nothing(meta: AuthMetadata, doc: object) -> None:
    data = (doc if isinstance(doc, str) else json.dumps(doc)).encode("utf-8", "replace")
    before = (meta.snapshot(), meta.version)
    try:
        meta.restore(data)
    except ValueError:
        assert (meta.snapshot(), meta.version) == before
        return
    assert reloaded(meta).snapshot() == meta.snapshot()
