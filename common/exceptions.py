"""The error root and one class per response code.

Every error rocketq raises on purpose derives from :class:`RocketqError`. A class carries
its response ``code`` (RocketMQ's numbers where RocketMQ has one) and a ``retriable`` flag;
the SDK's retry logic reads ``retriable``, never the message text. ``for_code(code)``
finds the class for a code received over the wire.

An error is also the builtin it is, so code that knows nothing of rocketq catches it the
usual way: a timeout is a :class:`TimeoutError` (``except TimeoutError`` catches a request
that got no answer in time), a connection that cannot be opened or breaks a
:class:`ConnectionError`, and bad input (an illegal message, a bad config value, an answer
body that does not parse) a :class:`ValueError`. Both parents are real bases::

    class RequestTimeoutError(RocketqError, TimeoutError): ...
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, TypeVar


class RocketqError(Exception):
    """The root of every rocketq error; ``except RocketqError`` catches all of them."""

    code: ClassVar[int] = 1
    """The response code of the error (RocketMQ's number where RocketMQ has one)."""
    name: ClassVar[str] = "SYSTEM_ERROR"
    """The code's name as RocketMQ spells it (``TOPIC_NOT_EXIST``)."""
    retriable: ClassVar[bool] = False
    """Whether the same request may succeed if sent again (the SDK's retries read it)."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its class, its args and its attributes, rebuilt without calling
        ``__init__``: a subclass whose constructor takes other arguments than its message
        (``BadMessageError``) crosses a process boundary as it is."""
        return _rebuild, (type(self), self.args), self.__dict__ or None


def _rebuild(cls: type[RocketqError], args: tuple[Any, ...]) -> RocketqError:
    return cls.__new__(cls, *args)


_E = TypeVar("_E", bound=type[RocketqError])

_BY_CODE: dict[int, type[RocketqError]] = {}


def _register(cls: _E) -> _E:
    if cls.code in _BY_CODE:
        raise RuntimeError(f"response code {cls.code} registered twice")
    _BY_CODE[cls.code] = cls
    return cls


def for_code(code: int) -> type[RocketqError]:
    """The error class for a response code; unknown codes map to :class:`RocketqSystemError`."""
    return _BY_CODE.get(code, RocketqSystemError)


@_register
class RocketqSystemError(RocketqError):
    """The server failed on its side (SYSTEM_ERROR), or sent an answer the client cannot read."""

    code = 1
    name = "SYSTEM_ERROR"


@_register
class SystemBusyError(RocketqError):
    """The broker is too busy to take the request now (a full queue or page cache); retry later."""

    code = 2
    name = "SYSTEM_BUSY"
    retriable = True


@_register
class RequestCodeNotSupportedError(RocketqError):
    """The server does not know the request (an older or a different server)."""

    code = 3
    name = "REQUEST_CODE_NOT_SUPPORTED"


@_register
class TransactionFailedError(RocketqError):
    """The broker could not end a transaction (commit or rollback of a half message)."""

    code = 4
    name = "TRANSACTION_FAILED"


@_register
class FlushDiskTimeoutError(RocketqError, TimeoutError):
    """The message was stored but not flushed to disk within the flush timeout (SYNC_FLUSH)."""

    code = 10
    name = "FLUSH_DISK_TIMEOUT"


@_register
class SlaveNotAvailableError(RocketqError):
    """The message was stored on the master but no slave is there to copy it (SYNC_MASTER)."""

    code = 11
    name = "SLAVE_NOT_AVAILABLE"


@_register
class FlushSlaveTimeoutError(RocketqError, TimeoutError):
    """The message was stored on the master but no slave (or raft quorum) had it in time."""

    code = 12
    name = "FLUSH_SLAVE_TIMEOUT"


@_register
class MessageIllegalError(RocketqError, ValueError):
    """A message, topic name or request field that is refused: too big, a bad name, missing."""

    code = 13
    name = "MESSAGE_ILLEGAL"


@_register
class ServiceNotAvailableError(RocketqError):
    """The broker does not serve the request now: starting, shutting down, or not writable."""

    code = 14
    name = "SERVICE_NOT_AVAILABLE"
    retriable = True


class DiskFullError(ServiceNotAvailableError):
    """The broker's store refuses writes because its disk is full: past
    ``disk_space_warning_level_ratio``, or the file system said "no space left". Reads go on,
    and the broker takes writes again by itself once space is freed. Code 14 as RocketMQ's
    broker answers it, so producers send to another broker."""


class StoreFailedError(ServiceNotAvailableError):
    """The broker's store stopped taking writes after a write or fsync of its files failed
    (an I/O error): what was not on disk cannot be trusted to get there by trying again, so
    writes stay refused until the broker is restarted. Reads go on. Code 14, as a full disk."""


@_register
class VersionNotSupportedError(RocketqError):
    """The server does not accept the client's protocol version."""

    code = 15
    name = "VERSION_NOT_SUPPORTED"


@_register
class NoPermissionError(RocketqError):
    """The server refused the request: the topic's or the broker's read/write permission,
    or, with authentication or authorization on, the caller's credentials or policies (the
    message says which)."""

    code = 16
    name = "NO_PERMISSION"


@_register
class TopicNotExistError(RocketqError):
    """The topic does not exist on the broker or the nameserver; create it first."""

    code = 17
    name = "TOPIC_NOT_EXIST"
    retriable = True


@_register
class TopicExistAlreadyError(RocketqError):
    """The topic to create exists already."""

    code = 18
    name = "TOPIC_EXIST_ALREADY"


@_register
class PullNotFoundError(RocketqError):
    """A pull found no new message in its queue."""

    code = 19
    name = "PULL_NOT_FOUND"


@_register
class PullRetryImmediatelyError(RocketqError):
    """A pull found nothing it could return at once; pull again."""

    code = 20
    name = "PULL_RETRY_IMMEDIATELY"
    retriable = True


@_register
class PullOffsetMovedError(RocketqError):
    """A pull asked for an offset the queue no longer (or not yet) has."""

    code = 21
    name = "PULL_OFFSET_MOVED"


@_register
class QueryNotFoundError(RocketqError):
    """No message matches the query (by id, key or offset)."""

    code = 22
    name = "QUERY_NOT_FOUND"


@_register
class SubscriptionParseFailedError(RocketqError, ValueError):
    """The broker cannot parse a subscription expression (a tag list or an SQL92 filter)."""

    code = 23
    name = "SUBSCRIPTION_PARSE_FAILED"


@_register
class SubscriptionNotExistError(RocketqError):
    """The broker has no subscription of the group for the topic."""

    code = 24
    name = "SUBSCRIPTION_NOT_EXIST"


@_register
class SubscriptionNotLatestError(RocketqError):
    """The broker's subscription of the group is older than the one the request names."""

    code = 25
    name = "SUBSCRIPTION_NOT_LATEST"
    retriable = True


@_register
class SubscriptionGroupNotExistError(RocketqError):
    """The consumer group is not known to the broker, which does not create groups itself."""

    code = 26
    name = "SUBSCRIPTION_GROUP_NOT_EXIST"


@_register
class TransactionStateGroupWrongError(RocketqError):
    """A transaction check answered for a producer group that is not the message's."""

    code = 203
    name = "TRANSACTION_STATE_GROUP_WRONG"


@_register
class ConsumerNotOnlineError(RocketqError):
    """No client of the consumer group is connected to the broker."""

    code = 206
    name = "CONSUMER_NOT_ONLINE"


@_register
class ConsumeMsgTimeoutError(RocketqError, TimeoutError):
    """A client did not finish consuming a message sent to it directly in time."""

    code = 207
    name = "CONSUME_MSG_TIMEOUT"


@_register
class NoMessageError(RocketqError):
    """The message asked for is not in the store."""

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
    """A write reached a broker (or a raft member) that is not, or no longer, the leader of
    its group; ``leader`` names the leader when it is known."""

    code = 1001
    name = "NOT_LEADER"
    retriable = True

    leader: str | None
    """The id of the group's leader as the refusing member knows it, or None."""

    def __init__(self, *args: object, leader: str | None = None) -> None:
        """``args`` as any exception's (the message); ``leader`` the leader, if known."""
        super().__init__(*args)
        self.leader = leader


@_register
class StoreCorruptError(RocketqError):
    """A store file is damaged in a way recovery cannot repair on its own."""

    code = 1002
    name = "STORE_CORRUPT"


@_register
class ConfigError(RocketqError, ValueError):
    """A config file, environment variable or flag has an unknown key or a bad value."""

    code = 1003
    name = "CONFIG_ERROR"


# Client-side errors (RocketMQ's client exceptions); codes from 2000.


@_register
class ConnectBrokerError(RocketqError, ConnectionError):
    """A broker or nameserver could not be reached: the connection was refused, reset or
    closed before the answer came."""

    code = 2001
    name = "CONNECT_BROKER_EXCEPTION"
    retriable = True


@_register
class RequestTimeoutError(RocketqError, TimeoutError):
    """A request got no answer within its timeout (the server is stalled, slow or gone)."""

    code = 2002
    name = "ACCESS_BROKER_TIMEOUT"
    retriable = True


@_register
class NoNameServerError(RocketqError, ConnectionError):
    """No nameserver answered: every address refused the connection, broke it or timed out."""

    code = 2003
    name = "NO_NAME_SERVER_EXCEPTION"
    retriable = True


@_register
class ClientStateError(RocketqError):
    """A client used before start() or after shutdown(), or configured wrongly."""

    code = 2004
    name = "CLIENT_STATE_ERROR"


ALL_ERRORS: Final[tuple[type[RocketqError], ...]] = tuple(_BY_CODE.values())
"""Every error class that has a response code of its own, in the order of their codes."""
