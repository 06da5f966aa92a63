"""The nameserver's request processor (RocketMQ's DefaultRequestProcessor): the remoting
requests of brokers (register, unregister, data version), clients (routes, cluster info,
topic lists) and admins (KV config, topic deletion), each answered from the route tables.

A broker's registrations come over its connection: the connection is its channel, and
closing it removes the broker at once. rocketq's brokers add to REGISTER_BROKER what a
stock nameserver ignores: ``registerKind`` (FULL, DELTA or HEARTBEAT), ``dataVersion``,
``baseVersion`` (DELTA) and ``maxPhyOffset``; the answer says ``needFull`` when a delta or
heartbeat did not apply, and the ``dataVersion`` held now.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from rocketq.common.exceptions import (
    MessageIllegalError,
    NoPermissionError,
    QueryNotFoundError,
    RocketqSystemError,
    TopicNotExistError,
)
from rocketq.common.names import check_topic_name
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.kv_config import KVConfigManager
from rocketq.nameserver.metrics import DELTA, FULL, HEARTBEAT, NameServerCounters
from rocketq.nameserver.route_info import RegisterResult, RouteInfoManager
from rocketq.remoting import fastjson
from rocketq.remoting.codes import MQVersion, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.register_body import (
    RegisterBody,
    RegisterBodyError,
    decode_body,
    decodes_inline,
)
from rocketq.remoting.route_data import ClusterInfo, cluster_info_body, route_body
from rocketq.remoting.transport import Connection, Handler

log = logging.getLogger(__name__)

# A refused registration is logged at most once in this many seconds per peer and reason
# (the peers remembered for it at most MAX_REFUSAL_PEERS, then forgotten at once).
REFUSAL_LOG_INTERVAL: Final = 60.0
MAX_REFUSAL_PEERS: Final = 1024

ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"
CHANNEL: Final = "channel"  # Connection.attrs key: the connection's channel number
# Registration bodies decoded at once off the event loop (each holds up to its table's
# cap, cluster.register_body.MAX_TABLE_BYTES at most); more wait their turn.
MAX_CONCURRENT_BODY_DECODES: Final = 2


def _flag(cmd: RemotingCommand, name: str) -> bool:
    return (cmd.ext or {}).get(name, "false").lower() == "true"


def _kind(cmd: RemotingCommand) -> str:
    """A registration's kind: FULL, DELTA or HEARTBEAT."""
    return (cmd.ext or {}).get("registerKind", "FULL").upper()


