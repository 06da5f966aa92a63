"""What the broker counts as it works: one dict update per request, per batch or per pull,
never per message. ``metrics_export.py`` reads these and the broker's state when scraped.

Keys hold only what the request brings (topic, message type, group, codes); labels that
follow from them (is_system, is_retry) are worked out at scrape time, once per key.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from typing import Final

from rocketq.common.metrics import (
    MESSAGE_SIZE_BUCKETS,
    RPC_LATENCY_BUCKETS_MS,
    SYNC_WAIT_BUCKETS_S,
    Histogram,
    Labels,
)

NORMAL: Final = "normal"
FIFO: Final = "fifo"
DELAY: Final = "delay"
TRANSACTION: Final = "transaction"

# RocketMQ's request codes (RequestCode) as rpc_latency's request_code label.
SEND_MESSAGE: Final = "send_message"
SEND_BATCH_MESSAGE: Final = "send_batch_message"
PULL_MESSAGE: Final = "pull_message"
HEARTBEAT: Final = "heartbeat"
CONSUMER_SEND_MSG_BACK: Final = "consumer_send_msg_back"
END_TRANSACTION: Final = "end_transaction"
POP_MESSAGE: Final = "pop_message"
ACK_MESSAGE: Final = "ack_message"
CHANGE_INVISIBLE_TIME: Final = "change_message_invisibletime"

# rpc_latency's and the connection gauges' protocol_type: the endpoint requests come through
# (RocketMQ's remoting protocol on the client port).
REMOTING: Final = "remoting"
# The apache.rocketmq.v2 endpoint; its request_code is the RPC's name in snake_case
# (send_message, receive_message, ack_message...), as RocketMQ 5's proxy labels them.
GRPC: Final = "grpc"

_SIZE_SLOTS: Final = len(MESSAGE_SIZE_BUCKETS) + 1


class BrokerCounters:
    """Counters and histograms of one broker, updated on the event loop."""

    def __init__(self) -> None:
        # (topic, message type) -> [messages, bytes, size bucket counts...]
        self.messages_in: dict[tuple[str, str], list[int]] = {}
        # topic -> its normal messages' row of messages_in (the same list): a send of one
        # topic's normal messages finds it without a (topic, type) key
        self._normal_in: dict[str, list[int]] = {}
        # (topic, group) -> [messages, bytes]
        self.messages_out: dict[tuple[str, str], list[int]] = {}
        # (topic, group) -> messages moved to the group's DLQ
        self.to_dlq: dict[tuple[str, str], int] = {}
        # topic -> transactions committed / rolled back / prepared and not yet ended
        self.commits: dict[str, int] = {}
        self.rollbacks: dict[str, int] = {}
        self.half: dict[str, int] = {}
        # (protocol, request code, response code, long polling) -> latency histogram (ms)
        self.rpc = Histogram(RPC_LATENCY_BUCKETS_MS)
        # () -> how long sends waited for a slave or a Raft quorum (s)
        self.sync_wait = Histogram(SYNC_WAIT_BUCKETS_S)
        # (group, topic, queue) -> the next offset of the last pull (pulled, not committed)
        self.pulled: dict[tuple[str, str, int], int] = {}

    def stored(self, topic: str, kind: str, count: int, size: int) -> None:
        """A send stored ``count`` messages of ``size`` bytes in all; a batch is counted at
        its mean message size."""
        if kind == NORMAL:
            row = self._normal_in.get(topic)
            if row is None:
                row = self._normal_in[topic] = self._row(topic, kind)
        else:
            row = self.messages_in.get((topic, kind)) or self._row(topic, kind)
        row[0] += count
        row[1] += size
        # The first bucket whose bound is at least the mean (the last slot: past them all).
        row[2 + bisect_left(MESSAGE_SIZE_BUCKETS, size // count if count else size)] += count

    def _row(self, topic: str, kind: str) -> list[int]:
        row = self.messages_in.get((topic, kind))
        if row is None:
            row = self.messages_in[(topic, kind)] = [0] * (2 + _SIZE_SLOTS)
        return row

    def pulled_out(
        self, group: str, topic: str, queue_id: int, count: int, size: int, next_offset: int
    ) -> None:
        row = self.messages_out.get((topic, group))
        if row is None:
            row = self.messages_out[(topic, group)] = [0, 0]
        row[0] += count
        row[1] += size
        self.pulled[(group, topic, queue_id)] = next_offset

    def dead_lettered(self, topic: str, group: str) -> None:
        self.to_dlq[(topic, group)] = self.to_dlq.get((topic, group), 0) + 1

    def prepared(self, topic: str) -> None:
        self.half[topic] = self.half.get(topic, 0) + 1

    def ended(self, topic: str, *, committed: bool) -> None:
        """A half message was committed or rolled back."""
        table = self.commits if committed else self.rollbacks
        table[topic] = table.get(topic, 0) + 1
        self.discarded(topic)

    def discarded(self, topic: str) -> None:
        """A half message is no longer waiting (ended, or given up after its checks)."""
        self.half[topic] = max(0, self.half.get(topic, 0) - 1)

    def answered(
        self,
        request: str,
        code: str,
        started: float,
        count: int = 1,
        *,
        held: bool = False,
        protocol: str = REMOTING,
    ) -> None:
        """``count`` requests answered with ``code`` since ``started`` (time.perf_counter)."""
        key: Labels = (protocol, request, code, "true" if held else "false")
        self.rpc.observe(key, (time.perf_counter() - started) * 1000, count)

    def waited_for_replicas(self, started: float) -> None:
        self.sync_wait.observe((), time.perf_counter() - started)
