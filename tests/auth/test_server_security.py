"""A server's security keys applied (auth/server_security.py): the init super user, ACL 1.0
files, the refusal of a server nobody could manage, and clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rocketq.auth.request_map import broker_requirement
from rocketq.auth.server_security import MemoryAuthMetadata, ServerSecurity, server_security
from rocketq.broker.config import BrokerConfig
from rocketq.common.exceptions import ConfigError

ROOT = json.dumps({"username": "root", "password": "root-secret"})


def _build(**keys: Any) -> ServerSecurity:
    security = server_security(BrokerConfig(**keys), MemoryAuthMetadata(), broker_requirement)
    security.seed()
    return security


def test_the_init_user_is_a_super_user_made_once() -> None:
    security = _build(authentication_enabled=True, init_authentication_user=ROOT)
    users = security.metadata.list_users()
    assert [(u.username, u.is_super) for u in users] == [("root", True)]
    security.seed()
    assert len(security.metadata.list_users()) == 1


def test_auth_on_with_nobody_to_manage_it_is_refused() -> None:
    with pytest.raises(ConfigError, match="nobody could manage"):
        _build(authentication_enabled=True)


def test_acl_v1_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yml"
    with pytest.raises(ConfigError, match="cannot read it"):
        _build(acl_v1_file=str(missing))
    binary = tmp_path / "binary.yml"
    binary.write_bytes(b"accounts:\n  - accessKey: \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"binary\.yml: not UTF-8 text"):
        _build(acl_v1_file=str(binary))
    bad = tmp_path / "bad.yml"
    bad.write_text("accounts: 3\n")
    with pytest.raises(ConfigError, match=r"bad\.yml"):
        _build(acl_v1_file=str(bad))


def test_acl_v1_accounts_become_users(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(
        "accounts:\n"
        "  - accessKey: rocketmq2\n"
        "    secretKey: '12345678'\n"
        "    admin: true\n"
        "  - accessKey: reader\n"
        "    secretKey: reader-secret\n"
        "    defaultTopicPerm: SUB\n"
    )
    security = _build(authentication_enabled=True, acl_v1_file=str(acl))
    users = {u.username: u.is_super for u in security.metadata.list_users()}
    assert users == {"rocketmq2": True, "reader": False}
