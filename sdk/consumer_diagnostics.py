"""How a consumer answers what a broker forwards it for an admin (RocketMQ's
ClientRemotingProcessor): GET_CONSUMER_RUNNING_INFO with its settings, subscriptions,
owned queues and figures (and a dump of the process's threads and asyncio tasks, Python's
jstack, when asked), and CONSUME_MESSAGE_DIRECTLY by running its listener once on the
message the broker sends, as a diagnostic: nothing is committed, nothing sent back.

The consumers (``push_consumer.py``, ``pull_consumer.py``) gather their own state; the
pieces they share are here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

from rocketq.common.exceptions import RequestCodeNotSupportedError
from rocketq.common.message import MessageExt, MessageQueue
from rocketq.remoting.codes import LanguageCode, RocketqVersion
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk.client_wire import (
    DirectConsumeRequest,
    RunningInfoRequest,
    direct_result_answer,
    group_not_here_answer,
    parse_consumer_request,
    running_info_answer,
)
from rocketq.sdk.consumer_stats import ConsumerStats
from rocketq.sdk.consumer_types import ConsumeResult, MessageSelector
from rocketq.sdk.process_queue import ProcessQueue
from rocketq.sdk.running_info import (
    CR_LATER,
    CR_RETURN_NULL,
    CR_SUCCESS,
    CR_THROW_EXCEPTION,
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ProcessQueueInfo,
)
from rocketq.sdk.wire import SubscriptionData

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

MIB: Final = 1024 * 1024
# Settings whose RocketMQ name is not their own in camelCase.
ROCKETMQ_NAMES: Final = {
    "allocate_strategy": "allocateMessageQueueStrategy",
    "enable_trace": "enableMsgTrace",
    "trace_topic": "customizedTraceTopic",
}
CONSUME_RESULTS: Final = {
    ConsumeResult.SUCCESS: CR_SUCCESS,
    ConsumeResult.RECONSUME_LATER: CR_LATER,
    ConsumeResult.SUSPEND: CR_LATER,  # orderly's SUSPEND_CURRENT_QUEUE_A_MOMENT
}


async def answer(
    cmd: RemotingCommand,
    *,
    group: str,
    client_id: str,
    running_info: Callable[[bool], ConsumerRunningInfo],
    consume_directly: Callable[[DirectConsumeRequest], Awaitable[ConsumeMessageDirectlyResult]]
    | None,
) -> RemotingCommand:
    """The consumer's answer to a GET_CONSUMER_RUNNING_INFO or CONSUME_MESSAGE_DIRECTLY a
    broker forwarded: SYSTEM_ERROR for another group's request (RocketMQ's words), and
    REQUEST_CODE_NOT_SUPPORTED for a direct consume of a consumer without a listener."""
    request = parse_consumer_request(cmd)
    if request.group != group:
        return group_not_here_answer(cmd, request.group, client_id)
    if isinstance(request, RunningInfoRequest):
        return running_info_answer(cmd, running_info(request.jstack))
    if consume_directly is None:
        raise RequestCodeNotSupportedError(
            f"group {group} is consumed by a pull consumer in client {client_id}: it has no "
            f"listener to run message {request.msg_id} through (only push consumers consume "
            "a message directly)"
        )
    return direct_result_answer(cmd, await consume_directly(request))


# -- running info -----------------------------------------------------------------------


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def consumer_properties(
    settings: DataclassInstance,
    *,
    group: str,
    message_model: str,
    consume_from_where: str,
    consume_type: str,
    namesrv_addrs: Iterable[str],
    client_id: str,
    started_ms: int,
) -> dict[str, str]:
    """A consumer's properties as RocketMQ's object2Properties and consumerRunningInfo give
    them: each setting (a dataclass) by its RocketMQ name, the group, model and start
    point, the nameservers, its client id and language, and the PROP_* figures every
    consumer has."""
    props = {
        ROCKETMQ_NAMES.get(f.name, camel(f.name)): _text(getattr(settings, f.name))
        for f in dataclasses.fields(settings)
    }
    addrs = "".join(f"{a};" for a in namesrv_addrs)
    props |= {
        "consumerGroup": group,
        "messageModel": message_model,
        "consumeFromWhere": consume_from_where,
        "namesrvAddr": addrs.rstrip(";"),
        "clientIP": client_id.partition("@")[0],
        "instanceName": client_id.partition("@")[2],
        "language": LanguageCode.BY_CODE[LanguageCode.PYTHON],
        "unitMode": "false",
        PROP_CONSUME_TYPE: consume_type,
        PROP_CONSUMER_START_TIMESTAMP: str(started_ms),
        PROP_NAMESERVER_ADDR: addrs,
        PROP_CLIENT_VERSION: RocketqVersion.describe(RocketqVersion.CURRENT),
    }
    return dict(sorted(props.items()))


def subscription_set(subscriptions: Mapping[str, MessageSelector]) -> tuple[SubscriptionData, ...]:
    """The subscriptions as the heartbeat states them."""
    return tuple(
        SubscriptionData(topic, s.expression, s.type.upper())
        for topic, s in sorted(subscriptions.items())
    )


def epoch_ms(monotonic: float) -> int:
    """A time.monotonic() moment as epoch milliseconds (0 stays 0: never)."""
    if not monotonic:
        return 0
    return int((time.time() - (time.monotonic() - monotonic)) * 1000)


def process_queue_info(
    mq: MessageQueue, pq: ProcessQueue, commit_offset: int, stats: ConsumerStats
) -> ProcessQueueInfo:
    """A push consumer's owned queue (ProcessQueue.fillProcessQueueInfo): the messages
    waiting for the listener (``cached_*``), the orderly batch in the listener now
    (``transaction_*``), the lock, and when the queue last pulled and consumed."""
    waiting: list[int] = pq._offsets  # sorted queue offsets of what waits
    taken: list[MessageExt] = pq._taken  # orderly: the batch being consumed
    return ProcessQueueInfo(
        commit_offset=commit_offset,
        cached_msg_min_offset=waiting[0] if waiting else 0,
        cached_msg_max_offset=waiting[-1] if waiting else 0,
        cached_msg_count=len(waiting),
        cached_msg_size_in_mib=pq.msg_size // MIB,
        transaction_msg_min_offset=taken[0].queue_offset if taken else 0,
        transaction_msg_max_offset=taken[-1].queue_offset if taken else 0,
        transaction_msg_count=len(taken),
        locked=pq.locked,
        last_lock_timestamp=epoch_ms(pq.last_lock_time),
        dropped=pq.dropped,
        last_pull_timestamp=stats.last_pull(mq),
        last_consume_timestamp=stats.last_consume(mq),
    )


def thread_dump() -> str:
    """Python's jstack: every thread's stack, then every asyncio task of the running loop
    with the chain of coroutines it is suspended in."""
    frames = sys._current_frames()
    out: list[str] = []
    for thread in sorted(threading.enumerate(), key=lambda t: t.name):
        daemon = " daemon" if thread.daemon else ""
        out.append(f'"{thread.name}"{daemon} tid={thread.ident} native_id={thread.native_id}')
        frame = frames.get(thread.ident or -1)
        if frame is not None:
            out.extend(line.rstrip("\n") for line in traceback.format_stack(frame))
        out.append("")
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:  # no running loop
        tasks = set()
    for task in sorted(tasks, key=lambda t: t.get_name()):
        coro: Any = task.get_coro()
        name = getattr(coro, "__qualname__", type(coro).__name__)
        out.append(f'task "{task.get_name()}" {name}{" (done)" if task.done() else ""}')
        summary = traceback.StackSummary.extract((f, f.f_lineno) for f in _awaiting(coro))
        out.extend(line.rstrip("\n") for line in summary.format())
        out.append("")
    return "\n".join(out)


def _awaiting(coro: Any) -> list[FrameType]:
    """The frames of a suspended coroutine and of what it awaits, outermost first."""
    frames = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


# -- consuming one message directly -------------------------------------------------------


async def consume_directly(
    listener: Callable[[list[MessageExt]], Awaitable[object]],
    msgs: list[MessageExt],
    *,
    orderly: bool,
) -> ConsumeMessageDirectlyResult:
    """Run ``listener`` once on ``msgs`` and say how it took them (RocketMQ's
    consumeMessageDirectly of its concurrent and orderly services)."""
    started = time.monotonic()
    remark = None
    try:
        result = await listener(msgs)
    except Exception as exc:
        code: str | None = CR_THROW_EXCEPTION
        remark = f"{type(exc).__name__}: {exc}"
    else:
        if result is None:
            code = CR_RETURN_NULL
        elif isinstance(result, ConsumeResult):
            code = CONSUME_RESULTS[result]
        else:
            code = CR_LATER
            remark = f"the listener returned {result!r}, not a ConsumeResult: it is retried"
    spent = int((time.monotonic() - started) * 1000)
    return ConsumeMessageDirectlyResult(
        order=orderly,
        auto_commit=True,
        consume_result=code,
        remark=remark,
        spent_time_mills=spent,
    )
