"""Each client's channel: the connection its heartbeat came over, with the language and
version its heartbeat's command header named (RocketMQ's ClientChannelInfo), and the
broker calling a consumer over it (RocketMQ's Broker2Client.callClient) for the two admin
requests a broker forwards to one client: GET_CONSUMER_RUNNING_INFO and
CONSUME_MESSAGE_DIRECTLY.

The channels of a broker hang off its consumer manager (:func:`client_channels`): the
heartbeat handler records them, the admin handlers read them, and both see the broker only
through its managers.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Final, Protocol

from rocketq.broker.consumer_manager import ConsumerManager
from rocketq.common.exceptions import (
    ConsumeMsgTimeoutError,
    ConsumerNotOnlineError,
    RequestTimeoutError,
    RocketqError,
    RocketqSystemError,
)
from rocketq.remoting.codes import LanguageCode, MQVersion, RequestCode, RocketqVersion
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection

# How long a broker waits for a client's answer (Broker2Client.callClient: 10 s).
CALL_CLIENT_TIMEOUT: Final = 10.0


@dataclass(frozen=True, slots=True)
class ClientChannel:
    """One client's connection, and who it said it was in its last heartbeat."""

    client_id: str
    conn: Connection
    language: int  # LanguageCode
    version: int  # MQVersion ordinal, or RocketqVersion for rocketq's SDK

    @property
    def language_name(self) -> str:
        return LanguageCode.BY_CODE.get(self.language, "OTHER")


class RemoteClient(Protocol):
    """A client without a remoting connection that still answers the broker's calls (a
    v5 consumer, over its Telemetry stream: broker/grpc_v2/client_calls.py)."""

    async def call(self, request: RemotingCommand, timeout: float) -> RemotingCommand: ...


class ClientChannels:
    """client id -> its channel. A heartbeat records the client's channel (a reconnected
    client's new connection replaces its old one); the connection's closing removes it."""

    def __init__(self, consumers: ConsumerManager) -> None:
        self.consumers = consumers
        self.by_id: dict[str, ClientChannel] = {}
        self.remote: dict[str, RemoteClient] = {}  # client id -> a v5 consumer's calls

    def heartbeat(self, client_id: str, conn: Connection, cmd: RemotingCommand) -> None:
        self.by_id[client_id] = ClientChannel(client_id, conn, cmd.language, cmd.version)

    def closed(self, client_id: str, conn: Connection) -> None:
        channel = self.by_id.get(client_id)
        if channel is not None and channel.conn is conn:
            del self.by_id[client_id]

    def get(self, client_id: str) -> ClientChannel | None:
        return self.by_id.get(client_id)

    def check_online(self, group: str, client_id: str) -> None:
        """ConsumerNotOnlineError unless ``client_id`` is a consumer of ``group`` the
        broker can call (over its remoting channel or its v5 Telemetry stream)."""
        if not self._remote(group, client_id):
            self.consumer(group, client_id)

    def _remote(self, group: str, client_id: str) -> RemoteClient | None:
        info = self.consumers.groups.get(group)
        remote = self.remote.get(client_id)
        return remote if remote is not None and info and client_id in info.clients else None

    def consumer(self, group: str, client_id: str) -> ClientChannel:
        """The channel of a client of ``group`` (RocketMQ's ConsumerManager.findChannel);
        ConsumerNotOnlineError, in RocketMQ's words, when it has none here."""
        info = self.consumers.groups.get(group)
        channel = self.by_id.get(client_id)
        if info is None or client_id not in info.clients or channel is None:
            if info is None or not info.clients:
                why = f"group {group} has no client connected to this broker"
            else:
                why = f"this broker's clients of {group} are " + ", ".join(sorted(info.clients))
            raise ConsumerNotOnlineError(
                f"The Consumer <{group}> <{client_id}> not online: {why}; list the group's "
                f"clients with `rocketq admin consumer-connection -g {group}`"
            )
        if channel.version < MQVersion.V3_1_8_SNAPSHOT:
            raise RocketqSystemError(
                f"The Consumer <{client_id}> Version <{RocketqVersion.describe(channel.version)}>"
                " too low to finish, please upgrade it to V3_1_8_SNAPSHOT"
            )
        return channel

    async def call(
        self,
        group: str,
        client_id: str,
        request: RemotingCommand,
        *,
        timeout: float = CALL_CLIENT_TIMEOUT,
    ) -> RemotingCommand:
        """Send ``request``'s code, header and body to a consumer of ``group`` over its
        channel and answer ``request`` with the client's answer, whatever its code. A client
        that does not answer within ``timeout`` is CONSUME_MSG_TIMEOUT, a broken channel
        SYSTEM_ERROR, as RocketMQ's AdminBrokerProcessor.callConsumer answers."""
        remote = self._remote(group, client_id)
        channel = self.consumer(group, client_id) if remote is None else None
        name = RequestCode.NAMES.get(request.code, str(request.code))
        forwarded = RemotingCommand(request.code, dict(request.ext or {}), request.body)
        try:
            if channel is not None:
                answer = await channel.conn.invoke(forwarded, timeout)
            else:
                assert remote is not None
                answer = await remote.call(forwarded, timeout)
        except RequestTimeoutError:
            raise ConsumeMsgTimeoutError(
                f"consumer <{group}> <{client_id}> did not answer {name} within "
                f"{timeout * 1000:.0f} ms; is its process busy or stopped?"
            ) from None
        except RocketqError as exc:
            raise RocketqSystemError(
                f"invoke consumer <{group}> <{client_id}> failed: {exc}"
            ) from None
        return request.response(answer.code, answer.ext, answer.body, answer.remark)


_CHANNELS: weakref.WeakKeyDictionary[ConsumerManager, ClientChannels] = weakref.WeakKeyDictionary()


def client_channels(consumers: ConsumerManager) -> ClientChannels:
    """The client channels of the broker whose consumer manager this is (made on first use;
    they live as long as the manager)."""
    channels = _CHANNELS.get(consumers)
    if channels is None:
        channels = _CHANNELS[consumers] = ClientChannels(consumers)
    return channels
