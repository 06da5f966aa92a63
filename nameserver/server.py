"""The nameserver process: the route tables behind a gRPC ``NameServer`` service."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypedDict

import grpc

from rocketq.cluster.errors import RocketqError, TopicNotExistError
from rocketq.cluster.metrics_server import MetricsServer
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.kv_config import KVConfigManager
from rocketq.nameserver.metrics import DELTA, FULL, HEARTBEAT, NameServerCounters, registry_for
from rocketq.nameserver.register_body import RegisterBodyError, full_table, topic_configs
from rocketq.nameserver.route_info import RouteInfoManager

log = logging.getLogger(__name__)

OK = pb.Status(code=0)
# A full registration of a broker with very many topics is one large message.
SERVER_OPTIONS = [
    ("grpc.so_reuseport", 0),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


def error_status(exc: RocketqError) -> pb.Status:
    return pb.Status(code=exc.code, message=str(exc))


class _Registrant(TypedDict):
    """What every kind of registration says of the broker (RouteInfoManager's arguments)."""

    cluster: str
    broker_addr: str
    broker_name: str
    broker_id: int
    ha_server_addr: str
    data_version: int
    channel: int | None
    max_phy_offset: int


class NameServerService(pb_grpc.NameServerServicer):
    def __init__(self, config: NameServerConfig, routes: RouteInfoManager, kv: KVConfigManager):
        self.config = config
        self.routes = routes
        self.kv = kv
        self._channels = itertools.count(1)
        self._closers: dict[int, Callable[[], None]] = {}
        self.counters = NameServerCounters()

    async def BrokerChannel(
        self, request_iterator: AsyncIterator[pb.BrokerChannelRequest], context: object
    ) -> AsyncIterator[pb.RegisterBrokerResult]:
        channel = next(self._channels)
        out: asyncio.Queue[pb.RegisterBrokerResult | None] = asyncio.Queue()

        async def reader() -> None:
            try:
                async for req in request_iterator:
                    kind = req.WhichOneof("kind")
                    if kind == "register":
                        out.put_nowait(self._register(req.register, channel))
                    elif kind == "unregister":
                        u = req.unregister
                        self.routes.unregister_broker(
                            cluster=u.cluster_name,
                            broker_addr=u.broker_addr,
                            broker_name=u.broker_name,
                            broker_id=u.broker_id,
                        )
                        out.put_nowait(pb.RegisterBrokerResult(status=OK))
            finally:
                out.put_nowait(None)

        self._closers[channel] = lambda: out.put_nowait(None)
        read_task = asyncio.ensure_future(reader())
        try:
            while (item := await out.get()) is not None:
                yield item
        finally:
            read_task.cancel()
            self._closers.pop(channel, None)
            self.routes.on_channel_destroy(channel)

    def close_channel(self, channel: int) -> None:
        """End a broker's stream (it expired): the broker sees it and registers anew."""
        close = self._closers.get(channel)
        if close is not None:
            close()

    def _register(self, r: pb.RegisterBrokerRequest, channel: int) -> pb.RegisterBrokerResult:
        if not r.broker_name or not r.broker_addr:
            return pb.RegisterBrokerResult(
                status=pb.Status(code=13, message="broker_name and broker_addr are required")
            )
        who: _Registrant = {
            "cluster": r.cluster_name,
            "broker_addr": r.broker_addr,
            "broker_name": r.broker_name,
            "broker_id": r.broker_id,
            "ha_server_addr": r.ha_server_addr,
            "data_version": r.data_version,
            "channel": channel,
            "max_phy_offset": r.max_phy_offset,
        }
        kind = {pb.REGISTER_DELTA: DELTA, pb.REGISTER_HEARTBEAT: HEARTBEAT}.get(r.kind, FULL)
        self.counters.registrations[kind] += 1
        if r.kind == pb.REGISTER_DELTA:
            result = self.routes.apply_delta(
                base_version=r.base_version,
                put=topic_configs(r.topics),
                deleted=list(r.deleted_topics),
                **who,
            )
        elif r.kind == pb.REGISTER_HEARTBEAT:
            result = self.routes.heartbeat(**who)
        else:
            try:
                topics = full_table(r)
            except RegisterBodyError as exc:
                log.warning(
                    "refused the full registration of broker %s at %s: %s",
                    r.broker_name,
                    r.broker_addr,
                    exc,
                )
                return pb.RegisterBrokerResult(
                    status=pb.Status(code=13, message=f"broker {r.broker_name}: {exc}")
                )
            result = self.routes.register_broker(topics=topics, **who)
        return pb.RegisterBrokerResult(
            status=OK,
            master_addr=result.master_addr,
            ha_server_addr=result.ha_server_addr,
            need_full=result.need_full,
            data_version=result.data_version,
        )

    async def UnregisterBroker(
        self, request: pb.UnregisterBrokerRequest, context: object
    ) -> pb.Status:
        self.routes.unregister_broker(
            cluster=request.cluster_name,
            broker_addr=request.broker_addr,
            broker_name=request.broker_name,
            broker_id=request.broker_id,
        )
        return OK

    async def GetRouteInfoByTopic(
        self, request: pb.GetRouteRequest, context: object
    ) -> pb.GetRouteResponse:
        route = self.routes.route(request.topic)
        if route is None:
            return pb.GetRouteResponse(
                status=error_status(
                    TopicNotExistError(
                        f"no route for topic {request.topic!r} on this nameserver: the topic "
                        "does not exist or no broker serving it is alive; create it with "
                        "`rocketq admin update-topic`"
                    )
                )
            )
        out = pb.TopicRouteData(
            queue_datas=[
                pb.QueueData(
                    broker_name=q.broker_name,
                    read_queue_nums=q.read_queue_nums,
                    write_queue_nums=q.write_queue_nums,
                    perm=q.perm,
                    topic_sys_flag=q.topic_sys_flag,
                )
                for q in route.queue_datas
            ],
            broker_datas=[
                pb.BrokerData(
                    cluster=b.cluster, broker_name=b.broker_name, broker_addrs=b.broker_addrs
                )
                for b in route.broker_datas
            ],
        )
        if self.config.order_message_enable:
            out.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, request.topic) or ""
        return pb.GetRouteResponse(status=OK, route=out)

    async def GetBrokerClusterInfo(self, request: pb.Empty, context: object) -> pb.ClusterInfo:
        info = pb.ClusterInfo()
        for name, data in self.routes.broker_addr_table.items():
            info.broker_addr_table[name].CopyFrom(
                pb.BrokerData(
                    cluster=data.cluster, broker_name=name, broker_addrs=data.broker_addrs
                )
            )
        for cluster, names in self.routes.cluster_addr_table.items():
            info.cluster_addr_table[cluster].names.extend(sorted(names))
        for addr, live in self.routes.broker_live_table.items():
            info.live.append(
                pb.BrokerLiveData(
                    broker_addr=addr,
                    ha_server_addr=live.ha_server_addr,
                    max_phy_offset=live.max_phy_offset,
                    last_update_timestamp=int(live.last_update_wall * 1000),
                )
            )
        return info

    async def GetAllTopicList(self, request: pb.Empty, context: object) -> pb.TopicList:
        return pb.TopicList(topics=self.routes.topics())

    async def PutKVConfig(self, request: pb.KVConfigRequest, context: object) -> pb.Status:
        if not request.namespace or not request.key:
            return pb.Status(code=13, message="KV config needs a namespace and a key")
        await asyncio.to_thread(self.kv.put, request.namespace, request.key, request.value)
        return OK

    async def GetKVConfig(
        self, request: pb.KVConfigRequest, context: object
    ) -> pb.KVConfigResponse:
        value = self.kv.get(request.namespace, request.key)
        if value is None:
            return pb.KVConfigResponse(
                status=pb.Status(code=22, message=f"no KV config {request.namespace}/{request.key}")
            )
        return pb.KVConfigResponse(status=OK, value=value)

    async def DeleteKVConfig(self, request: pb.KVConfigRequest, context: object) -> pb.Status:
        await asyncio.to_thread(self.kv.delete, request.namespace, request.key)
        return OK

    async def DeleteTopicInNamesrv(
        self, request: pb.DeleteTopicRequest, context: object
    ) -> pb.Status:
        self.routes.delete_topic(request.topic, request.cluster_name)
        return OK


