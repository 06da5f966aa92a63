"""The error root and one class per response code.

Every error rocketq raises on purpose derives from :class:`RocketqError`. A class carries
its response ``code`` (RocketMQ's numbers where RocketMQ has one) and a ``retriable`` flag;
the SDK's retry logic reads ``retriable``, never the message text. ``for_code(code)``
finds the class for a code received over the wire.
"""

from __future__ import annotations

from typing import ClassVar, Final


class RocketqError(Exception):
    """The root of every rocketq error."""

    code: ClassVar[int] = 1
    name: ClassVar[str] = "SYSTEM_ERROR"
    retriable: ClassVar[bool] = False


_BY_CODE: dict[int, type[RocketqError]] = {}


def _register(cls: type[RocketqError]) -> type[RocketqError]:
    if cls.code in _BY_CODE:
        raise RuntimeError(f"response code {cls.code} registered twice")
    _BY_CODE[cls.code] = cls
    return cls


def for_code(code: int) -> type[RocketqError]:
    """The error class for a response code; unknown codes map to :class:`RocketqSystemError`."""
    return _BY_CODE.get(code, RocketqSystemError)


@_register
class RocketqSystemError(RocketqError):
    code = 1
    name = "SYSTEM_ERROR"


@_register
class SystemBusyError(RocketqError):
    code = 2
    name = "SYSTEM_BUSY"
    retriable = True


@_register
class RequestCodeNotSupportedError(RocketqError):
    code = 3
    name = "REQUEST_CODE_NOT_SUPPORTED"


@_register
class TransactionFailedError(RocketqError):
    code = 4
    name = "TRANSACTION_FAILED"


@_register
class FlushDiskTimeoutError(RocketqError):
    code = 10
    name = "FLUSH_DISK_TIMEOUT"


@_register
class SlaveNotAvailableError(RocketqError):
    code = 11
    name = "SLAVE_NOT_AVAILABLE"


@_register
class FlushSlaveTimeoutError(RocketqError):
    code = 12
    name = "FLUSH_SLAVE_TIMEOUT"


@_register
class MessageIllegalError(RocketqError):
    code = 13
    name = "MESSAGE_ILLEGAL"


@_register
class ServiceNotAvailableError(RocketqError):
    code = 14
    name = "SERVICE_NOT_AVAILABLE"
    retriable = True


@_register
class VersionNotSupportedError(RocketqError):
    code = 15
    name = "VERSION_NOT_SUPPORTED"


@_register
class NoPermissionError(RocketqError):
    code = 16
    name = "NO_PERMISSION"


@_register
class TopicNotExistError(RocketqError):
    code = 17
    name = "TOPIC_NOT_EXIST"
    retriable = True


@_register
class TopicExistAlreadyError(RocketqError):
    code = 18
    name = "TOPIC_EXIST_ALREADY"


@_register
class PullNotFoundError(RocketqError):
    code = 19
    name = "PULL_NOT_FOUND"


@_register
class PullRetryImmediatelyError(RocketqError):
    code = 20
    name = "PULL_RETRY_IMMEDIATELY"
    retriable = True


@_register
class PullOffsetMovedError(RocketqError):
    code = 21
    name = "PULL_OFFSET_MOVED"


@_register
class QueryNotFoundError(RocketqError):
    code = 22
    name = "QUERY_NOT_FOUND"


@_register
class SubscriptionParseFailedError(RocketqError):
    code = 23
    name = "SUBSCRIPTION_PARSE_FAILED"


@_register
class SubscriptionNotExistError(RocketqError):
    code = 24
    name = "SUBSCRIPTION_NOT_EXIST"


@_register
class SubscriptionNotLatestError(RocketqError):
    code = 25
    name = "SUBSCRIPTION_NOT_LATEST"
    retriable = True


@_register
class SubscriptionGroupNotExistError(RocketqError):
    code = 26
    name = "SUBSCRIPTION_GROUP_NOT_EXIST"


@_register
class TransactionStateGroupWrongError(RocketqError):
    code = 203
    name = "TRANSACTION_STATE_GROUP_WRONG"


@_register
class ConsumerNotOnlineError(RocketqError):
    code = 206
    name = "CONSUMER_NOT_ONLINE"


@_register
class ConsumeMsgTimeoutError(RocketqError):
    code = 207
    name = "CONSUME_MSG_TIMEOUT"


@_register
class NoMessageError(RocketqError):
    code = 208
    name = "NO_MESSAGE"


# rocketq's own codes (RocketMQ 4.x has no number for these) start at 1000.


@_register
class PropertiesSizeExceededError(MessageIllegalError):
    """Properties longer than the record's 2-byte length field allows (32767 bytes)."""

    code = 1000
    name = "PROPERTIES_SIZE_EXCEEDED"


@_register
class NotLeaderError(RocketqError):
    """A write reached a broker that is not (or no longer) the master of its group."""

    code = 1001
    name = "NOT_LEADER"
    retriable = True


@_register
class StoreCorruptError(RocketqError):
    """A store file is damaged in a way recovery cannot repair on its own."""

    code = 1002
    name = "STORE_CORRUPT"


@_register
class ConfigError(RocketqError):
    """A config file, environment variable or flag has an unknown key or a bad value."""

    code = 1003
    name = "CONFIG_ERROR"


# Client-side errors (RocketMQ's client exceptions); codes from 2000.


@_register
class ConnectBrokerError(RocketqError):
    """The broker or nameserver could not be reached (connection refused, reset, closed)."""

    code = 2001
    name = "CONNECT_BROKER_EXCEPTION"
    retriable = True


@_register
class RequestTimeoutError(RocketqError):
    """No answer within the call's timeout."""

    code = 2002
    name = "ACCESS_BROKER_TIMEOUT"
    retriable = True


@_register
class NoNameServerError(RocketqError):
    """No nameserver address given, or none answered."""

    code = 2003
    name = "NO_NAME_SERVER_EXCEPTION"
    retriable = True


@_register
class ClientStateError(RocketqError):
    """A client used before start() or after shutdown(), or configured wrongly."""

    code = 2004
    name = "CLIENT_STATE_ERROR"


ALL_ERRORS: Final[tuple[type[RocketqError], ...]] = tuple(_BY_CODE.values())
