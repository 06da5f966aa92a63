"""POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME (RocketMQ
5's PopMessageProcessor, AckMessageProcessor and ChangeInvisibleTimeProcessor), over
:class:`~rocketq.broker.pop.PopService`.

A pop's answer is SUCCESS with the messages as stored (each with its ``POP_CK`` receipt
added) and the header fields RocketMQ's PopMessageResponseHeader has: ``popTime``,
``invisibleTime``, ``reviveQid``, ``restNum``, ``startOffsetInfo``, ``msgOffsetInfo`` and
``orderCountInfo``; or PULL_NOT_FOUND once ``pollTime`` has passed with nothing to give.
``order=true`` asks for an orderly pop (see :meth:`~rocketq.broker.pop.PopService.pop`).
"""

from __future__ import annotations

import time

from rocketq.broker.metrics import ACK_MESSAGE, CHANGE_INVISIBLE_TIME, POP_MESSAGE, REMOTING
from rocketq.broker.pop import INIT_MODE_MIN
from rocketq.broker.request_host import RequestHost
from rocketq.broker.wire.pull import header_int
from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.metrics import response_code_name
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, Handler


def _text(cmd: RemotingCommand, name: str) -> str:
    value = (cmd.ext or {}).get(name)
    if not value:
        raise MessageIllegalError(f"the request header has no field {name!r}")
    return value


class PopRequests:
    def __init__(self, broker: RequestHost) -> None:
        self.b = broker

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.POP_MESSAGE: self.pop,
            RequestCode.ACK_MESSAGE: self.ack,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible,
            RequestCode.BATCH_ACK_MESSAGE: self.batch_ack,
        }

    async def pop(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        started = time.perf_counter()
        ext = cmd.ext or {}
        answer = await self.b.pop.pop(
            _text(cmd, "consumerGroup"),
            _text(cmd, "topic"),
            header_int(cmd, "queueId", -1),
            max_nums=header_int(cmd, "maxMsgNums", 32),
            invisible_time=header_int(cmd, "invisibleTime"),
            poll_time=header_int(cmd, "pollTime", 0),
            init_mode=header_int(cmd, "initMode", INIT_MODE_MIN),
            expression=ext.get("exp") or "*",
            expression_type=ext.get("expType") or "TAG",
            order=(ext.get("order") or "").lower() == "true",
        )
        code = ResponseCode.SUCCESS if answer.records else ResponseCode.PULL_NOT_FOUND
        if self.b.metrics is not None:
            self.b.metrics.answered(
                POP_MESSAGE, response_code_name(code), started, held=answer.held, protocol=REMOTING
            )
        return cmd.response(
            code,
            {
                "popTime": str(answer.pop_time),
                "invisibleTime": str(answer.invisible_time),
                "reviveQid": str(answer.revive_qid),
                "restNum": str(answer.rest),
                "startOffsetInfo": ";".join(answer.start_offsets),
                "msgOffsetInfo": ";".join(answer.msg_offsets),
                "orderCountInfo": ";".join(answer.order_counts),
            },
            b"".join(answer.records) or None,
        )

    def _answered(self, request: str, started: float) -> None:
        if self.b.metrics is not None:
            self.b.metrics.answered(
                request, response_code_name(ResponseCode.SUCCESS), started, protocol=REMOTING
            )

    async def ack(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        started = time.perf_counter()
        await self.b.pop.ack(
            _text(cmd, "consumerGroup"),
            _text(cmd, "topic"),
            header_int(cmd, "queueId"),
            _text(cmd, "extraInfo"),
            header_int(cmd, "offset"),
        )
        self._answered(ACK_MESSAGE, started)
        return cmd.response(ResponseCode.SUCCESS)

    async def batch_ack(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        started = time.perf_counter()
        await self.b.pop.batch_ack(cmd.body)
        self._answered("batch_ack_message", started)
        return cmd.response(ResponseCode.SUCCESS)

    async def change_invisible(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        started = time.perf_counter()
        info = await self.b.pop.change_invisible(
            _text(cmd, "consumerGroup"),
            _text(cmd, "topic"),
            header_int(cmd, "queueId"),
            _text(cmd, "extraInfo"),
            header_int(cmd, "offset"),
            header_int(cmd, "invisibleTime"),
        )
        self._answered(CHANGE_INVISIBLE_TIME, started)
        return cmd.response(
            ResponseCode.SUCCESS,
            {
                "popTime": str(info.pop_time),
                "invisibleTime": str(info.invisible_time),
                "reviveQid": str(info.revive_qid),
            },
        )