class NameServer:
    """One nameserver: ``await start()``, ``port``, ``await stop()``."""

    def __init__(self, config: NameServerConfig) -> None:
        self.config = config
        self.routes = RouteInfoManager()
        self.kv = KVConfigManager(Path(config.kv_config_path))
        self.service = NameServerService(config, self.routes, self.kv)
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self._scan_task: asyncio.Task[None] | None = None
        self.serving = False
        self.metrics_server: MetricsServer | None = None
        if config.metrics_port:
            registry = registry_for(
                self.routes,
                self.service.counters,
                lambda: f"{config.bind_address}:{self.port}",
                lambda: self.serving,
            )
            self.metrics_server = MetricsServer(
                config.metrics_bind_address or config.bind_address,
                config.metrics_port,
                registry,
                self._readiness,
                what="nameserver",
            )

    def _readiness(self) -> tuple[bool, str]:
        return (True, "") if self.serving else (False, "the nameserver is not serving")

    async def start(self) -> None:
        if self.metrics_server is not None:
            await self.metrics_server.start()
        self.kv.load()
        self.server = grpc.aio.server(options=SERVER_OPTIONS)
        pb_grpc.add_NameServerServicer_to_server(self.service, self.server)  # type: ignore[no-untyped-call]
        addr = f"{self.config.bind_address}:{self.config.listen_port}"
        try:
            self.port = self.server.add_insecure_port(addr)
        except RuntimeError as exc:
            raise OSError(
                f"cannot listen on {addr} ({exc}); is another nameserver running there? "
                "pick another --port"
            ) from None
        if self.port == 0:
            raise OSError(
                f"cannot listen on {self.config.bind_address}:{self.config.listen_port}; "
                "is another nameserver running there? pick another --port"
            )
        await self.server.start()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan())
        self.serving = True
        log.info(
            "The Name Server boot success. listening on %s:%d", self.config.bind_address, self.port
        )

    async def _scan(self) -> None:
        interval = self.config.scan_not_active_broker_interval / 1000
        while True:
            await asyncio.sleep(interval)
            channels = {a: live.channel for a, live in self.routes.broker_live_table.items()}
            expired = self.routes.scan_not_active_brokers(self.config.broker_channel_expired_time)
            self.service.counters.expiries += len(expired)
            for addr in expired:
                # As RocketMQ closes an expired broker's channel.
                channel = channels.get(addr)
                if channel is not None:
                    self.service.close_channel(channel)

    async def stop(self) -> None:
        self.serving = False
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
        if self.server is not None:
            await self.server.stop(grace=1.0)
        if self.metrics_server is not None:
            await self.metrics_server.stop()
