"""The settings of the SDK's consumers: :class:`ConsumerConfig` (the push consumer's) and
:class:`PullConsumerConfig` (the lite pull consumer's), RocketMQ's names in snake_case with
its defaults; every duration is in seconds, as a float. Both are importable from their
consumer's module too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rocketq.sdk.message_body import MAX_BODY_INFLATE_RATIO, MAX_MESSAGE_SIZE, check_limits
from rocketq.sdk.security import SecurityConfig


@dataclass(frozen=True, slots=True)
class ConsumerConfig(SecurityConfig):
    """A push consumer's settings: RocketMQ's DefaultMQPushConsumer ones, snake_case, with
    its defaults; every duration is in seconds (a float).

    Attributes:
        allocate_strategy: How the group splits the queues: one of
            :data:`rocketq.sdk.rebalance.STRATEGIES` ("AVG", "AVG_BY_CIRCLE", ...).
        consume_thread_min: RocketMQ's minimum consume pool size (reported; the pool
            runs ``consume_thread_max`` tasks).
        consume_thread_max: Batches consumed at once (concurrent groups), and threads for
            a handler that is a plain function.
        consume_message_batch_max_size: Messages per handler call.
        pull_batch_size: Messages per pull.
        pull_threshold_for_queue: Pulling a queue pauses while it holds more messages
            than this, pulled and not consumed.
        pull_threshold_size_for_queue: ... or more than this many MiB of bodies.
        consume_concurrently_max_span: ... or (concurrent groups) when its first and last
            unconsumed offsets are further apart than this.
        max_reconsume_times: Retries before a message goes to ``%DLQ%<group>``; -1 uses
            the group's setting on the broker (16).
        pull_interval: Seconds a queue's pull loop waits between pulls (0: none).
        persist_consumer_offset_interval: Seconds between offset commits.
        rebalance_interval: Seconds between rebalances (a group change rebalances at once).
        heartbeat_broker_interval: Seconds between heartbeats to every broker.
        poll_name_server_interval: Seconds between route refreshes.
        broker_suspend_max_time: Seconds a broker may hold a pull waiting for messages
            (long polling); sent as milliseconds.
        consume_timestamp_ms: Where ``ConsumeFrom.TIMESTAMP`` starts a queue without a
            committed offset, in epoch milliseconds; 0 means 30 minutes before start.
        suspend_current_queue_time: Orderly: seconds before a batch the handler did not
            finish is consumed again.
        rebalance_lock_interval: Orderly: seconds between renewals of the queue locks
            (RocketMQ's ``rocketmq.client.rebalance.lockInterval``).
        rebalance_lock_max_live_time: Orderly: a lock not renewed for this many seconds
            is no longer trusted (``lockMaxLiveTime``).
        enable_trace: Write SubBefore/SubAfter trace events per message to
            ``trace_topic`` (see :mod:`rocketq.sdk.trace`).
        trace_topic: The topic trace events go to.
        offset_store_dir: Where broadcasting consumers keep their offsets.
        max_message_size: With ``max_body_inflate_ratio``, the cap of an inflated
            compressed body: ``max_message_size * max_body_inflate_ratio`` bytes (RocketMQ's
            producers compress only bodies of at most maxMessageSize, 4 MiB).
        max_body_inflate_ratio: See ``max_message_size``.
        check_crc: Check each body's CRC. A message failing it, or the inflation cap, goes
            to ``%DLQ%<group>`` as stored (see :mod:`rocketq.sdk.message_body`).
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

    allocate_strategy: str = "AVG"
    consume_thread_min: int = 10
    consume_thread_max: int = 20
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100
    consume_concurrently_max_span: int = 2000
    max_reconsume_times: int = -1
    pull_interval: float = 0.0
    persist_consumer_offset_interval: float = 5.0
    rebalance_interval: float = 20.0
    heartbeat_broker_interval: float = 30.0
    poll_name_server_interval: float = 30.0
    broker_suspend_max_time: float = 15.0
    consume_timestamp_ms: int = 0
    suspend_current_queue_time: float = 1.0
    rebalance_lock_interval: float = 20.0
    rebalance_lock_max_live_time: float = 30.0
    enable_trace: bool = False
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    offset_store_dir: str = str(Path.home() / ".rocketq_offsets")
    max_message_size: int = MAX_MESSAGE_SIZE
    max_body_inflate_ratio: int = MAX_BODY_INFLATE_RATIO
    check_crc: bool = True

    def __post_init__(self) -> None:
        """Refuse caps that cannot bound an inflated body (ConfigError)."""
        check_limits(self.max_message_size, self.max_body_inflate_ratio)

    @property
    def max_body_bytes(self) -> int:
        """The most a compressed body may inflate to."""
        return self.max_message_size * self.max_body_inflate_ratio


@dataclass(frozen=True, slots=True)
class PullConsumerConfig(SecurityConfig):
    """A lite pull consumer's settings (RocketMQ's DefaultLitePullConsumer ones, snake_case);
    every duration is in seconds (a float).

    Attributes:
        allocate_strategy: How the group splits the queues of subscribed topics: one of
            :data:`rocketq.sdk.rebalance.STRATEGIES`.
        pull_batch_size: Messages per pull, and at most per ``poll()``.
        pull_threshold_for_queue: Pulling a queue pauses while this many of its messages
            are pulled and not polled.
        auto_commit: Commit the offsets of what earlier polls returned every
            ``auto_commit_interval`` and at shutdown; otherwise ``commit()`` does it.
        auto_commit_interval: Seconds between automatic commits.
        rebalance_interval: Seconds between rebalances (a group change rebalances at once).
        poll_timeout: Seconds ``poll()`` waits for messages when given no timeout.
        broker_suspend_max_time: Seconds a broker may hold a pull waiting for messages
            (long polling); sent as milliseconds.
        offset_store_dir: Where broadcasting consumers keep their offsets.
        max_message_size: With ``max_body_inflate_ratio``, the cap of an inflated
            compressed body, as the push consumer's (:class:`ConsumerConfig`).
        max_body_inflate_ratio: See ``max_message_size``.
        check_crc: Check each body's CRC. A message failing it, or the inflation cap, is
            raised from ``poll()`` as a BadMessageError, and skipped.
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

    allocate_strategy: str = "AVG"
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    auto_commit: bool = True
    auto_commit_interval: float = 5.0
    rebalance_interval: float = 20.0
    poll_timeout: float = 5.0
    broker_suspend_max_time: float = 15.0
    offset_store_dir: str = str(Path.home() / ".rocketq_offsets")
    max_message_size: int = MAX_MESSAGE_SIZE
    max_body_inflate_ratio: int = MAX_BODY_INFLATE_RATIO
    check_crc: bool = True

    def __post_init__(self) -> None:
        """Refuse caps that cannot bound an inflated body (ConfigError)."""
        check_limits(self.max_message_size, self.max_body_inflate_ratio)

    @property
    def max_body_bytes(self) -> int:
        """The most a compressed body may inflate to."""
        return self.max_message_size * self.max_body_inflate_ratio
