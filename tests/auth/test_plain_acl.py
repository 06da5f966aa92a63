"""ACL 1.0's plain_acl.yml translated into users and policies."""

from __future__ import annotations

import contextlib

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from rocketq.auth.model import (
    Action,
    Decision,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserType,
)
from rocketq.auth.plain_acl import PlainAclError, translate_plain_acl

# RocketMQ 4.9's distribution/conf/plain_acl.yml, in its shape.
SAMPLE = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - '%RETRY%groupC=SUB'

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_sample_file() -> None:
    users, acls, patterns = translate_plain_acl(SAMPLE)
    assert patterns == ["10.10.103.*", "192.168.0.*"]
    assert users == [
        User("RocketMQ", "12345678", UserType.NORMAL),
        User("rocketmq2", "12345678", UserType.SUPER),
    ]
    by_name = {a.subject.name: a for a in acls}
    first = by_name["RocketMQ"]
    custom = first.policy(PolicyType.CUSTOM)
    assert custom is not None
    assert custom.entries == (
        PolicyEntry(Resource.topic("topicA"), (Action.ALL,), (), Decision.DENY),
        PolicyEntry(Resource.topic("topicB"), (Action.PUB, Action.SUB), (), Decision.ALLOW),
        PolicyEntry(Resource.topic("topicC"), (Action.SUB,), (), Decision.ALLOW),
        PolicyEntry(Resource.group("groupA"), (Action.ALL,), (), Decision.DENY),
        PolicyEntry(Resource.group("groupB"), (Action.PUB, Action.SUB), (), Decision.ALLOW),
        PolicyEntry(Resource.group("groupC"), (Action.SUB,), (), Decision.ALLOW),
    )
    default = first.policy(PolicyType.DEFAULT)
    assert default is not None
    assert default.entries == (
        PolicyEntry(
            Resource(ResourceType.TOPIC, "", ResourcePattern.ANY), (Action.ALL,), (), Decision.DENY
        ),
        PolicyEntry(
            Resource(ResourceType.GROUP, "", ResourcePattern.ANY), (Action.SUB,), (), Decision.ALLOW
        ),
    )
    # The admin's whitelist becomes an allow-everything entry limited to those addresses.
    second = by_name["rocketmq2"]
    assert second.policies[0].entries == (
        PolicyEntry(Resource.any(), (Action.ALL,), ("192.168.1.*",), Decision.ALLOW),
    )


def test_an_account_without_permissions_has_no_acl() -> None:
    users, acls, patterns = translate_plain_acl("accounts:\n  - accessKey: a\n    secretKey: s\n")
    assert users == [User("a", "s")] and acls == [] and patterns == []


def test_empty_file() -> None:
    assert translate_plain_acl("") == ([], [], [])


def test_later_perm_for_one_topic_wins_and_any_is_pub_or_sub() -> None:
    text = "accounts:\n  - {accessKey: a, secretKey: s, topicPerms: [t=PUB, t=ANY]}\n"
    _, acls, _ = translate_plain_acl(text)
    assert acls[0].policies[0].entries == (
        PolicyEntry(Resource.topic("t"), (Action.PUB, Action.SUB), (), Decision.ALLOW),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accounts: [", "not YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("accounts: 3\n", "accounts must be a list"),
        ("accounts: [3]\n", r"accounts\[0\] must be a mapping"),
        ("accounts: [{secretKey: s}]\n", r"accounts\[0\].accessKey must be text"),
        ("accounts: [{accessKey: a}]\n", "account 'a': secretKey must be text"),
        ("accounts: [{accessKey: a, secretKey: s, admin: maybe}]\n", "admin must be true or false"),
        ("accounts: [{accessKey: a, secretKey: s, topicPerms: [t]}]\n", "is not name=PERM"),
        ("accounts: [{accessKey: a, secretKey: s, topicPerms: [t=ALL]}]\n", "permission 'ALL'"),
        ("accounts: [{accessKey: a, secretKey: s, defaultTopicPerm: RW}]\n", "defaultTopicPerm"),
        ("accounts: [{accessKey: a, secretKey: s, whiteRemoteAddress: x.y}]\n", "whiteRemote"),
        ("globalWhiteRemoteAddresses: [300.1.1.1]\n", "globalWhiteRemoteAddresses"),
        ("accounts: [{accessKey: a, secretKey: s}, {accessKey: a, secretKey: t}]\n", "twice"),
        ("accounts: [{accessKey: a, secretKey: s, topicPerms: {t: PUB}}]\n", "must be text"),
    ],
)
def test_bad_files(text: str, message: str) -> None:
    with pytest.raises(PlainAclError, match=message):
        translate_plain_acl(text)


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
accounts = st.fixed_dictionaries(
    {},
    optional={
        "accessKey": st.text(max_size=6) | yaml_values,
        "secretKey": st.text(max_size=6) | st.integers(),
        "admin": st.booleans() | yaml_values,
        "whiteRemoteAddress": st.sampled_from(["", "1.2.3.*", "10.0.0.0/8", "bad"]) | yaml_values,
        "defaultTopicPerm": st.sampled_from(["PUB", "DENY", "x", ""]) | yaml_values,
        "topicPerms": st.lists(st.sampled_from(["t=PUB", "u=SUB|PUB", "=PUB", "v"]), max_size=3)
        | yaml_values,
    },
)


@given(
    st.fixed_dictionaries({}, optional={"accounts": st.lists(accounts, max_size=3) | yaml_values})
    | yaml_values
)
def test_translate_is_total(doc: object) -> None:
    with contextlib.suppress(PlainAclError):
        translate_plain_acl(yaml.safe_dump(doc))


@given(st.text(max_size=200))
def test_translate_text_is_total(text: str) -> None:
    with contextlib.suppress(PlainAclError):
        translate_plain_acl(text)
