from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PullStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FOUND: _ClassVar[PullStatus]
    NO_NEW_MSG: _ClassVar[PullStatus]
    NO_MATCHED_MSG: _ClassVar[PullStatus]
    OFFSET_ILLEGAL: _ClassVar[PullStatus]

class TransactionResolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSACTION_UNKNOWN: _ClassVar[TransactionResolution]
    TRANSACTION_COMMIT: _ClassVar[TransactionResolution]
    TRANSACTION_ROLLBACK: _ClassVar[TransactionResolution]
FOUND: PullStatus
NO_NEW_MSG: PullStatus
NO_MATCHED_MSG: PullStatus
OFFSET_ILLEGAL: PullStatus
TRANSACTION_UNKNOWN: TransactionResolution
TRANSACTION_COMMIT: TransactionResolution
TRANSACTION_ROLLBACK: TransactionResolution

class Status(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TopicConfigData(_message.Message):
    __slots__ = ("topic_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag", "order")
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int
    order: bool
    def __init__(self, topic_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., topic_sys_flag: _Optional[int] = ..., order: _Optional[bool] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ("request_id", "producer_group", "topic", "queue_id", "records", "batch", "default_topic", "default_topic_queue_nums", "max_reconsume_times", "oneway")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TOPIC_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TOPIC_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    ONEWAY_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    producer_group: str
    topic: str
    queue_id: int
    records: bytes
    batch: bool
    default_topic: str
    default_topic_queue_nums: int
    max_reconsume_times: int
    oneway: bool
    def __init__(self, request_id: _Optional[int] = ..., producer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., records: _Optional[bytes] = ..., batch: _Optional[bool] = ..., default_topic: _Optional[str] = ..., default_topic_queue_nums: _Optional[int] = ..., max_reconsume_times: _Optional[int] = ..., oneway: _Optional[bool] = ...) -> None: ...

class SendResponse(_message.Message):
    __slots__ = ("request_id", "status", "queue_id", "queue_offset", "wrote_offset", "store_host", "msg_count")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WROTE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STORE_HOST_FIELD_NUMBER: _ClassVar[int]
    MSG_COUNT_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    status: Status
    queue_id: int
    queue_offset: int
    wrote_offset: int
    store_host: bytes
    msg_count: int
    def __init__(self, request_id: _Optional[int] = ..., status: _Optional[_Union[Status, _Mapping]] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., wrote_offset: _Optional[int] = ..., store_host: _Optional[bytes] = ..., msg_count: _Optional[int] = ...) -> None: ...

class SendBatchRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[SendRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[SendRequest, _Mapping]]] = ...) -> None: ...

