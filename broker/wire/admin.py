"""Administering a broker (RocketMQ's AdminBrokerProcessor and QueryMessageProcessor):
topics, subscription groups, queue and consume stats, offsets, message queries, the
broker's config and runtime figures, the two requests the broker forwards to one consumer
over its channel (GET_CONSUMER_RUNNING_INFO, and CONSUME_MESSAGE_DIRECTLY with the stored
message as its body), and rocketq's own two calls (``RocketqRequestCode``): handing Raft
leadership over and resending a stored message to a group.

RocketMQ 4.9's header fields, and its bodies as fastjson writes them: beans have their
fields in name order; a map keyed by a MessageQueue has the queue as a bare object key
(``{{"brokerName":"b","queueId":0,"topic":"T"}:...}``); queue ids and delay levels as map
keys are bare numbers. Records (QUERY_MESSAGE, VIEW_MESSAGE_BY_ID) go out as the store
holds them, never decoded.

What rocketq does not keep is written as RocketMQ's default: a topic's ``topicFilterType``
(SINGLE_TAG), a group's ``consumeFromMinEnable`` (true), the subscription groups' and the
config's data version (counter 0). A connection list names each client's language and
version as its last heartbeat's command header did (rocketq's SDK: PYTHON and
``RocketqVersion``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from rocketq.broker.client_channels import client_channels
from rocketq.broker.config_json import group_doc, group_of, topic_doc
from rocketq.broker.consumer_manager import Subscription
from rocketq.broker.filter import SQL92
from rocketq.broker.request_host import RequestHost
from rocketq.broker.runtime_info import config_table, runtime_table
from rocketq.broker.subscription_group import check_group
from rocketq.broker.wire.client import json_body
from rocketq.broker.wire.pull import header_int
from rocketq.common.exceptions import (
    ConsumerNotOnlineError,
    MessageIllegalError,
    QueryNotFoundError,
    RocketqSystemError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from rocketq.common.message import TopicConfig
from rocketq.common.message_id import decode_offset_msg_id, encode_offset_msg_id
from rocketq.common.names import check_topic_name, is_system_topic
from rocketq.remoting import fastjson
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, Handler

if TYPE_CHECKING:
    from rocketq.broker.raft_member import RaftMember

FILTER_TYPES: Final = ("SINGLE_TAG", "MULTI_TAG")
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG
UNKNOWN_LANGUAGE: Final = "OTHER"  # a client with no channel here (never heartbeated to us)
# -- header fields ----------------------------------------------------------------------


def header_text(cmd: RemotingCommand, name: str) -> str:
    """A required text header field; MessageIllegalError names it when missing or empty."""
    value = (cmd.ext or {}).get(name)
    if value is None or value == "":
        raise MessageIllegalError(f"the request header has no field {name!r}")
    return value


def header_bool(cmd: RemotingCommand, name: str, default: bool) -> bool:
    """A boolean header field as Java's Boolean.parseBoolean reads it."""
    value = (cmd.ext or {}).get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() == "true"


# -- bodies -----------------------------------------------------------------------------


def data_version(counter: int, timestamp: int = 0) -> dict[str, int]:
    """DataVersion: rocketq's tables carry one number, the counter."""
    return {"counter": counter, "timestamp": timestamp}


def message_queue(broker_name: str, topic: str, queue_id: int) -> fastjson.ObjectKey:
    return fastjson.ObjectKey.of({"brokerName": broker_name, "queueId": queue_id, "topic": topic})


def subscription_doc(s: Subscription) -> dict[str, Any]:
    """SubscriptionData's JSON: tags as FilterAPI splits them ('*' and SQL92: none)."""
    expr = s.expression.strip()
    tags = (
        []
        if s.expression_type.upper() == SQL92 or expr in ("", "*")
        else [t.strip() for t in expr.split("||") if t.strip()]
    )
    return {
        "classFilterMode": False,
        "codeSet": sorted(s.codes),
        "expressionType": s.expression_type,
        "subString": s.expression,
        "subVersion": s.version,
        "tagsSet": tags,
        "topic": s.topic,
    }


