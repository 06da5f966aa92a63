"""``rocketq admin user|acl ...`` and the credential and TLS options of every command that
talks to a cluster: what the command line parses into (the admin client's settings and the
call it makes, through a recording stand-in for the admin client), their table and JSON
output, and the errors a bad setting or a refusal prints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from rocketq.cli.main import app
from rocketq.cli.options import SECURITY_OPTIONS, security_settings
from rocketq.common.exceptions import NoPermissionError
from rocketq.sdk import admin as sdk_admin
from rocketq.sdk.auth_wire import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo

runner = CliRunner()

BROKER = "127.0.0.1:10911"
ALICE_ACL = AclInfo(
    "User:alice",
    (
        PolicyInfo(
            "Custom",
            (
                PolicyEntryInfo("Topic:orders", ("Pub", "Sub"), ("10.0.0.0/8",), "Allow"),
                PolicyEntryInfo("Group:g1", ("Sub",), (), "Deny"),
            ),
        ),
    ),
)


class FakeAdmin:
    """Records how it was made and what it was asked; answers from ``results``."""

    made: list[tuple[str | None, dict[str, Any]]] = []
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    results: dict[str, Any] = {}

    def __init__(self, namesrv: str | None = None, **settings: Any) -> None:
        FakeAdmin.made.append((namesrv, settings))

    async def __aenter__(self) -> FakeAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            FakeAdmin.calls.append((name, args, kwargs))
            result = FakeAdmin.results.get(name, [BROKER])
            if isinstance(result, Exception):
                raise result
            return result

        return call


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeAdmin]]:
    FakeAdmin.made, FakeAdmin.calls, FakeAdmin.results = [], [], {}
    monkeypatch.setattr(sdk_admin, "Admin", FakeAdmin)
    for name in ("ROCKETQ_ACCESS_KEY", "ROCKETQ_SECRET_KEY", "ROCKETQ_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    yield FakeAdmin


def invoke(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Any:
    return runner.invoke(app, list(args), env=env, input=input)


def test_acl_create_as_mqadmin_writes_it(fake: type[FakeAdmin]) -> None:
    result = invoke(
        "admin", "acl", "create",
        "--subject", "User:alice",
        "--resources", "Topic:orders,Group:g1",
        "--actions", "Pub,Sub",
        "--source-ips", "10.0.0.0/8",
        "--decision", "Allow",
        "-c", "DefaultCluster",
        "-n", "ns:9876",
        "--access-key", "admin",
        "--secret-key", "admin-secret",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert fake.calls == [
        (
            "create_acl",
            ("User:alice", "Topic:orders,Group:g1", "Pub,Sub", "10.0.0.0/8", "Allow"),
            {"cluster": "DefaultCluster", "broker_addr": None},
        )
    ]
    namesrv, settings = fake.made[0]
    assert namesrv == "ns:9876"
    assert settings == {
        "access_key": "admin",
        "secret_key": "admin-secret",
        "credentials_file": None,
        "tls": False,
        "tls_ca_file": "",
        "tls_cert_file": "",
        "tls_key_file": "",
        "tls_verify_hostname": True,
    }
    assert f"ACL of User:alice created on {BROKER}" in result.output


def test_credentials_and_tls_from_the_environment(fake: type[FakeAdmin]) -> None:
    fake.results["list_users"] = []
    env = {
        "ROCKETQ_ACCESS_KEY": "ak",
        "ROCKETQ_SECRET_KEY": "sk",
        "ROCKETQ_TLS": "true",
        "ROCKETQ_TLS_CA_FILE": "/etc/ca.pem",
        "NAMESRV_ADDR": "env-ns:9876",
    }
    result = invoke("admin", "user", "list", env=env)
    assert result.exit_code == 0, result.output
    namesrv, settings = fake.made[0]
    assert namesrv == "env-ns:9876"
    assert settings["access_key"] == "ak" and settings["secret_key"] == "sk"
    assert settings["tls"] is True and settings["tls_ca_file"] == "/etc/ca.pem"


def test_tls_and_client_certificate_options(fake: type[FakeAdmin]) -> None:
    result = invoke(
        "admin", "topic-list",
        "--tls", "--tls-ca-file", "ca.pem",
        "--tls-cert-file", "me.crt", "--tls-key-file", "me.key",
        "--tls-no-verify-hostname",
        "--credentials-file", "creds.toml",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    _, settings = fake.made[0]
    assert settings == {
        "access_key": None,
        "secret_key": None,
        "credentials_file": "creds.toml",
        "tls": True,
        "tls_ca_file": "ca.pem",
        "tls_cert_file": "me.crt",
        "tls_key_file": "me.key",
        "tls_verify_hostname": False,
    }
    # Outside a command the settings are the defaults again.
    assert security_settings()["tls"] is False


def test_user_create_asks_for_the_password(fake: type[FakeAdmin]) -> None:
    result = invoke("admin", "user", "create", "-u", "alice", "-b", BROKER, input="pw\n")
    assert result.exit_code == 0, result.output
    assert fake.calls == [
        ("create_user", ("alice", "pw", "Normal"), {"cluster": None, "broker_addr": BROKER})
    ]
    assert "pw" not in result.output.replace("Password: ", "")


def test_user_update_and_delete(fake: type[FakeAdmin]) -> None:
    assert invoke("admin", "user", "update", "-u", "bob", "-s", "disable").exit_code == 0
    assert invoke("admin", "user", "delete", "-u", "bob", "-c", "C").exit_code == 0
    assert fake.calls == [
        (
            "update_user",
            ("bob", None, None, "disable"),
            {"cluster": None, "broker_addr": None},
        ),
        ("delete_user", ("bob",), {"cluster": "C", "broker_addr": None}),
    ]


def test_user_list_table_and_json(fake: type[FakeAdmin]) -> None:
    fake.results["list_users"] = [
        UserInfo("alice", "secret", "Normal", "enable"),
        UserInfo("root", "secret", "Super", "enable"),
    ]
    table = invoke("admin", "user", "list", "-f", "a")
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split() == ["username", "type", "status"]
    assert lines[2].split() == ["alice", "Normal", "enable"]
    assert "secret" not in table.output
    as_json = invoke("admin", "user", "list", "--json")
    assert json.loads(as_json.output) == [
        {"username": "alice", "type": "Normal", "status": "enable"},
        {"username": "root", "type": "Super", "status": "enable"},
    ]
    assert fake.calls[0] == ("list_users", ("a",), {"cluster": None, "broker_addr": None})


def test_user_get_missing_exits_1(fake: type[FakeAdmin]) -> None:
    fake.results["get_user"] = None
    result = invoke("admin", "user", "get", "-u", "ghost")
    assert result.exit_code == 1
    assert "no user 'ghost'" in result.output


def test_acl_get_and_list(fake: type[FakeAdmin]) -> None:
    fake.results["get_acl"] = ALICE_ACL
    fake.results["list_acls"] = [ALICE_ACL]
    table = invoke("admin", "acl", "get", "-s", "User:alice")
    assert table.exit_code == 0, table.output
    rows = [line.split() for line in table.output.splitlines()]
    assert rows[0] == ["subject", "policy", "resource", "actions", "source_ips", "decision"]
    assert rows[2] == ["User:alice", "Custom", "Topic:orders", "Pub,Sub", "10.0.0.0/8", "Allow"]
    assert rows[3] == ["User:alice", "Custom", "Group:g1", "Sub", "*", "Deny"]
    as_json = invoke("admin", "acl", "list", "-s", "ali", "-r", "orders", "--json")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)[0]["policies"][0]["entries"][0] == {
        "resource": "Topic:orders",
        "actions": ["Pub", "Sub"],
        "sourceIps": ["10.0.0.0/8"],
        "decision": "Allow",
    }
    assert fake.calls[1] == (
        "list_acls",
        ("ali", "orders"),
        {"cluster": None, "broker_addr": None},
    )


def test_acl_update_and_delete(fake: type[FakeAdmin]) -> None:
    result = invoke(
        "admin", "acl", "update", "-s", "User:bob", "-r", "Topic:t*", "-a", "Pub", "-d", "Deny"
    )
    assert result.exit_code == 0, result.output
    assert invoke("admin", "acl", "delete", "-s", "User:bob", "-r", "Topic:t*").exit_code == 0
    assert invoke("admin", "acl", "delete", "-s", "User:bob").exit_code == 0
    assert fake.calls == [
        (
            "update_acl",
            ("User:bob", "Topic:t*", "Pub", "", "Deny"),
            {"cluster": None, "broker_addr": None},
        ),
        ("delete_acl", ("User:bob", "Topic:t*"), {"cluster": None, "broker_addr": None}),
        ("delete_acl", ("User:bob", None), {"cluster": None, "broker_addr": None}),
    ]


def test_refusal_prints_the_error(fake: type[FakeAdmin]) -> None:
    fake.results["list_acls"] = NoPermissionError("user alice may not List Cluster:C")
    result = invoke("admin", "acl", "list")
    assert result.exit_code == 1
    assert "error: user alice may not List Cluster:C" in result.output


def test_missing_ca_file_is_an_error_before_connecting(tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    result = invoke(
        "admin", "topic-list", "-n", "127.0.0.1:1", "--tls", "--tls-ca-file", str(missing)
    )
    assert result.exit_code == 1
    assert f"tls_ca_file '{missing}' does not exist" in result.output


def test_bad_action_is_an_error() -> None:
    result = invoke(
        "admin", "acl", "create", "-n", "127.0.0.1:1",
        "-s", "User:a", "-r", "Topic:t", "-a", "Publish", "-b", BROKER,
    )  # fmt: skip
    assert result.exit_code == 1
    assert "action 'Publish' is not one of" in result.output


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


def _options(path: tuple[str, ...]) -> set[str]:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return {opt for p in command.params for opt in p.opts}


def test_every_command_that_talks_to_a_cluster_has_the_options() -> None:
    root: Any = typer.main.get_command(app)
    admin = [("admin", *p) for p in _commands(root.commands["admin"])]
    assert ("admin", "user", "create") in admin and ("admin", "acl", "list") in admin
    assert ("admin", "dlq", "list") in admin and ("admin", "resend-message") in admin
    wanted = {opt for _, _, option in SECURITY_OPTIONS for opt in option.param_decls}
    wanted = {o for decl in wanted for o in decl.split("/")}
    spark = [("pipeline", "archive"), ("pipeline", "replay")]
    for path in [*admin, ("send",), ("consume",), ("console",), *spark]:
        missing = wanted - _options(path)
        assert not missing, f"{' '.join(path)} lacks {sorted(missing)}"
    assert "--access-key" not in _options(("nameserver",))


def test_console_takes_the_options_and_serves_https(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from rocketq.console import app as console_app

    served: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(console_app, "serve", lambda *a, **kw: served.append((a, kw)))
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("cert")
    key.write_text("key")
    result = invoke(
        "console", "-n", "ns:9876", "--bind", "0.0.0.0", "--port", "8443",
        "--allowed-hosts", "console.example.com", "--allowed-hosts", "*.corp",
        "--tls-cert", str(cert), "--tls-key", str(key),
        "--access-key", "console", "--secret-key", "console-secret",
        "--tls", "--tls-ca-file", "ca.pem",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "rocketq console on https://0.0.0.0:8443/" in result.output
    [(args, kwargs)] = served
    assert args == ("ns:9876", None)
    assert kwargs["allowed_hosts"] == ["console.example.com", "*.corp"]
    assert (kwargs["tls_cert"], kwargs["tls_key"]) == (cert, key)
    client = kwargs["cluster_client"]
    assert (client.access_key, client.secret_key) == ("console", "console-secret")
    assert client.tls and client.tls_ca_file == "ca.pem"
    half = invoke("console", "--tls-cert", str(cert))
    assert half.exit_code == 2 and "both --tls-cert and --tls-key" in half.output
