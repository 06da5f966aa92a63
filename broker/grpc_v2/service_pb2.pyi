import datetime
from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import message as _message
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers

from rocketq.broker.grpc_v2 import definition_pb2 as _definition_pb2

DESCRIPTOR: _descriptor.FileDescriptor

class QueryRouteRequest(_message.Message):
    __slots__ = ("endpoints", "topic")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    topic: _definition_pb2.Resource
    endpoints: _definition_pb2.Endpoints
    def __init__(self, topic: _definition_pb2.Resource | _Mapping | None = ..., endpoints: _definition_pb2.Endpoints | _Mapping | None = ...) -> None: ...

class QueryRouteResponse(_message.Message):
    __slots__ = ("message_queues", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUES_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    message_queues: _containers.RepeatedCompositeFieldContainer[_definition_pb2.MessageQueue]
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., message_queues: _Iterable[_definition_pb2.MessageQueue | _Mapping] | None = ...) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_definition_pb2.Message]
    def __init__(self, messages: _Iterable[_definition_pb2.Message | _Mapping] | None = ...) -> None: ...

class SendResultEntry(_message.Message):
    __slots__ = ("message_id", "offset", "recall_handle", "status", "transaction_id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECALL_HANDLE_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    message_id: str
    transaction_id: str
    offset: int
    recall_handle: str
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., message_id: str | None = ..., transaction_id: str | None = ..., offset: int | None = ..., recall_handle: str | None = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ("entries", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    entries: _containers.RepeatedCompositeFieldContainer[SendResultEntry]
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., entries: _Iterable[SendResultEntry | _Mapping] | None = ...) -> None: ...

class QueryAssignmentRequest(_message.Message):
    __slots__ = ("endpoints", "group", "topic")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    topic: _definition_pb2.Resource
    group: _definition_pb2.Resource
    endpoints: _definition_pb2.Endpoints
    def __init__(self, topic: _definition_pb2.Resource | _Mapping | None = ..., group: _definition_pb2.Resource | _Mapping | None = ..., endpoints: _definition_pb2.Endpoints | _Mapping | None = ...) -> None: ...

class QueryAssignmentResponse(_message.Message):
    __slots__ = ("assignments", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    assignments: _containers.RepeatedCompositeFieldContainer[_definition_pb2.Assignment]
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., assignments: _Iterable[_definition_pb2.Assignment | _Mapping] | None = ...) -> None: ...

class ReceiveMessageRequest(_message.Message):
    __slots__ = ("attempt_id", "auto_renew", "batch_size", "filter_expression", "group", "invisible_duration", "long_polling_timeout", "message_queue")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    FILTER_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    INVISIBLE_DURATION_FIELD_NUMBER: _ClassVar[int]
    AUTO_RENEW_FIELD_NUMBER: _ClassVar[int]
    LONG_POLLING_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    group: _definition_pb2.Resource
    message_queue: _definition_pb2.MessageQueue
    filter_expression: _definition_pb2.FilterExpression
    batch_size: int
    invisible_duration: _duration_pb2.Duration
    auto_renew: bool
    long_polling_timeout: _duration_pb2.Duration
    attempt_id: str
    def __init__(self, group: _definition_pb2.Resource | _Mapping | None = ..., message_queue: _definition_pb2.MessageQueue | _Mapping | None = ..., filter_expression: _definition_pb2.FilterExpression | _Mapping | None = ..., batch_size: int | None = ..., invisible_duration: datetime.timedelta | _duration_pb2.Duration | _Mapping | None = ..., auto_renew: bool | None = ..., long_polling_timeout: datetime.timedelta | _duration_pb2.Duration | _Mapping | None = ..., attempt_id: str | None = ...) -> None: ...

class ReceiveMessageResponse(_message.Message):
    __slots__ = ("delivery_timestamp", "message", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    message: _definition_pb2.Message
    delivery_timestamp: _timestamp_pb2.Timestamp
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., message: _definition_pb2.Message | _Mapping | None = ..., delivery_timestamp: datetime.datetime | _timestamp_pb2.Timestamp | _Mapping | None = ...) -> None: ...

class AckMessageEntry(_message.Message):
    __slots__ = ("lite_topic", "message_id", "receipt_handle")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    LITE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    receipt_handle: str
    lite_topic: str
    def __init__(self, message_id: str | None = ..., receipt_handle: str | None = ..., lite_topic: str | None = ...) -> None: ...

class AckMessageRequest(_message.Message):
    __slots__ = ("entries", "group", "topic")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    group: _definition_pb2.Resource
    topic: _definition_pb2.Resource
    entries: _containers.RepeatedCompositeFieldContainer[AckMessageEntry]
    def __init__(self, group: _definition_pb2.Resource | _Mapping | None = ..., topic: _definition_pb2.Resource | _Mapping | None = ..., entries: _Iterable[AckMessageEntry | _Mapping] | None = ...) -> None: ...

class AckMessageResultEntry(_message.Message):
    __slots__ = ("message_id", "receipt_handle", "status")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    receipt_handle: str
    status: _definition_pb2.Status
    def __init__(self, message_id: str | None = ..., receipt_handle: str | None = ..., status: _definition_pb2.Status | _Mapping | None = ...) -> None: ...

class AckMessageResponse(_message.Message):
    __slots__ = ("entries", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    entries: _containers.RepeatedCompositeFieldContainer[AckMessageResultEntry]
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., entries: _Iterable[AckMessageResultEntry | _Mapping] | None = ...) -> None: ...

class ForwardMessageToDeadLetterQueueRequest(_message.Message):
    __slots__ = ("delivery_attempt", "group", "lite_topic", "max_delivery_attempts", "message_id", "receipt_handle", "topic")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERY_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LITE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    group: _definition_pb2.Resource
    topic: _definition_pb2.Resource
    receipt_handle: str
    message_id: str
    delivery_attempt: int
    max_delivery_attempts: int
    lite_topic: str
    def __init__(self, group: _definition_pb2.Resource | _Mapping | None = ..., topic: _definition_pb2.Resource | _Mapping | None = ..., receipt_handle: str | None = ..., message_id: str | None = ..., delivery_attempt: int | None = ..., max_delivery_attempts: int | None = ..., lite_topic: str | None = ...) -> None: ...

class ForwardMessageToDeadLetterQueueResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("client_type", "group")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    group: _definition_pb2.Resource
    client_type: _definition_pb2.ClientType
    def __init__(self, group: _definition_pb2.Resource | _Mapping | None = ..., client_type: _definition_pb2.ClientType | str | None = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ...) -> None: ...

class EndTransactionRequest(_message.Message):
    __slots__ = ("message_id", "resolution", "source", "topic", "trace_context", "transaction_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    topic: _definition_pb2.Resource
    message_id: str
    transaction_id: str
    resolution: _definition_pb2.TransactionResolution
    source: _definition_pb2.TransactionSource
    trace_context: str
    def __init__(self, topic: _definition_pb2.Resource | _Mapping | None = ..., message_id: str | None = ..., transaction_id: str | None = ..., resolution: _definition_pb2.TransactionResolution | str | None = ..., source: _definition_pb2.TransactionSource | str | None = ..., trace_context: str | None = ...) -> None: ...

class EndTransactionResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ...) -> None: ...

class PrintThreadStackTraceCommand(_message.Message):
    __slots__ = ("nonce",)
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: str
    def __init__(self, nonce: str | None = ...) -> None: ...

class ReconnectEndpointsCommand(_message.Message):
    __slots__ = ("nonce",)
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: str
    def __init__(self, nonce: str | None = ...) -> None: ...

class ThreadStackTrace(_message.Message):
    __slots__ = ("nonce", "thread_stack_trace")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    THREAD_STACK_TRACE_FIELD_NUMBER: _ClassVar[int]
    nonce: str
    thread_stack_trace: str
    def __init__(self, nonce: str | None = ..., thread_stack_trace: str | None = ...) -> None: ...

class VerifyMessageCommand(_message.Message):
    __slots__ = ("message", "nonce")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    nonce: str
    message: _definition_pb2.Message
    def __init__(self, nonce: str | None = ..., message: _definition_pb2.Message | _Mapping | None = ...) -> None: ...

class VerifyMessageResult(_message.Message):
    __slots__ = ("nonce",)
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: str
    def __init__(self, nonce: str | None = ...) -> None: ...

class RecoverOrphanedTransactionCommand(_message.Message):
    __slots__ = ("message", "transaction_id")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    message: _definition_pb2.Message
    transaction_id: str
    def __init__(self, message: _definition_pb2.Message | _Mapping | None = ..., transaction_id: str | None = ...) -> None: ...

class NotifyUnsubscribeLiteCommand(_message.Message):
    __slots__ = ("lite_topic",)
    LITE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    lite_topic: str
    def __init__(self, lite_topic: str | None = ...) -> None: ...

class TelemetryCommand(_message.Message):
    __slots__ = ("notify_unsubscribe_lite_command", "print_thread_stack_trace_command", "reconnect_endpoints_command", "recover_orphaned_transaction_command", "settings", "status", "thread_stack_trace", "verify_message_command", "verify_message_result")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    THREAD_STACK_TRACE_FIELD_NUMBER: _ClassVar[int]
    VERIFY_MESSAGE_RESULT_FIELD_NUMBER: _ClassVar[int]
    RECOVER_ORPHANED_TRANSACTION_COMMAND_FIELD_NUMBER: _ClassVar[int]
    PRINT_THREAD_STACK_TRACE_COMMAND_FIELD_NUMBER: _ClassVar[int]
    VERIFY_MESSAGE_COMMAND_FIELD_NUMBER: _ClassVar[int]
    RECONNECT_ENDPOINTS_COMMAND_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_UNSUBSCRIBE_LITE_COMMAND_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    settings: _definition_pb2.Settings
    thread_stack_trace: ThreadStackTrace
    verify_message_result: VerifyMessageResult
    recover_orphaned_transaction_command: RecoverOrphanedTransactionCommand
    print_thread_stack_trace_command: PrintThreadStackTraceCommand
    verify_message_command: VerifyMessageCommand
    reconnect_endpoints_command: ReconnectEndpointsCommand
    notify_unsubscribe_lite_command: NotifyUnsubscribeLiteCommand
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., settings: _definition_pb2.Settings | _Mapping | None = ..., thread_stack_trace: ThreadStackTrace | _Mapping | None = ..., verify_message_result: VerifyMessageResult | _Mapping | None = ..., recover_orphaned_transaction_command: RecoverOrphanedTransactionCommand | _Mapping | None = ..., print_thread_stack_trace_command: PrintThreadStackTraceCommand | _Mapping | None = ..., verify_message_command: VerifyMessageCommand | _Mapping | None = ..., reconnect_endpoints_command: ReconnectEndpointsCommand | _Mapping | None = ..., notify_unsubscribe_lite_command: NotifyUnsubscribeLiteCommand | _Mapping | None = ...) -> None: ...

class NotifyClientTerminationRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: _definition_pb2.Resource
    def __init__(self, group: _definition_pb2.Resource | _Mapping | None = ...) -> None: ...

class NotifyClientTerminationResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ...) -> None: ...

class ChangeInvisibleDurationRequest(_message.Message):
    __slots__ = ("group", "invisible_duration", "lite_topic", "message_id", "receipt_handle", "suspend", "topic")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    INVISIBLE_DURATION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    LITE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_FIELD_NUMBER: _ClassVar[int]
    group: _definition_pb2.Resource
    topic: _definition_pb2.Resource
    receipt_handle: str
    invisible_duration: _duration_pb2.Duration
    message_id: str
    lite_topic: str
    suspend: bool
    def __init__(self, group: _definition_pb2.Resource | _Mapping | None = ..., topic: _definition_pb2.Resource | _Mapping | None = ..., receipt_handle: str | None = ..., invisible_duration: datetime.timedelta | _duration_pb2.Duration | _Mapping | None = ..., message_id: str | None = ..., lite_topic: str | None = ..., suspend: bool | None = ...) -> None: ...

class ChangeInvisibleDurationResponse(_message.Message):
    __slots__ = ("receipt_handle", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    receipt_handle: str
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., receipt_handle: str | None = ...) -> None: ...

