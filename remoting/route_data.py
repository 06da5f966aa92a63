"""Topic routes and cluster info as the nameserver gives them, and their JSON bodies as
RocketMQ 4.9 writes them (GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO).

A route body in the default fastjson form writes broker ids as bare numbers
(``"brokerAddrs":{0:"10.0.0.1:10911"}``); clients at 4.9.4 or later (and ours) ask for the
standard form, with the ids quoted. Cluster info always goes in the default form. Reading
accepts both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.common.exceptions import RocketqSystemError
from rocketq.remoting import fastjson


@dataclass(slots=True)
class QueueData:
    """The queues one broker (a master and its slaves) keeps for a topic."""

    broker_name: str
    """The broker group holding the queues."""
    read_queue_nums: int
    """How many queues consumers read (ids 0 to read_queue_nums - 1)."""
    write_queue_nums: int
    """How many queues producers write (ids 0 to write_queue_nums - 1)."""
    perm: int
    """The topic's permission bits on that broker: 4 readable, 2 writable, 1 inherited."""
    topic_sys_flag: int = 0
    """RocketMQ's topic system flag (unit and unit-sub bits); 0 for an ordinary topic."""


@dataclass(slots=True)
class BrokerData:
    """One broker group of a cluster and the address of each of its members."""

    cluster: str
    """The cluster the group belongs to."""
    broker_name: str
    """The group's name, shared by its master and slaves."""
    broker_addrs: dict[int, str] = field(default_factory=dict)
    """Broker id (0 the master) -> "host:port" of its remoting port."""


@dataclass(slots=True)
class TopicRouteData:
    """Where a topic lives: its queues on each broker and those brokers' addresses."""

    queue_datas: list[QueueData] = field(default_factory=list)
    """The topic's queues, one entry per broker group."""
    broker_datas: list[BrokerData] = field(default_factory=list)
    """The broker groups that hold the topic, with their members' addresses."""
    order_topic_conf: str = ""
    """The ordered-topic config ("brokerName:queueNums;..."), empty for other topics."""


@dataclass(slots=True)
class ClusterInfo:
    """Every broker group the nameserver knows and the cluster each belongs to."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    """Broker group name -> the group."""
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)
    """Cluster name -> the names of its broker groups."""


class RouteBodyError(RocketqSystemError, ValueError):
    """Raised when a route or cluster-info body does not have RocketMQ's shape: it is not
    JSON, or a field has the wrong type or range. A nameserver's answer the client cannot
    read, so a RocketqSystemError; a ValueError as every undecodable text is in Python."""


def _broker_doc(b: BrokerData, standard: bool) -> dict[str, Any]:
    addrs: dict[Any, str] = (
        {str(i): a for i, a in sorted(b.broker_addrs.items())}
        if standard
        else dict(sorted(b.broker_addrs.items()))
    )
    return {"brokerAddrs": addrs, "brokerName": b.broker_name, "cluster": b.cluster}


def _queue_doc(q: QueueData) -> dict[str, Any]:
    return {
        "brokerName": q.broker_name,
        "perm": q.perm,
        "readQueueNums": q.read_queue_nums,
        "topicSysFlag": q.topic_sys_flag,
        "writeQueueNums": q.write_queue_nums,
    }


def route_body(route: TopicRouteData, *, standard: bool) -> bytes:
    """The TopicRouteData JSON; ``standard``: broker ids quoted (clients >= 4.9.4)."""
    doc: dict[str, Any] = {
        "brokerDatas": [_broker_doc(b, standard) for b in route.broker_datas],
        "filterServerTable": {},
    }
    if route.order_topic_conf:
        doc["orderTopicConf"] = route.order_topic_conf
    doc["queueDatas"] = [_queue_doc(q) for q in route.queue_datas]
    return fastjson.dumps(doc)


def cluster_info_body(info: ClusterInfo) -> bytes:
    """The ClusterInfo JSON, in fastjson's default form (broker ids as bare numbers)."""
    return fastjson.dumps(
        {
            "brokerAddrTable": {
                name: _broker_doc(b, False) for name, b in info.broker_addr_table.items()
            },
            "clusterAddrTable": {c: list(names) for c, names in info.cluster_addr_table.items()},
        }
    )


