"""What clients ask a broker besides send and pull (RocketMQ's ClientManageProcessor and
ConsumerManageProcessor, and the lock and send-back requests): heartbeats, unregistering,
a group's member list, offsets, queue ends, queue locks, giving a message back.

A heartbeat's JSON body (HeartbeatData) registers the client's producer and consumer groups;
the connection it came over is that client's channel from then on (with the language and
version of the heartbeat's command header, which the connection lists show), and closing it
unregisters the client at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Final

from rocketq.auth.request_map import SUPER
from rocketq.broker.client_channels import client_channels
from rocketq.broker.consumer_manager import Subscription
from rocketq.broker.filter import SQL92, TAG, parse_tags, sql_filter
from rocketq.broker.metrics import CONSUMER_SEND_MSG_BACK, END_TRANSACTION, HEARTBEAT, REMOTING
from rocketq.broker.request_host import RequestHost
from rocketq.broker.subscription_group import check_group
from rocketq.broker.transaction import CheckTransaction, Resolution
from rocketq.broker.wire.pull import LONG_MAX, LONG_MIN, header_int
from rocketq.common.exceptions import (
    MessageIllegalError,
    NoPermissionError,
    QueryNotFoundError,
    RocketqSystemError,
    ServiceNotAvailableError,
)
from rocketq.common.message import PERM_READ, PERM_WRITE, retry_topic
from rocketq.common.metrics import response_code_name
from rocketq.common.names import check_group_name, check_topic_name
from rocketq.common.topics_batch import TOPICS_BATCH_FIELD, TOPICS_BATCH_VERSION
from rocketq.remoting import fastjson
from rocketq.remoting.codes import MessageSysFlag, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, Handler, error_response

log = logging.getLogger(__name__)

CLIENT_IDS: Final = "client_ids"  # Connection.attrs: the client ids heartbeating over it
PUMPS: Final = "pumps"  # Connection.attrs: client id -> (event queue, task sending them)
# END_TRANSACTION's commitOrRollback (MessageSysFlag's transaction types) -> resolution.
RESOLUTIONS: Final = {
    MessageSysFlag.TRANSACTION_NOT_TYPE: Resolution.UNKNOWN,
    MessageSysFlag.TRANSACTION_COMMIT_TYPE: Resolution.COMMIT,
    MessageSysFlag.TRANSACTION_ROLLBACK_TYPE: Resolution.ROLLBACK,
}


@dataclass(frozen=True, slots=True)
class EndTransaction:
    """What END_TRANSACTION asks, under the names the transaction service reads."""

    producer_group: str
    commit_log_offset: int
    tran_state_table_offset: int
    msg_id: str
    transaction_id: str
    resolution: Resolution
    from_transaction_check: bool


def json_body(cmd: RemotingCommand, what: str) -> dict[str, Any]:
    """The request's JSON body as an object; MessageIllegalError saying what is wrong."""
    try:
        doc = fastjson.loads(bytes(cmd.body or b""))
    except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested too deep
        raise MessageIllegalError(f"the {what} body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise MessageIllegalError(f"the {what} body is not a JSON object")
    return doc


def _array(doc: dict[str, Any], key: str) -> list[Any]:
    """A heartbeat's list field: absent or null is empty; anything but an array is refused."""
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise MessageIllegalError(f"the heartbeat's {key} is not an array")
    return value


def _check_heartbeat_names(doc: dict[str, Any]) -> None:
    """Every group and subscribed topic a heartbeat names is a valid name, checked before
    the heartbeat changes anything (MessageIllegalError naming the first bad one)."""
    for p in _array(doc, "producerDataSet"):
        if isinstance(p, dict) and p.get("groupName"):
            check_group_name(str(p["groupName"]))
    for c in _array(doc, "consumerDataSet"):
        if isinstance(c, dict) and c.get("groupName"):
            check_group_name(str(c["groupName"]))
            for sub in _array(c, "subscriptionDataSet"):
                if isinstance(sub, dict) and sub.get("topic"):
                    check_topic_name(str(sub["topic"]))


def _sub_version(sub: dict[str, Any]) -> int:
    """A subscription's subVersion (a Java long, written as a number)."""
    value = sub.get("subVersion") or 0
    if isinstance(value, str) and value.lstrip("-").isdigit() and len(value) <= 20:
        value = int(value)
    if type(value) is not int or not LONG_MIN <= value <= LONG_MAX:
        raise MessageIllegalError(
            f"a subscription's subVersion is {str(value)[:30]!r}, not a number"
        )
    return value


def queue_keys(doc: dict[str, Any], what: str) -> list[tuple[str, int]]:
    """The (topic, queue id) of each MessageQueue of ``mqSet``."""
    out = []
    queues = doc.get("mqSet") or []
    if not isinstance(queues, list):
        raise MessageIllegalError(f"the {what} body's mqSet is not an array")
    for mq in queues:
        if not isinstance(mq, dict) or "topic" not in mq or "queueId" not in mq:
            raise MessageIllegalError(f"the {what} body has a message queue without topic/queueId")
        topic, queue_id = mq["topic"], mq["queueId"]
        if not isinstance(topic, str) or type(queue_id) is not int or not 0 <= queue_id < 1 << 31:
            raise MessageIllegalError(
                f"the {what} body has a message queue with topic {str(topic)[:40]!r} and "
                f"queueId {str(queue_id)[:20]!r}; expected a name and a queue number"
            )
        out.append((topic, queue_id))
    return out


class ClientRequests:
    def __init__(self, broker: RequestHost) -> None:
        self.b = broker

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.HEART_BEAT: self.heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_offset,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_time,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back,
            RequestCode.END_TRANSACTION: self.end_transaction,
        }

    def _timed(self, request_code: str, started: float, answer: RemotingCommand) -> RemotingCommand:
        """Count the answer in rpc_latency (with metrics on) and pass it on."""
        if self.b.metrics is not None:
            self.b.metrics.answered(
                request_code, response_code_name(answer.code), started, protocol=REMOTING
            )
        return answer

    # -- clients -----------------------------------------------------------------------

    def heartbeat(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        started = time.perf_counter()
        try:
            answer = self._heartbeat(conn, cmd)
        except Exception as exc:
            answer = error_response(cmd, exc)
        return self._timed(HEARTBEAT, started, answer)

    def _heartbeat(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        doc = json_body(cmd, "heartbeat")
        client_id = str(doc.get("clientID") or "")
        if not client_id:
            raise MessageIllegalError("the heartbeat has no clientID")
        _check_heartbeat_names(doc)
        security = self.b.security
        if security.access is not None and security.refused_beyond(conn, cmd, SUPER) is not None:
            # The client id is this user's, on this connection: another user's heartbeat
            # may not take its channel (its transaction checks, its group's changes). A
            # super user (or a node) may do anything, this too.
            why = self.b.consumers.bindings.claim(
                client_id, security.identity(conn, cmd) or "", conn.peer
            )
            if why is not None:
                raise NoPermissionError(f"authorization failed: {why}")
        conn.attrs.setdefault(CLIENT_IDS, set()).add(client_id)
        client_channels(self.b.consumers).heartbeat(client_id, conn, cmd)
        self._pump(conn, client_id)
        cm = self.b.consumers
        for p in _array(doc, "producerDataSet"):
            if isinstance(p, dict) and p.get("groupName"):
                cm.register_producer(str(p["groupName"]), client_id)
        for c in _array(doc, "consumerDataSet"):
            if not isinstance(c, dict) or not c.get("groupName"):
                raise MessageIllegalError("a consumer of the heartbeat has no groupName")
            group_name = str(c["groupName"])
            group = self.b.groups.find_or_create(group_name)
            model = str(c.get("messageModel") or "CLUSTERING")
            if model != "BROADCASTING":
                # The group's retry topic exists from its first heartbeat (as RocketMQ), so
                # consumers find it in the route before anything is retried.
                self.b.topics.create_system(
                    retry_topic(group_name), group.retry_queue_nums, PERM_READ | PERM_WRITE
                )
            subs = []
            for s in _array(c, "subscriptionDataSet"):
                if not isinstance(s, dict) or not s.get("topic"):
                    raise MessageIllegalError(f"a subscription of group {group_name} has no topic")
                expression = str(s.get("subString") or "*")
                kind = str(s.get("expressionType") or TAG).upper()
                if kind == SQL92:
                    # Refused here if the broker does not filter by SQL92 or the expression
                    # is bad: the consumer's start fails with the reason.
                    sql_filter(expression, kind, enabled=self.b.config.enable_property_filter)
                    codes: frozenset[int] = frozenset()
                else:
                    codes = parse_tags(expression) or frozenset()
                subs.append(Subscription(str(s["topic"]), expression, kind, codes, _sub_version(s)))
            cm.register_consumer(
                group_name,
                client_id,
                client_addr=conn.peer,
                consume_type=str(c.get("consumeType") or ""),
                message_model=model,
                consume_from_where=str(c.get("consumeFromWhere") or ""),
                subscriptions=subs,
            )
        # Stock clients ignore the field; rocketq's SDK sends this broker its natural
        # batches of many topics as one SEND_TOPICS_BATCH from now on.
        return cmd.response(ResponseCode.SUCCESS, {TOPICS_BATCH_FIELD: TOPICS_BATCH_VERSION})

    def connection_closed(self, conn: Connection) -> None:
        """A client's connection closed: it leaves its groups at once."""
        pumps: dict[str, tuple[asyncio.Queue[Any], asyncio.Task[None]]] = conn.attrs.get(PUMPS, {})
        channels = client_channels(self.b.consumers)
        for client_id in conn.attrs.get(CLIENT_IDS, ()):
            channels.closed(client_id, conn)
            pump = pumps.pop(client_id, None)
            if pump is not None:
                pump[1].cancel()
                self.b.consumers.close_channel(client_id, pump[0])  # unregisters it
            else:
                self.b.consumers.unregister_client(client_id, reason="its connection closed")

    # -- what the broker tells a client ------------------------------------------------

    def _pump(self, conn: Connection, client_id: str) -> None:
        """From its first heartbeat on, what the broker has to tell a client goes over the
        connection the heartbeat came on: group changes, offset resets, transaction checks,
        each a oneway request."""
        pumps = conn.attrs.setdefault(PUMPS, {})
        if client_id in pumps:
            return
        queue = self.b.consumers.open_channel(client_id)
        task = asyncio.ensure_future(self._tell(conn, queue))
        pumps[client_id] = (queue, task)

    async def _tell(self, conn: Connection, queue: asyncio.Queue[Any]) -> None:
        while conn.is_open:
            event = await queue.get()
            try:
                cmd = self._notice(event)
                if cmd is not None:
                    conn.invoke_oneway(cmd)
            except Exception:  # a client gone meanwhile: its close unregisters it
                log.debug("could not tell client at %s", conn.peer, exc_info=True)
                with contextlib.suppress(Exception):
                    conn.close()
                return

    def _notice(self, event: Any) -> RemotingCommand | None:
        if isinstance(event, tuple) and event[0] == "ids":
            return RemotingCommand(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": event[1]}
            )
        if isinstance(event, tuple) and event[0] == "reset":
            group, topic = event[1], event[2]
            table = {}
            config = self.b.topics.get(topic)
            for qid in range(config.read_queue_nums if config else 0):
                offset = self.b.offsets.query(group, topic, qid)
                if offset >= 0:
                    key = {"brokerName": self.b.config.broker_name, "queueId": qid, "topic": topic}
                    table[fastjson.ObjectKey.of(key)] = offset
            return RemotingCommand(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                {"topic": topic, "group": group, "timestamp": "0", "isForce": "false"},
                fastjson.dumps({"offsetTable": table}),
            )
        if isinstance(event, CheckTransaction):
            return RemotingCommand(
                RequestCode.CHECK_TRANSACTION_STATE,
                {
                    "tranStateTableOffset": str(event.tran_state_table_offset),
                    "commitLogOffset": str(event.commit_log_offset),
                    "msgId": event.msg_id,
                    "transactionId": event.transaction_id,
                    "offsetMsgId": event.msg_id,
                },
                event.record,
            )
        return None

    def unregister_client(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """A client leaves. With auth on, only a client id that heartbeated over this very
        connection is unregistered (any user may leave, none may unregister another); the
        answer is SUCCESS either way, as RocketMQ's."""
        client_id = cmd.field("clientID")
        own = conn.attrs.get(CLIENT_IDS, set())
        c = self.b.config
        if (c.authentication_enabled or c.authorization_enabled) and client_id not in own:
            return cmd.response(ResponseCode.SUCCESS)
        self.b.consumers.unregister_client(client_id, reason="it unregistered")
        own.discard(client_id)
        return cmd.response(ResponseCode.SUCCESS)

    def consumer_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.field("consumerGroup")
        ids = self.b.consumers.client_ids(group)
        if not ids:
            raise RocketqSystemError(f"no consumer for this group, {group}")
        return cmd.response(ResponseCode.SUCCESS, None, fastjson.dumps({"consumerIdList": ids}))

    # -- offsets -----------------------------------------------------------------------

    def query_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        group, topic = cmd.field("consumerGroup"), cmd.field("topic")
        queue_id = header_int(cmd, "queueId")
        offset = self.b.offsets.query(group, topic, queue_id)
        if offset < 0:
            # As RocketMQ: a group that never committed starts at 0 while the queue's
            # first message is still there.
            if self.b.store.min_offset_in_queue(topic, queue_id) <= 0:
                offset = 0
            else:
                raise QueryNotFoundError(
                    f"group {group} has no offset for {topic} queue {queue_id}"
                )
        return cmd.response(ResponseCode.SUCCESS, {"offset": str(offset)})

    def update_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        # A slave keeps what consumers commit while its master is away; the master takes
        # those offsets back when the slave reconnects (SlaveSynchronizer).
        offset = header_int(cmd, "commitOffset")
        if offset >= 0:  # some clients commit -1 for "nothing yet": nothing to keep
            self.b.offsets.commit(
                cmd.field("consumerGroup"), cmd.field("topic"), header_int(cmd, "queueId"), offset
            )
        return cmd.response(ResponseCode.SUCCESS)

    def max_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        offset = self.b.store.max_offset_in_queue(cmd.field("topic"), header_int(cmd, "queueId"))
        return cmd.response(ResponseCode.SUCCESS, {"offset": str(offset)})

    def min_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        offset = self.b.store.min_offset_in_queue(cmd.field("topic"), header_int(cmd, "queueId"))
        return cmd.response(ResponseCode.SUCCESS, {"offset": str(offset)})

    def search_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        offset = self.b.store.offset_by_time(
            cmd.field("topic"), header_int(cmd, "queueId"), header_int(cmd, "timestamp")
        )
        return cmd.response(ResponseCode.SUCCESS, {"offset": str(offset)})

    def earliest_time(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic, queue_id = cmd.field("topic"), header_int(cmd, "queueId")
        first = self.b.store.min_offset_in_queue(topic, queue_id)
        stamp = self.b.store.store_time_in_queue(topic, queue_id, first)
        return cmd.response(ResponseCode.SUCCESS, {"timestamp": str(max(stamp, 0))})

    # -- queue locks (orderly consumers) -----------------------------------------------

    def _check_lockable(self) -> None:
        if self.b.config.broker_role == "SLAVE":
            raise ServiceNotAvailableError(
                f"broker {self.b.config.broker_name} id {self.b.config.broker_id} is a slave; "
                "queue locks are answered by the master"
            )

    def lock_batch(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self._check_lockable()
        doc = json_body(cmd, "lock")
        group, client_id = str(doc.get("consumerGroup") or ""), str(doc.get("clientId") or "")
        check_group(group)
        held = self.b.locks.try_lock_batch(group, queue_keys(doc, "lock"), client_id)
        broker = self.b.config.broker_name
        body = fastjson.dumps(
            {"lockOKMQSet": [{"brokerName": broker, "queueId": q, "topic": t} for t, q in held]}
        )
        return cmd.response(ResponseCode.SUCCESS, None, body)

    def unlock_batch(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self._check_lockable()
        doc = json_body(cmd, "unlock")
        self.b.locks.unlock_batch(
            str(doc.get("consumerGroup") or ""),
            queue_keys(doc, "unlock"),
            str(doc.get("clientId") or ""),
        )
        return cmd.response(ResponseCode.SUCCESS)

    # -- giving a message back ---------------------------------------------------------

    async def send_back(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        started = time.perf_counter()
        try:
            group = cmd.field("group")
            origin = None
            if self.b.config.authorization_enabled:
                # The sender may read originTopic (or only the group's retries), not any
                # message it names by offset.
                origin = (cmd.ext or {}).get("originTopic") or retry_topic(group)
            await self.b.send.send_back(
                group,
                header_int(cmd, "offset"),
                header_int(cmd, "delayLevel", 0),
                header_int(cmd, "maxReconsumeTimes", -1),
                origin_topic=origin,
            )
            answer = cmd.response(ResponseCode.SUCCESS)
        except Exception as exc:
            answer = error_response(cmd, exc)
        return self._timed(CONSUMER_SEND_MSG_BACK, started, answer)

    # -- transactions ------------------------------------------------------------------

    async def end_transaction(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        started = time.perf_counter()
        try:
            kind = header_int(cmd, "commitOrRollback")
            if kind not in RESOLUTIONS:
                raise MessageIllegalError(
                    f"commitOrRollback is {kind}; expected 0 (unknown), 8 (commit) or 12 (rollback)"
                )
            ext = cmd.ext or {}
            await self.b.transactions.end(
                EndTransaction(
                    cmd.field("producerGroup"),
                    header_int(cmd, "commitLogOffset"),
                    header_int(cmd, "tranStateTableOffset"),
                    ext.get("msgId", ""),
                    ext.get("transactionId", ""),
                    RESOLUTIONS[kind],
                    ext.get("fromTransactionCheck", "false") == "true",
                )
            )
            answer = cmd.response(ResponseCode.SUCCESS)
        except Exception as exc:
            answer = error_response(cmd, exc)
        return self._timed(END_TRANSACTION, started, answer)
