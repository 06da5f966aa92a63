"""The routes the v2 endpoint answers keep their queues while a group has no master, and
the last route stays in use while no nameserver answers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rocketq.broker.grpc_v2.routes import ClusterRoutes
from rocketq.remoting.route_data import BrokerData, QueueData, TopicRouteData

OWN = "10.0.0.1:10911"


def _routes(ports: dict[str, int]) -> ClusterRoutes:
    broker: Any = SimpleNamespace(config=SimpleNamespace(broker_addr=OWN, namesrv_addrs=[]))
    routes = ClusterRoutes(broker, lambda: ("10.0.0.1", 8081))

    async def port(addr: str) -> int:
        return ports.get(addr, -1)

    routes._port = port  # type: ignore[method-assign]
    return routes


def _route(b_addrs: dict[int, str]) -> TopicRouteData:
    return TopicRouteData(
        [QueueData("broker-a", 4, 4, 6), QueueData("broker-b", 4, 4, 6)],
        [BrokerData("c", "broker-a", {0: OWN}), BrokerData("c", "broker-b", b_addrs)],
    )


async def test_a_group_without_a_master_keeps_its_queues_at_its_last_endpoint() -> None:
    routes = _routes({"10.0.0.2:10911": 8082, "10.0.0.3:10911": 8083})
    before = await routes._masters(_route({0: "10.0.0.2:10911", 1: "10.0.0.3:10911"}))
    assert [(r.name, r.host, r.port) for r in before] == [
        ("broker-a", "10.0.0.1", 8081), ("broker-b", "10.0.0.2", 8082),
    ]  # fmt: skip
    # broker-b's master is gone, its follower not master yet: the same queues, the same
    # endpoint (sends there fail until a master is back).
    during = await routes._masters(_route({1: "10.0.0.3:10911"}))
    assert during == before
    # The follower took over: its endpoint from now on.
    after = await routes._masters(_route({0: "10.0.0.3:10911"}))
    assert [(r.name, r.port) for r in after] == [("broker-a", 8081), ("broker-b", 8083)]


async def test_a_group_never_seen_with_a_master_is_answered_at_a_members_endpoint() -> None:
    routes = _routes({"10.0.0.3:10911": 8083})
    found = await routes._masters(_route({1: "10.0.0.3:10911"}))
    assert [(r.name, r.port) for r in found] == [("broker-a", 8081), ("broker-b", 8083)]
    none = _routes({})
    assert [r.name for r in await none._masters(_route({1: "10.0.0.9:10911"}))] == ["broker-a"]


async def test_the_last_route_stays_while_no_nameserver_answers() -> None:
    routes = _routes({"10.0.0.2:10911": 8082})
    answers = [(True, _route({0: "10.0.0.2:10911"})), (False, None)]

    async def route(topic: str) -> tuple[bool, TopicRouteData | None]:
        return answers.pop(0)

    routes._route = route  # type: ignore[method-assign]
    first = await routes._ask("T")
    assert first is not None and len(first) == 2
    assert await routes._ask("T") == first


async def test_a_taken_grpc_port_is_a_port_bind_error_and_is_not_shared(held_port: int) -> None:
    """The endpoint binds without SO_REUSEPORT: a port another program holds (or another
    endpoint) is refused with the error the launcher reads, not shared."""
    import errno

    import pytest

    from rocketq.broker.grpc_v2.endpoint import Endpoint
    from rocketq.common.ports import PortBindError

    broker: Any = SimpleNamespace(
        pop=SimpleNamespace(clock_ms=lambda: 0),
        security=SimpleNamespace(tls=None),
        consumers=SimpleNamespace(bindings=None),
    )
    with pytest.raises(PortBindError) as err:
        await Endpoint(broker, "127.0.0.1", held_port).start()
    assert (err.value.name, err.value.port, err.value.errno) == (
        "grpc",
        held_port,
        errno.EADDRINUSE,
    )
    assert "apache.rocketmq.v2 endpoint (Address already in use)" in str(err.value)
    first = Endpoint(broker, "127.0.0.1", 0)
    port = await first.start()
    try:
        with pytest.raises(PortBindError):
            await Endpoint(broker, "127.0.0.1", port).start()
    finally:
        await first.stop()
