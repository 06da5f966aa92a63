"""Transactional messages: a half message, the local transaction, then commit or rollback.

``send_message_in_transaction`` sends the message as a prepared (half) message that no
consumer sees, runs the listener's ``execute_local_transaction`` and tells the broker how
it ended. When the answer is UNKNOWN (or lost, or the producer died) the broker later asks
a live producer of the same group through ``check_local_transaction``; any producer of the
group can answer, so keep the group for transactional messages only.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

from rocketq.common.exceptions import ClientStateError, MessageIllegalError, RocketqError
from rocketq.common.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    Message,
    MessageExt,
)
from rocketq.common.message_id import decode_offset_msg_id
from rocketq.common.record import decode_record
from rocketq.sdk.client_wire import (
    TRANSACTION_COMMIT,
    TRANSACTION_ROLLBACK,
    TRANSACTION_UNKNOWN,
    Notice,
    TransactionCheck,
    end_transaction_request,
)
from rocketq.sdk.metrics import MetricsOption
from rocketq.sdk.producer import Producer, ProducerConfig, SendResult, SendStatus

log = logging.getLogger(__name__)

TRANSACTION_PREPARED_TYPE = 0x4
CLUSTER_REFRESH_INTERVAL = 30.0


class TransactionState(enum.Enum):
    """How a local transaction ended (RocketMQ's LocalTransactionState).

    Attributes:
        COMMIT: Deliver the half message to consumers.
        ROLLBACK: Discard it.
        UNKNOWN: Not known yet: the broker asks again later (RocketMQ's spelling,
            ``UNKNOW``, on the wire).
    """

    COMMIT = "COMMIT_MESSAGE"
    ROLLBACK = "ROLLBACK_MESSAGE"
    UNKNOWN = "UNKNOW"


_RESOLUTION = {
    TransactionState.COMMIT: TRANSACTION_COMMIT,
    TransactionState.ROLLBACK: TRANSACTION_ROLLBACK,
    TransactionState.UNKNOWN: TRANSACTION_UNKNOWN,
}


class TransactionListener(Protocol):
    """Both methods may be plain (run on a thread) or ``async``."""

    def execute_local_transaction(
        self, msg: Message, arg: Any
    ) -> TransactionState | Awaitable[TransactionState]:
        """Run the local transaction of ``msg`` (its half message is stored), with the
        ``arg`` given to ``send_message_in_transaction``; say how it ended."""
        ...

    def check_local_transaction(
        self, msg: MessageExt
    ) -> TransactionState | Awaitable[TransactionState]:
        """Answer the broker's check of a half message whose end it did not hear; any
        producer of the group may be asked."""
        ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """What ``send_message_in_transaction`` returns.

    Attributes:
        send_result: The half message's send.
        local_state: How the local transaction ended.
    """

    send_result: SendResult
    local_state: TransactionState

    @property
    def status(self) -> SendStatus:
        """The half message's send status."""
        return self.send_result.status

    @property
    def msg_id(self) -> str:
        """The message's unique id."""
        return self.send_result.msg_id


async def _call(fn: Any, *args: Any) -> TransactionState:
    if inspect.iscoroutinefunction(fn):
        result = await fn(*args)
    else:
        result = await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        if inspect.isawaitable(result):
            result = await result
    if not isinstance(result, TransactionState):
        log.warning("transaction listener returned %r, not a TransactionState: UNKNOWN", result)
        return TransactionState.UNKNOWN
    return result


class TransactionProducer(Producer):
    """A producer of transactional messages: a half message, the local transaction, then
    commit or rollback (see the module docstring).

    Args:
        group: The producer group (keep it for transactional messages only: the broker
            asks any of its producers to check a transaction).
        namesrv: Nameserver address(es); when None, the ``NAMESRV_ADDR`` environment
            variable.
        listener: Runs and checks the local transactions.
        config: All settings at once; or give them as keyword ``settings``, not both.
        metrics: As :class:`~rocketq.sdk.producer.Producer`'s.
        **settings: :class:`~rocketq.sdk.producer.ProducerConfig` fields.

    Attributes:
        listener: Runs and checks the local transactions.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | None = None,
        *,
        listener: TransactionListener,
        config: ProducerConfig | None = None,
        metrics: MetricsOption = False,
        **settings: Any,
    ) -> None:
        super().__init__(group, namesrv, config=config, metrics=metrics, **settings)
        self.listener = listener
        self.client.on_event = self._on_event
        self._checks: set[asyncio.Task[None]] = set()
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start, and register with every broker of the cluster (a check may come from
        any of them)."""
        await super().start()
        # Heartbeat to (and listen to) every broker: a check may come from any of them.
        with contextlib.suppress(RocketqError):
            await self.client.watch_cluster()
        await self.client.heartbeat_all()
        self._watch = asyncio.ensure_future(self._watch_loop())

    async def _watch_loop(self) -> None:
        while True:
            await asyncio.sleep(CLUSTER_REFRESH_INTERVAL)
            try:
                await self.client.watch_cluster()
            except RocketqError as exc:
                log.warning("cannot refresh the cluster's brokers: %s", exc)

    async def shutdown(self) -> None:
        """Stop answering checks, then shut down as a producer."""
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        if self._checks:
            await asyncio.gather(*self._checks, return_exceptions=True)
        await super().shutdown()

    async def __aenter__(self) -> TransactionProducer:
        await self.start()
        return self

    async def send_message_in_transaction(
        self, msg: Message, arg: Any = None, *, timeout: float | None = None
    ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end it."""
        self._require_running()
        if msg.delay_level or msg.deliver_at:
            raise MessageIllegalError("a transactional message cannot be delayed")
        enc = self._encode(
            [msg],
            system_props={
                PROPERTY_TRANSACTION_PREPARED: "true",
                PROPERTY_PRODUCER_GROUP: self.group,
            },
            extra_sys_flag=TRANSACTION_PREPARED_TYPE,
        )
        result = await self._send(enc, None, None, msg, None, timeout)
        if result.status is SendStatus.SEND_OK:
            try:
                state = await _call(self.listener.execute_local_transaction, msg, arg)
            except Exception:
                log.exception("local transaction of %s failed: UNKNOWN", result.msg_id)
                state = TransactionState.UNKNOWN
        else:
            state = TransactionState.ROLLBACK
        try:
            await self._end(result, state)
        except RocketqError as exc:
            # The broker will ask again (check): the outcome is not lost.
            log.warning("ending transaction %s failed: %s", result.msg_id, exc)
        return TransactionSendResult(result, state)

    async def _end(self, result: SendResult, state: TransactionState) -> None:
        addr = self.client.master_addr(result.queue.broker_name)
        if addr is None:
            raise ClientStateError(f"broker {result.queue.broker_name} has no master now")
        _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id)
        req = end_transaction_request(
            self.group,
            commit_log_offset=commit_log_offset,
            tran_state_table_offset=result.queue_offset,
            msg_id=result.offset_msg_id,
            transaction_id=result.msg_id,
            commit_or_rollback=_RESOLUTION[state],
            from_transaction_check=False,
        )
        await self.client.broker(addr).request(req, 3)

    async def _on_event(self, event: Notice, addr: str = "") -> None:
        if not isinstance(event, TransactionCheck):
            return
        task = asyncio.ensure_future(self._answer_check(event, addr))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(self, ask: TransactionCheck, addr: str) -> None:
        if ask.group and ask.group != self.group:
            return
        try:
            msg = decode_record(ask.record)
            msg.queue_offset = ask.tran_state_table_offset
            msg.commit_log_offset = ask.commit_log_offset
            state = await _call(self.listener.check_local_transaction, msg)
        except Exception:
            log.exception("checking transaction %s failed: UNKNOWN", ask.msg_id)
            state = TransactionState.UNKNOWN
        req = end_transaction_request(
            self.group,
            commit_log_offset=ask.commit_log_offset,
            tran_state_table_offset=ask.tran_state_table_offset,
            msg_id=ask.msg_id,
            transaction_id=ask.transaction_id,
            commit_or_rollback=_RESOLUTION[state],
            from_transaction_check=True,
        )
        try:
            await self.client.broker(addr).oneway(req)
        except RocketqError as exc:
            log.warning("answering the check of %s failed: %s", ask.msg_id, exc)
