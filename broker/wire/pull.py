"""PULL_MESSAGE (RocketMQ's PullMessageProcessor).

The answer's body is the stored records as they lie in the CommitLog: RocketMQ's wire form
of messages, copied once from the store, never decoded here. The outcome is the response
code: SUCCESS with records, PULL_NOT_FOUND (nothing new, after holding the request up to
``suspendTimeoutMillis`` when the suspend flag is set), PULL_RETRY_IMMEDIATELY (nothing
matched the filter) or PULL_OFFSET_MOVED; every answer carries ``nextBeginOffset``,
``minOffset``, ``maxOffset`` and ``suggestWhichBrokerId``.
"""

from __future__ import annotations

import time
from typing import Final

from rocketq.broker.metrics import PULL_MESSAGE, REMOTING
from rocketq.broker.pull_processor import PullStatus
from rocketq.broker.request_host import RequestHost
from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.metrics import response_code_name
from rocketq.remoting.codes import PullSysFlag, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, Handler

# What a header's number may hold: a Java long, as RocketMQ parses it.
LONG_MIN: Final = -(1 << 63)
LONG_MAX: Final = (1 << 63) - 1

PULL_CODES: Final = {
    PullStatus.FOUND: ResponseCode.SUCCESS,
    PullStatus.NO_NEW_MSG: ResponseCode.PULL_NOT_FOUND,
    PullStatus.NO_MATCHED_MSG: ResponseCode.PULL_RETRY_IMMEDIATELY,
    PullStatus.OFFSET_ILLEGAL: ResponseCode.PULL_OFFSET_MOVED,
}


def header_int(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    """An integer header field; MessageIllegalError names it when it is missing or bad."""
    value = (cmd.ext or {}).get(name)
    if value is None or value == "":
        if default is None:
            raise MessageIllegalError(f"the request header has no field {name!r}")
        return default
    try:
        number = int(value)
    except ValueError:
        raise MessageIllegalError(
            f"the header field {name} is {value[:40]!r}, not a number"
        ) from None
    if not LONG_MIN <= number <= LONG_MAX:
        raise MessageIllegalError(
            f"the header field {name} is {value[:40]!r}, past a Java long's range"
        )
    return number


class PullRequests:
    def __init__(self, broker: RequestHost) -> None:
        self.b = broker

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.PULL_MESSAGE: self.pull}

    async def pull(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        started = time.perf_counter()
        ext = cmd.ext or {}
        group, topic = cmd.field("consumerGroup"), cmd.field("topic")
        sys_flag = header_int(cmd, "sysFlag", 0)
        if sys_flag & PullSysFlag.FLAG_SUBSCRIPTION:
            expression = ext.get("subscription") or "*"
            kind = ext.get("expressionType") or "TAG"
        else:  # the subscription the group's heartbeat registered
            sub = self.b.consumers.subscription(group, topic)
            expression, kind = (sub.expression, sub.expression_type) if sub else ("*", "TAG")
        answer = await self.b.pull.pull(
            group,
            topic,
            header_int(cmd, "queueId"),
            header_int(cmd, "queueOffset"),
            max_msg_nums=header_int(cmd, "maxMsgNums", 32) or 32,
            subscription=expression,
            expression_type=kind,
            suspend_timeout_ms=(
                header_int(cmd, "suspendTimeoutMillis", 0)
                if sys_flag & PullSysFlag.FLAG_SUSPEND
                else 0
            ),
            commit_offset=(
                header_int(cmd, "commitOffset", -1)
                if sys_flag & PullSysFlag.FLAG_COMMIT_OFFSET
                else None
            ),
        )
        code = PULL_CODES[answer.status]
        if self.b.metrics is not None:
            self.b.metrics.answered(
                PULL_MESSAGE, response_code_name(code), started, held=answer.held, protocol=REMOTING
            )
        return cmd.response(
            code,
            {
                "suggestWhichBrokerId": str(answer.suggest_which_broker_id),
                "nextBeginOffset": str(answer.next_begin_offset),
                "minOffset": str(answer.min_offset),
                "maxOffset": str(answer.max_offset),
            },
            answer.records or None,
        )
