"""The SDK's transport, RocketMQ's remoting protocol: nameserver lookups with failover
across addresses, and one connection per broker that carries every request to it, many in
flight (sends, long-polled pulls, heartbeats, offsets, admin requests) and the notices the
broker sends back over it. A non-SUCCESS answer becomes the error class of its code
(``rocketq.common.exceptions``); a broken connection is ``ConnectBrokerError`` and a missed
deadline ``RequestTimeoutError``, both retriable.
"""

from __future__ import annotations

import contextlib
import logging
import random
from typing import Final

from rocketq.common.exceptions import (
    ConfigError,
    ConnectBrokerError,
    NoNameServerError,
    RequestTimeoutError,
    RocketqSystemError,
)
from rocketq.remoting import fastjson
from rocketq.remoting.answer import check as check_answer
from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import (
    ClusterInfo,
    TopicRouteData,
    parse_cluster_info,
    parse_route,
)
from rocketq.remoting.tls import ClientSecurity
from rocketq.remoting.transport import Handler, RemotingClient
from rocketq.sdk.client_wire import parse_offset
from rocketq.sdk.wire import PullReply, SendReply, parse_pull, parse_send

log = logging.getLogger(__name__)


UNSIGNED_HINT: Final = (
    "this client sends no credentials; if the cluster requires them, give it access_key and "
    "secret_key, or set ROCKETQ_ACCESS_KEY and ROCKETQ_SECRET_KEY"
)
"""What a NO_PERMISSION answer to a client that does not sign adds to the server's remark."""


def explain_refusal(answer: RemotingCommand, security: ClientSecurity | None) -> RemotingCommand:
    """``answer``, its remark saying that the client sent no credentials when it is a
    NO_PERMISSION refusal of a request that was not signed."""
    if answer.code == ResponseCode.NO_PERMISSION and (security is None or security.sign is None):
        answer.remark = f"{answer.remark or 'no permission'} ({UNSIGNED_HINT})"
    return answer


def parse_addrs(namesrv: str) -> list[str]:
    addrs = [a.strip() for a in namesrv.replace(",", ";").split(";") if a.strip()]
    if not addrs:
        raise ConfigError(
            "no nameserver address given; pass namesrv='host:9876' (several: 'a:9876;b:9876')"
        )
    return addrs


class NameServerClient:
    """Asks any live nameserver over RocketMQ's remoting protocol; a failure moves on to
    the next address. ``security`` signs every request and connects over TLS when it
    says so."""

    def __init__(
        self, namesrv: str, *, timeout: float = 3.0, security: ClientSecurity | None = None
    ) -> None:
        self.addrs = parse_addrs(namesrv)
        self.timeout = timeout
        self._index = random.randrange(len(self.addrs))
        self.remoting = RemotingClient(security=security)

    async def _ask(
        self, what: str, code: int, ext: dict[str, str] | None = None
    ) -> RemotingCommand:
        errors = []
        for i in range(len(self.addrs)):
            addr = self.addrs[(self._index + i) % len(self.addrs)]
            try:
                answer = await self.remoting.invoke(addr, RemotingCommand(code, ext), self.timeout)
            except (ConnectBrokerError, RequestTimeoutError) as exc:
                errors.append(str(exc))
                continue
            self._index = (self._index + i) % len(self.addrs)
            return explain_refusal(answer, self.remoting.security)
        raise NoNameServerError(f"no nameserver answered {what}: " + "; ".join(errors))

    async def route(self, topic: str) -> TopicRouteData:
        answer = await self._ask(
            f"route of {topic}", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}
        )
        check_answer(answer)
        return parse_route(answer.body or b"{}")

    async def cluster_info(self) -> ClusterInfo:
        answer = await self._ask("cluster info", RequestCode.GET_BROKER_CLUSTER_INFO)
        check_answer(answer)
        return parse_cluster_info(answer.body or b"{}")

    async def topic_list(self) -> list[str]:
        answer = await self._ask("topic list", RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        check_answer(answer)
        try:
            doc = fastjson.loads(bytes(answer.body or b"{}"))
        except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested too deep
            raise RocketqSystemError(f"the nameserver's topic list is not JSON: {exc}") from exc
        topics = doc.get("topicList") if isinstance(doc, dict) else None
        if not isinstance(topics, list | None):
            raise RocketqSystemError(f"the nameserver's topic list is {topics!r:.80}, not an array")
        return sorted(str(t) for t in topics or [])

    async def delete_topic(self, topic: str, cluster: str = "") -> None:
        """Every nameserver forgets the topic (they do not talk to each other)."""
        ext = {"topic": topic}
        if cluster:
            ext["clusterName"] = cluster
        for addr in self.addrs:
            with contextlib.suppress(ConnectBrokerError, RequestTimeoutError):
                await self.remoting.invoke(
                    addr, RemotingCommand(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext), self.timeout
                )

    async def close(self) -> None:
        await self.remoting.close()


class BrokerClient:
    """One broker, over the client's connection to it (shared by every request: sends,
    long-polled pulls, heartbeats and the broker's notices). Requests go with RocketMQ's
    binary header (``SerializeType.ROCKETMQ``, which 4.x clients may choose and brokers
    answer in kind): cheaper to write and read than the JSON one, on both sides."""

    def __init__(self, addr: str, remoting: RemotingClient) -> None:
        self.addr = addr
        self.remoting = remoting

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """The broker's answer, whatever its code; ConnectBrokerError when the connection
        cannot be opened or breaks, RequestTimeoutError after ``timeout`` seconds."""
        cmd.serialize_type = SerializeType.ROCKETMQ
        answer = await self.remoting.invoke(self.addr, cmd, timeout)
        return explain_refusal(answer, self.remoting.security)

    async def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """A SUCCESS answer; the error class of any other code."""
        answer = await self.invoke(cmd, timeout)
        check_answer(answer)
        return answer

    async def oneway(self, cmd: RemotingCommand) -> None:
        cmd.serialize_type = SerializeType.ROCKETMQ
        await self.remoting.invoke_oneway(self.addr, cmd)

    async def send(self, cmd: RemotingCommand, timeout: float) -> SendReply:
        return parse_send(await self.invoke(cmd, timeout))

    async def pull(self, cmd: RemotingCommand, timeout: float) -> PullReply:
        return parse_pull(await self.invoke(cmd, timeout))

    async def offset(self, cmd: RemotingCommand, timeout: float) -> int:
        """The offset a query, max, min or search request answers."""
        return parse_offset(await self.invoke(cmd, timeout))


class BrokerConnections:
    """Every broker a client talks to, over one RemotingClient: a connection per broker,
    opened on first use and again after it breaks. ``handlers`` answer what the brokers
    send the client (their notices); ``security`` signs every request and connects over
    TLS when it says so."""

    def __init__(
        self,
        handlers: dict[int, Handler] | None = None,
        *,
        security: ClientSecurity | None = None,
    ) -> None:
        self.remoting = RemotingClient(handlers, security=security)
        self._clients: dict[str, BrokerClient] = {}

    def get(self, addr: str) -> BrokerClient:
        client = self._clients.get(addr)
        if client is None:
            client = self._clients[addr] = BrokerClient(addr, self.remoting)
        return client

    async def close(self) -> None:
        self._clients.clear()
        await self.remoting.close()