_INT_MIN: Final = -(1 << 31)
_INT_MAX: Final = (1 << 31) - 1


def _int(doc: dict[str, Any], key: str, default: int = 0) -> int:
    """A Java int field: a number, or a string of one, inside the int range."""
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise RouteBodyError(f"{key} is {_show(value)}, not a number")
    try:
        number = int(value)
    except ValueError:
        raise RouteBodyError(f"{key} is {_show(value)}, not a number") from None
    if not _INT_MIN <= number <= _INT_MAX:
        raise RouteBodyError(f"{key} is {_show(value)}, outside a Java int's range")
    return number


def _show(value: Any) -> str:
    """A value for an error message, cut short (a hostile body may be megabytes)."""
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 256 else "a huge int"
    return text if len(text) <= 60 else text[:57] + "..."


def _list(doc: dict[str, Any], key: str) -> list[Any]:
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise RouteBodyError(f"{key} is {_show(value)}, not an array")
    return value


def _broker_data(doc: Any) -> BrokerData:
    if not isinstance(doc, dict):
        raise RouteBodyError(f"a broker data is {type(doc).__name__}, not an object")
    addrs = doc.get("brokerAddrs") or {}
    if not isinstance(addrs, dict):
        raise RouteBodyError("brokerAddrs is not an object")
    try:
        parsed = {int(i): str(a) for i, a in addrs.items()}
    except (TypeError, ValueError):
        raise RouteBodyError(
            f"brokerAddrs has a key that is not a broker id: {_show(addrs)}"
        ) from None
    return BrokerData(str(doc.get("cluster", "")), str(doc.get("brokerName", "")), parsed)


def _load(body: bytes | memoryview, what: str) -> dict[str, Any]:
    try:
        doc = fastjson.loads(bytes(body))
    except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested too deep
        raise RouteBodyError(f"the {what} body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RouteBodyError(f"the {what} body is not an object")
    return doc


def parse_route(body: bytes | memoryview) -> TopicRouteData:
    """A GET_ROUTEINFO_BY_TOPIC body, either form; RouteBodyError when it is not one."""
    doc = _load(body, "route")
    queues = []
    for q in _list(doc, "queueDatas"):
        if not isinstance(q, dict):
            raise RouteBodyError("a queue data is not an object")
        queues.append(
            QueueData(
                str(q.get("brokerName", "")),
                _int(q, "readQueueNums"),
                _int(q, "writeQueueNums"),
                _int(q, "perm"),
                _int(q, "topicSysFlag", _int(q, "topicSynFlag")),
            )
        )
    brokers = [_broker_data(b) for b in _list(doc, "brokerDatas")]
    return TopicRouteData(queues, brokers, str(doc.get("orderTopicConf") or ""))


def parse_cluster_info(body: bytes | memoryview) -> ClusterInfo:
    """A GET_BROKER_CLUSTER_INFO body, either form; RouteBodyError when it is not one."""
    doc = _load(body, "cluster info")
    table = doc.get("brokerAddrTable") or {}
    clusters = doc.get("clusterAddrTable") or {}
    if not isinstance(table, dict) or not isinstance(clusters, dict):
        raise RouteBodyError("brokerAddrTable and clusterAddrTable must be objects")
    for c, names in clusters.items():
        if not isinstance(names, list):
            raise RouteBodyError(f"clusterAddrTable[{c!r}] is {_show(names)}, not an array")
    return ClusterInfo(
        {str(name): _broker_data(b) for name, b in table.items()},
        {str(c): sorted(str(n) for n in names) for c, names in clusters.items()},
    )
