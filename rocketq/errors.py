"""Every error rocketq raises on purpose: the root :class:`RocketqError` and one class per
response code, each with its ``code`` and a ``retriable`` flag; ``for_code(code)`` finds the
class for a code received from a broker or a nameserver.

    from rocketq.errors import RocketqError, TopicNotExistError

Each error is also the builtin it is, so ``except TimeoutError`` catches a request that got
no answer in time (:class:`RequestTimeoutError`, and the broker's flush and consume
timeouts), ``except ConnectionError`` a broker or nameserver that cannot be reached
(:class:`ConnectBrokerError`, :class:`NoNameServerError`), and ``except ValueError`` bad
input: an illegal message (:class:`MessageIllegalError`, :class:`BadMessageError`), a bad
setting (:class:`ConfigError`), a subscription expression the broker cannot parse, a route
body that does not parse (:class:`RouteBodyError`). The SDK's public methods raise nothing
else on purpose: a socket error, a lost connection or an answer that cannot be read comes
out as one of these.
"""

from __future__ import annotations

from rocketq.common.exceptions import (
    ClientStateError,
    ConfigError,
    ConnectBrokerError,
    ConsumeMsgTimeoutError,
    ConsumerNotOnlineError,
    DiskFullError,
    FlushDiskTimeoutError,
    FlushSlaveTimeoutError,
    MessageIllegalError,
    NoMessageError,
    NoNameServerError,
    NoPermissionError,
    NotLeaderError,
    PropertiesSizeExceededError,
    PullNotFoundError,
    PullOffsetMovedError,
    PullRetryImmediatelyError,
    QueryNotFoundError,
    RequestCodeNotSupportedError,
    RequestTimeoutError,
    RocketqError,
    RocketqSystemError,
    ServiceNotAvailableError,
    SlaveNotAvailableError,
    StoreCorruptError,
    StoreFailedError,
    SubscriptionGroupNotExistError,
    SubscriptionNotExistError,
    SubscriptionNotLatestError,
    SubscriptionParseFailedError,
    SystemBusyError,
    TopicExistAlreadyError,
    TopicNotExistError,
    TransactionFailedError,
    TransactionStateGroupWrongError,
    VersionNotSupportedError,
    for_code,
)
from rocketq.remoting.route_data import RouteBodyError
from rocketq.sdk.bad_message import BadMessageError

__all__ = [
    "BadMessageError",
    "ClientStateError",
    "ConfigError",
    "ConnectBrokerError",
    "ConsumeMsgTimeoutError",
    "ConsumerNotOnlineError",
    "DiskFullError",
    "FlushDiskTimeoutError",
    "FlushSlaveTimeoutError",
    "MessageIllegalError",
    "NoMessageError",
    "NoNameServerError",
    "NoPermissionError",
    "NotLeaderError",
    "PropertiesSizeExceededError",
    "PullNotFoundError",
    "PullOffsetMovedError",
    "PullRetryImmediatelyError",
    "QueryNotFoundError",
    "RequestCodeNotSupportedError",
    "RequestTimeoutError",
    "RocketqError",
    "RocketqSystemError",
    "RouteBodyError",
    "ServiceNotAvailableError",
    "SlaveNotAvailableError",
    "StoreCorruptError",
    "StoreFailedError",
    "SubscriptionGroupNotExistError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionParseFailedError",
    "SystemBusyError",
    "TopicExistAlreadyError",
    "TopicNotExistError",
    "TransactionFailedError",
    "TransactionStateGroupWrongError",
    "VersionNotSupportedError",
    "for_code",
]
