"""The data source's options and offsets, checked on the driver before any task runs.

Offsets name each message queue ``broker:queue`` under its topic, as JSON::

    {"Orders": {"broker-a:0": 120, "broker-a:1": 98, "broker-b:0": 0}}

In ``startingOffsets`` and ``endingOffsets`` an offset may also be -2 (the queue's earliest)
or -1 (its latest); a streaming query's offsets are always resolved numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from rocketq.common import times
from rocketq.common.exceptions import ConfigError, MessageIllegalError, RocketqError
from rocketq.common.names import check_group_name, check_topic_name
from rocketq.sdk.security import SecurityConfig, client_security

EARLIEST: Final = -2
LATEST: Final = -1
# A queue's range is split into Spark partitions of at most this many offsets.
DEFAULT_PARTITION_OFFSETS: Final = 1_000_000
DEFAULT_GROUP: Final = "rocketq-spark"

QueueId = tuple[str, str, int]
"""(topic, broker name, queue id)."""
Offsets = dict[QueueId, int]


class SparkOptionError(RocketqError, ValueError):
    """An option of the ``rocketq`` data source is missing or wrong."""


def _name(value: str, what: str, check: Callable[[str], str]) -> str:
    """``value`` checked as a topic or group name; SparkOptionError naming the option."""
    try:
        return check(value)
    except MessageIllegalError as exc:
        raise SparkOptionError(f"option {what}: {exc}") from None


def queue_label(q: QueueId) -> str:
    return f"{q[0]} {q[1]}:{q[2]}"


def encode_offsets(offsets: Mapping[QueueId, int]) -> dict[str, dict[str, int]]:
    """``{(topic, broker, queue): offset}`` -> the JSON-ready form (sorted, so equal offsets
    print alike)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, broker, queue_id), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[f"{broker}:{queue_id}"] = int(offset)
    return out


def decode_offsets(doc: object, what: str) -> Offsets:
    """The JSON form (parsed, or a string) -> ``{(topic, broker, queue): offset}``."""
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise SparkOptionError(
                f"{what} is not JSON ({exc.msg}): give 'earliest', 'latest' or "
                '{"Topic": {"broker-a:0": 12}}'
            ) from None
    if not isinstance(doc, dict):
        raise SparkOptionError(f'{what} must be a JSON object: {{"Topic": {{"broker-a:0": 12}}}}')
    out: Offsets = {}
    for topic, queues in doc.items():
        _name(str(topic), what, check_topic_name)
        if not isinstance(queues, dict):
            raise SparkOptionError(f'{what}: topic {topic!r} must map "broker:queue" to offsets')
        for name, offset in queues.items():
            broker, sep, qid = str(name).rpartition(":")
            if not sep or not broker or not qid.isdigit():
                raise SparkOptionError(
                    f'{what}: {name!r} of topic {topic!r} is not "broker:queue" (e.g. broker-a:0)'
                )
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise SparkOptionError(
                    f"{what}: offset {offset!r} of {topic} {name} must be a whole number >= 0, "
                    "or -2 (earliest) or -1 (latest)"
                )
            out[(str(topic), broker, int(qid))] = offset
    return out


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise SparkOptionError(f"option {name} must be true or false, not {raw!r}")


def _positive(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw))
    except ValueError:
        value = 0
    if value <= 0:
        raise SparkOptionError(f"option {name} must be a whole number above 0, not {raw!r}")
    return value


