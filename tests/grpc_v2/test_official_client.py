"""RocketMQ 5's official Python client, unmodified, against the broker's apache.rocketmq.v2
endpoint: what the conformance matrix (tests/conformance/test_v5_matrix.py) does not
check: the RPC metrics, a receive's own invisible time running out, a FIFO group's queue
lock for a SimpleConsumer and its dead letters, and the refusals of a secured endpoint
(authorization, unsigned and plaintext requests). The client runs in a child process
(tests/grpc_v2/v5_client.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.auth.model import User, decode_acl_info
from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.broker.metrics import BrokerCounters
from rocketq.common.config import StoreConfig
from rocketq.common.message import TopicConfig
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.sdk.admin import Admin
from tests.integration.waiting import wait_until

CLIENT = Path(__file__).with_name("v5_client.py")


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with running_broker(tmp_path) as b:
        yield b


@contextlib.asynccontextmanager
async def running_broker(tmp_path: Path, **keys: Any) -> AsyncIterator[Broker]:
    """A broker (with a nameserver) serving the v2 endpoint on a free port."""
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    defaults: dict[str, Any] = {"metrics_port": 0, "revive_interval": 100}
    b = Broker(
        BrokerConfig(
            listen_port=0,
            ha_listen_port=0,
            grpc_listen_port=0,
            namesrv_addr=f"127.0.0.1:{ns.port}",
            **(defaults | keys),
        ),
        StoreConfig(
            store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
        ),
    )
    await b.start()
    try:
        await wait_until(lambda: all(b.registration.registered.values()), "registration")
        yield b
    finally:
        await b.stop()
        await ns.stop()


async def run_client(
    b: Broker,
    tmp_path: Path,
    topic: str,
    group: str,
    scenario: str,
    *credentials: str,
    env: dict[str, str] | None = None,
) -> dict:
    assert b.grpc is not None
    b.topics.update(TopicConfig(topic, 2, 2))
    env = {**os.environ, "HOME": str(tmp_path), **(env or {})}  # the client logs under ~/logs
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CLIENT),
        f"127.0.0.1:{b.grpc.port}",
        topic,
        group,
        scenario,
        *credentials,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_the_official_client_sends_receives_and_acknowledges(
    broker: Broker, tmp_path: Path
) -> None:
    broker.metrics = BrokerCounters()  # counted as with a metrics port
    result = await run_client(broker, tmp_path, "V5Topic", "v5-group", "send_receive_ack")
    got = sorted(result["got"], key=lambda m: m["body"])
    assert [m["body"] for m in got] == ["v5-0", "v5-1", "v5-2"]
    assert sorted(m["id"] for m in got) == sorted(result["sent"])
    assert all(m["tag"] == "TagA" and m["attempt"] == 1 for m in got)
    assert got[0]["keys"] == ["key-v5-0"] and got[0]["props"] == {"origin": "v5"}
    assert result["after_ack"] == []
    # Each RPC in rocketmq_rpc_latency, protocol grpc, by its status code.
    assert broker.metrics is not None
    counted = {(p, rpc, code) for p, rpc, code, _ in broker.metrics.rpc.rows}
    for rpc in ("query_route", "send_message", "receive_message", "ack_message"):
        assert ("grpc", rpc, "ok") in counted, (rpc, counted)
    assert ("grpc", "receive_message", "message_not_found") in counted


async def test_what_is_not_acknowledged_comes_back(broker: Broker, tmp_path: Path) -> None:
    result = await run_client(broker, tmp_path, "V5Again", "v5-again", "redelivery")
    assert result["first"] == ["again"]
    assert result["second"] == [["again", 2]]


async def test_a_fifo_group_gets_a_queue_in_order_and_one_batch_at_a_time(
    broker: Broker, tmp_path: Path
) -> None:
    """A FIFO group (consumeMessageOrderly): its settings say fifo, its assignments are
    per queue, and a queue's next messages wait until those given are acknowledged or
    come back."""
    broker.groups.find_or_create("v5-fifo-group").consume_message_orderly = True
    result = await run_client(broker, tmp_path, "V5FifoGroup", "v5-fifo-group", "fifo_group")
    rounds = [[tuple(m) for m in r] for r in result["rounds"]]
    assert rounds[0] == [("o-0", 1), ("o-1", 1)]
    assert result["while_held"] == []  # the queue is locked while o-0 and o-1 are out
    assert rounds[1] == [("o-0", 2), ("o-1", 2)]  # back after 3 s, in order
    assert [b for r in rounds[2:] for b, _ in r] == ["o-2", "o-3", "o-4"]


async def test_a_fifo_message_never_acknowledged_goes_to_the_dlq_after_its_attempts(
    broker: Broker, tmp_path: Path
) -> None:
    """A FIFO group of retryMaxTimes 1, a SimpleConsumer that never acknowledges: two
    deliveries, then ``%DLQ%<group>``, and the queue moves on to the next message of the
    message group. (A normal group's dead letters: tests/conformance/test_v5_matrix.py.)"""
    group = "v5-give-up-fifo"
    config = broker.groups.find_or_create(group)
    config.retry_max_times, config.consume_message_orderly = 1, True
    env = {"V5_FIFO": "1", "V5_SECONDS": "12"}
    result = await run_client(broker, tmp_path, "V5GiveUpFifo", group, "give_up", env=env)
    doomed = [a for body, a in result["seen"] if body == "doomed"]
    assert doomed == [1, 2], result["seen"]
    async with Admin(broker.config.namesrv_addr) as admin:

        async def in_the_dlq() -> bool:
            return [m.body for m in await admin.dlq_messages(group)] == [b"doomed"]

        await wait_until(in_the_dlq, "the message in the DLQ")
    assert [body for body, _ in result["seen"]][-1] == "after"


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Broker]:
    """A broker with authentication and authorization on, a super user ``root``, and user
    ``alice`` allowed everything on topic V5Auth and group v5-auth only."""
    keys = {
        "authentication_enabled": True,
        "authorization_enabled": True,
        "init_authentication_user": json.dumps({"username": "root", "password": "root-secret"}),
        "inner_client_authentication_credentials": json.dumps(
            {"accessKey": "inner", "secretKey": "inner-secret"}
        ),
    }
    ns = NameServer(
        NameServerConfig(
            listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"), **keys
        )
    )
    await ns.start()
    b = Broker(
        BrokerConfig(
            listen_port=0, ha_listen_port=0, metrics_port=0, grpc_listen_port=0,
            namesrv_addr=f"127.0.0.1:{ns.port}", **keys,
        ),
        StoreConfig(
            store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
        ),
    )  # fmt: skip
    await b.start()
    try:
        await wait_until(lambda: all(b.registration.registered.values()), "registration")
        b.auth_metadata.create_user(User("alice", "alice-secret"))
        acl = {
            "subject": "User:alice",
            "policies": [
                {
                    "policyType": "Custom",
                    "entries": [
                        {"resource": r, "actions": ["All"], "decision": "Allow"}
                        for r in ("Topic:V5Auth", "Group:v5-auth")
                    ],
                }
            ],
        }
        b.auth_metadata.create_acl(decode_acl_info(json.dumps(acl)))
        yield b
    finally:
        await b.stop()
        await ns.stop()


