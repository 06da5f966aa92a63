"""The load of a chaos run: producer and consumer processes that log every operation.

``python -m rocketq.chaos.workload producer|consumer ...`` - the runner starts each as a
process of its own (so a fault can kill a consumer without touching the others) and stops
it with SIGTERM: a producer then sends nothing new and waits for its sends in flight, a
consumer shuts down (committing its offsets).

A producer sends messages whose key is ``<name>-<sequence>``, unique across the run:
single sends and batches to the chaos topic, paced to ``--rate`` messages a second, and
with ``--shards`` orderly sends to the orderly topic - per shard one message at a time, to
a queue fixed for the shard when the producer starts (the same queue whichever broker is
down, so a shard's order cannot depend on which queues are up), and an unacknowledged
message is sent again (same key) until it is acknowledged. Producers run with
``send_latency_fault_enable`` off, RocketMQ's default, so a group that comes back is sent
to at once and its failover time is measured, not the producer's avoidance window; and
clients poll the nameservers every second (below).

A consumer runs a concurrent push consumer on the chaos topic and, with ``--orderly``, an
orderly one on the orderly topic; each message handed to it is logged before it is
acknowledged.

Against a cluster with auth and TLS on, the runner gives each process the cluster's client
environment (``LocalCluster.client_env``): ``ROCKETQ_CREDENTIALS_FILE`` names the super
user's credentials, which every client signs with, and ``ROCKETQ_TLS`` /
``ROCKETQ_TLS_CA_FILE`` make every client connect over TLS trusting the cluster's CA
(:func:`client_settings`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from rocketq.chaos.history import HistoryWriter
from rocketq.cluster.launcher import LauncherError, LocalCluster
from rocketq.common.exceptions import RocketqError
from rocketq.common.message import Message, MessageExt, MessageQueue
from rocketq.sdk.admin import Admin
from rocketq.sdk.consumer_types import ConsumeFrom, ConsumeResult
from rocketq.sdk.producer import Producer
from rocketq.sdk.push_consumer import PushConsumer

TOPIC: Final = "ChaosTopic"
ORDERLY_TOPIC: Final = "ChaosOrderly"
PRODUCER_GROUP: Final = "chaos_producer"
CONSUMER_GROUP: Final = "chaos_consumer"
ORDERLY_GROUP: Final = "chaos_orderly_consumer"
SHARD_PROPERTY: Final = "CHAOS_SHARD"  # an orderly message's shard, for its receipt
BODY_SIZE: Final = 256
BATCH_SHARE: Final = 0.25  # of operations (orderly ones aside) that are batches
MAX_BATCH: Final = 8
IN_FLIGHT: Final = 8  # concurrent single/batch senders per producer
SEND_TIMEOUT_S: Final = 2.0  # RocketMQ's sendMsgTimeout is 3 s
RETRY_PAUSE_S: Final = 0.2  # before an orderly message is sent again
ROUTE_WAIT_S: Final = 60.0
# Consumers: rebalance and commit often, so a killed consumer's queues move quickly.
REBALANCE_INTERVAL: Final = 2.0
PERSIST_OFFSET_INTERVAL: Final = 1.0
# Producers and consumers ask the nameservers for routes every second (RocketMQ's
# pollNameServerInterval, 30 s by default): a group whose master went away is left out of
# a route until it is asked again, and the run measures the cluster's failover, not the
# client's polling period.
POLL_NAME_SERVER_INTERVAL: Final = 1.0


def client_settings(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The credential and TLS settings of the workload's clients, from the environment the
    runner gives them: a credentials file (``ROCKETQ_CREDENTIALS_FILE``) and TLS
    (``ROCKETQ_TLS`` true, ``ROCKETQ_TLS_CA_FILE`` the CA). Empty for a cluster without
    them."""
    settings: dict[str, Any] = {}
    if credentials := environ.get("ROCKETQ_CREDENTIALS_FILE"):
        settings["credentials_file"] = credentials
    if environ.get("ROCKETQ_TLS", "").strip().lower() in ("1", "true", "yes", "on"):
        settings["tls"] = True
        if ca := environ.get("ROCKETQ_TLS_CA_FILE"):
            settings["tls_ca_file"] = ca
    return settings


class Pacer:
    """Spaces sends to a rate; a sender that fell behind (a send that hung) goes on at the
    rate from where it is, without a burst to catch up."""

    MAX_BEHIND_S: Final = 1.0

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / max(rate, 1e-9)
        self.due = time.monotonic()

    def sent(self, n: int) -> float:
        """Count ``n`` messages sent; -> seconds to wait before the next send."""
        now = time.monotonic()
        self.due = max(self.due, now - self.MAX_BEHIND_S) + n * self.interval
        return self.due - now