def _timestamp_ms(raw: str, name: str) -> int:
    """Epoch milliseconds, ``now``, or an ISO 8601 time, UTC unless it has an offset
    (``rocketq.common.times``, the rule of the CLI, the console and the pipeline)."""
    try:
        return times.parse_ms(raw)
    except ValueError as exc:
        raise SparkOptionError(f"option {name} must be a time, not {raw!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class ReadOptions:
    namesrv: str
    topics: tuple[str, ...]
    starting: str | Offsets  # "earliest", "latest", or offsets
    ending: str | Offsets  # "latest", or offsets (batch only)
    starting_timestamp: int | None
    expression: str
    expression_type: str  # "TAG" or "SQL92"
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    group: str | None
    partition_offsets: int
    read_timeout: float  # seconds a task waits for an unreachable queue
    security: SecurityConfig = field(default_factory=SecurityConfig)  # credentials and TLS

    @property
    def pull_group(self) -> str:
        return self.group or DEFAULT_GROUP


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    namesrv = str(options.get("namesrv", "")).strip()
    if not namesrv:
        raise SparkOptionError('option namesrv is required: .option("namesrv", "host:9876")')
    topics = tuple(t.strip() for t in str(options.get("topic", "")).split(",") if t.strip())
    if not topics:
        raise SparkOptionError('option topic is required: .option("topic", "T") or "T1,T2"')
    for t in topics:
        _name(t, "topic", check_topic_name)
    starting: str | Offsets = _offsets_option(options, "startingOffsets", "earliest")
    ending: str | Offsets = _offsets_option(options, "endingOffsets", "latest")
    if isinstance(ending, str) and ending != "latest":
        raise SparkOptionError("option endingOffsets is 'latest' or JSON offsets, not 'earliest'")
    if streaming and "endingOffsets" in options:
        raise SparkOptionError("option endingOffsets is for batch reads; a stream has no end")
    if not isinstance(ending, str) and any(o == EARLIEST for o in ending.values()):
        raise SparkOptionError("endingOffsets cannot be -2 (earliest): give -1 or an offset")
    for offsets, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if not isinstance(offsets, str):
            stray = sorted({t for t, _, _ in offsets} - set(topics))
            if stray:
                raise SparkOptionError(
                    f"{name} names topic(s) {', '.join(stray)} that option topic does not"
                )
    stamp_raw = options.get("startingTimestamp")
    starting_timestamp = None
    if stamp_raw is not None:
        if "startingOffsets" in options:
            raise SparkOptionError("give startingOffsets or startingTimestamp, not both")
        starting_timestamp = _timestamp_ms(str(stamp_raw), "startingTimestamp")
    tags = options.get("filter.tags")
    sql = options.get("filter.sql")
    if tags is not None and sql is not None:
        raise SparkOptionError("give filter.tags or filter.sql, not both")
    if sql is not None:
        from rocketq.common.sql92 import validate

        try:
            validate(str(sql))
        except RocketqError as exc:
            raise SparkOptionError(f"option filter.sql: {exc}") from None
        expression, expression_type = str(sql), "SQL92"
    else:
        expression, expression_type = str(tags or "*").strip() or "*", "TAG"
    max_per_trigger = _positive(options, "maxOffsetsPerTrigger", None)
    if max_per_trigger is not None and not streaming:
        raise SparkOptionError("option maxOffsetsPerTrigger is for streaming reads")
    partition_offsets = _positive(options, "maxOffsetsPerPartition", DEFAULT_PARTITION_OFFSETS)
    assert partition_offsets is not None
    read_timeout = _positive(options, "readTimeoutSeconds", 120)
    assert read_timeout is not None
    group = options.get("group")
    if group and str(group).strip():
        _name(str(group).strip(), "group", check_group_name)
    return ReadOptions(
        namesrv=namesrv,
        topics=topics,
        starting=starting,
        ending=ending,
        starting_timestamp=starting_timestamp,
        expression=expression,
        expression_type=expression_type,
        max_offsets_per_trigger=max_per_trigger,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        group=str(group).strip() if group and str(group).strip() else None,
        partition_offsets=partition_offsets,
        read_timeout=float(read_timeout),
        security=parse_security_options(options),
    )


def _offsets_option(options: Mapping[str, str], name: str, default: str) -> str | Offsets:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip()
    if text in ("earliest", "latest"):
        return text
    if not text.startswith("{"):
        raise SparkOptionError(
            f"option {name} must be 'earliest', 'latest' or JSON offsets per topic and "
            f'broker:queue ({{"T": {{"broker-a:0": 12}}}}), not {raw!r}'
        )
    return decode_offsets(text, f"option {name}")


@dataclass(frozen=True, slots=True)
class WriteOptions:
    namesrv: str
    topic: str | None
    group: str
    batch_size: int
    in_flight: int
    send_timeout_ms: int
    write_timeout: float  # seconds a task keeps sending a batch the brokers refuse
    security: SecurityConfig = field(default_factory=SecurityConfig)  # credentials and TLS


def parse_write_options(options: Mapping[str, str], columns: list[str]) -> WriteOptions:
    namesrv = str(options.get("namesrv", "")).strip()
    if not namesrv:
        raise SparkOptionError('option namesrv is required: .option("namesrv", "host:9876")')
    if "body" not in columns:
        raise SparkOptionError(
            f"writing to rocketq needs a column body (binary or string); the data has "
            f"{', '.join(columns) or 'no columns'}"
        )
    topic = str(options.get("topic", "")).strip() or None
    if topic is None and "topic" not in columns:
        raise SparkOptionError("give the topic as option topic or as a column named topic")
    if topic is not None:
        _name(topic, "topic", check_topic_name)
    producer_group = _name(
        str(options.get("producerGroup", "rocketq-spark-writer")), "producerGroup", check_group_name
    )
    batch_size = _positive(options, "batchSize", 32)
    in_flight = _positive(options, "maxInFlight", 8)
    timeout = _positive(options, "sendTimeoutMs", 10_000)
    write_timeout = _positive(options, "writeTimeoutSeconds", 120)
    assert batch_size is not None and in_flight is not None and timeout is not None
    assert write_timeout is not None
    return WriteOptions(
        namesrv=namesrv,
        topic=topic,
        group=producer_group,
        batch_size=batch_size,
        in_flight=in_flight,
        send_timeout_ms=timeout,
        write_timeout=float(write_timeout),
        security=parse_security_options(options),
    )


def _text(options: Mapping[str, str], name: str) -> str:
    return str(options.get(name, "") or "").strip()


def parse_security_options(options: Mapping[str, str]) -> SecurityConfig:
    """The credentials and TLS of a read or a write: options ``accessKey`` and
    ``secretKey`` (else ``ROCKETQ_ACCESS_KEY`` / ``ROCKETQ_SECRET_KEY`` where the task
    runs), ``credentialsFile``, ``tls``, ``tlsCaFile``, ``tlsCertFile``, ``tlsKeyFile`` and
    ``tlsVerifyHostname``; checked on the driver (half a key pair, a TLS file missing)."""
    config = SecurityConfig(
        access_key=_text(options, "accessKey") or None,
        secret_key=_text(options, "secretKey") or None,
        credentials_file=_text(options, "credentialsFile") or None,
        # Not given: ROCKETQ_TLS where the task runs, as the SDK's clients read it.
        tls=_bool(options, "tls", False) if options.get("tls") is not None else None,
        tls_ca_file=_text(options, "tlsCaFile"),
        tls_cert_file=_text(options, "tlsCertFile"),
        tls_key_file=_text(options, "tlsKeyFile"),
        tls_verify_hostname=_bool(options, "tlsVerifyHostname", True),
    )
    try:
        client_security(config, "the rocketq data source")
    except ConfigError as exc:
        raise SparkOptionError(_spark_names(str(exc))) from None
    return config


SECURITY_OPTIONS: Final = {
    "access_key": "accessKey",
    "secret_key": "secretKey",
    "credentials_file": "credentialsFile",
    "tls": "tls",
    "tls_ca_file": "tlsCaFile",
    "tls_cert_file": "tlsCertFile",
    "tls_key_file": "tlsKeyFile",
    "tls_verify_hostname": "tlsVerifyHostname",
}
"""SDK client settings -> the data source's options of the same meaning."""


def security_options(settings: Mapping[str, object]) -> dict[str, str]:
    """SDK client settings (``access_key``, ``tls``, ...) as the data source's options
    (``accessKey``, ``tls``, ...); settings left at their defaults are left out."""
    out: dict[str, str] = {}
    for name, option in SECURITY_OPTIONS.items():
        value = settings.get(name)
        if value is None or value == "" or (name == "tls" and value is False):
            continue
        if name == "tls_verify_hostname" and value is True:
            continue
        out[option] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


_SPARK_NAMES: Final = {
    "tls_ca_file": "tlsCaFile",
    "tls_cert_file": "tlsCertFile",
    "tls_key_file": "tlsKeyFile",
    "tls=True": "tls=true",
    "tls is off": "option tls is not true",
}


def _spark_names(message: str) -> str:
    """An SDK settings message with the data source's option names."""
    for sdk_name, spark_name in _SPARK_NAMES.items():
        message = message.replace(sdk_name, spark_name)
    return message
