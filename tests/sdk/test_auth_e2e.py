"""The SDK and the CLI against a real cluster with authentication, authorization and TLS
(enforcing) on, as ``rocketq cluster up`` makes one: the super user creates a user and its
ACL on every master; that user sends and consumes what its ACL allows over TLS and is
refused the rest; a wrong secret, no credentials and a plaintext client get nowhere; users
and ACLs are read back and deleted, from the SDK and from ``rocketq admin user|acl``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from rocketq import Admin, ConsumeFrom, Message, Producer, PullConsumer
from rocketq.cli.main import app
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.common.exceptions import NoNameServerError, NoPermissionError
from rocketq.sdk.auth_wire import PolicyEntryInfo, UserInfo

TOPIC = "SecOrders"
OTHER = "SecPayroll"
GROUP = "sec-cg"
ALICE = ("alice", "alice-secret-1")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No credentials or TLS settings from the machine running the tests."""
    for name in (
        "ROCKETQ_ACCESS_KEY",
        "ROCKETQ_SECRET_KEY",
        "ROCKETQ_CREDENTIALS_FILE",
        "ROCKETQ_TLS",
        "ROCKETQ_TLS_CA_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("secure"),
        auth=True,
        tls=True,
        metrics=False,
        broker_settings={"mapped_file_size_commit_log": str(64 * 1024 * 1024)},
    )
    cluster = LocalCluster(spec)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def tls(cluster: LocalCluster) -> dict[str, Any]:
    """TLS settings only (no credentials)."""
    return {k: v for k, v in cluster.client_settings().items() if k.startswith("tls")}


@pytest.fixture(scope="module")
def alice(cluster: LocalCluster) -> dict[str, Any]:
    """alice may send to and consume SecOrders as sec-cg, nothing else."""

    async def setup() -> None:
        async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
            for topic in (TOPIC, OTHER):
                await admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)
            assert await admin.create_user(*ALICE)
            await admin.create_acl(
                "User:alice", f"Topic:{TOPIC},Group:{GROUP}", "Pub,Sub,Get", decision="Allow"
            )

    asyncio.run(setup())
    return {"access_key": ALICE[0], "secret_key": ALICE[1], **tls(cluster)}


async def test_a_user_sends_and_consumes_what_its_acl_allows(
    cluster: LocalCluster, alice: dict[str, Any]
) -> None:
    ns = cluster.namesrv_addr
    async with Producer("sec-pg", ns, **alice) as producer:
        sent = await producer.send(Message(TOPIC, b"signed and encrypted"))
        assert sent.ok
        with pytest.raises(NoPermissionError):
            await producer.send(Message(OTHER, b"not allowed"))
    consumer = PullConsumer(GROUP, ns, consume_from=ConsumeFrom.FIRST_OFFSET, **alice)
    consumer.subscribe(TOPIC)
    got: list[bytes] = []
    async with consumer:
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got += [bytes(m.body) for m in await consumer.poll(timeout=1.0)]
    assert got == [b"signed and encrypted"]


async def test_wrong_secret_and_no_credentials_are_refused(
    cluster: LocalCluster, alice: dict[str, Any]
) -> None:
    ns = cluster.namesrv_addr
    wrong = {**alice, "secret_key": "not-the-secret"}
    async with Producer("sec-pg-wrong", ns, retry_times_when_send_failed=0, **wrong) as producer:
        with pytest.raises(NoPermissionError):
            await producer.send(Message(TOPIC, b"x"))
    async with Admin(ns, **tls(cluster)) as anonymous:
        with pytest.raises(NoPermissionError, match="this client sends no credentials"):
            await anonymous.list_users()


async def test_plaintext_gets_nowhere(cluster: LocalCluster) -> None:
    settings = {k: v for k, v in cluster.client_settings().items() if not k.startswith("tls")}
    async with Admin(cluster.namesrv_addr, timeout=2.0, **settings) as plain:
        with pytest.raises(NoNameServerError):
            await plain.topic_list()


async def test_users_and_acls_read_back_and_deleted(
    cluster: LocalCluster, alice: dict[str, Any]
) -> None:
    async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
        assert await admin.get_user("alice") == UserInfo("alice", "", "Normal", "enable")
        names = [u.username for u in await admin.list_users()]
        assert "alice" in names and cluster.secrets is not None
        assert cluster.secrets.username in names
        acl = await admin.get_acl("User:alice")
        assert acl is not None
        assert sorted(e.resource for e in acl.entries) == [f"Group:{GROUP}", f"Topic:{TOPIC}"]
        assert all(isinstance(e, PolicyEntryInfo) for e in acl.entries)
        await admin.create_user("bob", "bob-secret-1")
        await admin.create_acl("User:bob", "Topic:Sec*", "Sub", source_ips="10.0.0.0/8")
        await admin.delete_acl("User:bob", "Topic:Sec*")
        assert await admin.get_acl("User:bob") is None
        await admin.delete_user("bob")
        assert await admin.get_user("bob") is None
        # alice may not manage users.
    async with Admin(cluster.namesrv_addr, **alice) as as_alice:
        with pytest.raises(NoPermissionError):
            await as_alice.create_user("mallory", "m-secret-1")


def test_cli_manages_users_and_acls(cluster: LocalCluster, alice: dict[str, Any]) -> None:
    runner = CliRunner()
    env = cluster.client_env()
    created = runner.invoke(
        app,
        ["admin", "user", "create", "-u", "carol", "-p", "carol-secret-1"],
        env=env,
    )
    assert created.exit_code == 0, created.output
    acl = runner.invoke(
        app,
        [
            "admin", "acl", "create", "--subject", "User:carol", "--resources",
            f"Topic:{TOPIC},Group:g1", "--actions", "Pub,Sub", "--source-ips", "10.0.0.0/8",
            "--decision", "Allow", "-c", "DefaultCluster",
        ],
        env=env,
    )  # fmt: skip
    assert acl.exit_code == 0, acl.output
    listed = runner.invoke(app, ["admin", "acl", "list", "-s", "carol", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    [doc] = json.loads(listed.output)
    assert doc["subject"] == "User:carol"
    entries = {e["resource"]: e for p in doc["policies"] for e in p["entries"]}
    assert entries[f"Topic:{TOPIC}"]["sourceIps"] == ["10.0.0.0/8"]
    users = runner.invoke(app, ["admin", "user", "list", "--json"], env=env)
    assert "carol" in [u["username"] for u in json.loads(users.output)]
    # Without the credentials file the same command is refused, with the reason.
    bare = {k: v for k, v in env.items() if k != "ROCKETQ_CREDENTIALS_FILE"}
    refused = runner.invoke(app, ["admin", "user", "list"], env=bare)
    assert refused.exit_code == 1
    assert "no credentials" in refused.output