class SendBatchResponse(_message.Message):
    __slots__ = ("responses",)
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[SendResponse]
    def __init__(self, responses: _Optional[_Iterable[_Union[SendResponse, _Mapping]]] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("request_id", "consumer_group", "topic", "queue_id", "queue_offset", "max_msg_nums", "commit_offset", "has_commit_offset", "suspend_timeout_millis", "subscription", "expression_type", "sub_version")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_MSG_NUMS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HAS_COMMIT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_TIMEOUT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUB_VERSION_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    commit_offset: int
    has_commit_offset: bool
    suspend_timeout_millis: int
    subscription: str
    expression_type: str
    sub_version: int
    def __init__(self, request_id: _Optional[int] = ..., consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., max_msg_nums: _Optional[int] = ..., commit_offset: _Optional[int] = ..., has_commit_offset: _Optional[bool] = ..., suspend_timeout_millis: _Optional[int] = ..., subscription: _Optional[str] = ..., expression_type: _Optional[str] = ..., sub_version: _Optional[int] = ...) -> None: ...

class PullResponse(_message.Message):
    __slots__ = ("request_id", "status", "pull_status", "next_begin_offset", "min_offset", "max_offset", "suggest_which_broker_id", "records")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PULL_STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_BEGIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SUGGEST_WHICH_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    status: Status
    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    records: bytes
    def __init__(self, request_id: _Optional[int] = ..., status: _Optional[_Union[Status, _Mapping]] = ..., pull_status: _Optional[_Union[PullStatus, str]] = ..., next_begin_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., suggest_which_broker_id: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...

class SubscriptionData(_message.Message):
    __slots__ = ("topic", "expression", "expression_type", "tags", "codes", "version")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CODES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    expression: str
    expression_type: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    codes: _containers.RepeatedScalarFieldContainer[int]
    version: int
    def __init__(self, topic: _Optional[str] = ..., expression: _Optional[str] = ..., expression_type: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., codes: _Optional[_Iterable[int]] = ..., version: _Optional[int] = ...) -> None: ...

class ConsumerData(_message.Message):
    __slots__ = ("group", "consume_type", "message_model", "consume_from_where", "subscriptions")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CONSUME_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FROM_WHERE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionData]
    def __init__(self, group: _Optional[str] = ..., consume_type: _Optional[str] = ..., message_model: _Optional[str] = ..., consume_from_where: _Optional[str] = ..., subscriptions: _Optional[_Iterable[_Union[SubscriptionData, _Mapping]]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("client_id", "producer_groups", "consumers")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUPS_FIELD_NUMBER: _ClassVar[int]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    producer_groups: _containers.RepeatedScalarFieldContainer[str]
    consumers: _containers.RepeatedCompositeFieldContainer[ConsumerData]
    def __init__(self, client_id: _Optional[str] = ..., producer_groups: _Optional[_Iterable[str]] = ..., consumers: _Optional[_Iterable[_Union[ConsumerData, _Mapping]]] = ...) -> None: ...

class GroupRequest(_message.Message):
    __slots__ = ("group", "topic", "queue_id", "offset", "timestamp")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    queue_id: int
    offset: int
    timestamp: int
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...

class ConsumerListResponse(_message.Message):
    __slots__ = ("status", "client_ids")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_IDS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    client_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., client_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class OffsetResponse(_message.Message):
    __slots__ = ("status", "offset")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    status: Status
    offset: int
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., offset: _Optional[int] = ...) -> None: ...

class SendBackRequest(_message.Message):
    __slots__ = ("group", "commit_log_offset", "delay_level", "origin_msg_id", "origin_topic", "max_reconsume_times")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DELAY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_MSG_ID_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_TOPIC_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    group: str
    commit_log_offset: int
    delay_level: int
    origin_msg_id: str
    origin_topic: str
    max_reconsume_times: int
    def __init__(self, group: _Optional[str] = ..., commit_log_offset: _Optional[int] = ..., delay_level: _Optional[int] = ..., origin_msg_id: _Optional[str] = ..., origin_topic: _Optional[str] = ..., max_reconsume_times: _Optional[int] = ...) -> None: ...

class LockQueue(_message.Message):
    __slots__ = ("topic", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class LockBatchRequest(_message.Message):
    __slots__ = ("group", "client_id", "queues")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    group: str
    client_id: str
    queues: _containers.RepeatedCompositeFieldContainer[LockQueue]
    def __init__(self, group: _Optional[str] = ..., client_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[LockQueue, _Mapping]]] = ...) -> None: ...

class LockBatchResponse(_message.Message):
    __slots__ = ("status", "locked")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LOCKED_FIELD_NUMBER: _ClassVar[int]
    status: Status
    locked: _containers.RepeatedCompositeFieldContainer[LockQueue]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., locked: _Optional[_Iterable[_Union[LockQueue, _Mapping]]] = ...) -> None: ...

class ClientChannelRequest(_message.Message):
    __slots__ = ("client_id", "groups")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, client_id: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ...) -> None: ...

class ResetOffsetEvent(_message.Message):
    __slots__ = ("group", "topic")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class CheckTransactionEvent(_message.Message):
    __slots__ = ("group", "commit_log_offset", "tran_state_table_offset", "msg_id", "transaction_id", "record")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TRAN_STATE_TABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    group: str
    commit_log_offset: int
    tran_state_table_offset: int
    msg_id: str
    transaction_id: str
    record: bytes
    def __init__(self, group: _Optional[str] = ..., commit_log_offset: _Optional[int] = ..., tran_state_table_offset: _Optional[int] = ..., msg_id: _Optional[str] = ..., transaction_id: _Optional[str] = ..., record: _Optional[bytes] = ...) -> None: ...

class ServerEvent(_message.Message):
    __slots__ = ("consumer_ids_changed", "reset_offset", "check_transaction")
    CONSUMER_IDS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    RESET_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CHECK_TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    consumer_ids_changed: str
    reset_offset: ResetOffsetEvent
    check_transaction: CheckTransactionEvent
    def __init__(self, consumer_ids_changed: _Optional[str] = ..., reset_offset: _Optional[_Union[ResetOffsetEvent, _Mapping]] = ..., check_transaction: _Optional[_Union[CheckTransactionEvent, _Mapping]] = ...) -> None: ...

