"""TLS end to end on real processes started by the launcher (``ClusterSpec(tls=True)``, auth
on): the SDK's producer and consumer over TLS with the cluster's CA; a plaintext client
refused at once (not left hanging) with an error naming TLS; a client without the CA
refusing the servers' certificate with an error that says so; permissive mode serving TLS
and plaintext on one port; a certificate rotated under a live producer and consumer
(nothing fails, new connections get the new certificate); SYNC_MASTER replication over a
TLS-only HA port keeping every acknowledged message when the master is killed; and a Raft
group over TLS losing its leader (sends resume, every acknowledged message is consumed),
its members' ports showing a rotated certificate afterwards; client certificates required
on every port; the metrics ports serving HTTPS only."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import signal
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import trustme

from rocketq import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
)
from rocketq.chaos.hostile import listening_ports
from rocketq.cluster.launcher import LocalCluster, Node
from rocketq.common.exceptions import ConnectBrokerError, RocketqError
from rocketq.remoting.tls import ClientSecurity, client_context
from rocketq.remoting.transport import request_once
from rocketq.sdk import admin_wire as aw
from rocketq.sdk.admin import Admin
from tests.integration.security_helpers import (
    TIMEOUT,
    read_until_closed,
    running,
    runtime,
    secure_spec,
    super_credentials,
)
from tests.integration.test_raft import FAILOVER_DEADLINE, FAST_RAFT
from tests.integration.waiting import wait_until

RELOAD: Final = {"tls_cert_reload_interval_seconds": "0.5"}
# A refusal comes as soon as the server reads the first bytes: well within this.
PROMPT: Final = 5.0


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def install_leaf(ca: trustme.CA, cert_file: Path, key_file: Path) -> bytes:
    """A new certificate for 127.0.0.1 from ``ca`` written over the node's files (key
    first: until the certificate follows, the pair does not load and the old one serves);
    its DER bytes."""
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    write_atomic(key_file, leaf.private_key_pem.bytes())
    write_atomic(cert_file, b"".join(pem.bytes() for pem in leaf.cert_chain_pems))
    return ssl.PEM_cert_to_DER_cert(leaf.cert_chain_pems[0].bytes().decode())


def own_ca(data_dir: Path) -> trustme.CA:
    """A CA whose key this test keeps, its certificate and a leaf put where the launcher
    looks for the cluster's (it keeps certificates it finds there)."""
    ca = trustme.CA(organization_name="rocketq rotation test")
    folder = data_dir / "tls"
    folder.mkdir(parents=True)
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    install_leaf(ca, folder / "server.pem", folder / "server.key")
    return ca


async def server_certificate(addr: str, ca_file: Path) -> bytes:
    """The DER certificate a new TLS connection to ``addr`` is shown (verified)."""
    host, _, port = addr.rpartition(":")
    _, writer = await asyncio.wait_for(
        asyncio.open_connection(
            host, int(port), ssl=client_context(str(ca_file)), server_hostname=host
        ),
        TIMEOUT,
    )
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    assert der is not None
    return bytes(der)


class Secured:
    def __init__(self, cluster: LocalCluster, ca: trustme.CA) -> None:
        self.cluster, self.ca = cluster, ca


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    data_dir = tmp_path_factory.mktemp("tls")
    ca = own_ca(data_dir)
    settings = {**RELOAD, "metrics_tls_enable": "true"}
    spec = secure_spec(
        data_dir, tls=True, metrics=True, broker_settings=settings, nameserver_settings=settings
    )
    with running(spec) as cluster:
        with asyncio.Runner() as runner:
            runner.run(_topic(cluster, "Sealed"))
        yield Secured(cluster, ca)


async def _topic(cluster: LocalCluster, topic: str, **extra: Any) -> None:
    async with Admin(cluster.namesrv_addr, **{**cluster.client_settings(), **extra}) as admin:
        await admin.update_topic(topic, read_queue_nums=4, write_queue_nums=4)


