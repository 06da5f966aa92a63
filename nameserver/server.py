"""The nameserver process: the route tables behind RocketMQ's remoting protocol."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Mapping
from pathlib import Path

from rocketq.auth.request_map import nameserver_requirement
from rocketq.auth.server_security import MemoryAuthMetadata, server_security
from rocketq.common.metrics_server import MetricsAuth, MetricsServer
from rocketq.common.ports import PortBindError
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.kv_config import KVConfigManager
from rocketq.nameserver.metrics import registry_for
from rocketq.nameserver.processor import ORDER_TOPIC_CONFIG, NameServerProcessor
from rocketq.nameserver.route_info import RouteInfoManager
from rocketq.remoting.codes import RocketqRequestCode
from rocketq.remoting.transport import RemotingServer

__all__ = ["ORDER_TOPIC_CONFIG", "NameServer"]

log = logging.getLogger(__name__)


class NameServer:
    """One nameserver: ``await start()``, ``port``, ``await stop()``."""

    def __init__(
        self, config: NameServerConfig, *, sockets: Mapping[str, socket.socket] | None = None
    ) -> None:
        """``sockets``: listening sockets handed down by the process that started this one
        (``client``, ``metrics``), served instead of binding those ports."""
        self.config = config
        self._sockets = dict(sockets or {})
        self.routes = RouteInfoManager()
        self.kv = KVConfigManager(Path(config.kv_config_path))
        self.service = NameServerProcessor(config, self.routes, self.kv)
        # Who may call it: its init user, the inner credentials and an ACL 1.0 file's
        # accounts (kept in memory: brokers hold the cluster's users), and its TLS.
        self.security = server_security(config, MemoryAuthMetadata(), nameserver_requirement)
        self.security.seed()
        if config.authentication_enabled:
            self.service.identity_of = self.security.identity
        self.server: RemotingServer | None = None
        self.port = 0
        self._scan_task: asyncio.Task[None] | None = None
        self.serving = False
        self.metrics_server: MetricsServer | None = None
        if config.metrics_enabled:
            registry = registry_for(
                self.routes,
                self.service.counters,
                lambda: f"{config.bind_address}:{self.port}",
                lambda: self.serving,
                lambda: self.server.guard if self.server is not None else None,
                lambda: self.metrics_server.rejected if self.metrics_server else {},
            )
            self.metrics_server = MetricsServer(
                config.metrics_bind_address or config.bind_address,
                config.metrics_port_to_bind,
                registry,
                self._readiness,
                what="nameserver",
                workers=config.metrics_http_workers,
                timeout=config.metrics_http_timeout_seconds,
                tls=self.security.metrics_tls,
                auth=MetricsAuth.from_config(config),
                sock=self._sockets.pop("metrics", None),
            )
        for name, unused in self._sockets.items():
            if name != "client":
                log.warning("no %s port here: its inherited socket is closed", name)
                unused.close()

    def _readiness(self) -> tuple[bool, str]:
        return (True, "") if self.serving else (False, "the nameserver is not serving")

    async def start(self) -> None:
        if self.metrics_server is not None:
            await self.metrics_server.start()
        self.kv.load()
        self.server = RemotingServer(
            {**self.service.handlers(), RocketqRequestCode.AUTH_SESSION: self.security.session},
            on_close=self.service.connection_closed,
            bounds=self.config,
            access=self.security.hook,
            tls=self.security.tls,
        )
        try:
            self.port = await self.server.start(
                self.config.bind_address,
                self.config.listen_port,
                sock=self._sockets.pop("client", None),
            )
        except OSError as exc:
            raise PortBindError(
                f"cannot listen on {self.config.bind_address}:{self.config.listen_port} "
                f"({exc.strerror or exc}); is another nameserver running there? pick another "
                "--port",
                name="client",
                port=self.config.listen_port,
                code=exc.errno,
            ) from None
        self._scan_task = asyncio.get_running_loop().create_task(self._scan())
        self.serving = True
        log.info(
            "The Name Server boot success. listening on %s:%d", self.config.bind_address, self.port
        )

    async def _scan(self) -> None:
        interval = self.config.scan_not_active_broker_interval / 1000
        while True:
            await asyncio.sleep(interval)
            channels = {a: live.channel for a, live in self.routes.broker_live_table.items()}
            expired = self.routes.scan_not_active_brokers(self.config.broker_channel_expired_time)
            self.service.counters.expiries += len(expired)
            for addr in expired:
                # As RocketMQ closes an expired broker's channel.
                channel = channels.get(addr)
                if channel is not None:
                    self.service.close_channel(channel)

    async def stop(self) -> None:
        self.serving = False
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
        if self.server is not None:
            await self.server.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