async def test_signed_requests_are_checked_as_on_the_remoting_port(
    secured: Broker, tmp_path: Path
) -> None:
    ok = await run_client(secured, tmp_path, "V5Auth", "v5-auth", "signed", "alice", "alice-secret")
    assert "send_error" not in ok and "receive_error" not in ok, ok
    assert ok["got"] == ["signed"]
    # The client reports a refused route or send without its code: the codes are checked
    # below with rocketq's own stubs.
    wrong = await run_client(secured, tmp_path, "V5Auth", "v5-auth", "signed", "alice", "nope")
    assert "send_error" in wrong and "got" not in wrong, wrong
    other = await run_client(
        secured, tmp_path, "V5Other", "v5-auth", "signed", "alice", "alice-secret"
    )
    assert "send_error" in other, other
    nobody = await run_client(secured, tmp_path, "V5Auth", "v5-auth", "signed")
    assert "send_error" in nobody and "got" not in nobody, nobody


async def test_each_refusal_has_its_v2_code(secured: Broker) -> None:
    import time as _time

    import grpc

    from rocketq.broker.grpc_v2 import definition_pb2 as d
    from rocketq.broker.grpc_v2 import service_pb2 as sv
    from rocketq.broker.grpc_v2 import service_pb2_grpc
    from rocketq.broker.grpc_v2.convert import signature

    assert secured.grpc is not None
    secured.topics.update(TopicConfig("V5Auth", 2, 2))
    secured.topics.update(TopicConfig("V5Other", 2, 2))

    def metadata(ak: str, sk: str) -> list[tuple[str, str]]:
        now = _time.strftime("%Y%m%dT%H%M%SZ")
        sig = signature(sk, now) if sk else ""
        auth = f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"
        return [("x-mq-date-time", now), ("authorization", auth), ("x-mq-client-id", "t")]

    def message(topic: str) -> d.Message:
        msg = d.Message(topic=d.Resource(name=topic), body=b"x")
        msg.system_properties.message_id = "01ABC"
        msg.system_properties.message_type = d.MessageType.NORMAL
        return msg

    async with grpc.aio.insecure_channel(f"127.0.0.1:{secured.grpc.port}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        route = sv.QueryRouteRequest(topic=d.Resource(name="V5Auth"))
        cases = [
            (stub.QueryRoute(route, metadata=metadata("alice", "nope")), d.Code.UNAUTHORIZED),
            (stub.QueryRoute(route, metadata=metadata("mallory", "x")), d.Code.UNAUTHORIZED),
            (stub.QueryRoute(route, metadata=metadata("", "")), d.Code.UNAUTHORIZED),
            (stub.QueryRoute(route, metadata=metadata("alice", "alice-secret")), d.Code.OK),
            (
                stub.SendMessage(
                    sv.SendMessageRequest(messages=[message("V5Other")]),
                    metadata=metadata("alice", "alice-secret"),
                ),
                d.Code.FORBIDDEN,
            ),
            (
                stub.SendMessage(
                    sv.SendMessageRequest(messages=[message("V5Other")]),
                    metadata=metadata("root", "root-secret"),
                ),
                d.Code.OK,
            ),
        ]
        for call, code in cases:
            answer = await call
            assert answer.status.code == code, answer.status


async def test_the_endpoint_serves_tls_as_the_remoting_port_does(tmp_path: Path) -> None:
    """tls_server_mode enforcing: the official client with tls_enable works (the CA in
    gRPC's roots file), a plaintext one does not get through."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert_path, key_path, ca_path = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    ca.cert_pem.write_to_path(str(ca_path))
    keys = {
        "tls_server_mode": "enforcing",
        "tls_server_cert_path": str(cert_path),
        "tls_server_key_path": str(key_path),
    }
    async with running_broker(tmp_path, **keys) as b:
        tls = {"V5_TLS": "1", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(ca_path)}
        result = await run_client(b, tmp_path, "V5Tls", "v5-tls", "signed", env=tls)
        assert "send_error" not in result and result["got"] == ["signed"], result
        plain = await run_client(b, tmp_path, "V5Tls", "v5-tls-plain", "signed")
        assert "send_error" in plain, plain