class PullMessageRequest(_message.Message):
    __slots__ = ("batch_size", "filter_expression", "group", "long_polling_timeout", "message_queue", "offset")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    FILTER_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    LONG_POLLING_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    group: _definition_pb2.Resource
    message_queue: _definition_pb2.MessageQueue
    offset: int
    batch_size: int
    filter_expression: _definition_pb2.FilterExpression
    long_polling_timeout: _duration_pb2.Duration
    def __init__(self, group: _definition_pb2.Resource | _Mapping | None = ..., message_queue: _definition_pb2.MessageQueue | _Mapping | None = ..., offset: int | None = ..., batch_size: int | None = ..., filter_expression: _definition_pb2.FilterExpression | _Mapping | None = ..., long_polling_timeout: datetime.timedelta | _duration_pb2.Duration | _Mapping | None = ...) -> None: ...

class PullMessageResponse(_message.Message):
    __slots__ = ("message", "next_offset", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    message: _definition_pb2.Message
    next_offset: int
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., message: _definition_pb2.Message | _Mapping | None = ..., next_offset: int | None = ...) -> None: ...

class UpdateOffsetRequest(_message.Message):
    __slots__ = ("group", "message_queue", "offset")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    group: _definition_pb2.Resource
    message_queue: _definition_pb2.MessageQueue
    offset: int
    def __init__(self, group: _definition_pb2.Resource | _Mapping | None = ..., message_queue: _definition_pb2.MessageQueue | _Mapping | None = ..., offset: int | None = ...) -> None: ...

class UpdateOffsetResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ...) -> None: ...

class GetOffsetRequest(_message.Message):
    __slots__ = ("group", "message_queue")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    group: _definition_pb2.Resource
    message_queue: _definition_pb2.MessageQueue
    def __init__(self, group: _definition_pb2.Resource | _Mapping | None = ..., message_queue: _definition_pb2.MessageQueue | _Mapping | None = ...) -> None: ...

class GetOffsetResponse(_message.Message):
    __slots__ = ("offset", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    offset: int
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., offset: int | None = ...) -> None: ...

class QueryOffsetRequest(_message.Message):
    __slots__ = ("message_queue", "query_offset_policy", "timestamp")
    MESSAGE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    QUERY_OFFSET_POLICY_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    message_queue: _definition_pb2.MessageQueue
    query_offset_policy: _definition_pb2.QueryOffsetPolicy
    timestamp: _timestamp_pb2.Timestamp
    def __init__(self, message_queue: _definition_pb2.MessageQueue | _Mapping | None = ..., query_offset_policy: _definition_pb2.QueryOffsetPolicy | str | None = ..., timestamp: datetime.datetime | _timestamp_pb2.Timestamp | _Mapping | None = ...) -> None: ...

class QueryOffsetResponse(_message.Message):
    __slots__ = ("offset", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    offset: int
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., offset: int | None = ...) -> None: ...

class RecallMessageRequest(_message.Message):
    __slots__ = ("recall_handle", "topic")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    RECALL_HANDLE_FIELD_NUMBER: _ClassVar[int]
    topic: _definition_pb2.Resource
    recall_handle: str
    def __init__(self, topic: _definition_pb2.Resource | _Mapping | None = ..., recall_handle: str | None = ...) -> None: ...

class RecallMessageResponse(_message.Message):
    __slots__ = ("message_id", "status")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    message_id: str
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ..., message_id: str | None = ...) -> None: ...

class SyncLiteSubscriptionRequest(_message.Message):
    __slots__ = ("action", "group", "lite_topic_set", "offset_option", "topic", "version")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    LITE_TOPIC_SET_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_OPTION_FIELD_NUMBER: _ClassVar[int]
    action: _definition_pb2.LiteSubscriptionAction
    topic: _definition_pb2.Resource
    group: _definition_pb2.Resource
    lite_topic_set: _containers.RepeatedScalarFieldContainer[str]
    version: int
    offset_option: _definition_pb2.OffsetOption
    def __init__(self, action: _definition_pb2.LiteSubscriptionAction | str | None = ..., topic: _definition_pb2.Resource | _Mapping | None = ..., group: _definition_pb2.Resource | _Mapping | None = ..., lite_topic_set: _Iterable[str] | None = ..., version: int | None = ..., offset_option: _definition_pb2.OffsetOption | _Mapping | None = ...) -> None: ...

class SyncLiteSubscriptionResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _definition_pb2.Status | _Mapping | None = ...) -> None: ...