class EndTransactionRequest(_message.Message):
    __slots__ = ("producer_group", "commit_log_offset", "tran_state_table_offset", "msg_id", "transaction_id", "resolution", "from_transaction_check")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TRAN_STATE_TABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    FROM_TRANSACTION_CHECK_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    commit_log_offset: int
    tran_state_table_offset: int
    msg_id: str
    transaction_id: str
    resolution: TransactionResolution
    from_transaction_check: bool
    def __init__(self, producer_group: _Optional[str] = ..., commit_log_offset: _Optional[int] = ..., tran_state_table_offset: _Optional[int] = ..., msg_id: _Optional[str] = ..., transaction_id: _Optional[str] = ..., resolution: _Optional[_Union[TransactionResolution, str]] = ..., from_transaction_check: _Optional[bool] = ...) -> None: ...

class TopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class QueueStats(_message.Message):
    __slots__ = ("topic", "queue_id", "min_offset", "max_offset", "last_update_timestamp", "consumer_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int
    consumer_offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., last_update_timestamp: _Optional[int] = ..., consumer_offset: _Optional[int] = ...) -> None: ...

class TopicStatsResponse(_message.Message):
    __slots__ = ("status", "queues")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    status: Status
    queues: _containers.RepeatedCompositeFieldContainer[QueueStats]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., queues: _Optional[_Iterable[_Union[QueueStats, _Mapping]]] = ...) -> None: ...

class ConsumeStatsResponse(_message.Message):
    __slots__ = ("status", "queues", "consume_tps")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    CONSUME_TPS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    queues: _containers.RepeatedCompositeFieldContainer[QueueStats]
    consume_tps: float
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., queues: _Optional[_Iterable[_Union[QueueStats, _Mapping]]] = ..., consume_tps: _Optional[float] = ...) -> None: ...

class QueryMessageRequest(_message.Message):
    __slots__ = ("topic", "key", "max_num", "begin_timestamp", "end_timestamp", "msg_id", "commit_log_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int
    msg_id: str
    commit_log_offset: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., max_num: _Optional[int] = ..., begin_timestamp: _Optional[int] = ..., end_timestamp: _Optional[int] = ..., msg_id: _Optional[str] = ..., commit_log_offset: _Optional[int] = ...) -> None: ...

class RecordsResponse(_message.Message):
    __slots__ = ("status", "records")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    records: bytes
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., records: _Optional[bytes] = ...) -> None: ...

class ResetOffsetRequest(_message.Message):
    __slots__ = ("group", "topic", "timestamp")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    timestamp: int
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., timestamp: _Optional[int] = ...) -> None: ...

class ResetOffsetResponse(_message.Message):
    __slots__ = ("status", "queues")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    status: Status
    queues: _containers.RepeatedCompositeFieldContainer[QueueStats]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., queues: _Optional[_Iterable[_Union[QueueStats, _Mapping]]] = ...) -> None: ...

class SubscriptionGroupConfig(_message.Message):
    __slots__ = ("group_name", "consume_enable", "consume_broadcast_enable", "retry_queue_nums", "retry_max_times", "broker_id", "which_broker_when_consume_slowly", "notify_consumer_ids_changed_enable")
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUME_ENABLE_FIELD_NUMBER: _ClassVar[int]
    CONSUME_BROADCAST_ENABLE_FIELD_NUMBER: _ClassVar[int]
    RETRY_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    RETRY_MAX_TIMES_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    WHICH_BROKER_WHEN_CONSUME_SLOWLY_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_CONSUMER_IDS_CHANGED_ENABLE_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    consume_enable: bool
    consume_broadcast_enable: bool
    retry_queue_nums: int
    retry_max_times: int
    broker_id: int
    which_broker_when_consume_slowly: int
    notify_consumer_ids_changed_enable: bool
    def __init__(self, group_name: _Optional[str] = ..., consume_enable: _Optional[bool] = ..., consume_broadcast_enable: _Optional[bool] = ..., retry_queue_nums: _Optional[int] = ..., retry_max_times: _Optional[int] = ..., broker_id: _Optional[int] = ..., which_broker_when_consume_slowly: _Optional[int] = ..., notify_consumer_ids_changed_enable: _Optional[bool] = ...) -> None: ...

class SubscriptionGroupResponse(_message.Message):
    __slots__ = ("status", "config")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    status: Status
    config: SubscriptionGroupConfig
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., config: _Optional[_Union[SubscriptionGroupConfig, _Mapping]] = ...) -> None: ...

