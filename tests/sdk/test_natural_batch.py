"""Natural batching in the producer's lanes (rocketq.sdk.natural_batch), with a fake
broker: what leaves alone, what leaves together, and what each caller gets."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from rocketq.common.exceptions import RequestTimeoutError, SystemBusyError
from rocketq.common.message import MessageQueue
from rocketq.sdk.natural_batch import NaturalBatcher
from rocketq.sdk.producer import SendResult, SendStatus, split_result
from rocketq.sdk.send_encoding import Encoded

QA = MessageQueue("T", "broker-a", 0)
QA1 = MessageQueue("T", "broker-a", 1)
QB = MessageQueue("T", "broker-b", 0)


def _enc(i: int, topic: str = "T", size: int = 10) -> Encoded:
    return Encoded(topic, bytes([65 + i % 26]) * size, f"UNIQ_KEY\x01id{i}\x02", [f"id{i}"])


@dataclass
class FakeBroker:
    """Answers each request when told to; records what came."""

    requests: list[tuple[list[str], MessageQueue, bool]] = field(default_factory=list)
    gates: list[asyncio.Future[None]] = field(default_factory=list)
    fail: BaseException | None = None
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    auto: bool = False

    async def send(
        self, enc: Encoded, mq: MessageQueue, ordered: bool, timeout: float
    ) -> SendResult:
        self.requests.append((list(enc.ids), mq, ordered))
        if not self.auto:
            gate = asyncio.get_running_loop().create_future()
            self.gates.append(gate)
            await gate
        if self.fail is not None:
            raise self.fail
        key = (mq.broker_name, mq.queue_id)
        first = self.offsets.get(key, 0)
        self.offsets[key] = first + len(enc.ids)
        return SendResult(
            SendStatus.SEND_OK,
            ",".join(enc.ids),
            ",".join(f"off-{x}" for x in enc.ids),
            mq,
            first,
            tuple(enc.ids),
            tuple(f"off-{x}" for x in enc.ids),
        )

    async def release(self, n: int = 1) -> None:
        """Answer the oldest ``n`` unanswered requests, once they have come."""
        for _ in range(n):
            while not any(not g.done() for g in self.gates):
                await asyncio.sleep(0)
            next(g for g in self.gates if not g.done()).set_result(None)
        for _ in range(5):
            await asyncio.sleep(0)


def _batcher(broker: FakeBroker, **caps: float) -> NaturalBatcher:
    settings = {
        "max_delay": 0.0,
        "max_bytes": 32 * 1024,
        "max_count": 128,
        "total_max_bytes": 1 << 20,
    }
    settings.update(caps)
    return NaturalBatcher(
        broker.send,
        split_result,
        max_delay=settings["max_delay"],
        max_bytes=int(settings["max_bytes"]),
        max_count=int(settings["max_count"]),
        total_max_bytes=int(settings["total_max_bytes"]),
        max_in_flight=int(caps.get("max_in_flight", 1)),
        alone_below=int(caps.get("alone_below", 0)),
    )


async def _settled() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_lone_send_leaves_at_once_alone() -> None:
    broker = FakeBroker(auto=True)
    b = _batcher(broker)
    result = await b.send(_enc(0), QA, False, 5.0)
    assert broker.requests == [(["id0"], QA, False)]
    assert result.msg_id == "id0" and result.queue_offset == 0
    assert b.batches_sent == 0


async def test_sends_arriving_while_one_is_in_flight_leave_together_each_with_its_result() -> None:
    broker = FakeBroker()
    b = _batcher(broker)
    first = asyncio.ensure_future(b.send(_enc(0), QA, False, 5.0))
    await _settled()
    rest = [asyncio.ensure_future(b.send(_enc(i), QA1, False, 5.0)) for i in range(1, 6)]
    await _settled()
    assert [r[0] for r in broker.requests] == [["id0"]]  # the others wait
    await broker.release()
    assert [r[0] for r in broker.requests] == [["id0"], ["id1", "id2", "id3", "id4", "id5"]]
    # The batch goes to the queue of the lane's latest send.
    assert broker.requests[1][1] == QA1
    await broker.release()
    results = [await t for t in [first, *rest]]
    assert results[0].msg_id == "id0" and results[0].queue == QA
    for i, r in enumerate(results[1:], start=1):
        assert r.msg_id == f"id{i}" and r.msg_ids == (f"id{i}",)
        assert r.offset_msg_id == f"off-id{i}" and r.offset_msg_ids == (f"off-id{i}",)
        assert r.queue == QA1 and r.queue_offset == i - 1  # one after the other
    assert b.batches_sent == 1 and b.batched_messages == 5


async def test_an_unordered_lane_has_max_in_flight_requests_before_sends_wait() -> None:
    broker = FakeBroker()
    b = _batcher(broker, max_in_flight=2)
    sends = [asyncio.ensure_future(b.send(_enc(0), QA, False, 5.0))]
    await _settled()
    sends.append(asyncio.ensure_future(b.send(_enc(1), QA1, False, 5.0)))
    await _settled()
    sends += [asyncio.ensure_future(b.send(_enc(i), QA, False, 5.0)) for i in range(2, 6)]
    await _settled()
    # Two alone, at once; the rest wait for either to return.
    assert [r[0] for r in broker.requests] == [["id0"], ["id1"]]
    await broker.release()
    assert [r[0] for r in broker.requests][2] == ["id2", "id3", "id4", "id5"]
    await broker.release(2)
    assert [(await t).msg_id for t in sends] == [f"id{i}" for i in range(6)]
    # An ordered lane keeps one request in flight whatever the setting.
    ordered = [asyncio.ensure_future(b.send(_enc(i), QB, True, 5.0)) for i in range(6, 8)]
    await _settled()
    assert [r[0] for r in broker.requests][3:] == [["id6"]]
    await broker.release(2)
    assert [(await t).msg_id for t in ordered] == ["id6", "id7"]


async def test_each_broker_is_its_own_lane() -> None:
    broker = FakeBroker()
    b = _batcher(broker)
    a = asyncio.ensure_future(b.send(_enc(0), QA, False, 5.0))
    other = asyncio.ensure_future(b.send(_enc(1), QB, False, 5.0))
    await _settled()
    assert [r[0] for r in broker.requests] == [["id0"], ["id1"]]  # both alone, at once
    await broker.release(2)
    assert (await a).queue == QA and (await other).queue == QB


async def test_a_failed_batch_fails_every_message_in_it_and_no_other() -> None:
    broker = FakeBroker()
    b = _batcher(broker)
    first = asyncio.ensure_future(b.send(_enc(0), QA, False, 5.0))
    await _settled()
    batch = [asyncio.ensure_future(b.send(_enc(i), QA, False, 5.0)) for i in range(1, 4)]
    await _settled()
    await broker.release()  # the first succeeds
    assert (await first).ok
    broker.fail = SystemBusyError("broker busy")
    await broker.release()
    for t in batch:
        with pytest.raises(SystemBusyError, match="broker busy"):
            await t
    broker.fail = None
    broker.auto = True
    assert (await b.send(_enc(9), QA, False, 5.0)).msg_id == "id9"  # the lane goes on


async def test_an_ordered_lane_never_has_two_requests_in_flight_and_keeps_the_order() -> None:
    broker = FakeBroker()
    b = _batcher(broker, max_count=2)
    tasks = [asyncio.ensure_future(b.send(_enc(i), QA, True, 5.0)) for i in range(7)]
    await _settled()
    for _ in range(4):
        # One request at a time, even though the waiting ones fill batches of two.
        assert sum(1 for g in broker.gates if not g.done()) == 1
        await broker.release()
    await asyncio.gather(*tasks)
    sent = [ids for ids, _, _ in broker.requests]
    assert sent == [["id0"], ["id1", "id2"], ["id3", "id4"], ["id5", "id6"]]
    assert [t.result().queue_offset for t in tasks] == list(range(7))


async def test_a_full_batch_leaves_at_once_while_one_is_in_flight() -> None:
    broker = FakeBroker()
    b = _batcher(broker, max_count=3)
    tasks = [asyncio.ensure_future(b.send(_enc(i), QA, False, 5.0)) for i in range(4)]
    await _settled()
    # id0 alone; id1..id3 filled a batch of three and left without waiting for id0.
    assert [ids for ids, _, _ in broker.requests] == [["id0"], ["id1", "id2", "id3"]]
    await broker.release(2)
    await asyncio.gather(*tasks)


async def test_the_byte_cap_cuts_batches() -> None:
    broker = FakeBroker()
    b = _batcher(broker, max_bytes=3 * (22 + 10 + 14))  # three entries of 10-byte bodies
    tasks = [asyncio.ensure_future(b.send(_enc(i), QA, True, 5.0)) for i in range(6)]
    await _settled()
    await broker.release(3)
    await asyncio.gather(*tasks)
    assert [len(ids) for ids, _, _ in broker.requests] == [1, 3, 2]


async def test_a_message_whose_timeout_passes_while_waiting_is_not_sent() -> None:
    broker = FakeBroker()
    b = _batcher(broker)
    first = asyncio.ensure_future(b.send(_enc(0), QA, False, 5.0))
    await _settled()
    late = asyncio.ensure_future(b.send(_enc(1), QA, False, 0.05))
    keep = asyncio.ensure_future(b.send(_enc(2), QA, False, 5.0))
    with pytest.raises(RequestTimeoutError, match="was not sent"):
        await late
    await broker.release(2)
    await first
    assert (await keep).msg_id == "id2"
    assert [ids for ids, _, _ in broker.requests] == [["id0"], ["id2"]]


async def test_a_cancelled_waiting_send_is_not_sent() -> None:
    broker = FakeBroker()
    b = _batcher(broker)
    first = asyncio.ensure_future(b.send(_enc(0), QA, False, 5.0))
    await _settled()
    gone = asyncio.ensure_future(b.send(_enc(1), QA, False, 5.0))
    keep = asyncio.ensure_future(b.send(_enc(2), QA, False, 5.0))
    await _settled()
    gone.cancel()
    await broker.release(2)
    await first
    await keep
    assert [ids for ids, _, _ in broker.requests] == [["id0"], ["id2"]]


async def test_linger_holds_a_lone_send_for_company() -> None:
    broker = FakeBroker(auto=True)
    b = _batcher(broker, max_delay=0.05)
    tasks = [asyncio.ensure_future(b.send(_enc(i), QA, False, 5.0)) for i in range(3)]
    await _settled()
    assert broker.requests == []  # held for the delay
    await asyncio.gather(*tasks)
    assert [ids for ids, _, _ in broker.requests] == [["id0", "id1", "id2"]]


async def test_past_the_total_cap_a_send_may_not_join() -> None:
    broker = FakeBroker()
    b = _batcher(broker, total_max_bytes=80)
    first = asyncio.ensure_future(b.send(_enc(0), QA, False, 5.0))
    await _settled()
    assert b.joins(_enc(1))
    second = asyncio.ensure_future(b.send(_enc(1), QA, False, 5.0))
    await _settled()
    assert not b.joins(_enc(2))  # 80 bytes hold one 45-byte entry: one waits
    await broker.release(2)
    await first
    await second


@pytest.mark.parametrize(
    ("setting", "value", "match"),
    [
        ("batch_max_count", 0, "batch_max_count must be a whole number of at least 1"),
        ("batch_max_bytes", -1, "batch_max_bytes must be"),
        ("total_batch_max_bytes", 1.5, "total_batch_max_bytes must be"),
        ("batch_max_delay", 31, "batch_max_delay must be between 0 and 30 seconds"),
        ("batch_max_delay", -0.1, "batch_max_delay must be"),
    ],
)
def test_batching_settings_out_of_range_are_refused(
    setting: str, value: object, match: str
) -> None:
    from rocketq.common.exceptions import ConfigError
    from rocketq.sdk.producer import Producer

    with pytest.raises(ConfigError, match=match):
        Producer("pg", "127.0.0.1:9876", **{setting: value})
    Producer("pg", "127.0.0.1:9876", auto_batch=False, **{setting: value})  # off: not read


async def test_a_caller_whose_time_passes_while_its_batch_is_under_way_is_told() -> None:
    broker = FakeBroker()
    b = _batcher(broker)
    first = asyncio.ensure_future(b.send(_enc(0), QA, False, 5.0))
    await _settled()
    short = asyncio.ensure_future(b.send(_enc(1), QA, False, 0.2))
    long = asyncio.ensure_future(b.send(_enc(2), QA, False, 5.0))
    await _settled()
    await broker.release()  # id0 answered: id1 and id2 leave together and hang there
    await first
    assert [ids for ids, _, _ in broker.requests] == [["id0"], ["id1", "id2"]]
    with pytest.raises(RequestTimeoutError, match="may still be stored"):
        await short
    assert not long.done()
    await broker.release()
    assert (await long).msg_id == "id2"


async def test_closing_sends_what_lingers_and_waits_for_every_answer() -> None:
    broker = FakeBroker(auto=True)
    b = _batcher(broker, max_delay=10.0)  # would linger for ten seconds
    tasks = [asyncio.ensure_future(b.send(_enc(i), QA, False, 30.0)) for i in range(3)]
    await _settled()
    assert broker.requests == []
    await asyncio.wait_for(b.close(), 2.0)
    assert all(t.done() and t.result().ok for t in tasks)
    assert [ids for ids, _, _ in broker.requests] == [["id0", "id1", "id2"]]


async def test_closing_waits_for_what_leaves_behind_a_lone_send() -> None:
    broker = FakeBroker()
    b = _batcher(broker)
    first = asyncio.ensure_future(b.send(_enc(0), QA, True, 5.0))  # an ordered lane
    await _settled()
    behind = [asyncio.ensure_future(b.send(_enc(i), QA, True, 5.0)) for i in (1, 2)]
    await _settled()
    closing = asyncio.ensure_future(b.close())
    await _settled()
    # The lone send is still in flight and its lane is ordered: the others wait for it.
    assert not closing.done() and len(broker.requests) == 1
    broker.auto = True
    await broker.release()
    await asyncio.wait_for(closing, 2.0)
    assert (await first).ok and all(t.done() and t.result().ok for t in behind)
    assert [ids for ids, _, _ in broker.requests] == [["id0"], ["id1", "id2"]]


async def test_a_broker_that_takes_topics_batches_has_one_lane_for_every_topic() -> None:
    """Sends of several topics waiting behind one in flight leave as one topics batch, each
    with its own queue and result; a batch of one topic in that lane leaves as a plain
    batch to that topic's queue; a broker that does not take them keeps a lane per topic."""
    broker = FakeBroker()
    topics_requests: list[list[tuple[str, str, MessageQueue]]] = []

    async def send_topics(
        sends: list[tuple[Encoded, MessageQueue]], timeout: float
    ) -> list[SendResult | BaseException]:
        topics_requests.append([(enc.topic, enc.ids[0], mq) for enc, mq in sends])
        return [
            SendResult(SendStatus.SEND_OK, enc.ids[0], f"off-{enc.ids[0]}", mq, 7)
            if enc.topic != "Refused"
            else SystemBusyError("busy")
            for enc, mq in sends
        ]

    b = NaturalBatcher(
        broker.send,
        split_result,
        max_delay=0.0,
        max_bytes=32 * 1024,
        max_count=128,
        total_max_bytes=1 << 20,
        send_topics=send_topics,
        takes_topics=lambda name: name == "broker-a",
        alone_below=0,
    )
    qs = {t: MessageQueue(t, "broker-a", 3) for t in ("T", "U", "Refused")}
    first = asyncio.ensure_future(b.send(_enc(0, "T"), qs["T"], False, 5.0))
    await _settled()
    mixed = [
        asyncio.ensure_future(b.send(_enc(i, t), qs[t], False, 5.0))
        for i, t in enumerate(("U", "T", "Refused", "U"), start=1)
    ]
    await _settled()
    await broker.release()
    await _settled()
    assert topics_requests == [
        [("U", "id1", qs["U"]), ("T", "id2", qs["T"]), ("Refused", "id3", qs["Refused"]),
         ("U", "id4", qs["U"])]
    ]  # fmt: skip
    assert (await first).queue == qs["T"]
    results = await asyncio.gather(*mixed, return_exceptions=True)
    assert [getattr(r, "msg_id", None) for r in results] == ["id1", "id2", None, "id4"]
    assert isinstance(results[2], SystemBusyError)
    assert b.topics_batches_sent == 1
    # One topic behind one in flight in the broker's lane: a plain batch, its topic's queue.
    lone = asyncio.ensure_future(b.send(_enc(5, "U"), qs["U"], False, 5.0))
    await _settled()
    same = [asyncio.ensure_future(b.send(_enc(i, "T"), qs["T"], False, 5.0)) for i in (6, 7)]
    await _settled()
    await broker.release()
    await _settled()
    assert broker.requests[-1][0] == ["id6", "id7"] and broker.requests[-1][1] == qs["T"]
    await broker.release()
    assert [r.queue for r in await asyncio.gather(lone, *same)] == [qs["U"], qs["T"], qs["T"]]
    # Another broker: a lane per topic, as before.
    other = MessageQueue("T", "broker-b", 0)
    one = asyncio.ensure_future(b.send(_enc(8, "T"), other, False, 5.0))
    await _settled()
    two = asyncio.ensure_future(b.send(_enc(9, "U"), MessageQueue("U", "broker-b", 0), False, 5.0))
    await _settled()
    assert [r[0] for r in broker.requests[-2:]] == [["id8"], ["id9"]]  # both left at once
    await broker.release(2)
    await asyncio.gather(one, two)
    assert b.topics_batches_sent == 1


