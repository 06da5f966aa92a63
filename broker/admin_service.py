"""The broker's gRPC ``BrokerAdmin`` service: topics, groups, offsets, stats, queries."""

from __future__ import annotations

import time
from dataclasses import asdict, fields
from importlib.metadata import PackageNotFoundError, version

from rocketq.broker.service import OK, ServiceHost, status_of
from rocketq.broker.slave_sync import sync_data
from rocketq.broker.subscription_group import SubscriptionGroupConfig, check_group
from rocketq.cluster.errors import QueryNotFoundError, RocketqSystemError, TopicNotExistError
from rocketq.cluster.message import TopicConfig
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc


def topic_data(t: TopicConfig) -> pb.TopicConfigData:
    return pb.TopicConfigData(
        topic_name=t.topic_name,
        read_queue_nums=t.read_queue_nums,
        write_queue_nums=t.write_queue_nums,
        perm=t.perm,
        topic_sys_flag=t.topic_sys_flag,
        order=t.order,
    )


def broker_version() -> str:
    try:
        return version("rocketq")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def config_table(*configs: object) -> dict[str, str]:
    """The fields of config dataclasses as broker.toml would spell their values."""
    table: dict[str, str] = {}
    for config in configs:
        for f in fields(config):  # type: ignore[arg-type]
            value = getattr(config, f.name)
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, (list, tuple)):
                text = ";".join(str(v) for v in value)
            else:
                text = str(value)
            table[f.name] = text
    return table


def runtime_table(b: ServiceHost) -> dict[str, str]:
    """The broker's runtime figures (GetBrokerRuntimeInfo / GET_BROKER_RUNTIME_INFO)."""
    s = b.store
    table = {
        "brokerName": b.config.broker_name,
        "brokerId": str(b.config.broker_id),
        "brokerRole": b.config.broker_role,
        "brokerAddr": b.config.broker_addr,
        "commitLogMinOffset": str(s.min_phy_offset),
        "commitLogMaxOffset": str(s.max_phy_offset),
        "dispatchBehindBytes": str(s.dispatch_behind_bytes),
        "flushedOffset": str(s.flusher.flushed[0]),
        "bootTimestamp": str(int(b.boot_time * 1000)),
        "runtimeSeconds": str(int(time.time() - b.boot_time)),
        "sendsInFlight": str(b.flow.in_flight),
        "sendsRejected": str(b.flow.rejected),
        "pullsHeld": str(b.holds.held_count),
        "pullsFound": str(b.pull.found),
        "topics": str(len(b.topics.topics)),
        "topicCount": str(len(b.topics.topics)),
        "consumerGroups": str(len(b.consumers.groups)),
        "brokerVersionDesc": f"rocketq {broker_version()}",
    }
    table.update(b.stats.runtime_info())
    table.update(b.registration.runtime_info())
    if b.ha_master is not None:
        table["haSlaves"] = str(len(b.ha_master.slaves))
        table["haSlaveAckOffset"] = str(b.ha_master.best_ack)
        if b.ha_master.slaves:  # no slave, no lag: lag_bytes() would give the whole log
            table["haLagBytes"] = str(b.ha_master.lag_bytes())
    if b.raft is not None:
        table.update(b.raft.runtime_info())
    if b.ha_slave is not None:
        table["haMaster"] = b.ha_slave.connected_to
        table["haMasterMaxOffset"] = str(b.ha_slave.master_max_offset)
        table["haLagBytes"] = str(b.ha_slave.lag_bytes())
    return table


