"""RouteInfoManager as plain data: registration, removal triggers and routes (NS-4..NS-10).

A fake clock drives liveness, so no test sleeps.
"""

from __future__ import annotations

import pytest

from rocketq.common.message import PERM_READ, PERM_WRITE, TopicConfig
from rocketq.nameserver.route_info import BrokerData, QueueData, RegisterResult, RouteInfoManager

EXPIRY_MS = 120_000
RW = PERM_READ | PERM_WRITE


class FakeClock:
    """Seconds, like ``time.monotonic``; moves only when told."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def routes(clock: FakeClock) -> RouteInfoManager:
    return RouteInfoManager(clock=clock)


def topics(*names: str, queues: int = 4, perm: int = RW) -> list[TopicConfig]:
    return [TopicConfig(n, queues, queues, perm) for n in names]


def register(
    routes: RouteInfoManager,
    name: str,
    addr: str,
    *,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    topic_list: list[TopicConfig] | None = None,
    data_version: int = 1,
    channel: int | None = 1,
    ha: str = "",
) -> RegisterResult:
    return routes.register_broker(
        cluster=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr=ha,
        topics=topic_list if topic_list is not None else [],
        data_version=data_version,
        channel=channel,
    )


def served_by(routes: RouteInfoManager, topic: str) -> set[str]:
    """Broker names holding queues of ``topic``."""
    return set(routes.topic_queue_table.get(topic, {}))


# ---------------------------------------------------------------- registration


def test_master_registration_builds_queue_and_broker_data(routes: RouteInfoManager) -> None:
    result = register(
        routes,
        "broker-a",
        "10.0.0.1:10911",
        topic_list=[TopicConfig("T1", 8, 4, PERM_READ, 1), TopicConfig("T2", 2, 2, RW)],
    )

    assert result.first
    assert result.master_addr == "" and result.ha_server_addr == ""
    assert routes.topic_queue_table["T1"] == {"broker-a": QueueData("broker-a", 8, 4, PERM_READ, 1)}
    assert routes.topic_queue_table["T2"] == {"broker-a": QueueData("broker-a", 2, 2, RW, 0)}
    assert routes.broker_addr_table == {
        "broker-a": BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"})
    }
    assert set(routes.broker_live_table) == {"10.0.0.1:10911"}
    route = routes.route("T1")
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 8, 4, PERM_READ, 1)]
    assert route.broker_datas == [BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"})]
    assert routes.topics() == ["T1", "T2"]


def test_re_registration_is_not_first(routes: RouteInfoManager) -> None:
    assert register(routes, "broker-a", "a:1", topic_list=topics("T")).first
    assert not register(routes, "broker-a", "a:1", topic_list=topics("T")).first


def test_cluster_table_groups_broker_names(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", cluster="C1")
    register(routes, "broker-a", "a:2", cluster="C1", broker_id=1)
    register(routes, "broker-b", "b:1", cluster="C1")
    register(routes, "broker-c", "c:1", cluster="C2")

    assert routes.cluster_addr_table == {"C1": {"broker-a", "broker-b"}, "C2": {"broker-c"}}


def test_slave_gets_master_address_and_ha_address(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:10911", ha="a:10912", topic_list=topics("T"))

    result = register(routes, "broker-a", "a2:10911", broker_id=1, ha="a2:10912", channel=2)

    assert result.master_addr == "a:10911"
    assert result.ha_server_addr == "a:10912"
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: "a:10911", 1: "a2:10911"}


def test_slave_without_live_master_gets_no_master(routes: RouteInfoManager) -> None:
    result = register(routes, "broker-a", "a2:10911", broker_id=1, ha="a2:10912")

    assert result.master_addr == ""
    assert result.ha_server_addr == ""


def test_slave_topics_do_not_change_queue_datas(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T", queues=4))

    register(
        routes,
        "broker-a",
        "a:2",
        broker_id=1,
        topic_list=topics("T", "ONLY_ON_SLAVE", queues=16),
        data_version=99,
    )

    assert routes.topics() == ["T"]
    assert routes.topic_queue_table["T"]["broker-a"].write_queue_nums == 4


def test_second_master_of_another_broker_adds_its_queue_datas(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T", "A_ONLY", queues=4))
    register(routes, "broker-b", "b:1", topic_list=topics("T", queues=8), channel=2)

    route = routes.route("T")
    assert route is not None
    assert route.queue_datas == [
        QueueData("broker-a", 4, 4, RW),
        QueueData("broker-b", 8, 8, RW),
    ]
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]
    assert served_by(routes, "A_ONLY") == {"broker-a"}


def test_changed_data_version_replaces_queue_datas(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T", "SHARED", "GONE"), data_version=1)
    register(routes, "broker-b", "b:1", topic_list=topics("SHARED"), channel=2)

    register(
        routes,
        "broker-a",
        "a:1",
        topic_list=[*topics("T", queues=16), *topics("SHARED")],
        data_version=2,
    )

    assert routes.topic_queue_table["T"]["broker-a"].write_queue_nums == 16
    # A topic the master dropped loses its queues; served by no one, it disappears.
    assert "GONE" not in routes.topic_queue_table
    assert routes.route("GONE") is None
    assert served_by(routes, "SHARED") == {"broker-a", "broker-b"}

    register(routes, "broker-a", "a:1", topic_list=topics("T", queues=16), data_version=3)

    assert served_by(routes, "SHARED") == {"broker-b"}
    assert routes.topics() == ["SHARED", "T"]


def test_same_data_version_does_not_rewrite_queue_datas(
    routes: RouteInfoManager, clock: FakeClock
) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T", "U", queues=4), data_version=7)
    clock.advance(30)

    register(routes, "broker-a", "a:1", topic_list=topics("T", queues=16), data_version=7)

    assert routes.topics() == ["T", "U"]
    assert routes.topic_queue_table["T"]["broker-a"].write_queue_nums == 4
    # The heartbeat itself is recorded.
    assert routes.broker_live_table["a:1"].last_update_timestamp == clock.now


def test_master_slave_switch_keeps_one_record_per_address(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), channel=1)
    register(routes, "broker-a", "a:2", broker_id=1, topic_list=topics("T"), channel=2)
    routes.unregister_broker(
        cluster="DefaultCluster", broker_addr="a:1", broker_name="broker-a", broker_id=0
    )

    # The slave is promoted: "first remove <1, a:2> then add <0, a:2>".
    register(routes, "broker-a", "a:2", broker_id=0, topic_list=topics("T"), channel=2)

    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: "a:2"}
    assert set(routes.broker_live_table) == {"a:2"}
    assert served_by(routes, "T") == {"broker-a"}

    # And demoted again: still one record for the address.
    register(routes, "broker-a", "a:2", broker_id=1, channel=2)
    assert routes.broker_addr_table["broker-a"].broker_addrs == {1: "a:2"}


def test_new_master_address_replaces_the_old_one(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), channel=1)

    register(routes, "broker-a", "a:9", topic_list=topics("T"), channel=2)

    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: "a:9"}
    assert set(routes.broker_live_table) == {"a:9"}
    # The old master's channel breaking later does not touch the new master.
    assert routes.on_channel_destroy(1) == []
    assert served_by(routes, "T") == {"broker-a"}


# ---------------------------------------------------------------- removal


def test_unregister_removes_broker_and_topics_only_it_served(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", cluster="C", topic_list=topics("A_ONLY", "SHARED"))
    register(routes, "broker-b", "b:1", cluster="C", topic_list=topics("SHARED"), channel=2)

    assert routes.unregister_broker(
        cluster="C", broker_addr="a:1", broker_name="broker-a", broker_id=0
    )

    assert "broker-a" not in routes.broker_addr_table
    assert "a:1" not in routes.broker_live_table
    assert routes.cluster_addr_table == {"C": {"broker-b"}}
    assert routes.route("A_ONLY") is None
    assert served_by(routes, "SHARED") == {"broker-b"}


def test_unregister_last_broker_removes_cluster(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", cluster="C", topic_list=topics("T"))

    routes.unregister_broker(cluster="C", broker_addr="a:1", broker_name="broker-a", broker_id=0)

    assert routes.cluster_addr_table == {}
    assert routes.broker_addr_table == {}
    assert routes.topic_queue_table == {}
    assert routes.broker_live_table == {}


def test_unregister_master_keeps_the_group_while_a_slave_lives(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), channel=1)
    register(routes, "broker-a", "a:2", broker_id=1, channel=2)

    routes.unregister_broker(
        cluster="DefaultCluster", broker_addr="a:1", broker_name="broker-a", broker_id=0
    )

    assert routes.broker_addr_table["broker-a"].broker_addrs == {1: "a:2"}
    route = routes.route("T")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {1: "a:2"}


def test_unregister_unknown_broker_is_a_no_op(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"))

    assert not routes.unregister_broker(
        cluster="DefaultCluster", broker_addr="z:1", broker_name="broker-z", broker_id=0
    )
    assert served_by(routes, "T") == {"broker-a"}


def test_channel_destroy_removes_every_broker_of_that_channel_only(
    routes: RouteInfoManager,
) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("A", "SHARED"), channel=1)
    register(routes, "broker-b", "b:1", topic_list=topics("B", "SHARED"), channel=1)
    register(routes, "broker-c", "c:1", topic_list=topics("C", "SHARED"), channel=2)
    register(routes, "broker-c", "c:2", broker_id=1, channel=3)

    gone = routes.on_channel_destroy(1)

    assert sorted(gone) == ["a:1", "b:1"]
    assert set(routes.broker_live_table) == {"c:1", "c:2"}
    assert set(routes.broker_addr_table) == {"broker-c"}
    assert routes.cluster_addr_table == {"DefaultCluster": {"broker-c"}}
    assert routes.topics() == ["C", "SHARED"]
    assert served_by(routes, "SHARED") == {"broker-c"}
    assert routes.on_channel_destroy(1) == []
    assert routes.on_channel_destroy(42) == []


def test_channel_destroy_of_slave_keeps_master_routes(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), channel=1)
    register(routes, "broker-a", "a:2", broker_id=1, channel=2)

    assert routes.on_channel_destroy(2) == ["a:2"]

    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: "a:1"}
    assert served_by(routes, "T") == {"broker-a"}


def test_scan_removes_silent_brokers_and_keeps_fresh_ones(
    routes: RouteInfoManager, clock: FakeClock
) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("A", "SHARED"), channel=1)
    register(routes, "broker-b", "b:1", topic_list=topics("B", "SHARED"), channel=2)
    clock.advance(100)
    register(routes, "broker-b", "b:1", topic_list=topics("B", "SHARED"), channel=2)

    clock.advance(20)  # a: silent exactly 120 s, not yet expired
    assert routes.scan_not_active_brokers(EXPIRY_MS) == []

    clock.advance(0.5)  # a: 120.5 s; b: 20.5 s
    assert routes.scan_not_active_brokers(EXPIRY_MS) == ["a:1"]

    assert set(routes.broker_live_table) == {"b:1"}
    assert set(routes.broker_addr_table) == {"broker-b"}
    assert routes.route("A") is None
    assert served_by(routes, "SHARED") == {"broker-b"}

    clock.advance(100)  # b: 120.5 s
    assert routes.scan_not_active_brokers(EXPIRY_MS) == ["b:1"]
    assert routes.topic_queue_table == {}
    assert routes.cluster_addr_table == {}


def test_expired_broker_registers_again_as_new(routes: RouteInfoManager, clock: FakeClock) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), data_version=5)
    clock.advance(121)
    routes.scan_not_active_brokers(EXPIRY_MS)

    result = register(routes, "broker-a", "a:1", topic_list=topics("T"), data_version=5)

    assert result.first
    assert served_by(routes, "T") == {"broker-a"}


def test_address_reused_by_another_broker_name_leaves_nothing_behind(
    routes: RouteInfoManager, clock: FakeClock
) -> None:
    """A host:port that comes back as another broker (restarted with a new name before its
    old stream was seen to break) must not leave the old name's route behind for ever.

    Fails today: ``_remove`` only cleans the broker name in ``_identity`` (the latest), so
    broker-a keeps ``x:1`` and topic A with no live entry that could ever expire.
    """
    register(routes, "broker-a", "x:1", topic_list=topics("A"), channel=1)
    register(routes, "broker-b", "x:1", topic_list=topics("B"), channel=2)

    routes.on_channel_destroy(2)
    routes.on_channel_destroy(1)
    clock.advance(1_000)
    routes.scan_not_active_brokers(EXPIRY_MS)

    assert routes.broker_addr_table == {}
    assert routes.topics() == []


# ---------------------------------------------------------------- routes and topics


def test_route_of_unknown_topic_is_none(routes: RouteInfoManager) -> None:
    assert routes.route("NOPE") is None
    register(routes, "broker-a", "a:1", topic_list=topics("T"))
    assert routes.route("NOPE") is None


def test_delete_topic_without_cluster_removes_it_everywhere(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", cluster="C1", topic_list=topics("T", "U"))
    register(routes, "broker-b", "b:1", cluster="C2", topic_list=topics("T"), channel=2)

    assert routes.delete_topic("T")

    assert routes.route("T") is None
    assert routes.topics() == ["U"]
    assert not routes.delete_topic("T")
    # Brokers are untouched.
    assert set(routes.broker_addr_table) == {"broker-a", "broker-b"}


def test_delete_topic_in_one_cluster_keeps_the_other_clusters_queues(
    routes: RouteInfoManager,
) -> None:
    register(routes, "broker-a", "a:1", cluster="C1", topic_list=topics("T"))
    register(routes, "broker-b", "b:1", cluster="C1", topic_list=topics("T"), channel=2)
    register(routes, "broker-c", "c:1", cluster="C2", topic_list=topics("T"), channel=3)

    assert routes.delete_topic("T", "C1")

    route = routes.route("T")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["broker-c"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-c"]

    assert routes.delete_topic("T", "C2")
    assert routes.route("T") is None
    assert routes.topics() == []


def test_delete_unknown_topic_returns_false(routes: RouteInfoManager) -> None:
    assert not routes.delete_topic("NOPE")
    assert not routes.delete_topic("NOPE", "C1")


# ---------------------------------------------------------------- deltas and heartbeats


def delta(
    routes: RouteInfoManager,
    name: str,
    addr: str,
    *,
    base: int,
    version: int,
    put: list[TopicConfig] | None = None,
    deleted: list[str] | None = None,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    channel: int | None = 1,
) -> RegisterResult:
    return routes.apply_delta(
        cluster=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr="",
        base_version=base,
        data_version=version,
        put=put or [],
        deleted=deleted or [],
        channel=channel,
    )


def heartbeat(
    routes: RouteInfoManager,
    name: str,
    addr: str,
    *,
    version: int,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    channel: int | None = 1,
) -> RegisterResult:
    return routes.heartbeat(
        cluster=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr="",
        data_version=version,
        channel=channel,
    )


def test_delta_puts_and_deletes_only_what_changed(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T", "U", "GONE"), data_version=3)
    register(routes, "broker-b", "b:1", topic_list=topics("GONE"), channel=2)

    result = delta(
        routes,
        "broker-a",
        "a:1",
        base=3,
        version=5,
        put=[*topics("NEW"), *topics("T", queues=16)],
        deleted=["GONE", "NEVER_HAD"],
    )

    assert not result.need_full and result.data_version == 5
    assert routes.topics() == ["GONE", "NEW", "T", "U"]
    assert routes.topic_queue_table["T"]["broker-a"].write_queue_nums == 16
    assert served_by(routes, "GONE") == {"broker-b"}
    assert routes.broker_live_table["a:1"].data_version == 5
    assert routes.held_table("a:1") == {t.topic_name: t for t in [
        *topics("NEW"), *topics("T", queues=16), *topics("U")
    ]}  # fmt: skip


def test_delta_or_heartbeat_of_an_unknown_broker_asks_for_the_full_table(
    routes: RouteInfoManager,
) -> None:
    result = delta(routes, "broker-a", "a:1", base=0, version=1, put=topics("T"))

    assert result.need_full and result.data_version == -1
    assert heartbeat(routes, "broker-a", "a:1", version=1).need_full
    # Nothing of it was applied: no broker, no route.
    assert routes.broker_addr_table == {} and routes.broker_live_table == {}
    assert routes.topics() == []


def test_delta_from_another_version_asks_for_the_full_table(
    routes: RouteInfoManager, clock: FakeClock
) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), data_version=4)
    clock.advance(10)

    result = delta(routes, "broker-a", "a:1", base=5, version=6, put=topics("LOST"))

    assert result.need_full and result.data_version == 4
    assert routes.topics() == ["T"]
    assert heartbeat(routes, "broker-a", "a:1", version=6).need_full
    # Not a sign of life: only what applies refreshes the broker.
    assert routes.broker_live_table["a:1"].last_update_timestamp == clock.now - 10

    full = register(routes, "broker-a", "a:1", topic_list=topics("T", "LOST"), data_version=6)

    assert not full.need_full and routes.topics() == ["LOST", "T"]
    assert not heartbeat(routes, "broker-a", "a:1", version=6).need_full


def test_unregistered_or_expired_broker_needs_the_full_table_again(
    routes: RouteInfoManager, clock: FakeClock
) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), data_version=2)
    routes.unregister_broker(
        cluster="DefaultCluster", broker_addr="a:1", broker_name="broker-a", broker_id=0
    )
    assert heartbeat(routes, "broker-a", "a:1", version=2).need_full

    register(routes, "broker-a", "a:1", topic_list=topics("T"), data_version=2)
    clock.advance(121)
    routes.scan_not_active_brokers(EXPIRY_MS)
    assert delta(routes, "broker-a", "a:1", base=2, version=3).need_full


def test_another_name_or_cluster_on_the_address_needs_the_full_table(
    routes: RouteInfoManager,
) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), data_version=2)

    assert heartbeat(routes, "broker-z", "a:1", version=2).need_full
    assert heartbeat(routes, "broker-a", "a:1", version=2, cluster="Other").need_full
    assert served_by(routes, "T") == {"broker-a"}


def test_heartbeat_refreshes_liveness_without_touching_topics(
    routes: RouteInfoManager, clock: FakeClock
) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), data_version=2)
    clock.advance(100)

    result = heartbeat(routes, "broker-a", "a:1", version=2)

    assert not result.need_full and not result.first
    assert routes.broker_live_table["a:1"].last_update_timestamp == clock.now
    clock.advance(100)  # 100 s after the heartbeat, 200 s after the registration
    assert routes.scan_not_active_brokers(EXPIRY_MS) == []
    assert served_by(routes, "T") == {"broker-a"}


def test_slave_deltas_keep_its_table_but_make_no_queue_data(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T"), data_version=1)
    register(routes, "broker-a", "a:2", broker_id=1, topic_list=topics("T"), channel=2)

    result = delta(
        routes, "broker-a", "a:2", base=1, version=2, put=topics("S"), broker_id=1, channel=2
    )

    assert not result.need_full and result.master_addr == "a:1"
    assert routes.topics() == ["T"]
    held = routes.held_table("a:2")
    assert held is not None and set(held) == {"S", "T"}


def test_slave_promoted_by_heartbeat_makes_queue_data_from_its_held_table(
    routes: RouteInfoManager,
) -> None:
    """A Raft leader registers as master id 0 with a heartbeat: no table is resent."""
    register(routes, "broker-a", "a:1", topic_list=topics("T", "OLD_ONLY"), data_version=1)
    register(
        routes,
        "broker-a",
        "a:2",
        broker_id=2,
        topic_list=topics("T", "S"),
        data_version=7,
        channel=2,
    )
    routes.on_channel_destroy(1)  # the old leader dies
    assert served_by(routes, "OLD_ONLY") == {"broker-a"}  # the group lives on in its slave

    result = heartbeat(routes, "broker-a", "a:2", version=7, broker_id=0, channel=2)

    assert not result.need_full
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: "a:2"}
    assert routes.topics() == ["S", "T"]


def test_new_master_address_by_delta_replaces_the_queue_data(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", "a:1", topic_list=topics("T", "A1_ONLY"), channel=1)
    register(routes, "broker-a", "a:2", broker_id=1, topic_list=topics("T"), channel=2)

    delta(routes, "broker-a", "a:2", base=1, version=2, put=topics("A2"), channel=2)

    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: "a:2"}
    assert routes.topics() == ["A2", "T"]
    assert "a:1" not in routes.broker_live_table


class NoScan(dict[str, dict[str, QueueData]]):
    """The topic table, refusing to be walked: what may not happen per registration."""

    def _refuse(self, *args: object) -> None:
        raise AssertionError("the whole topic table was scanned")

    __iter__ = keys = values = items = _refuse  # type: ignore[assignment]


def test_registration_never_walks_the_whole_topic_table(routes: RouteInfoManager) -> None:
    register(routes, "broker-big", "big:1", topic_list=topics(*(f"B{i}" for i in range(5000))))
    register(routes, "broker-a", "a:1", topic_list=topics("T", "U"), data_version=1, channel=2)
    routes.topic_queue_table = NoScan(routes.topic_queue_table)

    delta(routes, "broker-a", "a:1", base=1, version=2, put=topics("V"), deleted=["T"], channel=2)
    heartbeat(routes, "broker-a", "a:1", version=2, channel=2)
    register(routes, "broker-a", "a:1", topic_list=topics("U", "W"), data_version=3, channel=2)
    register(routes, "broker-c", "c:1", topic_list=topics("C"), channel=3)
    routes.delete_topic("C", "DefaultCluster")
    routes.unregister_broker(
        cluster="DefaultCluster", broker_addr="a:1", broker_name="broker-a", broker_id=0
    )
    routes.on_channel_destroy(3)

    table = dict(dict.items(routes.topic_queue_table))
    assert len(table) == 5000
    assert all(set(queues) == {"broker-big"} for queues in table.values())
