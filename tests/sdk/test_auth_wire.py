"""The user and ACL admin requests as RocketMQ 5.3 sends them (codes 3001..3010, header
fields, UserInfo / AclInfo JSON bodies that the brokers' decoders in ``rocketq.auth.model``
read back as sent), the answers read into dataclasses, and the checks of what an admin
asks for."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.auth import model
from rocketq.common.exceptions import ConfigError, NoPermissionError, RocketqSystemError
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk import auth_wire as auw


def answer(body: bytes | None, code: int = ResponseCode.SUCCESS) -> RemotingCommand:
    return RemotingCommand(0).response(code, body=body, remark="refused" if code else None)


def test_codes_are_rocketmqs() -> None:
    made = [
        auw.create_user_request(auw.user_doc("u", "p")),
        auw.update_user_request(auw.user_doc("u")),
        auw.delete_user_request("u"),
        auw.get_user_request("u"),
        auw.list_users_request(),
        auw.create_acl_request(auw.acl_doc("User:u", ["*"], ["All"])),
        auw.update_acl_request(auw.acl_doc("User:u", ["*"], ["All"])),
        auw.delete_acl_request("User:u"),
        auw.get_acl_request("User:u"),
        auw.list_acls_request(),
    ]
    assert [cmd.code for cmd in made] == list(range(3001, 3011))
    assert RequestCode.AUTH_CREATE_USER == 3001 and RequestCode.AUTH_LIST_ACL == 3010


def test_user_requests() -> None:
    cmd = auw.create_user_request(auw.user_doc("alice", "pw", "Super"))
    assert cmd.ext == {"username": "alice"}
    body = bytes(cmd.body or b"")
    assert json.loads(body) == {"username": "alice", "password": "pw", "userType": "Super"}
    user = model.decode_user_info(body).to_user()
    assert (user.username, user.password, user.user_type) == ("alice", "pw", model.UserType.SUPER)
    # An update sends only what changes.
    update = auw.update_user_request(auw.user_doc("alice", user_status="disable"))
    assert json.loads(bytes(update.body or b"")) == {"username": "alice", "userStatus": "disable"}
    assert auw.delete_user_request("alice").ext == {"username": "alice"}
    assert auw.get_user_request("alice").ext == {"username": "alice"}
    assert auw.list_users_request("al").ext == {"filter": "al"}
    assert not auw.list_users_request().ext


def test_acl_requests_as_acl_info_of() -> None:
    doc = auw.acl_doc("User:alice", ["Topic:orders", "Group:g1"], ["Pub", "Sub"], ["10.0.0.0/8"])
    cmd = auw.create_acl_request(doc)
    assert cmd.ext == {"subject": "User:alice"}
    acl = model.decode_acl_info(bytes(cmd.body or b""))
    [policy] = acl.policies
    assert policy.policy_type is model.PolicyType.CUSTOM
    assert [e.resource.key for e in policy.entries] == ["Topic:orders", "Group:g1"]
    for entry in policy.entries:
        assert entry.actions == (model.Action.PUB, model.Action.SUB)
        assert entry.source_ips == ("10.0.0.0/8",)
        assert entry.decision is model.Decision.ALLOW
    assert auw.delete_acl_request("User:a", "Topic:t").ext == {
        "subject": "User:a",
        "resource": "Topic:t",
    }
    assert auw.delete_acl_request("User:a").ext == {"subject": "User:a"}
    assert auw.list_acls_request("a", "orders").ext == {
        "subjectFilter": "a",
        "resourceFilter": "orders",
    }


def test_answers_read_back() -> None:
    users = model.encode_user_infos(
        [
            model.User("bob", "x", model.UserType.NORMAL, model.UserStatus.DISABLE),
            model.User("alice", "y", model.UserType.SUPER),
        ]
    )
    assert auw.parse_users(answer(users)) == [
        auw.UserInfo("alice", "y", "Super", "enable"),
        auw.UserInfo("bob", "x", "Normal", "disable"),
    ]
    assert "'y'" not in repr(auw.parse_users(answer(users)))
    acl = model.decode_acl_info(
        json.dumps(auw.acl_doc("User:alice", ["Topic:o*"], ["Sub"], decision="Deny")).encode()
    )
    got = auw.parse_acl(answer(model.encode_acl_info(acl)))
    assert got == auw.AclInfo(
        "User:alice",
        (auw.PolicyInfo("Custom", (auw.PolicyEntryInfo("Topic:o*", ("Sub",), (), "Deny"),)),),
    )
    assert got.entries == got.policies[0].entries
    assert auw.parse_acls(answer(model.encode_acl_infos([acl])))[0] == got
    assert auw.parse_user(answer(None)) is None
    assert auw.parse_acl(answer(b"")) is None
    assert auw.parse_acls(answer(b"[]")) == []


def test_refusal_and_bad_answers() -> None:
    with pytest.raises(NoPermissionError, match="refused"):
        auw.parse_users(answer(None, ResponseCode.NO_PERMISSION))
    bad = [
        (auw.parse_user, b"{"),
        (auw.parse_user, b'{"userType": "Normal"}'),
        (auw.parse_users, b'{"username": "a"}'),
        (auw.parse_users, b"[1]"),
        (auw.parse_acl, b'{"subject": "User:a", "policies": 3}'),
        (auw.parse_acl, b'{"subject": "User:a", "policies": [{"entries": [{"actions": 1}]}]}'),
        (auw.parse_acls, b"[[]]"),
    ]
    for parse, body in bad:
        with pytest.raises(RocketqSystemError):
            parse(answer(body))  # type: ignore[operator]


@given(st.binary(max_size=80))
def test_any_answer_body_is_read_or_refused_cleanly(body: bytes) -> None:
    for parse in (auw.parse_user, auw.parse_users, auw.parse_acl, auw.parse_acls):
        with contextlib.suppress(RocketqSystemError):
            parse(answer(body))


def test_checks_of_what_an_admin_asks_for() -> None:
    assert auw.user_type("super") == "Super"
    assert auw.user_status("DISABLE") == "disable"
    assert auw.decision("deny") == "Deny"
    assert auw.actions(["pub", " Sub ", ""]) == ("Pub", "Sub")
    assert auw.resource("topic:orders") == "Topic:orders"
    assert auw.resource("Group:g*") == "Group:g*"
    assert auw.resource(" * ") == "*"
    assert auw.subject("user:bob") == "User:bob"
    for bad, check in (
        ("Root", auw.user_type),
        ("paused", auw.user_status),
        ("Maybe", auw.decision),
        ("orders", auw.resource),
        ("Queue:q", auw.resource),
        ("bob", auw.subject),
        ("Group:g", auw.subject),
    ):
        with pytest.raises(ConfigError):
            check(bad)
    with pytest.raises(ConfigError, match="at least one action"):
        auw.actions([])
    with pytest.raises(ConfigError, match="action 'Publish' is not one of"):
        auw.actions(["Publish"])