@contextlib.asynccontextmanager
async def consuming(
    namesrv: str, group: str, topic: str, sink: set[bytes], **settings: Any
) -> AsyncIterator[PushConsumer]:
    consumer = PushConsumer(
        group, namesrv, consume_from=ConsumeFrom.FIRST_OFFSET, rebalance_interval=1.0, **settings
    )
    consumer.subscribe(topic, "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        sink.update(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    consumer.on_message(handler)
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.shutdown()


async def send_and_consume(cluster: LocalCluster, topic: str, tag: str, **settings: Any) -> None:
    """20 messages sent and consumed by a producer and consumer with ``settings``."""
    bodies = {f"{tag}-{i}".encode() for i in range(20)}
    got: set[bytes] = set()
    async with Producer(f"pg-{tag}", cluster.namesrv_addr, **settings) as producer:
        for body in sorted(bodies):
            assert (await producer.send(Message(topic, body))).status is SendStatus.SEND_OK
    async with consuming(cluster.namesrv_addr, f"cg-{tag}", topic, got, **settings):
        await wait_until(lambda: got >= bodies, f"{tag}: the messages to be consumed")


def without_tls(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if not k.startswith("tls")}


# -- enforcing ------------------------------------------------------------------------------


async def test_sdk_over_tls_sends_and_consumes(secured: Secured) -> None:
    cluster = secured.cluster
    await send_and_consume(cluster, "Sealed", "tls", **cluster.client_settings())


def test_metrics_are_served_over_https_only(secured: Secured) -> None:
    cluster = secured.cluster
    assert cluster.certs is not None
    for node in cluster.nodes:
        # Over HTTPS with the cluster's CA and metrics token (auth is on).
        assert b"rocketq_" in cluster.fetch_metrics(node, timeout=TIMEOUT)
        started = time.monotonic()
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=10)
        assert time.monotonic() - started < PROMPT, f"{node.name}: plain HTTP left waiting"


async def test_a_plaintext_client_is_refused_at_once(secured: Secured) -> None:
    cluster = secured.cluster
    signed = ClientSecurity(sign=super_credentials(cluster).sign)  # right credentials, no TLS
    for node in (cluster.nameservers[0], cluster.brokers[0]):
        started = time.monotonic()
        with pytest.raises(ConnectBrokerError):
            await request_once(node.addr, aw.broker_runtime_info_request(), 30, security=signed)
        assert time.monotonic() - started < PROMPT, f"{node.name} left a plaintext client waiting"
    started = time.monotonic()
    plain = without_tls(cluster.client_settings())
    with pytest.raises(RocketqError, match="TLS"):  # says why, not just "closed"
        async with Producer("pg-plain", cluster.namesrv_addr, **plain) as producer:
            await producer.send(Message("Sealed", b"in the clear"), timeout=3)
    assert time.monotonic() - started < PROMPT + 3


async def test_a_client_without_the_ca_refuses_the_certificate(secured: Secured) -> None:
    cluster = secured.cluster
    strangers = ClientSecurity(ssl=client_context(), sign=super_credentials(cluster).sign)
    for node in (cluster.nameservers[0], cluster.brokers[0]):
        with pytest.raises(ConnectBrokerError, match="certificate"):
            await request_once(node.addr, aw.broker_runtime_info_request(), 10, security=strangers)
    settings = {**cluster.client_settings(), "tls_ca_file": ""}
    with pytest.raises(RocketqError, match="certificate"):
        async with Admin(cluster.namesrv_addr, timeout=3.0, **settings) as admin:
            await admin.topic_route("Sealed")


