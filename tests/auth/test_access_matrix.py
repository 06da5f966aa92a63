"""Who may do what, over the wire: every request code a broker and a nameserver answer,
sent by six senders — no credentials, a wrong secret, an unknown user, a user whose
policies do not cover the request, a user whose policies do, a super user — to servers
with authentication and authorization on, and off.

With auth on, each answer is NO_PERMISSION exactly where the request's gate says so (the
gates are stated here, code by code, independently of ``auth/request_map.py``), and a
refused request changes nothing: the broker's topics, groups, offsets, store, clients and
users, and the nameserver's routes and KV config are the same after it. With auth off,
nothing is refused, whatever credentials a request carries.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from rocketq.auth.credentials import Credentials
from rocketq.auth.model import Gate, Requirement, User, decode_acl_info
from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.common.config import StoreConfig
from rocketq.common.message import TopicConfig
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import ONEWAY_FLAG, RemotingCommand
from rocketq.remoting.tls import ClientSecurity
from rocketq.remoting.transport import Connection, connect
from tests.auth.test_request_map import BROKER_TABLE, CLUSTER, GROUP, PRODUCER, TOPIC, name_of
from tests.integration.waiting import wait_until

ROOT: Final = Credentials("root", "root-secret")
INNER: Final = Credentials("inner-node", "inner-secret")
ALICE: Final = Credentials("alice", "alice-secret")  # policies cover the requests
BOB: Final = Credentials("bob", "bob-secret")  # policies elsewhere only
SENDERS: Final[dict[str, Credentials | None]] = {
    "no credentials": None,
    "wrong secret": Credentials("alice", "not-alices-secret"),
    "unknown user": Credentials("mallory", "mallory-secret"),
    "user without the action": BOB,
    "user with the action": ALICE,
    "super user": ROOT,
}
TIMEOUT: Final = 5.0


def _acl(subject: str, resources: list[str]) -> Any:
    return decode_acl_info(
        json.dumps(
            {
                "subject": subject,
                "policies": [
                    {
                        "policyType": "Custom",
                        "entries": [
                            {"resource": r, "actions": ["All"], "decision": "Allow"}
                            for r in resources
                        ],
                    }
                ],
            }
        )
    )


# The nameserver's requests, with what each needs: stated here, not read from the map. A
# nameserver knows only the super user and the inner credentials, not the brokers' users:
# its reads beyond routes are a super user's.
NAMESERVER_TABLE: Final[dict[int, tuple[RemotingCommand, Gate]]] = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: (
        RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}),
        Gate.OPEN,
    ),
    RequestCode.GET_BROKER_CLUSTER_INFO: (
        RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO),
        Gate.OPEN,
    ),
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: (
        RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        Gate.SUPER,
    ),
    RequestCode.GET_TOPICS_BY_CLUSTER: (
        RemotingCommand(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": CLUSTER}),
        Gate.SUPER,
    ),
    RequestCode.GET_KV_CONFIG: (
        RemotingCommand(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"}),
        Gate.SUPER,
    ),
    RequestCode.GET_KVLIST_BY_NAMESPACE: (
        RemotingCommand(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"}),
        Gate.SUPER,
    ),
    RequestCode.REGISTER_BROKER: (
        RemotingCommand(
            RequestCode.REGISTER_BROKER,
            {
                "clusterName": CLUSTER,
                "brokerName": "broker-m",
                "brokerAddr": "6.6.6.6:10911",
                "brokerId": "0",
                "haServerAddr": "6.6.6.6:10912",
                "compressed": "false",
            },
            b'{"topicConfigSerializeWrapper":{"topicConfigTable":{},'
            b'"dataVersion":{"counter":1,"timestamp":1}},"filterServerList":[]}',
        ),
        Gate.SUPER,
    ),
    RequestCode.UNREGISTER_BROKER: (
        RemotingCommand(
            RequestCode.UNREGISTER_BROKER,
            {
                "clusterName": CLUSTER,
                "brokerName": "broker-m",
                "brokerAddr": "6.6.6.6:10911",
                "brokerId": "0",
            },
        ),
        Gate.SUPER,
    ),
    RequestCode.QUERY_DATA_VERSION: (
        RemotingCommand(
            RequestCode.QUERY_DATA_VERSION,
            {
                "clusterName": CLUSTER,
                "brokerName": "broker-m",
                "brokerAddr": "6.6.6.6:10911",
                "brokerId": "0",
            },
            b'{"counter":1,"timestamp":1}',
        ),
        Gate.SUPER,
    ),
    RequestCode.DELETE_TOPIC_IN_NAMESRV: (
        RemotingCommand(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Other"}),
        Gate.SUPER,
    ),
    RequestCode.PUT_KV_CONFIG: (
        RemotingCommand(RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "v"}),
        Gate.SUPER,
    ),
    RequestCode.DELETE_KV_CONFIG: (
        RemotingCommand(RequestCode.DELETE_KV_CONFIG, {"namespace": "NS", "key": "k"}),
        Gate.SUPER,
    ),
    # Anyone may ask which signatures the server takes (a normal user, whom the nameserver
    # does not know, is told it is not remembered and keeps signing).
    RocketqRequestCode.AUTH_SESSION: (RemotingCommand(RocketqRequestCode.AUTH_SESSION), Gate.OPEN),
}


def refused(gate: Gate, sender: str) -> bool:
    """Whether a sender is refused at a gate once auth is on."""
    if gate is Gate.OPEN:
        return False  # anyone: what a request claims is not even read
    if sender in ("wrong secret", "unknown user", "no credentials"):
        return True
    if sender == "super user":
        return False
    if gate is Gate.USER:
        return False
    if gate is Gate.SUPER:
        return True
    return sender == "user without the action"  # Gate.POLICY


@dataclass
class Servers:
    broker: Broker
    nameserver: NameServer
    auth: bool

    def state(self) -> object:
        """Everything a refused request could have changed."""
        b, ns = self.broker, self.nameserver
        return (
            sorted(b.topics.topics),
            b.topics.data_version,
            sorted(b.groups.groups),
            json.dumps({k: dict(v) for k, v in b.offsets.table.items()}, sort_keys=True),
            b.store.max_phy_offset,
            sorted(b.consumers.groups),
            sorted(b.consumers.producer_groups),
            b.auth_metadata.snapshot(),
            {name: dict(d.broker_addrs) for name, d in ns.routes.broker_addr_table.items()},
            sorted(ns.routes.topics()),
            json.dumps(ns.kv.namespace("NS"), sort_keys=True),
        )


async def secured_pair(
    tmp_path: Path, auth: bool, *, grpc: bool = False
) -> tuple[NameServer, Broker]:
    """A nameserver (started) and a broker (to start) on free ports, with authentication
    and authorization on (the super user ROOT, the inner credentials INNER) or off;
    ``grpc``: the broker serves the v2 endpoint too."""
    keys: dict[str, Any] = {}
    if auth:
        keys = {
            "authentication_enabled": True,
            "authorization_enabled": True,
            "init_authentication_user": json.dumps(
                {"username": ROOT.access_key, "password": ROOT.secret_key}
            ),
            "inner_client_authentication_credentials": json.dumps(
                {"accessKey": INNER.access_key, "secretKey": INNER.secret_key}
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
            listen_port=0,
            ha_listen_port=0,
            metrics_port=0,
            grpc_listen_port=0 if grpc else -1,
            namesrv_addr=f"127.0.0.1:{ns.port}",
            **keys,
        ),
        StoreConfig(
            store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
        ),
    )
    return ns, b


@pytest.fixture(params=[True, False], ids=["auth on", "auth off"])
async def servers(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Servers]:
    auth: bool = request.param
    ns, b = await secured_pair(tmp_path, auth)
    try:
        await b.start()
        await wait_until(lambda: all(b.registration.registered.values()), "registration")
        b.topics.update(TopicConfig(TOPIC, 2, 2))
        b.topics.update(TopicConfig("Other", 2, 2))
        meta = b.auth_metadata
        meta.create_user(User(ALICE.access_key, ALICE.secret_key))
        meta.create_user(User(BOB.access_key, BOB.secret_key))
        meta.create_acl(
            _acl(
                "User:alice",
                [
                    f"Topic:{TOPIC}",
                    f"Group:{GROUP}",
                    f"Group:{PRODUCER}",
                    f"Cluster:{CLUSTER}",
                ],
            )
        )
        meta.create_acl(_acl("User:bob", ["Topic:Other", "Group:others"]))
        # The new topics' registration lands before the matrix compares routes.
        await wait_until(lambda: "Other" in ns.routes.topics(), "the topics' registration")
        yield Servers(b, ns, auth)
    finally:
        await b.stop()
        await ns.stop()


def _copy(cmd: RemotingCommand) -> RemotingCommand:
    """A fresh request like the sample (signing writes into its fields), answered even if
    the sample is oneway; a pull that the broker does not hold."""
    ext = dict(cmd.ext or {})
    if cmd.code == RequestCode.PULL_MESSAGE:
        ext["sysFlag"] = "0"  # no suspend: answered at once
        ext["suspendTimeoutMillis"] = "0"
    copy = RemotingCommand(cmd.code, ext, cmd.body, flag=cmd.flag & ~ONEWAY_FLAG)
    return copy


# The AUTH_* samples act on a user of their own, so the super user's AUTH_DELETE_USER does
# not take away the users the matrix sends as.
AUTH_SAMPLES: Final = {
    code: RemotingCommand(code, {"username": "carol", "subject": "User:carol"}, body)
    for code, body in [
        (RequestCode.AUTH_CREATE_USER, b'{"username":"carol","password":"carol-secret"}'),
        (RequestCode.AUTH_UPDATE_USER, b'{"username":"carol","password":"carol-2"}'),
        (
            RequestCode.AUTH_CREATE_ACL,
            b'{"subject":"User:carol","policies":[{"policyType":"Custom","entries":'
            b'[{"resource":"Topic:T","actions":["Pub"],"decision":"Allow"}]}]}',
        ),
        (
            RequestCode.AUTH_UPDATE_ACL,
            b'{"subject":"User:carol","policies":[{"policyType":"Custom","entries":'
            b'[{"resource":"Topic:T","actions":["Sub"],"decision":"Allow"}]}]}',
        ),
        (RequestCode.AUTH_GET_USER, None),
        (RequestCode.AUTH_LIST_USER, None),
        (RequestCode.AUTH_GET_ACL, None),
        (RequestCode.AUTH_LIST_ACL, None),
        (RequestCode.AUTH_DELETE_ACL, None),
        (RequestCode.AUTH_DELETE_USER, None),
    ]
}


async def _matrix(
    servers: Servers, addr: str, table: dict[int, tuple[RemotingCommand, Gate]]
) -> list[str]:
    """Send every request from every sender, each sender over a connection of its own kept
    open throughout (closing one ends its clients' registrations, which is a change)."""
    conns = {
        sender: await connect(
            addr,
            {},
            timeout=TIMEOUT,
            security=ClientSecurity(sign=c.sign) if c is not None else None,
        )
        for sender, c in SENDERS.items()
    }
    try:
        return await _each(servers, conns, table)
    finally:
        for conn in conns.values():
            conn.close()


async def _each(
    servers: Servers,
    conns: dict[str, Connection],
    table: dict[int, tuple[RemotingCommand, Gate]],
) -> list[str]:
    wrong = []
    for code, (sample, gate) in sorted(table.items()):
        cmd = AUTH_SAMPLES.get(code, sample)
        for sender, conn in conns.items():
            before = servers.state()
            answer = await conn.invoke(_copy(cmd), TIMEOUT)
            expect = servers.auth and refused(gate, sender)
            got = answer.code == ResponseCode.NO_PERMISSION
            if got != expect:
                wrong.append(
                    f"{name_of(code)} from {sender}: answered {answer.code} ({answer.remark}), "
                    f"expected {'NO_PERMISSION' if expect else 'an answer from the handler'}"
                )
            if got and servers.state() != before:
                wrong.append(f"{name_of(code)} from {sender}: refused, yet changed the state")
    return wrong


def _gate(requirement: Requirement) -> Gate:
    return requirement.gate


async def test_every_broker_request_from_every_sender(servers: Servers) -> None:
    table = {code: (cmd, _gate(req)) for code, (cmd, req) in BROKER_TABLE.items()}
    addr = f"127.0.0.1:{servers.broker.remoting.port}"
    wrong = await _matrix(servers, addr, table)
    assert not wrong, "\n".join(wrong)


async def test_every_nameserver_request_from_every_sender(servers: Servers) -> None:
    addr = f"127.0.0.1:{servers.nameserver.port}"
    wrong = await _matrix(servers, addr, NAMESERVER_TABLE)
    assert not wrong, "\n".join(wrong)


def test_the_tables_cover_every_code_the_servers_answer() -> None:
    from rocketq.auth.request_map import BROKER_CODES, NAMESERVER_CODES

    assert set(BROKER_TABLE) == set(BROKER_CODES)
    assert set(NAMESERVER_TABLE) == set(NAMESERVER_CODES)


async def test_a_client_unregisters_itself_and_nobody_else(servers: Servers) -> None:
    from rocketq.sdk.client_wire import unregister_request
    from rocketq.sdk.wire import ConsumerData, SubscriptionData, heartbeat_request

    addr = f"127.0.0.1:{servers.broker.remoting.port}"
    alice = await connect(addr, {}, timeout=TIMEOUT, security=ClientSecurity(sign=ALICE.sign))
    root = await connect(addr, {}, timeout=TIMEOUT, security=ClientSecurity(sign=ROOT.sign))
    consumers = servers.broker.consumers
    try:
        beat = heartbeat_request(
            "10.0.0.7@7", [], [ConsumerData(GROUP, subscriptions=(SubscriptionData(TOPIC),))]
        )
        assert (await alice.invoke(beat, TIMEOUT)).code == ResponseCode.SUCCESS
        assert "10.0.0.7@7" in consumers.groups[GROUP].clients
        leave = unregister_request("10.0.0.7@7", consumer_group=GROUP)
        assert (await root.invoke(leave, TIMEOUT)).code == ResponseCode.SUCCESS
        if servers.auth:  # another connection's client stays
            assert "10.0.0.7@7" in consumers.groups[GROUP].clients
            leave = unregister_request("10.0.0.7@7", consumer_group=GROUP)
            assert (await alice.invoke(leave, TIMEOUT)).code == ResponseCode.SUCCESS
        group = consumers.groups.get(GROUP)
        assert group is None or "10.0.0.7@7" not in group.clients
    finally:
        alice.close()
        root.close()


async def test_a_client_id_stays_with_the_user_and_connection_that_registered_it(
    servers: Servers,
) -> None:
    from rocketq.broker.client_channels import client_channels
    from rocketq.sdk.wire import ConsumerData, SubscriptionData, heartbeat_request

    addr = f"127.0.0.1:{servers.broker.remoting.port}"
    alice = await connect(addr, {}, timeout=TIMEOUT, security=ClientSecurity(sign=ALICE.sign))
    bob = await connect(addr, {}, timeout=TIMEOUT, security=ClientSecurity(sign=BOB.sign))
    channels = client_channels(servers.broker.consumers)
    try:
        mine = heartbeat_request("10.0.0.8@8", [], [ConsumerData("others")])
        assert (await bob.invoke(mine, TIMEOUT)).code == ResponseCode.SUCCESS
        bobs = channels.get("10.0.0.8@8")
        assert bobs is not None
        # Alice names bob's client id in a heartbeat of her own group.
        taken = heartbeat_request(
            "10.0.0.8@8", [], [ConsumerData(GROUP, subscriptions=(SubscriptionData(TOPIC),))]
        )
        answer = await alice.invoke(taken, TIMEOUT)
        channel = channels.get("10.0.0.8@8")
        assert channel is not None
        if servers.auth:
            assert answer.code == ResponseCode.NO_PERMISSION, answer.remark
            assert channel.conn is bobs.conn  # what the broker tells the client goes to bob
            group = servers.broker.consumers.groups.get(GROUP)
            assert group is None or "10.0.0.8@8" not in group.clients
        else:
            assert answer.code == ResponseCode.SUCCESS
    finally:
        alice.close()
        bob.close()