class BrokerAdminService(pb_grpc.BrokerAdminServicer):
    def __init__(self, broker: ServiceHost) -> None:
        self.b = broker

    async def UpdateAndCreateTopic(self, request: pb.TopicConfigData, context: object) -> pb.Status:
        try:
            self.b.topics.update(
                TopicConfig(
                    request.topic_name,
                    request.read_queue_nums,
                    request.write_queue_nums,
                    request.perm or 6,
                    request.topic_sys_flag,
                    request.order,
                )
            )
        except Exception as exc:
            return status_of(exc)
        return OK

    async def DeleteTopic(self, request: pb.TopicRequest, context: object) -> pb.Status:
        if not self.b.topics.delete(request.topic):
            return status_of(TopicNotExistError(f"topic {request.topic!r} does not exist here"))
        self.b.offsets.remove_topic(request.topic)
        return OK

    async def GetAllTopicConfig(
        self, request: pb.Empty, context: object
    ) -> pb.TopicConfigsResponse:
        return pb.TopicConfigsResponse(
            status=OK,
            topics=[topic_data(t) for _, t in sorted(self.b.topics.topics.items())],
        )

    async def GetTopicStats(
        self, request: pb.TopicRequest, context: object
    ) -> pb.TopicStatsResponse:
        config = self.b.topics.get(request.topic)
        if config is None:
            err = TopicNotExistError(f"topic {request.topic!r} does not exist on this broker")
            return pb.TopicStatsResponse(status=status_of(err))
        store = self.b.store
        queues = []
        for qid in range(max(config.read_queue_nums, config.write_queue_nums)):
            hi = store.max_offset_in_queue(request.topic, qid)
            last = store.store_time_in_queue(request.topic, qid, hi - 1) if hi > 0 else 0
            queues.append(
                pb.QueueStats(
                    topic=request.topic,
                    queue_id=qid,
                    min_offset=store.min_offset_in_queue(request.topic, qid),
                    max_offset=hi,
                    last_update_timestamp=max(last, 0),
                )
            )
        return pb.TopicStatsResponse(status=OK, queues=queues)

    async def GetConsumeStats(
        self, request: pb.GroupRequest, context: object
    ) -> pb.ConsumeStatsResponse:
        b = self.b
        topics = [request.topic] if request.topic else b.offsets.topics_of(request.group)
        info = b.consumers.groups.get(request.group)
        if not request.topic and info is not None:
            topics = sorted(set(topics) | set(info.subscriptions))
        queues = []
        for topic in topics:
            config = b.topics.get(topic)
            if config is None:
                continue
            for qid in range(config.read_queue_nums):
                hi = b.store.max_offset_in_queue(topic, qid)
                consumer = b.offsets.query(request.group, topic, qid)
                last = b.store.store_time_in_queue(topic, qid, consumer - 1) if consumer > 0 else 0
                queues.append(
                    pb.QueueStats(
                        topic=topic,
                        queue_id=qid,
                        max_offset=hi,
                        min_offset=b.store.min_offset_in_queue(topic, qid),
                        consumer_offset=max(consumer, 0),
                        last_update_timestamp=max(last, 0),
                    )
                )
        return pb.ConsumeStatsResponse(
            status=OK, queues=queues, consume_tps=b.stats.consume_tps(request.group, topics)
        )

    async def QueryMessage(
        self, request: pb.QueryMessageRequest, context: object
    ) -> pb.RecordsResponse:
        views = self.b.store.messages_by_key(
            request.topic,
            request.key,
            max_num=request.max_num or None,
            begin_ms=request.begin_timestamp,
            end_ms=request.end_timestamp or None,
        )
        try:
            if not views:
                err = QueryNotFoundError(
                    f"no message of topic {request.topic} with key {request.key!r} here"
                )
                return pb.RecordsResponse(status=status_of(err))
            return pb.RecordsResponse(status=OK, records=b"".join(views))
        finally:
            for v in views:
                v.release()

    async def ViewMessage(
        self, request: pb.QueryMessageRequest, context: object
    ) -> pb.RecordsResponse:
        try:
            view = (
                self.b.store.message_by_id(request.msg_id)
                if request.msg_id
                else self.b.store.message_by_offset(request.commit_log_offset)
            )
        except ValueError as exc:
            return pb.RecordsResponse(status=pb.Status(code=13, message=str(exc)))
        if view is None:
            what = request.msg_id or f"offset {request.commit_log_offset}"
            return pb.RecordsResponse(
                status=status_of(QueryNotFoundError(f"no message {what} on this broker"))
            )
        try:
            return pb.RecordsResponse(status=OK, records=bytes(view))
        finally:
            view.release()

    async def ResetOffsetByTime(
        self, request: pb.ResetOffsetRequest, context: object
    ) -> pb.ResetOffsetResponse:
        b = self.b
        config = b.topics.get(request.topic)
        if config is None:
            err = TopicNotExistError(f"topic {request.topic!r} does not exist on this broker")
            return pb.ResetOffsetResponse(status=status_of(err))
        try:
            check_group(request.group)
        except Exception as exc:
            return pb.ResetOffsetResponse(status=status_of(exc))
        queues = []
        for qid in range(config.read_queue_nums):
            offset = b.store.offset_by_time(request.topic, qid, request.timestamp)
            b.offsets.commit(request.group, request.topic, qid, offset)
            queues.append(pb.QueueStats(topic=request.topic, queue_id=qid, consumer_offset=offset))
        b.consumers.notify_reset_offset(request.group, request.topic)
        return pb.ResetOffsetResponse(status=OK, queues=queues)

    async def UpdateSubscriptionGroup(
        self, request: pb.SubscriptionGroupConfig, context: object
    ) -> pb.Status:
        try:
            values = {f.name: getattr(request, f.name) for f in fields(SubscriptionGroupConfig)}
            self.b.groups.update(SubscriptionGroupConfig(**values))
        except Exception as exc:
            return status_of(exc)
        return OK

    async def GetSubscriptionGroup(
        self, request: pb.GroupRequest, context: object
    ) -> pb.SubscriptionGroupResponse:
        config = self.b.groups.groups.get(request.group)
        if config is None:
            err = QueryNotFoundError(f"no subscription group {request.group!r} on this broker")
            return pb.SubscriptionGroupResponse(status=status_of(err))
        return pb.SubscriptionGroupResponse(
            status=OK, config=pb.SubscriptionGroupConfig(**asdict(config))
        )

    async def GetBrokerRuntimeInfo(self, request: pb.Empty, context: object) -> pb.RuntimeInfo:
        return pb.RuntimeInfo(status=OK, table=runtime_table(self.b))

    async def TransferLeader(self, request: pb.TransferLeaderRequest, context: object) -> pb.Status:
        """Raft mode: hand leadership of the group to member ``request.to``."""
        try:
            if self.b.raft is None:
                raise RocketqSystemError(
                    f"broker {self.b.config.broker_name} does not run Raft "
                    "(enable_dledger_commit_log is off)"
                )
            self.b.raft.transfer(request.group, request.to)
        except Exception as exc:
            return status_of(exc)
        return OK

    async def GetSlaveSyncData(self, request: pb.Empty, context: object) -> pb.SlaveSyncData:
        data = sync_data(self.b)
        data.status.CopyFrom(OK)
        return data

    async def QueryTopicConsumeByWho(
        self, request: pb.TopicRequest, context: object
    ) -> pb.GroupList:
        groups = set(self.b.offsets.groups_of(request.topic))
        groups |= {
            g for g, info in self.b.consumers.groups.items() if request.topic in info.subscriptions
        }
        return pb.GroupList(status=OK, groups=sorted(groups))

    async def GetConsumerConnectionList(
        self, request: pb.GroupRequest, context: object
    ) -> pb.ConsumerConnectionResponse:
        info = self.b.consumers.groups.get(request.group)
        if info is None:
            err = QueryNotFoundError(f"consumer group {request.group!r} has no online client")
            return pb.ConsumerConnectionResponse(status=status_of(err))
        subs = [
            pb.SubscriptionData(
                topic=s.topic,
                expression=s.expression,
                expression_type=s.expression_type,
                version=s.version,
            )
            for s in info.subscriptions.values()
        ]
        conns = [
            pb.ConsumerConnection(
                client_id=cid,
                client_addr=info.client_addrs.get(cid, ""),
                consume_type=info.consume_type,
                message_model=info.message_model,
                consume_from_where=info.consume_from_where,
                subscriptions=subs,
                last_update_timestamp=int(seen * 1000),
            )
            for cid, seen in sorted(info.clients.items())
        ]
        return pb.ConsumerConnectionResponse(status=OK, connections=conns)

    async def ResendMessage(
        self, request: pb.ResendMessageRequest, context: object
    ) -> pb.SendResponse:
        try:
            check_group(request.group)
            r = await self.b.send.resend(request.group, request.commit_log_offset)
        except Exception as exc:
            return pb.SendResponse(status=status_of(exc))
        return pb.SendResponse(
            status=OK,
            queue_offset=r.queue_offset,
            wrote_offset=r.wrote_offset,
            store_host=self.b.store.commitlog.store_host,
            msg_count=r.msg_count,
        )

    async def GetBrokerConfig(self, request: pb.Empty, context: object) -> pb.BrokerConfigResponse:
        """Every key of the broker's config and its store's, as in effect now."""
        return pb.BrokerConfigResponse(
            status=OK, table=config_table(self.b.config, self.b.store_config)
        )
