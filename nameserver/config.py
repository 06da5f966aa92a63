"""The nameserver's config (RocketMQ's NamesrvConfig names, snake_case)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rocketq.common.config import (
    ServerSecurityConfig,
    check_server_bounds,
    check_server_security,
    validate_config,
)


@dataclass(frozen=True, slots=True)
class NameServerConfig(ServerSecurityConfig):
    """The nameserver's keys, after the server bounds and the security keys every server shares."""

    # Port of the remoting protocol (RocketMQ's 9876): brokers and clients.
    listen_port: int = field(default=9876, metadata={"min": 0, "max": 65535})
    # Address the server binds (0.0.0.0 to accept other hosts, as in Kubernetes).
    bind_address: str = "127.0.0.1"
    # Where the KV config is persisted.
    kv_config_path: str = str(Path.home() / "namesrv" / "kvConfig.json")
    # A broker not heard from for this many ms is dropped (BROKER_CHANNEL_EXPIRED_TIME).
    broker_channel_expired_time: int = field(default=120_000, metadata={"min": 1})
    # Period of the scan for silent brokers, in ms.
    scan_not_active_broker_interval: int = field(default=10_000, metadata={"min": 1})
    # Fill routes' order_topic_conf from the ORDER_TOPIC_CONFIG KV namespace.
    order_message_enable: bool = False
    # HTTP port of /metrics (Prometheus), /healthz and /readyz (0: no metrics server);
    # unset: listen_port + 1 (9877 beside the default 9876; with listen_port 0, any free
    # port, as a broker's derived ports).
    metrics_port: int | None = field(
        default=None, metadata={"min": 0, "max": 65535, "unset": "listen_port + 1"}
    )
    # Address the metrics server binds ("": bind_address).
    metrics_bind_address: str = ""
    # A nameserver's requests are small but for registrations (a 10,000-topic table is
    # 0.4-1.6 MiB): lower budgets of request bytes its handlers may hold than a broker's,
    # which bound its memory under a flood of frames at the size limit.
    server_max_in_flight_bytes_per_connection: int = field(
        default=32 * 1024 * 1024, metadata={"min": 4096}
    )
    server_max_in_flight_bytes: int = field(default=64 * 1024 * 1024, metadata={"min": 4096})
    # and of partial frames (a broker's is 64 MiB).
    server_max_buffered_bytes: int = field(default=32 * 1024 * 1024, metadata={"min": 4096})
    # The most a broker's compressed topic table may inflate to, whatever topic count it
    # announces (below it the cap is 4 MiB + 256 bytes a topic; rocketq's key): a table past
    # it is refused as a zlib bomb. A 10,000-topic table inflates to 0.4-1.6 MiB.
    register_body_max_inflated_bytes: int = field(
        default=64 * 1024 * 1024, metadata={"min": 4 * 1024 * 1024}
    )

    def __post_init__(self) -> None:
        validate_config(self)
        check_server_bounds(self)
        check_server_security(self)

    @property
    def metrics_port_to_bind(self) -> int:
        """The metrics port to bind: metrics_port, or when unset listen_port + 1 (0, any
        free port, with listen_port 0). 0 when set to 0: check :attr:`metrics_enabled`."""
        if self.metrics_port is not None:
            return self.metrics_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def metrics_enabled(self) -> bool:
        """A metrics server runs unless metrics_port is 0."""
        return self.metrics_port != 0