async def test_certificate_rotated_under_live_clients(secured: Secured) -> None:
    cluster = secured.cluster
    assert cluster.certs is not None
    ca_file, cert_file, key_file = (
        cluster.certs.ca_file,
        cluster.certs.cert_file,
        cluster.certs.key_file,
    )
    nodes: list[Node] = [cluster.nameservers[0], *cluster.brokers]
    old = {n.name: await server_certificate(n.addr, ca_file) for n in nodes}
    settings = cluster.client_settings()
    acked: list[bytes] = []
    failures: list[BaseException] = []
    got: set[bytes] = set()
    stop = asyncio.Event()

    async def send_forever(producer: Producer) -> None:
        n = 0
        while not stop.is_set():
            body = b"rot-%06d" % n
            n += 1
            try:
                result = await producer.send(Message("Sealed", body), timeout=5)
            except RocketqError as exc:
                failures.append(exc)
                continue
            if result.status is SendStatus.SEND_OK:
                acked.append(body)
            else:
                failures.append(AssertionError(result.status))
            await asyncio.sleep(0.01)  # a steady stream, not a flood

    async with (
        Producer("pg-rotation", cluster.namesrv_addr, **settings) as producer,
        consuming(cluster.namesrv_addr, "cg-rotation", "Sealed", got, **settings),
    ):
        sender = asyncio.ensure_future(send_forever(producer))
        try:
            await wait_until(lambda: len(acked) >= 20 and set(acked) <= got, "the stream to flow")
            new = install_leaf(secured.ca, cert_file, key_file)
            assert new not in old.values()

            async def all_rotated() -> bool:
                for n in nodes:
                    if await server_certificate(n.addr, ca_file) != new:
                        return False
                return True

            await wait_until(all_rotated, "new connections to be shown the new certificate")
            rotated_at = len(acked)
            await wait_until(
                lambda: len(acked) >= rotated_at + 20, "sends to go on after the rotation"
            )
        finally:
            stop.set()
            await asyncio.wait_for(sender, 15)
        await wait_until(
            lambda: got >= set(acked),
            lambda: f"{len(set(acked) - got)} acknowledged messages to be consumed",
        )
    assert failures == []
    # The SDK over a new connection trusts it as it did the old one.
    await send_and_consume(cluster, "Sealed", "after-rotation", **settings)


# -- permissive -----------------------------------------------------------------------------


async def test_permissive_mode_serves_tls_and_plaintext(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    permissive = {"tls_server_mode": "permissive"}
    spec = secure_spec(
        tmp_path_factory.mktemp("permissive"),
        tls=True,
        broker_settings=permissive,
        nameserver_settings=permissive,
    )
    with running(spec) as cluster:
        await _topic(cluster, "Open")
        settings = cluster.client_settings()
        await send_and_consume(cluster, "Open", "tls-client", **settings)
        await send_and_consume(cluster, "Open", "plain-client", **without_tls(settings))
        # Plaintext on the broker's port too, not just through the nameserver.
        answer = await request_once(
            cluster.brokers[0].addr,
            aw.broker_runtime_info_request(),
            TIMEOUT,
            security=ClientSecurity(sign=super_credentials(cluster).sign),
        )
        assert answer.code == 0, answer.remark


# -- HA and Raft over TLS -------------------------------------------------------------------


async def links_are_tls(cluster: LocalCluster, ports: list[tuple[Node, int]]) -> None:
    """Each replication port shows the cluster's certificate to a TLS client and closes
    on a plaintext one."""
    assert cluster.certs is not None
    served = ssl.PEM_cert_to_DER_cert(cluster.certs.cert_file.read_text())
    for node, port in ports:
        assert await server_certificate(f"127.0.0.1:{port}", cluster.certs.ca_file) == served
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"plaintext, not a TLS ClientHello")
            await writer.drain()
            data, closed = await read_until_closed(reader, PROMPT)
        finally:
            writer.close()
        assert closed and data == b"", f"{node.name}'s port {port} took plaintext"


