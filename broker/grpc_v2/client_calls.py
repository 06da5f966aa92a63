"""The admin calls a broker makes to one consumer, made to a v5 consumer over its Telemetry
stream, as RocketMQ 5's proxy makes them.

A 4.x consumer answers GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY on its
remoting connection. A v5 consumer has no such connection: the endpoint answers the
running info itself from the settings the client sent (its group, subscriptions, language
and version, consume type CONSUME_POP), and asks the client only for what it alone has:

- the thread stacks (``jstackEnable``): a ``PrintThreadStackTraceCommand`` with a nonce,
  answered by a ``ThreadStackTrace`` with the same nonce;
- consuming a stored message (CONSUME_MESSAGE_DIRECTLY): a ``VerifyMessageCommand`` with
  the message, answered by a ``VerifyMessageResult`` whose status says whether the
  client's listener took it (CR_SUCCESS) or not (CR_THROW_EXCEPTION, the status's message
  as the remark).

A client that does not answer in time is the remoting call's timeout (RequestTimeoutError:
CONSUME_MSG_TIMEOUT to the admin). A client that answers nothing at all (RocketMQ 5's
Python client ignores both commands) times out the same way.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as s
from rocketq.common.exceptions import RequestTimeoutError
from rocketq.common.message import MessageExt
from rocketq.common.record import decode_record
from rocketq.remoting import fastjson
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand

_nonces = itertools.count(1)


class ClientCalls:
    """The calls to one v5 consumer: ``write`` puts a command on its Telemetry stream,
    ``render`` makes a stored message the v2 Message it is shown as."""

    def __init__(
        self,
        client_id: str,
        write: Callable[[s.TelemetryCommand], Awaitable[None]],
        render: Callable[[MessageExt], d.Message],
        describe: Callable[[], tuple[str, str]],
    ) -> None:
        self.client_id = client_id
        self.write = write
        self.render = render
        self.describe = describe  # (language, version)
        self.settings = d.Settings()
        self.started = int(time.time() * 1000)
        self._pending: dict[str, asyncio.Future[s.TelemetryCommand]] = {}

    def answered(self, command: s.TelemetryCommand) -> bool:
        """Take the client's answer to a call; False when ``command`` is not one."""
        kind = command.WhichOneof("command")
        if kind == "thread_stack_trace":
            nonce = command.thread_stack_trace.nonce
        elif kind == "verify_message_result":
            nonce = command.verify_message_result.nonce
        else:
            return False
        waiting = self._pending.pop(nonce, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(command)
        return True

    def close(self) -> None:
        for waiting in self._pending.values():
            if not waiting.done():
                waiting.set_exception(RequestTimeoutError("the client's Telemetry stream ended"))
        self._pending.clear()

    async def call(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """The client's answer to ``request`` (as a 4.x client's answer would be)."""
        ext = request.ext or {}
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            jstack = None
            if str(ext.get("jstackEnable", "false")).lower() == "true":
                nonce = self._nonce()
                command = s.TelemetryCommand(
                    print_thread_stack_trace_command=s.PrintThreadStackTraceCommand(nonce=nonce)
                )
                answer = await self._ask(nonce, command, timeout)
                jstack = answer.thread_stack_trace.thread_stack_trace
            return RemotingCommand(ResponseCode.SUCCESS, None, self._running_info(jstack))
        if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            msg = decode_record(bytes(request.body or b""))
            nonce = self._nonce()
            command = s.TelemetryCommand(
                verify_message_command=s.VerifyMessageCommand(nonce=nonce, message=self.render(msg))
            )
            started = time.monotonic()
            answer = await self._ask(nonce, command, timeout)
            ok = answer.status.code == d.Code.OK
            doc: dict[str, Any] = {
                "autoCommit": True,
                "consumeResult": "CR_SUCCESS" if ok else "CR_THROW_EXCEPTION",
                "order": False,
                "spentTimeMills": int((time.monotonic() - started) * 1000),
            }
            if not ok:
                doc["remark"] = answer.status.message or d.Code.Name(answer.status.code)
            return RemotingCommand(ResponseCode.SUCCESS, None, fastjson.dumps(doc))
        return RemotingCommand(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            None,
            None,
            remark=f"a v5 client does not answer request code {request.code}",
        )

    def _nonce(self) -> str:
        return f"{self.client_id}-{next(_nonces)}"

    async def _ask(
        self, nonce: str, command: s.TelemetryCommand, timeout: float
    ) -> s.TelemetryCommand:
        waiting: asyncio.Future[s.TelemetryCommand] = asyncio.get_running_loop().create_future()
        self._pending[nonce] = waiting
        try:
            await self.write(command)
            async with asyncio.timeout(timeout):
                return await waiting
        except TimeoutError:
            raise RequestTimeoutError(
                f"the v5 client {self.client_id} did not answer within {timeout:g} s"
            ) from None
        finally:
            self._pending.pop(nonce, None)

    def _running_info(self, jstack: str | None) -> bytes:
        language, version = self.describe()
        sub = self.settings.subscription
        subscriptions = [
            {
                "classFilterMode": False,
                "codeSet": [],
                "expressionType": "SQL92" if e.expression.type == d.FilterType.SQL else "TAG",
                "subString": e.expression.expression or "*",
                "subVersion": 0,
                "tagsSet": [],
                "topic": e.topic.name,
            }
            for e in sub.subscriptions
        ]
        properties = {
            "PROP_CLIENT_VERSION": version,
            "PROP_CLIENT_LANGUAGE": language.upper(),
            "PROP_CLIENT_PROTOCOL": "grpc",
            "PROP_CONSUME_TYPE": "CONSUME_POP",
            "PROP_CONSUMER_START_TIMESTAMP": str(self.started),
            "PROP_CONSUMEORDERLY": str(sub.fifo).lower(),
        }
        doc: dict[str, Any] = {
            "mqTable": {},
            "properties": properties,
            "statusTable": {},
            "subscriptionSet": subscriptions,
        }
        if jstack is not None:
            doc["jstack"] = jstack
        return fastjson.dumps(doc)
