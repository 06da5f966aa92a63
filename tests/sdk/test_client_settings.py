"""How the SDK's clients take settings: a config or keyword settings, never both; unknown
settings refused with a did-you-mean; durations in seconds reaching the wire as the
milliseconds RocketMQ's protocol carries; the nameserver from NAMESRV_ADDR."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from rocketq.common.exceptions import ConfigError
from rocketq.common.message import Message, MessageQueue
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk.admin import Admin
from rocketq.sdk.consumer_types import MessageSelector
from rocketq.sdk.fault_tolerance import TopicPublishInfo
from rocketq.sdk.offset_store import RemoteOffsetStore
from rocketq.sdk.producer import Producer, ProducerConfig, SendStatus
from rocketq.sdk.pull_consumer import PullConsumer, PullConsumerConfig
from rocketq.sdk.push_consumer import ConsumerConfig, PushConsumer
from rocketq.sdk.transaction import TransactionProducer, TransactionState
from rocketq.sdk.wire import PullOutcome, PullReply, SendReply

NS = "127.0.0.1:9876"


class _Commit:
    def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState:
        return TransactionState.COMMIT

    def check_local_transaction(self, msg: Any) -> TransactionState:
        return TransactionState.COMMIT


CLIENTS: dict[str, tuple[Callable[..., Any], type[Any]]] = {
    "Producer": (lambda **kw: Producer("pg", NS, **kw), ProducerConfig),
    "TransactionProducer": (
        lambda **kw: TransactionProducer("tpg", NS, listener=_Commit(), **kw),
        ProducerConfig,
    ),
    "PushConsumer": (lambda **kw: PushConsumer("cg", NS, **kw), ConsumerConfig),
    "PullConsumer": (lambda **kw: PullConsumer("cg", NS, **kw), PullConsumerConfig),
}


@pytest.mark.parametrize("kind", sorted(CLIENTS))
def test_a_config_and_settings_together_are_refused(kind: str) -> None:
    make, config_cls = CLIENTS[kind]
    with pytest.raises(TypeError, match=r"either config= or settings \(pull_batch_size\)"):
        make(config=config_cls(), pull_batch_size=8)


@pytest.mark.parametrize("kind", sorted(CLIENTS))
def test_a_config_alone_or_settings_alone_are_taken(kind: str) -> None:
    make, config_cls = CLIENTS[kind]
    config = config_cls(trace_topic="T") if "trace_topic" in config_cls.__slots__ else config_cls()
    assert make(config=config).config is config
    assert make().config == config_cls()


@pytest.mark.parametrize(
    ("kind", "typo", "meant"),
    [
        ("Producer", "send_timeout_ms", "send_timeout"),
        ("TransactionProducer", "retry_times_when_send_fail", "retry_times_when_send_failed"),
        ("PushConsumer", "rebalance_intervall", "rebalance_interval"),
        ("PushConsumer", "broker_suspend_max_time_millis", "broker_suspend_max_time"),
        ("PullConsumer", "poll_timeout_ms", "poll_timeout"),
    ],
)
def test_an_unknown_setting_is_refused_with_a_did_you_mean(
    kind: str, typo: str, meant: str
) -> None:
    make, _ = CLIENTS[kind]
    with pytest.raises(TypeError, match=f"unknown setting '{typo}'; did you mean '{meant}'"):
        make(**{typo: 1})


def test_an_unknown_setting_with_nothing_close_lists_the_known_ones() -> None:
    with pytest.raises(
        TypeError, match=r"the settings of PullConsumerConfig are: access_key, .*allocate_strategy"
    ):
        PullConsumer("cg", NS, zzz=1)


def test_a_config_of_another_kind_is_refused() -> None:
    with pytest.raises(TypeError, match="config must be a ProducerConfig, not ConsumerConfig"):
        Producer("pg", NS, config=ConsumerConfig())  # type: ignore[arg-type]


# -- the nameserver address ---------------------------------------------------------------

ALL_CLIENTS: dict[str, Callable[[], Any]] = {
    "Producer": lambda: Producer("pg"),
    "TransactionProducer": lambda: TransactionProducer("tpg", listener=_Commit()),
    "PushConsumer": lambda: PushConsumer("cg"),
    "PullConsumer": lambda: PullConsumer("cg"),
    "Admin": lambda: Admin(),
}


@pytest.mark.parametrize("kind", sorted(ALL_CLIENTS))
def test_namesrv_addr_is_read_when_no_namesrv_is_given(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.7:9876;10.0.0.8:9876")
    client = ALL_CLIENTS[kind]()
    assert client.namesrv == "10.0.0.7:9876;10.0.0.8:9876"
    assert client.client.nameserver.addrs == ["10.0.0.7:9876", "10.0.0.8:9876"]


@pytest.mark.parametrize("kind", sorted(ALL_CLIENTS))
def test_no_namesrv_and_no_namesrv_addr_is_a_clear_error(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(ConfigError, match=f"{kind} has no nameserver address.*NAMESRV_ADDR"):
        ALL_CLIENTS[kind]()


def test_a_namesrv_given_wins_over_namesrv_addr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.7:9876")
    assert Producer("pg", "127.0.0.1:1").client.nameserver.addrs == ["127.0.0.1:1"]


# -- durations on the wire ----------------------------------------------------------------


@dataclass
class _Broker:
    """Stands for a broker connection: records what is sent and how long it may take."""

    sent: list[tuple[RemotingCommand, float]] = field(default_factory=list)

    async def pull(self, cmd: RemotingCommand, timeout: float) -> PullReply:
        self.sent.append((cmd, timeout))
        await asyncio.sleep(0)
        return PullReply(PullOutcome.NO_NEW_MSG, 0, 0, 0, 0, b"")

    async def send(self, cmd: RemotingCommand, timeout: float) -> SendReply:
        self.sent.append((cmd, timeout))
        return SendReply(0, ["0A0000010000000000000001"], 0, 0)


MQ = MessageQueue("T", "broker-a", 0)


async def test_the_push_consumers_long_polling_seconds_reach_the_wire_as_ms() -> None:
    consumer = PushConsumer("cg", NS, broker_suspend_max_time=2.5)
    broker = _Broker()
    consumer.client.broker = lambda addr: broker  # type: ignore[assignment, return-value]
    consumer.client.broker_addrs["broker-a"] = {0: "10.0.0.1:10911"}
    consumer.offsets = RemoteOffsetStore(consumer.client, "cg")
    await consumer.pull_service._pull_once(MQ, MessageSelector.tags("*"), 0)
    ((cmd, timeout),) = broker.sent
    assert cmd.ext is not None and cmd.ext["suspendTimeoutMillis"] == "2500"
    assert timeout == pytest.approx(2.5 + 15.0)


async def test_the_pull_consumers_long_polling_seconds_reach_the_wire_as_ms() -> None:
    consumer = PullConsumer("cg", NS, broker_suspend_max_time=0.75)
    broker = _Broker()
    consumer.client.broker = lambda addr: broker  # type: ignore[assignment, return-value]
    consumer.client.broker_addrs["broker-a"] = {0: "10.0.0.1:10911"}
    consumer.running = True
    consumer._next[MQ], consumer._generation[MQ] = 0, 1
    loop = consumer._pull_loop(MQ, 1)

    async def one_pull() -> None:
        while not broker.sent:
            await asyncio.sleep(0)
        consumer.running = False

    await asyncio.gather(loop, one_pull())
    cmd, timeout = broker.sent[0]
    assert cmd.ext is not None and cmd.ext["suspendTimeoutMillis"] == "750"
    assert timeout == pytest.approx(0.75 + 15.0)


async def test_the_producers_send_timeout_is_seconds() -> None:
    producer = Producer("pg", NS, send_timeout=1.5)
    broker = _Broker()
    producer.client.broker = lambda addr: broker  # type: ignore[assignment, return-value]
    producer.client.broker_addrs["broker-a"] = {0: "10.0.0.1:10911"}
    producer.publish["T"] = TopicPublishInfo(message_queues=[MQ])
    producer._running = True
    result = await producer.send(Message("T", b"x"))
    assert result.status is SendStatus.SEND_OK
    ((_, timeout),) = broker.sent
    assert 1.4 < timeout <= 1.5
    await producer.send(Message("T", b"y"), timeout=0.25)
    assert 0.2 < broker.sent[1][1] <= 0.25