def _timeout_like(exc: BaseException) -> bool:
    """No answer in time (the SDK wraps a broker's silence into its send error)."""
    return (
        isinstance(exc, TimeoutError)
        or "timeout" in type(exc).__name__.lower()
        or "timed out" in str(exc)
    )


class ProducerProcess:
    def __init__(
        self,
        name: str,
        namesrv: str,
        history: HistoryWriter,
        *,
        rate: float,
        shards: int,
        seed: int,
        in_flight: int = IN_FLIGHT,
    ) -> None:
        self.name = name
        self.namesrv = namesrv
        self.history = history
        self.rate = rate
        self.shards = shards
        self.rng = random.Random(seed)
        self.in_flight = in_flight
        self.seq = 0
        self.op = 0
        self.stopping = asyncio.Event()
        self.body = (b"chaos-" * (BODY_SIZE // 6 + 1))[:BODY_SIZE]

    def _keys(self, n: int) -> list[str]:
        keys = [f"{self.name}-{self.seq + i}" for i in range(n)]
        self.seq += n
        return keys

    def _next_op(self) -> int:
        self.op += 1
        return self.op

    async def _send(
        self,
        producer: Producer,
        topic: str,
        keys: list[str],
        *,
        mode: str,
        shard: str | None = None,
        queue: MessageQueue | None = None,
    ) -> bool:
        """One operation, logged before and after; True if SEND_OK."""
        op = self._next_op()
        props = {SHARD_PROPERTY: shard} if shard is not None else {}
        msgs = [Message(topic, self.body, keys=[k], properties=props) for k in keys]
        self.history.write("send", process=self.name, op=op, keys=keys, mode=mode, shard=shard)
        try:
            if mode == "batch":
                result = await producer.send_batch(msgs, timeout=SEND_TIMEOUT_S)
            else:
                result = await producer.send(msgs[0], queue=queue, timeout=SEND_TIMEOUT_S)
        except Exception as exc:
            kind = "send_timeout" if _timeout_like(exc) else "send_failed"
            error = f"{type(exc).__name__}: {exc}"[:300]
            self.history.write(kind, process=self.name, op=op, keys=keys, error=error)
            return False
        if not result.ok:
            self.history.write(
                "send_failed", process=self.name, op=op, keys=keys, error=result.status.name
            )
            return False
        self.history.write(
            "send_ok",
            process=self.name,
            op=op,
            keys=keys,
            msg_ids=list(result.msg_ids or (result.msg_id,)),
            group=result.queue.broker_name,
            queue=result.queue.queue_id,
            offset=result.queue_offset,
        )
        return True

    async def _pace(self, pacer: Pacer, n: int) -> None:
        delay = pacer.sent(n)
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)

    async def _sender(self, producer: Producer, share: float) -> None:
        pacer = Pacer(self.rate * share)
        while not self.stopping.is_set():
            n = 1
            if self.rng.random() < BATCH_SHARE:
                n = self.rng.randint(2, MAX_BATCH)
            await self._send(producer, TOPIC, self._keys(n), mode="batch" if n > 1 else "single")
            await self._pace(pacer, n)

    async def _orderly(self, producer: Producer, shard: str, queue: MessageQueue) -> None:
        pacer = Pacer(self.rate * 0.5 / self.shards)
        while not self.stopping.is_set():
            keys = self._keys(1)
            while not await self._send(
                producer, ORDERLY_TOPIC, keys, mode="orderly", shard=shard, queue=queue
            ):
                if self.stopping.is_set():
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), RETRY_PAUSE_S)
            await self._pace(pacer, 1)

    async def _shard_queues(self) -> list[MessageQueue]:
        """Every queue of the orderly topic (all groups), in a fixed order."""
        deadline = time.monotonic() + ROUTE_WAIT_S
        async with Admin(self.namesrv, **client_settings()) as admin:
            while True:
                try:
                    route = await admin.topic_route(ORDERLY_TOPIC)
                except RocketqError:
                    route = None
                if route is not None and route.queue_datas:
                    return sorted(
                        MessageQueue(ORDERLY_TOPIC, qd.broker_name, i)
                        for qd in route.queue_datas
                        for i in range(qd.write_queue_nums)
                    )
                if time.monotonic() > deadline:
                    raise RocketqError(f"no route for {ORDERLY_TOPIC} in {ROUTE_WAIT_S:g} s")
                await asyncio.sleep(0.5)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stopping.set)
        loop.add_signal_handler(signal.SIGINT, self.stopping.set)
        async with Producer(
            PRODUCER_GROUP,
            self.namesrv,
            send_latency_fault_enable=False,
            poll_name_server_interval=POLL_NAME_SERVER_INTERVAL,
            **client_settings(),
        ) as producer:
            tasks = []
            single_share = 1.0 if not self.shards else 0.5
            for _ in range(self.in_flight):
                tasks.append(
                    asyncio.ensure_future(self._sender(producer, single_share / self.in_flight))
                )
            if self.shards:
                queues = await self._shard_queues()
                for i in range(self.shards):
                    shard = f"{self.name}-s{i}"
                    queue = queues[(hash_shard(shard)) % len(queues)]
                    tasks.append(asyncio.ensure_future(self._orderly(producer, shard, queue)))
            await asyncio.gather(*tasks)


