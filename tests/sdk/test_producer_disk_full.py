"""A broker that refuses a send for a full disk answers code 14 (SERVICE_NOT_AVAILABLE)
with RocketMQ's text: the producer counts it retriable and sends again on another broker.
Two real remoting servers on port 0 play the brokers (the first also the nameserver)."""

from __future__ import annotations

from rocketq.common.exceptions import ServiceNotAvailableError, for_code
from rocketq.common.message import Message
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import BrokerData, QueueData, TopicRouteData, route_body
from rocketq.remoting.transport import Connection, RemotingServer
from rocketq.sdk.producer import Producer, SendStatus

REMARK = (
    "service not available now. It may be caused by one of the following reasons: the "
    "broker's disk is full [CL:  0.93 CQ:  0.93 INDEX:  0.93], messages are put to the "
    "slave, message store has been shut down, etc."
)
SENDS = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)


class Broker:
    """Answers sends: refused for a full disk (``full``) or stored; records each one."""

    def __init__(self, full: bool) -> None:
        self.full = full
        self.sends = 0
        self.addr = ""
        self.route: TopicRouteData | None = None
        codes = [*SENDS, RequestCode.GET_ROUTEINFO_BY_TOPIC]
        self.server = RemotingServer(dict.fromkeys(codes, self.handle))

    async def start(self) -> None:
        self.addr = f"127.0.0.1:{await self.server.start('127.0.0.1', 0)}"

    def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            assert self.route is not None
            return cmd.response(ResponseCode.SUCCESS, body=route_body(self.route, standard=True))
        self.sends += 1
        if self.full:
            return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, remark=REMARK)
        header = {"msgId": "0A00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "0"}
        return cmd.response(ResponseCode.SUCCESS, header)


async def test_a_full_broker_s_refusal_is_sent_again_to_another_broker() -> None:
    refusal = for_code(14)(REMARK)  # what the client makes of the broker's answer
    assert isinstance(refusal, ServiceNotAvailableError) and refusal.retriable
    full, roomy = Broker(full=True), Broker(full=False)
    await full.start()
    await roomy.start()
    full.route = TopicRouteData(
        queue_datas=[QueueData("broker-a", 1, 1, 6), QueueData("broker-b", 1, 1, 6)],
        broker_datas=[
            BrokerData("c", "broker-a", {0: full.addr}),
            BrokerData("c", "broker-b", {0: roomy.addr}),
        ],
    )
    producer = Producer("pg", full.addr, retry_times_when_send_failed=2)
    await producer.start()
    try:
        for i in range(6):
            result = await producer.send(Message("T", f"m{i}".encode()), timeout=5.0)
            assert result.status is SendStatus.SEND_OK
            assert result.queue.broker_name == "broker-b"
        # Round robin tried the full broker too, which refused, and never was the last try.
        assert full.sends >= 1 and roomy.sends == 6
    finally:
        await producer.shutdown()
        await full.server.stop()
        await roomy.server.stop()
