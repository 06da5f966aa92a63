"""Helpers for the security tests against real processes: a secured cluster per module,
raw requests signed (or not) as a chosen sender over the cluster's TLS, and the state a
refused request must leave unchanged (routes, topics, offsets, runtime figures)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from rocketq.auth.credentials import Credentials
from rocketq.cluster.launcher import ClusterSpec, LocalCluster, Node
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import parse_route
from rocketq.remoting.tls import ClientSecurity
from rocketq.remoting.transport import request_once
from rocketq.sdk import admin_wire as aw
from rocketq.sdk import client_wire as cw
from tests.integration.conftest import SMALL_STORE

TIMEOUT: Final = 5.0
CLUSTER_NAME: Final = "DefaultCluster"


@contextlib.contextmanager
def running(spec: ClusterSpec, cls: type[LocalCluster] = LocalCluster) -> Iterator[LocalCluster]:
    """A cluster (of class ``cls``) started from ``spec`` (with small CommitLog segments),
    stopped on the way out whatever happens."""
    settings = {**SMALL_STORE, **spec.broker_settings}
    spec = ClusterSpec(**{**spec.to_dict(), "broker_settings": settings})
    with cls(spec) as cluster:
        yield cluster


def secure_spec(data_dir: Path, **kwargs: Any) -> ClusterSpec:
    """Auth on, no metrics servers, whatever else ``kwargs`` says."""
    return ClusterSpec(data_dir=data_dir, **{"auth": True, "metrics": False, **kwargs})


def super_credentials(cluster: LocalCluster) -> Credentials:
    assert cluster.secrets is not None
    return Credentials(cluster.secrets.username, cluster.secrets.password)


def inner_credentials(cluster: LocalCluster) -> Credentials:
    assert cluster.secrets is not None
    return Credentials.from_json(cluster.secrets.inner_json)


def as_sender(cluster: LocalCluster, who: Credentials | None) -> ClientSecurity:
    """The cluster's TLS (if any), requests signed with ``who`` (None: unsigned)."""
    base = cluster.client_security()
    ssl = base.ssl if base is not None else None
    return ClientSecurity(ssl=ssl, sign=None if who is None else who.sign)


def settings_for(cluster: LocalCluster, who: Credentials) -> dict[str, Any]:
    """SDK keyword arguments for ``who`` against this cluster."""
    return {
        **cluster.client_settings(),
        "access_key": who.access_key,
        "secret_key": who.secret_key,
    }


async def ask(
    cluster: LocalCluster, addr: str, cmd: RemotingCommand, who: Credentials | None
) -> RemotingCommand:
    """One request to ``addr`` on a connection of its own, signed as ``who``."""
    return await request_once(addr, cmd, TIMEOUT, security=as_sender(cluster, who))


async def ask_super(cluster: LocalCluster, addr: str, cmd: RemotingCommand) -> RemotingCommand:
    return await ask(cluster, addr, cmd, super_credentials(cluster))


async def route_addrs(cluster: LocalCluster, topic: str) -> dict[str, dict[int, str]] | None:
    """Broker name -> {id: address} of ``topic``'s route as the first nameserver gives it
    to anyone; None when it has no route."""
    cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    answer = await ask(cluster, cluster.nameservers[0].addr, cmd, None)
    if answer.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
    route = parse_route(answer.body or b"{}")
    return {b.broker_name: dict(b.broker_addrs) for b in route.broker_datas}


async def runtime(cluster: LocalCluster, node: Node) -> dict[str, str]:
    """The broker's runtime figures (asked as the super user)."""
    answer = await ask_super(cluster, node.addr, aw.broker_runtime_info_request())
    return aw.parse_broker_runtime_info(answer).table


async def broker_topics(cluster: LocalCluster, node: Node) -> bytes:
    """The broker's topic table as it sends it (JSON)."""
    from rocketq.remoting.broker_tables import all_topic_config_request

    answer = await ask_super(cluster, node.addr, all_topic_config_request())
    assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
    return bytes(answer.body or b"")


async def committed_offset(
    cluster: LocalCluster, node: Node, group: str, topic: str, queue_id: int
) -> int:
    answer = await ask_super(cluster, node.addr, cw.query_offset_request(group, topic, queue_id))
    if answer.code != ResponseCode.SUCCESS:
        return -1
    return cw.parse_offset(answer)


async def read_until_closed(reader: asyncio.StreamReader, timeout: float) -> tuple[bytes, bool]:
    """Everything the peer sends until it closes (True) or ``timeout`` passes (False)."""
    got = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(got), False
        try:
            chunk = await asyncio.wait_for(reader.read(65536), left)
        except TimeoutError:
            return bytes(got), False
        except (ConnectionError, OSError):
            return bytes(got), True
        if not chunk:
            return bytes(got), True
        got += chunk