def hash_shard(shard: str) -> int:
    """A stable (not per-process salted) hash of a shard name."""
    value = 0
    for ch in shard.encode():
        value = (value * 31 + ch) & 0x7FFFFFFF
    return value


class ConsumerProcess:
    def __init__(
        self, name: str, namesrv: str, history: HistoryWriter, *, cluster_dir: Path, orderly: bool
    ) -> None:
        self.name = name
        self.namesrv = namesrv
        self.history = history
        self.cluster_dir = cluster_dir
        self.orderly = orderly
        self.groups: dict[str, str] = {}
        self.stopping = asyncio.Event()
        self._load_groups()

    def _load_groups(self) -> None:
        """Broker address -> broker group, from the launcher's cluster.json."""
        with contextlib.suppress(LauncherError, OSError):
            cluster = LocalCluster.load(self.cluster_dir)
            self.groups = {b.addr: b.broker_name for b in cluster.brokers}

    def _group_of(self, msg: MessageExt) -> str:
        host = msg.store_host
        if host not in self.groups:
            self._load_groups()
        return self.groups.get(host, host)

    def _handler(self) -> Callable[[list[MessageExt]], ConsumeResult]:
        def handle(msgs: list[MessageExt]) -> ConsumeResult:
            for m in msgs:
                keys = m.keys
                self.history.write(
                    "receive",
                    process=self.name,
                    key=keys[0] if keys else None,
                    msg_id=m.msg_id,
                    group=self._group_of(m),
                    queue=m.queue_id,
                    offset=m.queue_offset,
                    reconsume=m.reconsume_times,
                    shard=m.properties.get(SHARD_PROPERTY),
                )
            return ConsumeResult.SUCCESS

        return handle

    def _consumer(self, group: str, topic: str, *, orderly: bool) -> PushConsumer:
        consumer = PushConsumer(
            group,
            self.namesrv,
            consume_from=ConsumeFrom.FIRST_OFFSET,
            orderly=orderly,
            rebalance_interval=REBALANCE_INTERVAL,
            persist_consumer_offset_interval=PERSIST_OFFSET_INTERVAL,
            poll_name_server_interval=POLL_NAME_SERVER_INTERVAL,
            offset_store_dir=str(self.cluster_dir / "offsets" / self.name),
            **client_settings(),
        )
        consumer.subscribe(topic, "*")
        consumer.on_message(self._handler())
        return consumer

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stopping.set)
        loop.add_signal_handler(signal.SIGINT, self.stopping.set)
        consumers = [self._consumer(CONSUMER_GROUP, TOPIC, orderly=False)]
        if self.orderly:
            consumers.append(self._consumer(ORDERLY_GROUP, ORDERLY_TOPIC, orderly=True))
        for c in consumers:
            await c.start()
        print('{"ready": "consumer"}', flush=True)
        try:
            await self.stopping.wait()
        finally:
            for c in consumers:
                await c.shutdown()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rocketq.chaos.workload")
    sub = parser.add_subparsers(dest="role", required=True)
    p = sub.add_parser("producer")
    p.add_argument("--name", required=True)
    p.add_argument("--namesrv", required=True)
    p.add_argument("--history", required=True)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--shards", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("consumer")
    c.add_argument("--name", required=True)
    c.add_argument("--namesrv", required=True)
    c.add_argument("--history", required=True)
    c.add_argument("--cluster-dir", required=True)
    c.add_argument("--orderly", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with HistoryWriter(args.history) as history:
        if args.role == "producer":
            if args.rate <= 0 or args.shards < 0:
                print("--rate must be > 0 and --shards >= 0", file=sys.stderr)
                return 2
            worker: ProducerProcess | ConsumerProcess = ProducerProcess(
                args.name, args.namesrv, history, rate=args.rate, shards=args.shards, seed=args.seed
            )
        else:
            worker = ConsumerProcess(
                args.name,
                args.namesrv,
                history,
                cluster_dir=Path(args.cluster_dir),
                orderly=args.orderly,
            )
        try:
            import uvloop

            uvloop.run(worker.run())
        except KeyboardInterrupt:
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
