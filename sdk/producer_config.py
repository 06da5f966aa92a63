"""A producer's settings (:class:`ProducerConfig`), apart from the producer so that the
compiled build (setup.py) compiles the producer's send path and leaves the settings, which
are read once, as Python: a setting of the wrong type gets a ConfigError, not a TypeError.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketq.common.exceptions import ConfigError
from rocketq.common.message import AUTO_CREATE_TOPIC_KEY_TOPIC
from rocketq.sdk.security import SecurityConfig

__all__ = ["ProducerConfig", "check_batching"]


@dataclass(frozen=True, slots=True)
class ProducerConfig(SecurityConfig):
    """A producer's settings: RocketMQ's DefaultMQProducer ones, snake_case; every
    duration is in seconds (a float).

    Attributes:
        send_timeout: Seconds a send may take, retries included, when ``send`` is given
            no ``timeout`` (RocketMQ's sendMsgTimeout; this project's default is 10 s).
        retry_times_when_send_failed: Retries of a failed send, on another broker when
            there is one.
        retry_another_broker_when_not_store_ok: Also retry a send the broker stored but
            did not flush or replicate in time (a status other than SEND_OK).
        compress_msg_body_over_howmuch: Bodies longer than this many bytes are sent
            compressed (zlib), except in batches.
        max_message_size: The largest body (or batch) sent, in bytes.
        send_latency_fault_enable: Avoid, for a while, brokers that were slow or failed.
        create_topic_key: The template topic an unknown topic is created from (TBW102).
        default_topic_queue_nums: Queues of a topic created through the template.
        poll_name_server_interval: Seconds between route refreshes.
        heartbeat_broker_interval: Seconds between heartbeats to every broker.
        auto_batch: Natural batching (RocketMQ's autoBatch): sends of one topic that
            arrive while a request to their broker is in flight leave together as one
            batch when it returns; a lone send leaves at once (see
            :mod:`rocketq.sdk.natural_batch`).
        batch_max_delay: Seconds a send waits for others to join it even when nothing
            is in flight (RocketMQ's batchMaxDelayMs, in seconds); 0: never.
        batch_max_bytes: A batch's largest size in bytes; a full batch leaves at once
            (RocketMQ's batchMaxBytes).
        batch_max_count: A batch's most messages.
        total_batch_max_bytes: The most bytes waiting to be batched at once; past it a
            send leaves alone (RocketMQ's totalBatchMaxBytes).
        batch_max_in_flight: Requests of one topic to one broker in flight at once before
            further sends wait to be batched (sends to one queue, ordered, have one).
        enable_trace: Write a trace event per message sent to ``trace_topic`` (see
            :mod:`rocketq.sdk.trace`).
        trace_topic: The topic trace events go to.
        access_key: The access key requests are signed with (see
            :class:`~rocketq.sdk.security.SecurityConfig`); None: ``ROCKETQ_ACCESS_KEY`` or
            the credentials file.
        secret_key: Its secret key; None: ``ROCKETQ_SECRET_KEY`` or the credentials file.
        credentials_file: A TOML file of ``access_key`` and ``secret_key``.
        tls: Connect over TLS; None: as ``ROCKETQ_TLS`` says (off when unset).
        tls_ca_file: The CA certificates a server's certificate must chain to (empty:
            ``ROCKETQ_TLS_CA_FILE``, else the system's).
        tls_cert_file: A client certificate, for servers that ask for one.
        tls_key_file: The private key of ``tls_cert_file``.
        tls_verify_hostname: Check that a server's certificate names its address.
    """

    send_timeout: float = 10.0
    retry_times_when_send_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    compress_msg_body_over_howmuch: int = 4096
    max_message_size: int = 4 * 1024 * 1024
    send_latency_fault_enable: bool = True
    create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC
    default_topic_queue_nums: int = 4
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    auto_batch: bool = True
    batch_max_delay: float = 0.0
    batch_max_bytes: int = 32 * 1024
    batch_max_count: int = 128
    total_batch_max_bytes: int = 32 * 1024 * 1024
    batch_max_in_flight: int = 2
    enable_trace: bool = False
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"


def check_batching(config: ProducerConfig) -> None:
    """The natural batching settings, or a ConfigError naming the one that is wrong."""
    for name, value, low in (
        ("batch_max_bytes", config.batch_max_bytes, 1),
        ("batch_max_count", config.batch_max_count, 1),
        ("total_batch_max_bytes", config.total_batch_max_bytes, 1),
        ("batch_max_in_flight", config.batch_max_in_flight, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be a whole number of at least {low}, not {value!r}")
    delay = config.batch_max_delay
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= 30:
        raise ConfigError(
            f"batch_max_delay must be between 0 and 30 seconds (RocketMQ's batchMaxDelayMs "
            f"allows up to 30 s), not {delay!r}"
        )
