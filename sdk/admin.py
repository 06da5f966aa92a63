"""The admin client: topics, groups, offsets, stats, message queries and cluster info,
over the nameservers and the brokers' admin requests (mqadmin's verbs, RocketMQ's remoting
protocol; the requests and their answers are ``sdk/admin_wire.py``'s)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from rocketq.common.exceptions import (
    ConfigError,
    ConnectBrokerError,
    ConsumerNotOnlineError,
    MessageIllegalError,
    QueryNotFoundError,
    RocketqError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from rocketq.common.message import (
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    TRACE_TOPIC,
    MessageExt,
    dlq_topic,
)
from rocketq.common.message_id import decode_offset_msg_id, encode_offset_msg_id
from rocketq.common.names import check_group_name, check_topic_name, is_system_topic
from rocketq.common.record import decode_records
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import TopicRouteData
from rocketq.sdk import admin_wire as aw
from rocketq.sdk import auth_wire as auw
from rocketq.sdk.admin_types import BrokerInfo, MessageTrack, QueueOffsets, QueueProgress
from rocketq.sdk.auth_wire import AclInfo, UserInfo
from rocketq.sdk.client import ClientInstance
from rocketq.sdk.client_wire import search_offset_request
from rocketq.sdk.message_body import (
    MAX_BODY_INFLATE_RATIO,
    MAX_MESSAGE_SIZE,
    BadMessageError,
    check_message,
)
from rocketq.sdk.security import SecurityConfig, client_security
from rocketq.sdk.settings import resolve_namesrv
from rocketq.sdk.trace import TraceEvent, parse_events
from rocketq.sdk.wire import PullOutcome, pull_request

log = logging.getLogger(__name__)


def _decoded(records: bytes) -> list[MessageExt]:
    """Stored records as messages, a compressed body inflated as a consumer inflates it;
    a body that does not inflate stays as stored (and is logged)."""
    msgs = decode_records(records)
    for m in msgs:
        try:
            check_message(
                m, max_body_bytes=MAX_MESSAGE_SIZE * MAX_BODY_INFLATE_RATIO, check_crc=False
            )
        except BadMessageError as exc:
            log.warning("message %s: %s; its body is shown as stored", m.msg_id, exc)
    return msgs


__all__ = [
    "CLIENT_CALL_TIMEOUT",
    "TOOLS_GROUP",
    "AclInfo",
    "Admin",
    "BrokerInfo",
    "MessageTrack",
    "QueueOffsets",
    "QueueProgress",
    "UserInfo",
]

# The group admin reads run as (RocketMQ's tools use it too); it never commits an offset.
TOOLS_GROUP = "TOOLS_CONSUMER"
# How long a broker waits for a client it forwards a request to (RocketMQ's callClient); an
# admin waits longer, so that the broker's answer (the client's, or its timeout) comes first.
CLIENT_CALL_TIMEOUT = 10.0


class Admin:
    """The admin client (mqadmin's verbs)::

        async with Admin("127.0.0.1:9876") as admin:
            await admin.update_topic("Orders", read_queue_nums=4, write_queue_nums=4)

    Args:
        namesrv: Nameserver address(es), ``host:port`` separated by ``;``; when None, the
            ``NAMESRV_ADDR`` environment variable.
        timeout: Seconds each request to a nameserver or broker may take.
        access_key: The access key every request is signed with; None:
            ``ROCKETQ_ACCESS_KEY`` or the credentials file (see :mod:`rocketq.sdk.security`).
        secret_key: Its secret key; None: ``ROCKETQ_SECRET_KEY`` or the credentials file.
        credentials_file: A TOML file of ``access_key`` and ``secret_key``; None:
            ``ROCKETQ_CREDENTIALS_FILE``, else ``~/.rocketq/credentials`` when it exists.
        tls: Connect to nameservers and brokers over TLS; None: as ``ROCKETQ_TLS`` says
            (off when unset).
        tls_ca_file: The CA certificates a server's certificate must chain to (empty:
            ``ROCKETQ_TLS_CA_FILE``, else the system's).
        tls_cert_file: A client certificate, for servers that ask for one.
        tls_key_file: The private key of ``tls_cert_file``.
        tls_verify_hostname: Check that a server's certificate names its address.

    Raises:
        ConfigError: No nameserver address, half a key pair, an unreadable credentials
            file, or a TLS file that is missing or does not load.

    Attributes:
        namesrv: The nameserver address(es) used.
        client: The connection to the cluster.
        timeout: Seconds each request may take.
        security: The credential and TLS settings.
    """

    def __init__(
        self,
        namesrv: str | None = None,
        *,
        timeout: float = 5.0,
        access_key: str | None = None,
        secret_key: str | None = None,
        credentials_file: str | None = None,
        tls: bool | None = None,
        tls_ca_file: str = "",
        tls_cert_file: str = "",
        tls_key_file: str = "",
        tls_verify_hostname: bool = True,
    ) -> None:
        self.namesrv = resolve_namesrv(namesrv, "Admin")
        self.security = SecurityConfig(
            access_key=access_key,
            secret_key=secret_key,
            credentials_file=credentials_file,
            tls=tls,
            tls_ca_file=tls_ca_file,
            tls_cert_file=tls_cert_file,
            tls_key_file=tls_key_file,
            tls_verify_hostname=tls_verify_hostname,
        )
        self.client = ClientInstance(
            self.namesrv, timeout=timeout, security=client_security(self.security, "Admin")
        )
        self.timeout = timeout

    async def start(self) -> None:
        """Connect to the cluster."""
        await self.client.start()

    async def shutdown(self) -> None:
        """Disconnect."""
        await self.client.shutdown()

    async def __aenter__(self) -> Admin:
        """Start the admin client."""
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Shut the admin client down."""
        await self.shutdown()

    async def _ask(self, addr: str, req: RemotingCommand) -> RemotingCommand:
        """The broker's answer, whatever its code (the ``aw.parse_*`` function reads it)."""
        return await self.client.broker(addr).invoke(req, self.timeout)

    async def _masters(self, cluster: str | None = None) -> dict[str, str]:
        """broker name -> master address, for the cluster (or all)."""
        info = await self.client.nameserver.cluster_info()
        if cluster and cluster not in info.cluster_addr_table:
            raise RocketqError(f"cluster {cluster!r} is unknown to the nameserver")
        names = set(info.cluster_addr_table[cluster]) if cluster else set(info.broker_addr_table)
        return {
            n: info.broker_addr_table[n].broker_addrs[MASTER_ID]
            for n in sorted(names)
            if MASTER_ID in info.broker_addr_table[n].broker_addrs
        }

    # -- topics ------------------------------------------------------------------------

    async def update_topic(
        self,
        topic: str,
        *,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = PERM_READ | PERM_WRITE,
        cluster: str | None = None,
        broker_addr: str | None = None,
        order: bool = False,
    ) -> list[str]:
        """Create or update a topic on one broker or on every master of a cluster. A name
        that is not valid, or a system topic's, is MessageIllegalError before anything is
        sent."""
        check_topic_name(topic)
        if is_system_topic(topic):
            raise MessageIllegalError(
                f"the topic name {topic!r} is reserved: it is a system topic of the cluster"
            )
        targets = [broker_addr] if broker_addr else list((await self._masters(cluster)).values())
        if not targets:
            raise RocketqError("no broker master is registered with the nameserver")
        config = aw.TopicConfigData(
            topic_name=topic,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            order=order,
        )
        for addr in targets:
            aw.parse_ok(await self._ask(addr, aw.update_and_create_topic_request(config)))
        return targets

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """Delete a topic from the masters of a cluster (or all) and the nameservers."""
        check_topic_name(topic)
        for addr in (await self._masters(cluster)).values():
            with contextlib.suppress(TopicNotExistError):
                aw.parse_ok(await self._ask(addr, aw.delete_topic_request(topic)))
        await self.client.nameserver.delete_topic(topic, cluster or "")

    async def topic_list(self) -> list[str]:
        """Every topic the nameservers know."""
        return await self.client.nameserver.topic_list()

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The topic's route (raises TopicNotExistError for an unknown topic)."""
        check_topic_name(topic)
        return await self.client.update_route(topic)

    async def topic_status(self, topic: str) -> list[QueueOffsets]:
        """The offsets of each of the topic's queues."""
        check_topic_name(topic)
        route = await self.client.update_route(topic)
        out = []
        for b in sorted(route.broker_datas, key=lambda b: b.broker_name):
            addr = b.broker_addrs.get(MASTER_ID) or next(iter(b.broker_addrs.values()), None)
            if addr is None:
                continue
            resp = aw.parse_topic_stats(await self._ask(addr, aw.topic_stats_request(topic)))
            out += [
                QueueOffsets(
                    b.broker_name, q.queue_id, q.min_offset, q.max_offset, q.last_update_timestamp
                )
                for q in resp.queues
            ]
        return out

    # -- groups and offsets ------------------------------------------------------------

    async def update_sub_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        retry_max_times: int = 16,
        retry_queue_nums: int = 1,
        consume_enable: bool = True,
        consume_broadcast_enable: bool = True,
        consume_message_orderly: bool = False,
    ) -> None:
        """Create or update a subscription group (its retry and consume settings) on
        every master of ``cluster`` (or of every cluster). ``consume_message_orderly``
        makes it a FIFO group for RocketMQ 5's clients. A name that is not valid is
        MessageIllegalError before anything is sent."""
        check_group_name(group)
        config = aw.SubscriptionGroupConfig(
            group_name=group,
            consume_enable=consume_enable,
            consume_broadcast_enable=consume_broadcast_enable,
            retry_queue_nums=retry_queue_nums,
            retry_max_times=retry_max_times,
            broker_id=MASTER_ID,
            which_broker_when_consume_slowly=1,
            notify_consumer_ids_changed_enable=True,
            consume_message_orderly=consume_message_orderly,
        )
        for addr in (await self._masters(cluster)).values():
            aw.parse_ok(await self._ask(addr, aw.update_subscription_group_request(config)))

    async def group_list(self) -> list[str]:
        """Every consumer group the masters know: with a config or a committed offset."""
        groups: set[str] = set()
        for addr in (await self._masters()).values():
            configs = aw.parse_all_subscription_group_config(
                await self._ask(addr, aw.all_subscription_group_config_request())
            )
            groups.update(configs.subscription_group_table)
            offsets = aw.parse_all_consumer_offset(
                await self._ask(addr, aw.all_consumer_offset_request())
            )
            groups.update(offsets.groups)
        return sorted(groups)

    async def group_config(self, group: str) -> dict[str, aw.SubscriptionGroupConfig]:
        """broker name -> the group's config on that master (brokers without it left out)."""
        out = {}
        for name, addr in (await self._masters()).items():
            try:
                resp = aw.parse_subscription_group(
                    await self._ask(addr, aw.all_subscription_group_config_request()), group
                )
            except QueryNotFoundError:
                continue
            out[name] = resp.config
        return out

    async def consume_tps(self, group: str) -> float:
        """The group's consume TPS summed over the masters (0.0 where none reports it)."""
        total = 0.0
        for addr in (await self._masters()).values():
            total += (await self._consume_stats(addr, group)).consume_tps
        return total

    async def topic_consumers(self, topic: str) -> list[str]:
        """The groups that consume ``topic`` (with offsets on it, or online and subscribed),
        as the masters of its route know them."""
        route = await self.client.update_route(topic)
        groups: set[str] = set()
        for b in route.broker_datas:
            addr = b.broker_addrs.get(MASTER_ID)
            if addr is None:
                continue
            try:
                resp = aw.parse_query_topic_consume_by_who(
                    await self._ask(addr, aw.query_topic_consume_by_who_request(topic))
                )
            except QueryNotFoundError:
                continue
            groups.update(resp.groups)
        return sorted(groups)

    async def broker_addrs(self) -> set[str]:
        """Every broker address registered with the nameserver (masters and slaves)."""
        info = await self.client.nameserver.cluster_info()
        return {a for data in info.broker_addr_table.values() for a in data.broker_addrs.values()}

    async def _consume_stats(self, addr: str, group: str, topic: str = "") -> aw.ConsumeStats:
        """The group's stats on one master; none (no queue, 0 TPS) where the broker has never
        heard of the group."""
        answer = await self._ask(addr, aw.consume_stats_request(group, topic))
        try:
            return aw.parse_consume_stats(answer)
        except SubscriptionGroupNotExistError:
            return aw.ConsumeStats((), 0.0)

    async def consumer_progress(self, group: str, topic: str = "") -> list[QueueProgress]:
        """How far the group is in each queue (of ``topic``, or of every topic it reads)."""
        out = []
        for name, addr in (await self._masters()).items():
            resp = await self._consume_stats(addr, group, topic)
            out += [
                QueueProgress(
                    q.topic,
                    name,
                    q.queue_id,
                    q.max_offset,
                    q.consumer_offset,
                    q.last_update_timestamp,
                )
                for q in resp.queues
            ]
        return sorted(out, key=lambda p: (p.topic, p.broker_name, p.queue_id))

    async def consumer_connections(self, group: str) -> list[aw.ConsumerConnection]:
        """The group's online clients, as the brokers know them."""
        conns: dict[str, aw.ConsumerConnection] = {}
        for addr in (await self._masters()).values():
            try:
                resp = aw.parse_consumer_connection_list(
                    await self._ask(addr, aw.consumer_connection_list_request(group))
                )
            except ConsumerNotOnlineError:  # none of the group's clients is on this broker
                continue
            for c in resp.connections:
                conns[c.client_id] = c
        return [conns[k] for k in sorted(conns)]

    async def _client_broker(self, group: str, client_id: str) -> str:
        """A master the group's client ``client_id`` is connected to (heartbeats over);
        ConsumerNotOnlineError naming the group's clients when none is."""
        others: set[str] = set()
        for addr in (await self._masters()).values():
            try:
                resp = aw.parse_consumer_connection_list(
                    await self._ask(addr, aw.consumer_connection_list_request(group))
                )
            except ConsumerNotOnlineError:
                continue
            ids = {c.client_id for c in resp.connections}
            if client_id in ids:
                return addr
            others |= ids
        if not others:
            raise ConsumerNotOnlineError(
                f"consumer group {group!r} has no online client on any broker; is its "
                "consumer running? (`rocketq admin consumer-connection -g GROUP` lists them)"
            )
        raise ConsumerNotOnlineError(
            f"{client_id!r} is not an online client of consumer group {group!r}; its clients "
            "are " + ", ".join(sorted(others))
        )

    def _client_call_timeout(self) -> float:
        return max(self.timeout * 3, CLIENT_CALL_TIMEOUT + self.timeout)

    async def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False
    ) -> aw.ConsumerRunningInfo:
        """One consumer client's running info (mqadmin consumerStatus -i): its settings,
        subscriptions, every queue it owns with the offset it would commit, its measured
        figures, and with ``jstack`` a dump of its threads and tasks. Asked through a
        master the client is connected to, which forwards it over the client's connection."""
        addr = await self._client_broker(group, client_id)
        req = aw.consumer_running_info_request(group, client_id, jstack=jstack)
        answer = await self.client.broker(addr).invoke(req, self._client_call_timeout())
        return aw.parse_consumer_running_info(answer)

    async def consume_message_directly(
        self, group: str, client_id: str, msg_id: str
    ) -> aw.ConsumeMessageDirectlyResult:
        """Have one push consumer client of ``group`` run its listener on a stored message,
        as a diagnostic (mqadmin's consumeMessageDirectly): the broker holding it (the one
        its offset id ``msg_id`` names) hands it to the client over the client's connection
        to that broker. The group's offsets do not move and nothing is sent back."""
        try:
            addr, _ = decode_offset_msg_id(msg_id)
        except ValueError as exc:
            raise MessageIllegalError(
                f"{exc}; give the message's offset id (offset_msg_id, as `rocketq send` and "
                "`rocketq admin query-msg-by-key` print it)"
            ) from None
        req = aw.consume_message_directly_request(group, client_id, msg_id)
        try:
            answer = await self.client.broker(addr).invoke(req, self._client_call_timeout())
        except ConnectBrokerError as exc:
            raise ConnectBrokerError(
                f"message id {msg_id} names broker {addr}, which does not answer: {exc}"
            ) from None
        return aw.parse_consume_message_directly(answer)

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int
    ) -> dict[tuple[str, int], int]:
        """Move the group's committed offsets in ``topic`` to the first message stored at
        or after ``timestamp_ms`` (epoch milliseconds); -> (broker name, queue id) -> the
        new offset."""
        check_topic_name(topic)
        check_group_name(group)
        route = await self.client.update_route(topic)
        out = {}
        for b in route.broker_datas:
            addr = b.broker_addrs.get(MASTER_ID)
            if addr is None:
                continue
            resp = aw.parse_reset_offset_by_time(
                await self._ask(addr, aw.reset_offset_by_time_request(group, topic, timestamp_ms))
            )
            for q in resp.queues:
                out[(b.broker_name, q.queue_id)] = q.consumer_offset
        return out

    # -- messages ----------------------------------------------------------------------

    async def query_msg_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 32,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[MessageExt]:
        """The messages of ``topic`` with ``key`` stored between ``begin_ms`` and ``end_ms``
        (epoch milliseconds; by default up to a minute from now), newest first, at most
        ``max_num``."""
        route = await self.client.update_route(topic)
        end_ms = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
        found: list[MessageExt] = []
        for b in route.broker_datas:
            addr = b.broker_addrs.get(MASTER_ID) or next(iter(b.broker_addrs.values()), None)
            if addr is None:
                continue
            try:
                resp = aw.parse_query_message(
                    await self._ask(
                        addr,
                        aw.query_message_request(
                            topic,
                            key,
                            max_num=max_num,
                            begin_timestamp=begin_ms,
                            end_timestamp=end_ms,
                        ),
                    )
                )
            except QueryNotFoundError:
                continue
            found += _decoded(resp.records)
        found.sort(key=lambda m: m.store_timestamp, reverse=True)
        return found[:max_num]

    async def query_msg_by_id(self, msg_id: str) -> MessageExt:
        """By offset id (store host + offset); the broker is the one the id names."""
        try:
            addr, offset = decode_offset_msg_id(msg_id)
        except ValueError as exc:
            raise QueryNotFoundError(str(exc)) from None
        resp = aw.parse_view_message(await self._ask(addr, aw.view_message_request(offset)))
        return _decoded(resp.records)[0]

    async def resend_message(self, msg_id: str, group: str) -> str:
        """Send a stored message (a dead letter, or any) to ``group`` again: the broker
        that holds it puts a copy on %RETRY%<group>, due at once, with its reconsume count
        at 0, and the group's consumers get it under its original topic. -> the copy's
        offset id."""
        check_group_name(group)
        try:
            addr, offset = decode_offset_msg_id(msg_id)
        except ValueError as exc:
            raise QueryNotFoundError(str(exc)) from None
        resp = aw.parse_resend_message(
            await self._ask(addr, aw.resend_message_request(group, offset))
        )
        return encode_offset_msg_id(resp.store_host, resp.wrote_offset)

    async def messages_by_time(
        self, topic: str, begin_ms: int = 0, end_ms: int | None = None, *, max_num: int = 1000
    ) -> list[MessageExt]:
        """The messages of ``topic`` stored between ``begin_ms`` and ``end_ms`` (epoch ms),
        oldest first, at most ``max_num``: each queue read from the offset its broker finds
        for ``begin_ms``, with the tools' group (TOOLS_CONSUMER), which commits nothing."""
        end_ms = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
        found: list[MessageExt] = []
        route = await self.client.update_route(topic)
        for b in sorted(route.broker_datas, key=lambda b: b.broker_name):
            addr = b.broker_addrs.get(MASTER_ID) or next(iter(b.broker_addrs.values()), None)
            if addr is None:
                continue
            broker = self.client.broker(addr)
            readable = max(
                (q.read_queue_nums for q in route.queue_datas if q.broker_name == b.broker_name),
                default=0,
            )
            stats = aw.parse_topic_stats(await self._ask(addr, aw.topic_stats_request(topic)))
            for q in stats.queues:
                if q.queue_id >= readable:
                    continue  # a write-only queue: the broker refuses to read it
                start = await broker.offset(
                    search_offset_request(topic, q.queue_id, begin_ms), self.timeout
                )
                found += await self._read_queue(
                    addr, topic, q.queue_id, max(start, q.min_offset), q.max_offset,
                    end_ms, max_num,
                )  # fmt: skip
        found = [m for m in found if begin_ms <= m.store_timestamp <= end_ms]
        found.sort(key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))
        return found[:max_num]

    async def _read_queue(
        self, addr: str, topic: str, queue_id: int, offset: int, end: int, end_ms: int, limit: int
    ) -> list[MessageExt]:
        out: list[MessageExt] = []
        broker = self.client.broker(addr)
        while offset < end and len(out) < limit:
            resp = await broker.pull(
                pull_request(
                    group=TOOLS_GROUP,
                    topic=topic,
                    queue_id=queue_id,
                    offset=offset,
                    max_msg_nums=32,
                ),
                self.timeout,
            )
            if resp.outcome is not PullOutcome.FOUND or resp.next_begin_offset <= offset:
                break
            batch = _decoded(resp.records)
            out += batch
            offset = resp.next_begin_offset
            if batch and batch[-1].store_timestamp > end_ms:
                break
        return out

    async def dlq_messages(
        self, group: str, begin_ms: int = 0, end_ms: int | None = None, *, max_num: int = 1000
    ) -> list[MessageExt]:
        """A group's dead letters (%DLQ%<group>) stored in the time range, oldest first."""
        try:
            return await self.messages_by_time(dlq_topic(group), begin_ms, end_ms, max_num=max_num)
        except TopicNotExistError:
            return []  # no dead letter yet: the DLQ topic is made with the first

    async def query_msg_by_offset(self, broker_addr: str, commit_log_offset: int) -> MessageExt:
        """The message stored at ``commit_log_offset`` of the broker at ``broker_addr``."""
        resp = aw.parse_view_message(
            await self._ask(broker_addr, aw.view_message_request(commit_log_offset))
        )
        return _decoded(resp.records)[0]

    async def trace(self, msg_id: str, *, topic: str = TRACE_TOPIC) -> list[TraceEvent]:
        """The trace events of a message (sent or consumed by traced clients), oldest first."""
        events = []
        try:
            found = await self.query_msg_by_key(topic, msg_id, max_num=64)
        except TopicNotExistError:
            # No trace written yet: the trace topic is made by the first trace writer's send,
            # and reaches the nameservers with the broker's next registration.
            return []
        for m in found:
            events += [e for e in parse_events(m.body) if e.msg_id == msg_id]
        return sorted(events, key=lambda e: (e.timestamp, e.type != "Pub"))

    async def message_track(self, msg: MessageExt) -> list[MessageTrack]:
        """Every group that consumes the message's topic, and whether it consumed it."""
        addr = msg.store_host
        resp = aw.parse_query_topic_consume_by_who(
            await self._ask(addr, aw.query_topic_consume_by_who_request(msg.topic))
        )
        # The group the store host belongs to, whatever its role now: after a Raft leader
        # change the member that stored the message is a follower of the same broker name.
        info = await self.client.nameserver.cluster_info()
        broker_name = next(
            (n for n, data in info.broker_addr_table.items() if addr in data.broker_addrs.values()),
            None,
        )
        tracks = []
        for group in resp.groups:
            conns = await self.consumer_connections(group)
            progress = [
                p
                for p in await self.consumer_progress(group, msg.topic)
                if p.broker_name == broker_name and p.queue_id == msg.queue_id
            ]
            if not progress:
                tracks.append(MessageTrack(group, "UNKNOWN", "no offset for the queue"))
                continue
            offset = progress[0].consumer_offset
            if offset <= msg.queue_offset:
                state = "NOT_CONSUME_YET" if conns else "NOT_ONLINE"
                tracks.append(MessageTrack(group, state, f"consumer offset {offset}"))
                continue
            state = "CONSUMED"
            for sub in conns[0].subscriptions if conns else []:
                if sub.topic == msg.topic and sub.expression_type == "TAG":
                    tags = {t.strip() for t in sub.expression.split("||")}
                    if "*" not in tags and sub.expression.strip() and msg.tags not in tags:
                        state = "CONSUMED_BUT_FILTERED"
            tracks.append(MessageTrack(group, state, f"consumer offset {offset}"))
        return tracks

    # -- cluster -----------------------------------------------------------------------

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """The broker's config in effect: every broker.toml key, its and its store's."""
        resp = aw.parse_broker_config(await self._ask(broker_addr, aw.broker_config_request()))
        return dict(sorted(resp.table.items()))

    async def transfer_leader(self, leader_addr: str, to: str, group: str = "") -> None:
        """Ask a Raft group's leader to hand leadership to member ``to`` (rocketq's own
        TRANSFER_LEADER request); it answers once the transfer has started."""
        aw.parse_transfer_leader(
            await self._ask(leader_addr, aw.transfer_leader_request(to, group))
        )

    async def cluster_list(self) -> list[BrokerInfo]:
        """Every broker of every cluster, with its runtime figures."""
        info = await self.client.nameserver.cluster_info()
        out = []
        for cluster, names in sorted(info.cluster_addr_table.items()):
            for name in sorted(names):
                data = info.broker_addr_table[name]
                for bid, addr in sorted(data.broker_addrs.items()):
                    try:
                        rt = aw.parse_broker_runtime_info(
                            await self._ask(addr, aw.broker_runtime_info_request())
                        )
                        runtime = dict(rt.table)
                    except RocketqError as exc:
                        runtime = {"error": str(exc)}
                    out.append(BrokerInfo(cluster, name, bid, addr, runtime))
        return out

    # -- users and ACLs (ACL 2.0) -------------------------------------------------------

    async def _auth_targets(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        """The brokers a user or ACL change goes to: ``broker_addr``, else every master of
        ``cluster`` (or of every cluster), as mqadmin's -b / -c."""
        if broker_addr:
            return [broker_addr]
        targets = list((await self._masters(cluster)).values())
        if not targets:
            raise RocketqError("no broker master is registered with the nameserver")
        return targets

    async def _apply(
        self, cluster: str | None, broker_addr: str | None, req: Callable[[], RemotingCommand]
    ) -> list[str]:
        targets = await self._auth_targets(cluster, broker_addr)
        for addr in targets:
            aw.parse_ok(await self._ask(addr, req()))
        return targets

    async def create_user(
        self,
        username: str,
        password: str,
        user_type: str = "Normal",
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Create a user (its name is the access key clients sign with, its password the
        secret key) on ``broker_addr``, else on every master of ``cluster`` (or of every
        cluster); the brokers written to. ``user_type``: ``Normal`` or ``Super``.

        Raises:
            ConfigError: An unknown user type, or an empty name or password.
            NoPermissionError: The admin's credentials may not manage users.
        """
        if not username or not password:
            raise ConfigError("a user needs a name and a password")
        doc = auw.user_doc(username, password, auw.user_type(user_type))
        return await self._apply(cluster, broker_addr, lambda: auw.create_user_request(doc))

    async def update_user(
        self,
        username: str,
        password: str | None = None,
        user_type: str | None = None,
        user_status: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Change a user's password, type (``Normal``/``Super``) or status
        (``enable``/``disable``): what is None stays as it is. Goes where
        :meth:`create_user` goes; the brokers written to."""
        doc = auw.user_doc(
            username,
            password,
            None if user_type is None else auw.user_type(user_type),
            None if user_status is None else auw.user_status(user_status),
        )
        return await self._apply(cluster, broker_addr, lambda: auw.update_user_request(doc))

    async def delete_user(
        self, username: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Delete a user where :meth:`create_user` goes; the brokers written to."""
        return await self._apply(cluster, broker_addr, lambda: auw.delete_user_request(username))

    async def get_user(
        self, username: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> UserInfo | None:
        """A user as ``broker_addr`` (else the first master of ``cluster``, by broker name)
        has it; None when it has no such user."""
        addr = (await self._auth_targets(cluster, broker_addr))[0]
        return auw.parse_user(await self._ask(addr, auw.get_user_request(username)))

    async def list_users(
        self, filter: str = "", *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[UserInfo]:
        """The users (those whose name contains ``filter``) of ``broker_addr``, else of the
        first master of ``cluster``, by name."""
        addr = (await self._auth_targets(cluster, broker_addr))[0]
        return auw.parse_users(await self._ask(addr, auw.list_users_request(filter)))

    def _acl_doc(
        self,
        subject: str,
        resources: str | Iterable[str],
        actions: str | Iterable[str],
        source_ips: str | Iterable[str],
        decision: str,
    ) -> dict[str, object]:
        listed = [auw.resource(r) for r in _split(resources)]
        if not listed:
            raise ConfigError("an ACL needs at least one resource (e.g. Topic:orders)")
        return auw.acl_doc(
            auw.subject(subject),
            listed,
            auw.actions(_split(actions)),
            _split(source_ips),
            auw.decision(decision),
        )

    async def create_acl(
        self,
        subject: str,
        resources: str | Iterable[str],
        actions: str | Iterable[str],
        source_ips: str | Iterable[str] = (),
        decision: str = "Allow",
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Give ``subject`` (``User:alice``) a policy: for each resource (``Topic:orders``,
        ``Group:g*``, ``*``; a list, or one comma-separated string) the ``actions`` (``Pub``,
        ``Sub``, ``Create``, ``Update``, ``Delete``, ``Get``, ``List``, ``All``) are
        allowed or denied (``decision``), from ``source_ips`` (addresses or CIDR blocks;
        none: any). Goes to ``broker_addr``, else to every master of ``cluster`` (or of
        every cluster); the brokers written to.

        Raises:
            ConfigError: A subject, resource, action or decision RocketMQ does not know.
            NoPermissionError: The admin's credentials may not manage ACLs.
        """
        doc = self._acl_doc(subject, resources, actions, source_ips, decision)
        return await self._apply(cluster, broker_addr, lambda: auw.create_acl_request(doc))

    async def update_acl(
        self,
        subject: str,
        resources: str | Iterable[str],
        actions: str | Iterable[str],
        source_ips: str | Iterable[str] = (),
        decision: str = "Allow",
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Replace what ``subject``'s policy says of these resources (the arguments of
        :meth:`create_acl`); the brokers written to."""
        doc = self._acl_doc(subject, resources, actions, source_ips, decision)
        return await self._apply(cluster, broker_addr, lambda: auw.update_acl_request(doc))

    async def delete_acl(
        self,
        subject: str,
        resource: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Delete what ``subject``'s ACL says of ``resource``, or (None) its whole ACL,
        where :meth:`create_acl` goes; the brokers written to."""
        who = auw.subject(subject)
        what = None if resource is None else auw.resource(resource)
        return await self._apply(cluster, broker_addr, lambda: auw.delete_acl_request(who, what))

    async def get_acl(
        self, subject: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> AclInfo | None:
        """``subject``'s ACL as ``broker_addr`` (else the first master of ``cluster``, by
        broker name) has it; None when it has none."""
        addr = (await self._auth_targets(cluster, broker_addr))[0]
        return auw.parse_acl(await self._ask(addr, auw.get_acl_request(auw.subject(subject))))

    async def list_acls(
        self,
        subject_filter: str = "",
        resource_filter: str = "",
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[AclInfo]:
        """The ACLs of ``broker_addr``, else of the first master of ``cluster`` (those whose
        subject contains ``subject_filter`` and that name a resource containing
        ``resource_filter``), by subject."""
        addr = (await self._auth_targets(cluster, broker_addr))[0]
        return auw.parse_acls(
            await self._ask(addr, auw.list_acls_request(subject_filter, resource_filter))
        )


def _split(values: str | Iterable[str]) -> list[str]:
    """One comma-separated string, or a list of them, as its non-empty parts."""
    items = [values] if isinstance(values, str) else list(values)
    return [part.strip() for item in items for part in item.split(",") if part.strip()]