def _int(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    ext = cmd.ext or {}
    if name not in ext:
        if default is None:
            raise MessageIllegalError(f"the request header has no field {name!r}")
        return default
    try:
        return int(ext[name])
    except ValueError:
        raise MessageIllegalError(
            f"the header field {name} is {ext[name]!r}, not a number"
        ) from None


class NameServerProcessor:
    def __init__(
        self, config: NameServerConfig, routes: RouteInfoManager, kv: KVConfigManager
    ) -> None:
        self.config = config
        self.routes = routes
        self.kv = kv
        self.counters = NameServerCounters()
        self._refusals_logged: dict[tuple[str, str], float] = {}
        self._channels = itertools.count(1)
        self._connections: dict[int, Connection] = {}
        self._decodes: asyncio.Semaphore | None = None
        # With authentication on: who a registrant is (its verified access key, or its
        # client certificate's name under mTLS), and which identity holds each broker name
        # while it has a live member.
        self.identity_of: Callable[[Connection, RemotingCommand], str | None] | None = None
        self.owners: dict[str, str] = {}

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.REGISTER_BROKER: self.register_broker_request,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.topic_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.PUT_KV_CONFIG: self.put_kv,
            RequestCode.GET_KV_CONFIG: self.get_kv,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.kv_list,
        }

    # -- channels ----------------------------------------------------------------------

    def channel_of(self, conn: Connection) -> int:
        channel = conn.attrs.get(CHANNEL)
        if channel is None:
            channel = conn.attrs[CHANNEL] = next(self._channels)
            self._connections[channel] = conn
        return int(channel)

    def connection_closed(self, conn: Connection) -> None:
        """A broker's connection closed: its routes go at once."""
        channel = conn.attrs.get(CHANNEL)
        if channel is not None:
            self._connections.pop(channel, None)
            self.routes.on_channel_destroy(channel)

    def close_channel(self, channel: int) -> None:
        """End an expired broker's connection (it registers anew when it notices)."""
        conn = self._connections.pop(channel, None)
        if conn is not None:
            conn.close()

    # -- brokers -----------------------------------------------------------------------

    def register_broker_request(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand | None]:
        """REGISTER_BROKER: a small table is decoded here, a large one (or a bomb claiming
        to be) in a thread, at most MAX_CONCURRENT_BODY_DECODES at once, so that inflating
        it never holds the loop."""
        if _kind(cmd) == "HEARTBEAT" or decodes_inline(
            cmd.body,
            compressed=_flag(cmd, "compressed"),
            ceiling=self.config.register_body_max_inflated_bytes,
        ):
            return self.register_broker(conn, cmd)
        return self._register_off_loop(conn, cmd)

    async def _register_off_loop(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand | None:
        self._check_names(cmd)
        if self._decodes is None:
            self._decodes = asyncio.Semaphore(MAX_CONCURRENT_BODY_DECODES)
        async with self._decodes:
            try:
                body = await asyncio.to_thread(self._decode, cmd)
            except RegisterBodyError as exc:
                raise self._refused(conn, cmd, exc) from None
        if not conn.is_open:
            return None  # the broker left while its body was decoded: nothing to hold
        return self.register_broker(conn, cmd, body)

    def _check_names(self, cmd: RemotingCommand) -> tuple[str, str]:
        name, addr = cmd.field("brokerName"), cmd.field("brokerAddr")
        if not name or not addr:
            raise MessageIllegalError("brokerName and brokerAddr are required")
        return name, addr

    def _claim(self, conn: Connection, cmd: RemotingCommand, name: str) -> None:
        """With authentication on, a broker name belongs to the identity that registered
        it first for as long as any member of it is registered: another identity's
        registration or unregistration of it is refused."""
        if self.identity_of is None:
            return
        who = self.identity_of(conn, cmd) or ""
        owner = self.owners.get(name)
        if owner is not None and name not in self.routes.broker_addr_table:
            del self.owners[name]  # every member gone: the name is free again
            owner = None
        if owner is not None and owner != who:
            self.counters.registrations_refused["identity"] += 1
            raise NoPermissionError(
                f"broker name {name!r} is registered by another identity; {who or 'this peer'} "
                "may not register or unregister it"
            )
        self.owners[name] = who

    def _decode(self, cmd: RemotingCommand) -> RegisterBody:
        return decode_body(
            cmd.body,
            compressed=_flag(cmd, "compressed"),
            crc=_int(cmd, "bodyCrc32", 0),
            ceiling=self.config.register_body_max_inflated_bytes,
        )

    def _refused(
        self, conn: Connection, cmd: RemotingCommand, exc: RegisterBodyError
    ) -> RocketqSystemError:
        """Count a registration refused for its body and log it at most once a minute per
        peer and reason; the error its broker is answered with."""
        name, addr = cmd.field("brokerName"), cmd.field("brokerAddr")
        refused = self.counters.registrations_refused
        refused[exc.reason] = refused.get(exc.reason, 0) + 1
        now = time.monotonic()
        key = (conn.address or conn.peer, exc.reason)
        if now - self._refusals_logged.get(key, -REFUSAL_LOG_INTERVAL) >= REFUSAL_LOG_INTERVAL:
            if len(self._refusals_logged) >= MAX_REFUSAL_PEERS:
                self._refusals_logged.clear()
            self._refusals_logged[key] = now
            log.warning(
                "refused the registration of broker %s at %s from %s [%s]: %s "
                "(once a minute per peer and reason)",
                name,
                addr,
                conn.peer or "a peer",
                exc.reason,
                exc,
            )
        return RocketqSystemError(f"broker {name}: {exc}")

    def register_broker(
        self, conn: Connection, cmd: RemotingCommand, decoded: RegisterBody | None = None
    ) -> RemotingCommand:
        """REGISTER_BROKER with its body decoded (``decoded``) or to decode here."""
        name, addr = self._check_names(cmd)
        self._claim(conn, cmd, name)
        kind = _kind(cmd)
        who = {
            "cluster": cmd.field("clusterName"),
            "broker_addr": addr,
            "broker_name": name,
            "broker_id": _int(cmd, "brokerId"),
            "ha_server_addr": (cmd.ext or {}).get("haServerAddr", ""),
            "channel": self.channel_of(conn),
            "max_phy_offset": _int(cmd, "maxPhyOffset", 0),
        }
        result: RegisterResult
        if kind == "HEARTBEAT":
            self.counters.registrations[HEARTBEAT] += 1
            result = self.routes.heartbeat(data_version=_int(cmd, "dataVersion"), **who)  # type: ignore[arg-type]
        else:
            if decoded is not None:
                body = decoded
            else:
                try:
                    body = self._decode(cmd)
                except RegisterBodyError as exc:
                    raise self._refused(conn, cmd, exc) from None
            version = _int(cmd, "dataVersion", body.data_version)
            if kind == "DELTA":
                self.counters.registrations[DELTA] += 1
                result = self.routes.apply_delta(
                    base_version=_int(cmd, "baseVersion"),
                    data_version=version,
                    put=body.topics,
                    deleted=body.deleted,
                    **who,  # type: ignore[arg-type]
                )
            else:
                self.counters.registrations[FULL] += 1
                result = self.routes.register_broker(
                    topics=body.topics,
                    data_version=version,
                    **who,  # type: ignore[arg-type]
                )
        ext = {"dataVersion": str(result.data_version)}
        if result.master_addr:
            ext["masterAddr"] = result.master_addr
            ext["haServerAddr"] = result.ha_server_addr
        if result.need_full:
            ext["needFull"] = "true"
        table = self.kv.namespace(ORDER_TOPIC_CONFIG)
        reply = fastjson.dumps({"table": table}) if table else None
        return cmd.response(ResponseCode.SUCCESS, ext, reply)

    def unregister_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self._claim(conn, cmd, cmd.field("brokerName"))
        self.routes.unregister_broker(
            cluster=cmd.field("clusterName"),
            broker_addr=cmd.field("brokerAddr"),
            broker_name=cmd.field("brokerName"),
            broker_id=_int(cmd, "brokerId"),
        )
        return cmd.response(ResponseCode.SUCCESS)

    def query_data_version(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Whether the broker's table version differs from the one held here."""
        addr = cmd.field("brokerAddr")
        live = self.routes.broker_live_table.get(addr)
        try:
            doc = fastjson.loads(bytes(cmd.body or b"{}"))
            counter = int(doc.get("counter", -1)) if isinstance(doc, dict) else -1
        except (ValueError, TypeError):
            counter = -1
        changed = live is None or live.data_version != counter
        body = None
        if live is not None:
            body = fastjson.dumps({"counter": live.data_version, "timestamp": 0})
            if not changed:
                self.routes.touch(addr)
        return cmd.response(ResponseCode.SUCCESS, {"changed": "true" if changed else "false"}, body)

    # -- clients -----------------------------------------------------------------------

    def route(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC; a topic name that is not valid is MessageIllegalError."""
        topic = check_topic_name(cmd.field("topic"))
        route = self.routes.route(topic)
        if route is None:
            raise TopicNotExistError(
                f"no route for topic {topic!r} on this nameserver: the topic does not exist "
                "or no broker serving it is alive; create it with `rocketq admin update-topic`"
            )
        if self.config.order_message_enable:
            route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, topic) or ""
        standard = cmd.version >= MQVersion.V4_9_4 or _flag(cmd, "acceptStandardJsonOnly")
        return cmd.response(ResponseCode.SUCCESS, None, route_body(route, standard=standard))

    def cluster_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        r = self.routes
        info = ClusterInfo(
            dict(r.broker_addr_table),
            {c: sorted(names) for c, names in r.cluster_addr_table.items()},
        )
        return cmd.response(ResponseCode.SUCCESS, None, cluster_info_body(info))

    def topic_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(
            ResponseCode.SUCCESS, None, fastjson.dumps({"topicList": self.routes.topics()})
        )

    def topics_by_cluster(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        cluster = cmd.field("cluster")
        names = self.routes.cluster_addr_table.get(cluster, set())
        topics = [t for t, queues in self.routes.topic_queue_table.items() if names & queues.keys()]
        return cmd.response(
            ResponseCode.SUCCESS, None, fastjson.dumps({"topicList": sorted(topics)})
        )

    def delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = check_topic_name(cmd.field("topic"))
        self.routes.delete_topic(topic, (cmd.ext or {}).get("clusterName", ""))
        return cmd.response(ResponseCode.SUCCESS)

    # -- KV config ---------------------------------------------------------------------

    async def put_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        namespace, key = cmd.field("namespace"), cmd.field("key")
        if not namespace or not key:
            raise MessageIllegalError("KV config needs a namespace and a key")
        await asyncio.to_thread(self.kv.put, namespace, key, cmd.field("value"))
        return cmd.response(ResponseCode.SUCCESS)

    def get_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        namespace, key = cmd.field("namespace"), cmd.field("key")
        value = self.kv.get(namespace, key)
        if value is None:
            raise QueryNotFoundError(f"No config item, Namespace: {namespace} Key: {key}")
        return cmd.response(ResponseCode.SUCCESS, {"value": value})

    async def delete_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        await asyncio.to_thread(self.kv.delete, cmd.field("namespace"), cmd.field("key"))
        return cmd.response(ResponseCode.SUCCESS)

    def kv_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        namespace = cmd.field("namespace")
        table = self.kv.namespace(namespace)
        if not table:
            raise QueryNotFoundError(f"No config item, Namespace: {namespace}")
        return cmd.response(ResponseCode.SUCCESS, None, fastjson.dumps({"table": table}))