async def test_ha_over_tls_keeps_every_acknowledged_message_when_the_master_dies(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    sync = {"broker_role": "SYNC_MASTER", "flush_disk_type": "SYNC_FLUSH"}
    data_dir = tmp_path_factory.mktemp("ha-tls")
    ca = own_ca(data_dir)
    spec = secure_spec(data_dir, tls=True, replication="ha", broker_settings={**sync, **RELOAD})
    with running(spec) as cluster:
        master, slave = cluster.brokers
        await _topic(cluster, "Mirrored")

        async def slave_connected() -> bool:
            return (await runtime(cluster, master)).get("haSlaves") == "1"

        await wait_until(slave_connected, "the slave to connect over TLS")
        (ha_port,) = listening_ports(master.pid) - {master.port, master.metrics_port}
        await links_are_tls(cluster, [(master, ha_port)])
        # A certificate rotated on the master: new links get it, the slave stays connected.
        assert cluster.certs is not None
        certs = cluster.certs
        new_cert = install_leaf(ca, certs.cert_file, certs.key_file)

        async def rotated() -> bool:
            shown = await server_certificate(f"127.0.0.1:{ha_port}", certs.ca_file)
            return shown == new_cert

        await wait_until(rotated, "the HA port to show the new certificate")
        await wait_until(slave_connected, "the slave to stay connected")
        settings = cluster.client_settings()
        acked: list[bytes] = []
        async with Producer("pg-mirrored", cluster.namesrv_addr, **settings) as producer:
            for i in range(100):
                result = await producer.send(Message("Mirrored", b"mi-%04d" % i))
                assert result.status is SendStatus.SEND_OK, result.status
                acked.append(b"mi-%04d" % i)
        cluster.kill(master.name, signal.SIGKILL)
        got: set[bytes] = set()
        # The master is gone: all of it comes from the slave, over TLS.
        async with consuming(cluster.namesrv_addr, "cg-mirrored", "Mirrored", got, **settings):
            await wait_until(
                lambda: got >= set(acked),
                lambda: f"{len(set(acked) - got)} acknowledged messages missing on the slave",
                timeout=30,
            )
        assert cluster.is_alive(slave.name)


async def _serving_leader(cluster: LocalCluster, not_: Node | None = None) -> Node | None:
    for n in cluster.brokers:
        if n is not_ or not cluster.is_alive(n.name):
            continue
        with contextlib.suppress(RocketqError, OSError):
            if (await runtime(cluster, n)).get("raftServing") == "true":
                return n
    return None


async def test_raft_over_tls_survives_a_leader_kill(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    data_dir = tmp_path_factory.mktemp("raft-tls")
    ca = own_ca(data_dir)
    spec = secure_spec(
        data_dir, tls=True, replication="raft", broker_settings={**FAST_RAFT, **RELOAD}
    )
    with running(spec) as cluster:
        await _topic(cluster, "Elected")
        settings = cluster.client_settings()
        found: list[Node] = []

        async def leader_found(not_: Node | None = None) -> bool:
            node = await _serving_leader(cluster, not_)
            if node is not None:
                found.append(node)
            return node is not None

        await wait_until(leader_found, "a serving leader")
        leader = found[-1]
        await links_are_tls(cluster, [(n, n.raft_port) for n in cluster.brokers])
        acked: list[tuple[float, float, bytes]] = []
        stop = asyncio.Event()
        counter = iter(range(10**9))

        async def sender(producer: Producer) -> None:
            while not stop.is_set():
                body = b"el-%07d" % next(counter)
                started = time.monotonic()
                try:
                    result = await producer.send(Message("Elected", body), timeout=3)
                except RocketqError:  # the leader is gone: not acknowledged
                    await asyncio.sleep(0.05)
                    continue
                if result.status is SendStatus.SEND_OK:
                    acked.append((started, time.monotonic(), body))

        async with Producer("pg-elected", cluster.namesrv_addr, **settings) as producer:
            tasks = [asyncio.ensure_future(sender(producer)) for _ in range(4)]
            try:
                await wait_until(lambda: len(acked) >= 100, "sends to go through over TLS")
                term = int((await runtime(cluster, leader))["raftTerm"])
                assert (await runtime(cluster, leader))["raftRole"] == "LEADER"
                killed_at = time.monotonic()
                cluster.kill(leader.name, signal.SIGKILL)
                await wait_until(
                    lambda: any(started > killed_at for started, _, _ in acked),
                    "a send made after the leader's kill to be acknowledged",
                    timeout=FAILOVER_DEADLINE,
                )
                resumed = min(done for started, done, _ in acked if started > killed_at) - killed_at
                print(f"Raft over TLS: sends resumed {resumed:.2f} s after the leader's kill")
                count = len(acked)
                await wait_until(lambda: len(acked) >= count + 50, "sends to the new leader")
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(*tasks), 15)
        await wait_until(lambda: leader_found(leader), "a new serving leader")
        assert int((await runtime(cluster, found[-1]))["raftTerm"]) > term
        bodies = {body for _, _, body in acked}
        got: set[bytes] = set()
        async with consuming(cluster.namesrv_addr, "cg-elected", "Elected", got, **settings):
            await wait_until(
                lambda: got >= bodies,
                lambda: f"{len(bodies - got)} of {len(bodies)} acknowledged messages consumed",
                timeout=30,
            )
        # A certificate rotated on the members: their Raft ports show it to new links
        # (the links between members are kept), and the group goes on serving.
        assert cluster.certs is not None
        certs = cluster.certs
        new_cert = install_leaf(ca, certs.cert_file, certs.key_file)
        alive = [n for n in cluster.brokers if cluster.is_alive(n.name)]

        async def rotated() -> bool:
            for n in alive:
                for port in (n.port, n.raft_port):
                    if await server_certificate(f"127.0.0.1:{port}", certs.ca_file) != new_cert:
                        return False
            return True

        await wait_until(rotated, "the members' ports to show the new certificate")
        async with Producer("pg-rotated", cluster.namesrv_addr, **settings) as producer:
            result = await producer.send(Message("Elected", b"after the rotation"), timeout=10)
            assert result.status is SendStatus.SEND_OK


# -- client certificates ----------------------------------------------------------------------


async def test_client_certificates_required(tmp_path_factory: pytest.TempPathFactory) -> None:
    """With ``tls_server_need_client_auth=require`` every port asks for a certificate from
    the cluster's CA: the nodes show theirs to each other, a client showing one works, a
    client without one (or with one from another CA) gets nowhere, promptly."""
    data_dir = tmp_path_factory.mktemp("mtls")
    ca = own_ca(data_dir)
    folder = data_dir / "tls"
    client = ca.issue_cert("client-alice")
    client.cert_chain_pems[0].write_to_path(str(folder / "client.pem"))
    client.private_key_pem.write_to_path(str(folder / "client.key"))
    mutual = {
        "tls_server_need_client_auth": "require",
        "tls_server_trust_cert_path": str(folder / "ca.pem"),
        "tls_client_cert_path": str(folder / "server.pem"),
        "tls_client_key_path": str(folder / "server.key"),
    }

    class MutualCluster(LocalCluster):
        """The launcher's own requests (is every broker registered?) show the client
        certificate too."""

        def client_security(self) -> ClientSecurity:
            ctx = client_context(
                str(folder / "ca.pem"), str(folder / "client.pem"), str(folder / "client.key")
            )
            return ClientSecurity(ssl=ctx, sign=super_credentials(self).sign)

    spec = secure_spec(data_dir, tls=True, broker_settings=mutual, nameserver_settings=mutual)
    with running(spec, MutualCluster) as cluster:
        mine = {
            "tls_cert_file": str(folder / "client.pem"),
            "tls_key_file": str(folder / "client.key"),
        }
        await _topic(cluster, "Mutual", **mine)
        settings = cluster.client_settings()
        await send_and_consume(cluster, "Mutual", "with-cert", **settings, **mine)
        other = trustme.CA().issue_cert("client-mallory")
        other.cert_chain_pems[0].write_to_path(str(folder / "mallory.pem"))
        other.private_key_pem.write_to_path(str(folder / "mallory.key"))
        cases: dict[str, dict[str, Any]] = {
            "no client certificate": {},
            "a certificate of another CA": {
                "tls_cert_file": str(folder / "mallory.pem"),
                "tls_key_file": str(folder / "mallory.key"),
            },
        }
        for what, extra in cases.items():
            started = time.monotonic()
            with pytest.raises(RocketqError):
                async with Admin(cluster.namesrv_addr, timeout=3.0, **settings, **extra) as admin:
                    await admin.topic_route("Mutual")
            assert time.monotonic() - started < PROMPT + 3, f"{what}: left waiting"
            for node in (cluster.nameservers[0], cluster.brokers[0]):
                ctx = client_context(
                    str(folder / "ca.pem"),
                    extra.get("tls_cert_file", ""),
                    extra.get("tls_key_file", ""),
                )
                with pytest.raises(ConnectBrokerError):
                    await request_once(
                        node.addr,
                        aw.broker_runtime_info_request(),
                        TIMEOUT,
                        security=ClientSecurity(ssl=ctx, sign=super_credentials(cluster).sign),
                    )