async def test_a_lane_carrying_few_messages_lets_sends_leave_alone() -> None:
    """Fewer than alone_below messages in flight: a send leaves at once even past
    max_in_flight requests (batches of two or three cost more than they save); once the
    lane carries that many, sends wait and leave together."""
    broker = FakeBroker()
    b = _batcher(broker, max_in_flight=2, alone_below=4)
    sends = [asyncio.ensure_future(b.send(_enc(i), QA, False, 5.0)) for i in range(4)]
    await _settled()
    assert [r[0] for r in broker.requests] == [["id0"], ["id1"], ["id2"], ["id3"]]
    more = [asyncio.ensure_future(b.send(_enc(i), QA, False, 5.0)) for i in range(4, 9)]
    await _settled()
    assert len(broker.requests) == 4  # four carried: the rest wait
    await broker.release()
    assert [r[0] for r in broker.requests][4:] == [["id4", "id5", "id6", "id7", "id8"]]
    # Ordered lanes keep one request in flight whatever they carry.
    ordered = [asyncio.ensure_future(b.send(_enc(i), QB, True, 5.0)) for i in range(9, 11)]
    await _settled()
    assert [r[0] for r in broker.requests][5:] == [["id9"]]
    await broker.release(6)
    await asyncio.gather(*sends, *more, *ordered)