def properties_text(table: dict[str, str]) -> bytes:
    """``key=value`` lines, as MixAll.properties2String writes a Properties."""
    return "".join(f"{key}={value}\n" for key, value in table.items()).encode()


def _json(cmd: RemotingCommand, doc: Any, ext: dict[str, str] | None = None) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, ext, fastjson.dumps(doc))


# How long a topic's creation waits for the nameservers to take the new topic table.
REGISTER_WAIT: Final = 3.0


class AdminRequests:
    def __init__(self, broker: RequestHost) -> None:
        self.b = broker

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topics,
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by_who,
            RequestCode.GET_BROKER_CONFIG: self.broker_config,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.all_consumer_offsets,
            RequestCode.GET_ALL_DELAY_OFFSET: self.all_delay_offsets,
            RocketqRequestCode.TRANSFER_LEADER: self.transfer_leader,
            RocketqRequestCode.RESEND_MESSAGE: self.resend_message,
            RocketqRequestCode.RAFT_ADD_MEMBER: self.raft_add_member,
            RocketqRequestCode.RAFT_REMOVE_MEMBER: self.raft_remove_member,
            RocketqRequestCode.RAFT_MEMBERS: self.raft_members,
        }

    def _topic(self, topic: str) -> TopicConfig:
        config = self.b.topics.get(topic)
        if config is None:
            raise TopicNotExistError(f"topic {topic!r} does not exist on this broker")
        return config

    def _mq(self, topic: str, queue_id: int) -> fastjson.ObjectKey:
        return message_queue(self.b.config.broker_name, topic, queue_id)

    # -- topics ------------------------------------------------------------------------

    async def update_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = check_topic_name(header_text(cmd, "topic"))
        if is_system_topic(topic):  # RocketMQ's AdminBrokerProcessor refuses them too
            raise MessageIllegalError(
                f"the topic[{topic}] is conflict with system topic; the broker manages it"
            )
        filter_type = (cmd.ext or {}).get("topicFilterType") or "SINGLE_TAG"
        if filter_type not in FILTER_TYPES:
            raise MessageIllegalError(
                f"topicFilterType {filter_type!r} of topic {topic} is not SINGLE_TAG or MULTI_TAG"
            )
        self.b.topics.update(
            TopicConfig(
                topic,
                header_int(cmd, "readQueueNums"),
                header_int(cmd, "writeQueueNums"),
                header_int(cmd, "perm", 6),
                header_int(cmd, "topicSysFlag", 0),
                header_bool(cmd, "order", False),
            )
        )
        # Answered once the nameservers have the topic, as RocketMQ's broker registers it
        # before answering: a producer asking for its route next finds every broker of it.
        await self.b.registration.wait_held(self.b.topics.data_version, REGISTER_WAIT)
        return cmd.response(ResponseCode.SUCCESS)

    def delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = header_text(cmd, "topic")
        if not self.b.topics.delete(topic):
            raise TopicNotExistError(f"topic {topic!r} does not exist here")
        self.b.offsets.remove_topic(topic)
        return cmd.response(ResponseCode.SUCCESS)

    def all_topics(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """TopicConfigSerializeWrapper."""
        topics = self.b.topics
        return _json(
            cmd,
            {
                "dataVersion": data_version(topics.data_version),
                "topicConfigTable": {n: topic_doc(t) for n, t in sorted(topics.topics.items())},
            },
        )

    def topic_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """TopicStatsTable: per queue its offsets and the store time of its last message."""
        topic = header_text(cmd, "topic")
        config = self._topic(topic)
        store = self.b.store
        table = {}
        for qid in range(max(config.read_queue_nums, config.write_queue_nums)):
            hi = store.max_offset_in_queue(topic, qid)
            last = store.store_time_in_queue(topic, qid, hi - 1) if hi > 0 else 0
            table[self._mq(topic, qid)] = {
                "lastUpdateTimestamp": max(last, 0),
                "maxOffset": hi,
                "minOffset": store.min_offset_in_queue(topic, qid),
            }
        return _json(cmd, {"offsetTable": table})

    # -- consumption -------------------------------------------------------------------

    def consume_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """ConsumeStats of a group: every read queue of the topic, or of every topic the
        group has offsets for or subscribes to when the header names none."""
        b = self.b
        group = header_text(cmd, "consumerGroup")
        topic = (cmd.ext or {}).get("topic") or ""
        info = b.consumers.groups.get(group)
        known = b.offsets.topics_of(group)
        if group not in b.groups.groups and info is None and not known:
            raise SubscriptionGroupNotExistError(
                f"consumer group {group!r} has no config, no offsets and no client on this broker"
            )
        if topic:
            self._topic(topic)
            topics = [topic]
        else:
            topics = sorted(set(known) | set(info.subscriptions if info else ()))
        table = {}
        for t in topics:
            config = b.topics.get(t)
            if config is None:
                continue
            for qid in range(config.read_queue_nums):
                consumer = b.offsets.query(group, t, qid)
                last = b.store.store_time_in_queue(t, qid, consumer - 1) if consumer > 0 else 0
                table[self._mq(t, qid)] = {
                    "brokerOffset": b.store.max_offset_in_queue(t, qid),
                    "consumerOffset": max(consumer, 0),
                    "lastTimestamp": max(last, 0),
                }
        tps = float(b.stats.consume_tps(group, topics))
        return _json(cmd, {"consumeTps": tps, "offsetTable": table})

    def reset_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Each read queue's offset at ``timestamp`` (-1: the queue's end) becomes the
        group's; with ``isForce`` false a smaller stored offset is kept. The group's
        consumers are told; the answer is a ResetOffsetBody."""
        b = self.b
        topic, group = header_text(cmd, "topic"), header_text(cmd, "group")
        timestamp = header_int(cmd, "timestamp")
        force = header_bool(cmd, "isForce", True)
        config = self._topic(topic)
        check_group(group)
        table = {}
        for qid in range(config.read_queue_nums):
            if timestamp == -1:
                offset = b.store.max_offset_in_queue(topic, qid)
            else:
                offset = max(b.store.offset_by_time(topic, qid, timestamp), 0)
            stored = b.offsets.query(group, topic, qid)
            if not force and 0 <= stored < offset:
                offset = stored
            b.offsets.commit(group, topic, qid, offset)
            table[self._mq(topic, qid)] = offset
        b.consumers.notify_reset_offset(group, topic)
        return _json(cmd, {"offsetTable": table})

    def consumer_connections(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """ConsumerConnection: the group's online clients and what they subscribe to."""
        group = header_text(cmd, "consumerGroup")
        info = self.b.consumers.groups.get(group)
        if info is None or not info.clients:
            raise ConsumerNotOnlineError(f"consumer group {group!r} has no online client")
        channels = client_channels(self.b.consumers)
        connections = []
        for cid in sorted(info.clients):
            channel = channels.get(cid)
            connections.append(
                {
                    "clientAddr": info.client_addrs.get(cid, ""),
                    "clientId": cid,
                    "language": channel.language_name
                    if channel is not None
                    else self.b.consumers.client_kinds.get(cid, (UNKNOWN_LANGUAGE,))[0].upper(),
                    "version": 0 if channel is None else channel.version,
                }
            )
        doc: dict[str, Any] = {"connectionSet": connections}
        # An enum the clients did not say is null in Java: fastjson leaves it out.
        if info.consume_from_where:
            doc["consumeFromWhere"] = info.consume_from_where
        if info.consume_type:
            doc["consumeType"] = info.consume_type
        if info.message_model:
            doc["messageModel"] = info.message_model
        doc["subscriptionTable"] = {
            t: subscription_doc(s) for t, s in sorted(info.subscriptions.items())
        }
        return _json(cmd, doc)

    async def consumer_running_info(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO, forwarded to the client over its channel; the client's
        answer (a ConsumerRunningInfo body, or its error) is the answer."""
        group, client_id = header_text(cmd, "consumerGroup"), header_text(cmd, "clientId")
        return await client_channels(self.b.consumers).call(group, client_id, cmd)

    async def consume_message_directly(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY: the record the header's offset ``msgId`` names, read
        from this broker's CommitLog, goes to the client as the request's body (with this
        broker's name in ``brokerName``); the client runs its listener on it and answers
        a ConsumeMessageDirectlyResult, which is the answer. Nothing is committed."""
        group, client_id = header_text(cmd, "consumerGroup"), header_text(cmd, "clientId")
        msg_id = header_text(cmd, "msgId")
        channels = client_channels(self.b.consumers)
        channels.check_online(group, client_id)  # not online: say so before reading anything
        try:
            _, offset = decode_offset_msg_id(msg_id)
            view = self.b.store.message_by_offset(offset)
        except ValueError as exc:
            raise MessageIllegalError(
                f"{exc}; give the message's offset id (offset_msg_id)"
            ) from None
        if view is None:
            raise QueryNotFoundError(
                f"no message at CommitLog offset {offset} (message id {msg_id}) on this broker"
            )
        try:
            record = bytes(view)
        finally:
            view.release()
        forwarded = RemotingCommand(
            cmd.code,
            {**(cmd.ext or {}), "brokerName": self.b.config.broker_name},
            record,
            opaque=cmd.opaque,
            serialize_type=cmd.serialize_type,
        )
        return await channels.call(group, client_id, forwarded)

    def consumed_by_who(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GroupList: groups with offsets for the topic and groups online subscribing it."""
        topic = header_text(cmd, "topic")
        groups = set(self.b.offsets.groups_of(topic))
        groups |= {g for g, info in self.b.consumers.groups.items() if topic in info.subscriptions}
        return _json(cmd, {"groupList": sorted(groups)})

    def all_consumer_offsets(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """ConsumerOffsetManager's JSON: "topic@group" -> queue id -> offset."""
        table = self.b.offsets.table
        return _json(
            cmd,
            {"offsetTable": {key: dict(sorted(q.items())) for key, q in sorted(table.items())}},
        )

    def all_delay_offsets(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """ScheduleMessageService's JSON: delay level -> offset in its queue."""
        return _json(cmd, {"offsetTable": dict(sorted(self.b.schedule.offsets.items()))})

    # -- subscription groups -----------------------------------------------------------

    def update_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.b.groups.update(group_of(json_body(cmd, "subscription group")))
        return cmd.response(ResponseCode.SUCCESS)

    def all_groups(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """SubscriptionGroupWrapper."""
        groups = self.b.groups.groups
        return _json(
            cmd,
            {
                "dataVersion": data_version(0),
                "subscriptionGroupTable": {n: group_doc(g) for n, g in sorted(groups.items())},
            },
        )

    # -- messages ----------------------------------------------------------------------

    def query_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Every record of the topic with the key (in KEYS, or as its unique id), as stored,
        one after another."""
        store = self.b.store
        topic, key = header_text(cmd, "topic"), header_text(cmd, "key")
        max_num = header_int(cmd, "maxNum", 0)
        if header_bool(cmd, UNIQUE_KEY_QUERY, False):
            max_num = store.config.default_query_max_num
        end = header_int(cmd, "endTimestamp", 0)
        views = store.messages_by_key(
            topic,
            key,
            max_num=max_num if max_num > 0 else None,
            begin_ms=header_int(cmd, "beginTimestamp", 0),
            end_ms=end or None,
        )
        try:
            if not views:
                raise QueryNotFoundError(f"no message of topic {topic} with key {key!r} here")
            records = b"".join(views)
        finally:
            for v in views:
                v.release()
        files = store.index.files if store.index is not None else []
        return cmd.response(
            ResponseCode.SUCCESS,
            {
                "indexLastUpdateTimestamp": str(files[-1].end_timestamp if files else 0),
                "indexLastUpdatePhyoffset": str(files[-1].end_phy_offset if files else 0),
            },
            records,
        )

    def view_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """The one record at a CommitLog offset, as stored."""
        offset = header_int(cmd, "offset")
        try:
            view = self.b.store.message_by_offset(offset)
        except ValueError as exc:
            raise MessageIllegalError(f"cannot read CommitLog offset {offset}: {exc}") from None
        if view is None:
            raise QueryNotFoundError(f"no message at CommitLog offset {offset} on this broker")
        try:
            return cmd.response(ResponseCode.SUCCESS, None, bytes(view))
        finally:
            view.release()

    async def resend_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """rocketq's RESEND_MESSAGE: a copy of the stored message on %RETRY%<group>."""
        group = check_group(header_text(cmd, "group"))
        r = await self.b.send.resend(group, header_int(cmd, "commitLogOffset"))
        return cmd.response(
            ResponseCode.SUCCESS,
            {
                "msgId": encode_offset_msg_id(self.b.store.commitlog.store_host, r.wrote_offset),
                "queueOffset": str(r.queue_offset),
                "commitLogOffset": str(r.wrote_offset),
            },
        )

    # -- the broker --------------------------------------------------------------------

    def runtime_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """KVTable of the broker's runtime figures."""
        return _json(cmd, {"table": runtime_table(self.b)})

    def broker_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Every key of the broker's and its store's config as a properties text; the
        header's ``version`` is the config's DataVersion (it never changes at run time)."""
        stamp = int(self.b.boot_time * 1000)
        return cmd.response(
            ResponseCode.SUCCESS,
            {"version": fastjson.dumps(data_version(0, stamp)).decode()},
            properties_text(config_table(self.b.config, self.b.store_config)),
        )

    def transfer_leader(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """rocketq's TRANSFER_LEADER: Raft mode, leadership of the group to member ``to``."""
        to = header_text(cmd, "to")
        raft = self.b.raft
        if raft is None:
            raise RocketqSystemError(
                f"broker {self.b.config.broker_name} does not run Raft "
                "(enable_dledger_commit_log is off)"
            )
        raft.transfer((cmd.ext or {}).get("group") or "", to)
        return cmd.response(ResponseCode.SUCCESS)

    def _raft(self) -> RaftMember:
        raft = self.b.raft
        if raft is None:
            raise RocketqSystemError(
                f"broker {self.b.config.broker_name} does not run Raft "
                "(enable_dledger_commit_log is off)"
            )
        return raft

    def raft_add_member(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """rocketq's RAFT_ADD_MEMBER: ``member`` at Raft ``address`` joins as a learner."""
        member, address = header_text(cmd, "member"), header_text(cmd, "address")
        index = self._raft().change_members((cmd.ext or {}).get("group") or "", member, address)
        return cmd.response(ResponseCode.SUCCESS, {"index": str(index)})

    def raft_remove_member(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """rocketq's RAFT_REMOVE_MEMBER: ``member`` leaves the group."""
        member = header_text(cmd, "member")
        index = self._raft().change_members((cmd.ext or {}).get("group") or "", member, None)
        return cmd.response(ResponseCode.SUCCESS, {"index": str(index)})

    def raft_members(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """rocketq's RAFT_MEMBERS: the group's membership as this member sees it (JSON)."""
        view = self._raft().members_view()
        return cmd.response(ResponseCode.SUCCESS, body=json.dumps(view).encode())
