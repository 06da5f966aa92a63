"""The ACL model: resource text, users and ACLs as RocketMQ's JSON writes them, matching."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.auth.model import (
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
    UserInfo,
    UserStatus,
    UserType,
    acl_to_doc,
    decode_acl_info,
    decode_acl_infos,
    decode_user_info,
    decode_user_infos,
    encode_acl_info,
    encode_acl_infos,
    encode_user_info,
    encode_user_infos,
)

# --- resources --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "resource"),
    [
        ("Topic:foo", Resource(ResourceType.TOPIC, "foo", ResourcePattern.LITERAL)),
        ("Topic:foo*", Resource(ResourceType.TOPIC, "foo", ResourcePattern.PREFIXED)),
        ("Topic:*", Resource(ResourceType.TOPIC, "", ResourcePattern.ANY)),
        ("Group:g", Resource(ResourceType.GROUP, "g", ResourcePattern.LITERAL)),
        ("Cluster:c", Resource(ResourceType.CLUSTER, "c", ResourcePattern.LITERAL)),
        ("Namespace:n*", Resource(ResourceType.NAMESPACE, "n", ResourcePattern.PREFIXED)),
        ("*", Resource(ResourceType.ANY, "", ResourcePattern.ANY)),
    ],
)
def test_resource_text_round_trip(text: str, resource: Resource) -> None:
    assert Resource.parse(text) == resource
    assert resource.key == text


def test_resource_type_is_case_insensitive_and_a_star_inside_is_literal() -> None:
    assert Resource.parse("topic:foo") == Resource.topic("foo")
    assert Resource.parse("GROUP:g") == Resource.group("g")
    assert Resource.parse("Topic:a*b") == Resource(ResourceType.TOPIC, "a*b")
    assert Resource.parse("Topic:a*b*") == Resource(
        ResourceType.TOPIC, "a", ResourcePattern.PREFIXED
    )


@pytest.mark.parametrize("text", ["", " ", "Topic", "Topic:", "Queue:q", "Any:x", "foo", None, 3])
def test_bad_resource_text(text: object) -> None:
    with pytest.raises(ValueError):
        Resource.parse(text)


@given(st.text(max_size=40))
def test_resource_parse_is_total_and_round_trips(text: str) -> None:
    try:
        resource = Resource.parse(text)
    except ValueError:
        return
    assert Resource.parse(resource.key) == resource


def test_resource_matching() -> None:
    foo = Resource.topic("foo")
    assert Resource.parse("Topic:foo").matches(foo)
    assert not Resource.parse("Topic:fo").matches(foo)
    assert Resource.parse("Topic:fo*").matches(foo)
    assert not Resource.parse("Topic:foo1*").matches(foo)
    assert Resource.parse("Topic:*").matches(foo)
    assert not Resource.parse("Group:*").matches(foo)
    assert not Resource.parse("Group:foo").matches(foo)
    assert Resource.parse("*").matches(foo)
    assert Resource.parse("*").matches(Resource.cluster("c"))
    assert Resource.parse("Cluster:*").matches(Resource.cluster(""))


# --- users and subjects -----------------------------------------------------------------


def test_subject() -> None:
    assert Subject.parse("User:alice") == Subject("alice")
    assert Subject.parse("user:a:b").name == "a:b"
    assert Subject("alice").key == "User:alice"
    for bad in ("alice", "Role:alice", "User:", "User: ", None):
        with pytest.raises(ValueError):
            Subject.parse(bad)


def test_user_defaults_and_repr() -> None:
    user = User("alice", "s3cret")
    assert user.user_type is UserType.NORMAL and user.user_status is UserStatus.ENABLE
    assert user.enabled and not user.is_super
    assert "s3cret" not in repr(user)
    with pytest.raises(ValueError, match="password is empty"):
        User("alice", "")
    with pytest.raises(ValueError, match="username is empty"):
        User("", "x")


def test_user_info_json_round_trip() -> None:
    user = User("alice", "pw", UserType.SUPER, UserStatus.DISABLE)
    body = encode_user_info(user)
    assert json.loads(body) == {
        "username": "alice",
        "password": "pw",
        "userType": "Super",
        "userStatus": "disable",
    }
    assert decode_user_info(body).to_user() == user
    assert "password" not in json.loads(encode_user_info(user, with_password=False))
    listed = decode_user_infos(encode_user_infos([user, User("bob", "x")]))
    assert [u.username for u in listed] == ["alice", "bob"]


def test_user_info_partial_and_case_insensitive() -> None:
    info = decode_user_info(b'{"username": "bob", "userType": "super"}')
    assert info == UserInfo("bob", None, UserType.SUPER, None)
    with pytest.raises(ValueError, match="password is empty"):
        info.to_user()
    assert decode_user_info(b'{"username":"b","password":"p"}').to_user() == User("b", "p")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "not JSON"),
        (b"\xff", "not JSON"),
        (b"[]", "must be a JSON object"),
        (b"{}", "username is empty"),
        (b'{"username": 1}', "username is empty"),
        (b'{"username": "a", "password": 1}', "password must be a string"),
        (b'{"username": "a", "userType": "Admin"}', "user type 'Admin' is not one of"),
        (b'{"username": "a", "userStatus": "on"}', "user status"),
        (b"[" * 5000 + b"]" * 5000, "not JSON"),
    ],
)
def test_bad_user_info(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_user_info(body)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
user_docs = st.fixed_dictionaries(
    {},
    optional={
        "username": st.text(max_size=8) | json_values,
        "password": st.text(max_size=8) | json_values,
        "userType": st.sampled_from(["Super", "Normal", "normal", "x"]) | json_values,
        "userStatus": st.sampled_from(["enable", "disable", "DISABLE", ""]) | json_values,
    },
)


@given(user_docs | json_values)
def test_decode_user_info_is_total(doc: object) -> None:
    try:
        info = decode_user_info(json.dumps(doc).encode())
    except ValueError:
        return
    try:
        user = info.to_user()  # a blank password is refused here, with a ValueError
    except ValueError:
        return
    assert decode_user_info(encode_user_info(user)).to_user() == user


@given(st.binary(max_size=100))
def test_decode_user_info_bytes_are_total(data: bytes) -> None:
    try:
        decode_user_info(data)
        decode_user_infos(data)
    except ValueError:
        pass


# --- ACLs ---------------------------------------------------------------------------------

ACL_DOC = {
    "subject": "User:alice",
    "policies": [
        {
            "policyType": "Custom",
            "entries": [
                {
                    "resource": "Topic:orders",
                    "actions": ["Pub", "Sub"],
                    "sourceIps": ["10.0.0.0/8"],
                    "decision": "Allow",
                },
                {"resource": "Group:*", "actions": ["All"], "decision": "Deny"},
            ],
        },
        {
            "policyType": "Default",
            "entries": [{"resource": "*", "actions": ["Get", "List"], "decision": "Allow"}],
        },
    ],
}


def test_acl_info_round_trip() -> None:
    acl = decode_acl_info(json.dumps(ACL_DOC).encode())
    assert acl.subject == Subject("alice")
    custom = acl.policy(PolicyType.CUSTOM)
    assert custom is not None
    assert custom.entries[0] == PolicyEntry(
        Resource.topic("orders"), (Action.PUB, Action.SUB), ("10.0.0.0/8",), Decision.ALLOW
    )
    assert custom.entries[1].decision is Decision.DENY
    assert acl.entry_count == 3
    assert acl_to_doc(acl) == ACL_DOC
    assert decode_acl_info(encode_acl_info(acl)) == acl
    assert decode_acl_infos(encode_acl_infos([acl, acl])) == [acl, acl]


def test_acl_info_defaults() -> None:
    doc = {
        "policies": [
            {"entries": [{"resource": "Topic:t", "actions": ["pub"], "decision": "allow"}]}
        ]
    }
    acl = decode_acl_info(json.dumps(doc), subject="User:bob")
    assert acl.subject == Subject("bob")
    assert acl.policies[0].policy_type is PolicyType.CUSTOM
    assert acl.policies[0].entries[0].actions == (Action.PUB,)


def test_acl_info_policies_of_one_type_merge_by_resource() -> None:
    entry = {"resource": "Topic:t", "actions": ["Pub"], "decision": "Allow"}
    later = {"resource": "Topic:t", "actions": ["Sub"], "decision": "Deny"}
    doc = {"subject": "User:a", "policies": [{"entries": [entry]}, {"entries": [later]}]}
    acl = decode_acl_info(json.dumps(doc))
    assert len(acl.policies) == 1
    assert acl.policies[0].entries == (
        PolicyEntry(Resource.topic("t"), (Action.SUB,), (), Decision.DENY),
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"resource": "Topic:t", "actions": [], "decision": "Allow"}, "actions are empty"),
        ({"resource": "Topic:t", "actions": ["Any"], "decision": "Allow"}, "can not be Any"),
        ({"resource": "Topic:t", "actions": ["Fly"], "decision": "Allow"}, "action 'Fly'"),
        ({"resource": "Topic:t", "actions": ["Pub"]}, "decision is missing"),
        ({"resource": "Topic:t", "actions": ["Pub"], "decision": "Maybe"}, "decision 'Maybe'"),
        ({"resource": "Queue:q", "actions": ["Pub"], "decision": "Allow"}, "not Type:name"),
        (
            {"resource": "Topic:t", "actions": ["Pub"], "decision": "Allow", "sourceIps": ["x"]},
            "source IP pattern 'x'",
        ),
        (
            {"resource": "Topic:t", "actions": ["Pub"], "decision": "Allow", "sourceIps": [""]},
            "empty",
        ),
        ({"resource": "Topic:t", "actions": "Pub", "decision": "Allow"}, "must be a JSON list"),
    ],
)
def test_bad_acl_entries(entry: dict[str, object], message: str) -> None:
    doc = {"subject": "User:a", "policies": [{"entries": [entry]}]}
    with pytest.raises(ValueError, match=message):
        decode_acl_info(json.dumps(doc))


def test_acl_limits() -> None:
    entries = [
        {"resource": f"Topic:t{i}", "actions": ["Pub"], "decision": "Allow"} for i in range(1001)
    ]
    doc = {"subject": "User:a", "policies": [{"entries": entries}]}
    with pytest.raises(ValueError, match="more than 1000"):
        decode_acl_info(json.dumps(doc))
    with pytest.raises(ValueError, match="larger than"):
        decode_acl_info(b" " * (16 * 1024 * 1024 + 1))
    with pytest.raises(ValueError, match="subject"):
        decode_acl_info(b'{"policies": []}')


entry_docs = st.fixed_dictionaries(
    {},
    optional={
        "resource": st.sampled_from(["Topic:t", "Group:g*", "*", "Cluster:*", "Bad"]) | json_values,
        "actions": st.lists(st.sampled_from(["Pub", "Sub", "All", "Any", "get", "x"]), max_size=3)
        | json_values,
        "sourceIps": st.lists(
            st.sampled_from(["1.2.3.4", "10.0.0.0/8", "192.168.*.*", "::1", "bad", ""]),
            max_size=2,
        )
        | json_values,
        "decision": st.sampled_from(["Allow", "deny", "no"]) | json_values,
    },
)
acl_docs = st.fixed_dictionaries(
    {},
    optional={
        "subject": st.sampled_from(["User:a", "a", "User:"]) | json_values,
        "policies": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "policyType": st.sampled_from(["Custom", "DEFAULT", "other"]) | json_values,
                    "entries": st.lists(entry_docs, max_size=3) | json_values,
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values,
    },
)


@given(acl_docs | json_values)
def test_decode_acl_info_is_total(doc: object) -> None:
    try:
        acl = decode_acl_info(json.dumps(doc).encode())
    except ValueError:
        return
    assert decode_acl_info(encode_acl_info(acl)) == acl


@given(st.binary(max_size=100))
def test_decode_acl_info_bytes_are_total(data: bytes) -> None:
    try:
        decode_acl_info(data)
        decode_acl_infos(data)
    except ValueError:
        pass


def test_acl_merge_and_delete_as_rocketmq() -> None:
    t = PolicyEntry(Resource.topic("t"), (Action.PUB,))
    g = PolicyEntry(Resource.group("g"), (Action.SUB,))
    acl = Acl(Subject("a"), (Policy(PolicyType.CUSTOM, (t,)),))
    t2 = PolicyEntry(Resource.topic("t"), (Action.SUB,), decision=Decision.DENY)
    merged = acl.merged([Policy(PolicyType.CUSTOM, (t2, g)), Policy(PolicyType.DEFAULT, (t,))])
    custom = merged.policy(PolicyType.CUSTOM)
    assert custom is not None and custom.entries == (t2, g)
    assert merged.policy(PolicyType.DEFAULT) == Policy(PolicyType.DEFAULT, (t,))
    fewer = merged.without(PolicyType.DEFAULT, Resource.topic("t"))
    assert fewer.policy(PolicyType.DEFAULT) is None
    assert fewer.without(PolicyType.CUSTOM, Resource.topic("nope")) == fewer


def test_entry_action_matching() -> None:
    pub = PolicyEntry(Resource.topic("t"), (Action.PUB,))
    every = PolicyEntry(Resource.topic("t"), (Action.ALL,))
    assert pub.allows_action(Action.PUB) and not pub.allows_action(Action.SUB)
    assert every.allows_action(Action.DELETE)
    assert pub.allows_action(Action.ANY)