class TopicConfigsResponse(_message.Message):
    __slots__ = ("status", "topics")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    topics: _containers.RepeatedCompositeFieldContainer[TopicConfigData]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[TopicConfigData, _Mapping]]] = ...) -> None: ...

class RuntimeInfo(_message.Message):
    __slots__ = ("status", "table")
    class TableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    status: Status
    table: _containers.ScalarMap[str, str]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., table: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ConsumerConnection(_message.Message):
    __slots__ = ("client_id", "client_addr", "consume_type", "message_model", "consume_from_where", "subscriptions", "last_update_timestamp")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ADDR_FIELD_NUMBER: _ClassVar[int]
    CONSUME_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FROM_WHERE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    client_addr: str
    consume_type: str
    message_model: str
    consume_from_where: str
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionData]
    last_update_timestamp: int
    def __init__(self, client_id: _Optional[str] = ..., client_addr: _Optional[str] = ..., consume_type: _Optional[str] = ..., message_model: _Optional[str] = ..., consume_from_where: _Optional[str] = ..., subscriptions: _Optional[_Iterable[_Union[SubscriptionData, _Mapping]]] = ..., last_update_timestamp: _Optional[int] = ...) -> None: ...

class ConsumerConnectionResponse(_message.Message):
    __slots__ = ("status", "connections")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    connections: _containers.RepeatedCompositeFieldContainer[ConsumerConnection]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., connections: _Optional[_Iterable[_Union[ConsumerConnection, _Mapping]]] = ...) -> None: ...

class BrokerConfigResponse(_message.Message):
    __slots__ = ("status", "table")
    class TableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    status: Status
    table: _containers.ScalarMap[str, str]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., table: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ResendMessageRequest(_message.Message):
    __slots__ = ("group", "commit_log_offset")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    group: str
    commit_log_offset: int
    def __init__(self, group: _Optional[str] = ..., commit_log_offset: _Optional[int] = ...) -> None: ...

class TransferLeaderRequest(_message.Message):
    __slots__ = ("group", "to")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    group: str
    to: str
    def __init__(self, group: _Optional[str] = ..., to: _Optional[str] = ...) -> None: ...

class GroupList(_message.Message):
    __slots__ = ("status", "groups")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., groups: _Optional[_Iterable[str]] = ...) -> None: ...

class SlaveSyncData(_message.Message):
    __slots__ = ("status", "topic_configs", "consumer_offsets", "delay_offsets", "subscription_groups")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    DELAY_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_GROUPS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    topic_configs: bytes
    consumer_offsets: bytes
    delay_offsets: bytes
    subscription_groups: bytes
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., topic_configs: _Optional[bytes] = ..., consumer_offsets: _Optional[bytes] = ..., delay_offsets: _Optional[bytes] = ..., subscription_groups: _Optional[bytes] = ...) -> None: ...

class RaftMessage(_message.Message):
    __slots__ = ("sender", "term", "vote_request", "vote_response", "timeout_now")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    VOTE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    VOTE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_NOW_FIELD_NUMBER: _ClassVar[int]
    sender: str
    term: int
    vote_request: RaftVoteRequest
    vote_response: RaftVoteResponse
    timeout_now: RaftTimeoutNow
    def __init__(self, sender: _Optional[str] = ..., term: _Optional[int] = ..., vote_request: _Optional[_Union[RaftVoteRequest, _Mapping]] = ..., vote_response: _Optional[_Union[RaftVoteResponse, _Mapping]] = ..., timeout_now: _Optional[_Union[RaftTimeoutNow, _Mapping]] = ...) -> None: ...

class RaftTimeoutNow(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RaftVoteRequest(_message.Message):
    __slots__ = ("last_index", "last_term", "pre", "transfer")
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_TERM_FIELD_NUMBER: _ClassVar[int]
    PRE_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_FIELD_NUMBER: _ClassVar[int]
    last_index: int
    last_term: int
    pre: bool
    transfer: bool
    def __init__(self, last_index: _Optional[int] = ..., last_term: _Optional[int] = ..., pre: _Optional[bool] = ..., transfer: _Optional[bool] = ...) -> None: ...

class RaftVoteResponse(_message.Message):
    __slots__ = ("granted", "pre", "reason")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    PRE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    pre: bool
    reason: str
    def __init__(self, granted: _Optional[bool] = ..., pre: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...
