"""SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (RocketMQ's SendMessageProcessor).

The header says who sends what where (V2 under one-letter names); the body is the message
body, or for a batch RocketMQ's batch encoding (per message: total size, magic, body CRC,
flag, body length, body, properties length, properties). A request is a batch when its
code is SEND_BATCH_MESSAGE or, as RocketMQ 4.9's broker decides, when its header's batch
flag is set (``batch`` in SEND_MESSAGE's header, ``m`` in SEND_MESSAGE_V2's, read as Java's
Boolean.parseBoolean reads it): both go the same way. Beyond RocketMQ, a flag of "1" (what
Apache's C++ 4.x client writes for its batches, a C++ bool as a number, which RocketMQ
reads as false and stores as one message) makes a batch too whenever the body is RocketMQ's
batch encoding, whole; any other body with it stays one message. The broker turns the body
into CommitLog records, the born host being the connection's peer, and stores them through the
send processor; the answer names the offset id of each record, the queue and the first
queue offset. A send that waits (a flush, a slave, a Raft quorum) is answered from the
callback that learns the outcome: no task per send.
"""

from __future__ import annotations

import functools
import random
import struct
import time
from collections.abc import Sequence
from typing import Final

from rocketq.broker.metrics import REMOTING, SEND_BATCH_MESSAGE, SEND_MESSAGE
from rocketq.broker.request_host import RequestHost
from rocketq.broker.send_processor import (
    DEL_NAMES,
    MAY_DELAY,
    SHARDED,
    SHARDING_KEY_NAME,
    UNKNOWN_TRAITS,
    check_batch,
)
from rocketq.broker.wire.pull import LONG_MAX, LONG_MIN
from rocketq.common.exceptions import (
    MessageIllegalError,
    NoPermissionError,
    PropertiesSizeExceededError,
)
from rocketq.common.message import PROPERTY_CLUSTER, SysFlag
from rocketq.common.message_id import encode_offset_msg_id
from rocketq.common.metrics import response_code_name
from rocketq.common.record import (
    MAX_PROPERTIES_LENGTH,
    check_topic,
    encode_host,
    encode_record,
    encode_send_record,
)
from rocketq.common.topics_batch import decode_segment_columns, encode_result_columns
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, Handler, error_response
from rocketq.storage.commitlog import AppendResult
from rocketq.storage.results import PutStatus

# SendMessageRequestHeaderV2's one-letter names.
V2_NAMES: Final = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "maxReconsumeTimes": "l",
    "batch": "m",
}
PUT_CODES: Final = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
}
BORN_HOST: Final = "born_host"  # Connection.attrs: the peer as a record's 8-byte host
_NO_HOST: Final = b"\0" * 8
# One message of a batch body, up to its body: total size, magic, body CRC, flag, body size.
_BATCH_HEAD: Final = struct.Struct(">iiiii")
_BATCH_ENTRY_MIN: Final = _BATCH_HEAD.size + 2  # an empty body and no properties
_U16: Final = struct.Struct(">H")
# The batch flag as Apache's C++ 4.x client writes it (UtilAll::to_string of a C++ bool, in
# every release from 1.2.3 to 2.2.0): Java's Boolean.parseBoolean reads it as false.
CPP_BATCH_FLAG: Final = "1"


# The header's numbers are Java ints (the record's 4-byte fields) but for these longs.
_LONG_FIELDS: Final = frozenset({"bornTimestamp"})
INT_MIN: Final = -(1 << 31)
INT_MAX: Final = (1 << 31) - 1


class SendHeader:
    """A send request's header fields, from either name set."""

    __slots__ = ("ext", "v2")

    def __init__(self, cmd: RemotingCommand) -> None:
        self.ext = cmd.ext or {}
        self.v2 = cmd.code != RequestCode.SEND_MESSAGE

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.ext.get(V2_NAMES[name] if self.v2 else name, default)

    def text(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            key = V2_NAMES[name] if self.v2 else name
            raise MessageIllegalError(f"the send request has no {name} (header field {key!r})")
        return value

    def int(self, name: str, default: int | None = None) -> int:
        value = self.get(name)
        if value is None or value == "":
            if default is None:
                key = V2_NAMES[name] if self.v2 else name
                raise MessageIllegalError(
                    f"the send request has no {name} (header field {key!r} is "
                    f"{'empty' if value == '' else 'missing'})"
                )
            return default
        try:
            number = int(value)
        except ValueError:
            raise MessageIllegalError(
                f"the send request's {name} is {value[:40]!r}, not a number"
            ) from None
        low, high, kind = (
            (LONG_MIN, LONG_MAX, "long") if name in _LONG_FIELDS else (INT_MIN, INT_MAX, "int")
        )
        if not low <= number <= high:
            raise MessageIllegalError(
                f"the send request's {name} is {value[:40]!r}, past a Java {kind}'s range"
            )
        return number


def java_true(value: str | None) -> bool:
    """A boolean header field as Java's Boolean.parseBoolean reads it: "true" in any case
    is true, anything else (absent, "false", "1", " true") false."""
    return value is not None and value.lower() == "true"


def cpp_batch(flag: str | None, body: bytes | memoryview, sys_flag: int) -> bool:
    """Whether a send Java would store as one message is a batch all the same: its batch
    flag is "1", as Apache's C++ 4.x client flags a batch (RocketMQ 4.9 reads that as false
    and stores the whole batch as one message), and its body is RocketMQ's batch encoding,
    whole. A compressed body is one message's zlib bytes (the C++ client 1.2.3 compressed
    batches too): never a batch. Anything else stays one message, as RocketMQ stores it."""
    return flag == CPP_BATCH_FLAG and not sys_flag & SysFlag.COMPRESSED and is_batch_encoding(body)


def is_batch_encoding(body: bytes | memoryview) -> bool:
    """Whether ``body`` is, from its first byte to its last, one or more entries of
    RocketMQ's batch encoding (the layout batch_records reads); nothing is copied."""
    view = memoryview(body)
    try:
        _batch_entries(view, 0, len(view))
    except MessageIllegalError:
        return False
    return True


def born_host(conn: Connection) -> bytes:
    """The connection's peer as the 8 bytes a record's born host holds (zeros if it is not
    an IPv4 address)."""
    host = conn.attrs.get(BORN_HOST)
    if host is None:
        try:
            host = encode_host(conn.peer)
        except ValueError:
            host = _NO_HOST
        conn.attrs[BORN_HOST] = host
    return bytes(host)


def with_cluster(properties: str | None, cluster_property: bytes) -> bytes:
    """The header's properties with the CLUSTER property after them."""
    if not properties:
        return cluster_property
    if properties[-1] != "\x02":
        return properties.encode() + b"\x02" + cluster_property
    return properties.encode() + cluster_property


def _batch_entries(view: memoryview, pos: int, end: int) -> list[tuple[int, int, int, int]]:
    """RocketMQ's batch body (MessageDecoder.encodeMessages) -> each entry's flag, where its
    body starts, where its properties start and where it ends. Total: any other bytes
    raise MessageIllegalError naming the entry and byte where they stop being a batch; an
    entry's total size must be the bytes its fields take, as every RocketMQ client writes
    it (magic and body CRC are not read: clients write zeros, the broker computes the
    CRC); a body of no entry is no batch. Reads ``view[pos:end]``; the bytes named in
    errors count from ``pos``."""
    first = pos
    out: list[tuple[int, int, int, int]] = []
    while pos < end:
        count = len(out)
        if end - pos < _BATCH_ENTRY_MIN:
            raise MessageIllegalError(
                f"the batch body is cut short: message {count} at byte {pos - first} of "
                f"{end - first} has {end - pos} bytes, fewer than an entry's {_BATCH_ENTRY_MIN}"
            )
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(view, pos)
        start = pos + _BATCH_HEAD.size
        props_at = start + body_len
        if body_len < 0 or props_at + 2 > end:
            raise MessageIllegalError(
                f"message {count} of the batch (at byte {pos - first} of {end - first}) has a body "
                f"of {body_len} bytes, past the end of the batch"
            )
        (props_len,) = _U16.unpack_from(view, props_at)
        props_start = props_at + 2
        entry_end = props_start + props_len
        if entry_end > end:
            raise MessageIllegalError(
                f"message {count} of the batch (at byte {pos - first} of {end - first}) has "
                f"properties of {props_len} bytes, past the end of the batch"
            )
        if total != entry_end - pos:
            raise MessageIllegalError(
                f"message {count} of the batch (at byte {pos - first} of {end - first}) says it is "
                f"{total} bytes, but its body and properties make it {entry_end - pos}"
            )
        out.append((flag, start, props_start, entry_end))
        pos = entry_end
    if not out:
        raise MessageIllegalError("the batch has no message")
    return out


def batch_records(
    body: bytes | memoryview,
    topic: bytes,
    *,
    queue_id: int,
    born_timestamp: int,
    born: bytes,
    sys_flag: int,
    reconsume_times: int,
    batch_properties: bytes = b"",
) -> tuple[bytes, list[int], int]:
    """RocketMQ's batch body (MessageDecoder.encodeMessages) as CommitLog records, their
    body CRC left for the CommitLog's stamp -> the records, each one's size, and what the
    messages' properties hold for the batch's checks and metrics (send_processor's
    MAY_DELAY and SHARDED bits), noted while each message's properties are at hand. Each
    record gets its entry's properties followed by the batch's own (the header's). Total:
    bytes that are not the batch encoding raise MessageIllegalError (see _batch_entries),
    an entry whose properties with the batch's do not fit a record
    PropertiesSizeExceededError."""
    view = memoryview(body)
    return records_of(
        view,
        0,
        len(view),
        bytes((len(topic),)) + topic,
        queue_id,
        born_timestamp,
        born[:4],
        int.from_bytes(born[4:8], "big"),
        sys_flag,
        reconsume_times,
        batch_properties,
    )


def records_of(
    view: memoryview,
    pos: int,
    end: int,
    topic_part: bytes,
    queue_id: int,
    born_timestamp: int,
    born_ip: bytes,
    born_port: int,
    sys_flag: int,
    reconsume_times: int,
    batch_properties: bytes,
) -> tuple[bytes, list[int], int]:
    """:func:`batch_records` of the batch encoding in ``view[pos:end]``, with what is the
    same for every batch of a request made once by the caller: the topic's length byte
    and name (``topic_part``) and the born host's address and port."""
    records: list[bytes] = []
    sizes: list[int] = []
    traits = 0
    for flag, start, props_start, entry_end in _batch_entries(view, pos, end):
        props = bytes(view[props_start:entry_end])
        if batch_properties:
            if props and not props.endswith(b"\x02"):
                props += b"\x02"
            props += batch_properties
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise PropertiesSizeExceededError(
                f"message {len(records)} of the batch has {len(props)} bytes of properties "
                f"with the batch's own; at most {MAX_PROPERTIES_LENGTH} fit in a record"
            )
        if DEL_NAMES in props:
            traits |= MAY_DELAY
        if SHARDING_KEY_NAME in props:
            traits |= SHARDED
        record = encode_send_record(
            topic_part,
            view[start : props_start - 2],
            props,
            born_timestamp,
            born_ip,
            born_port,
            flag,
            sys_flag,
            queue_id,
            reconsume_times,
        )
        records.append(record)
        sizes.append(len(record))
    return b"".join(records), sizes, traits


class _TopicsResults:
    """The results of a SEND_TOPICS_BATCH's segments while they wait for their answer: one
    list per field, by segment, and the stored ones' appends."""

    __slots__ = ("codes", "offsets", "queue_ids", "stored", "texts")

    def __init__(
        self,
        codes: list[int],
        queue_ids: list[int],
        offsets: list[int],
        texts: list[str],
        stored: list[tuple[int, AppendResult, list[int]]],
    ) -> None:
        self.codes = codes
        self.queue_ids = queue_ids
        self.offsets = offsets
        self.texts = texts
        self.stored = stored  # (segment index, its append, its record sizes)


class SendRequests:
    def __init__(self, broker: RequestHost) -> None:
        self.b = broker

    @functools.cached_property
    def cluster_property(self) -> bytes:
        """CLUSTER=<the broker's cluster>, appended to every message's properties (as
        RocketMQ's SendMessageProcessor puts PROPERTY_CLUSTER); a batch's go to each entry."""
        return f"{PROPERTY_CLUSTER}\x01{self.b.config.broker_cluster_name}\x02".encode()

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.SEND_MESSAGE: self.send,
            RequestCode.SEND_MESSAGE_V2: self.send,
            RequestCode.SEND_BATCH_MESSAGE: self.send,
            RocketqRequestCode.SEND_TOPICS_BATCH: self.send_topics,
        }

    def send(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        started = time.perf_counter()
        h = SendHeader(cmd)
        flag = h.get("batch")
        batch = cmd.code == RequestCode.SEND_BATCH_MESSAGE or java_true(flag)
        try:
            body = cmd.body if cmd.body is not None else b""
            # Before anything copies it; "1" is how the C++ client flags its batches.
            self._check_body_size(len(body), batch=batch or flag == CPP_BATCH_FLAG)
            topic = h.text("topic")
            topic_bytes = check_topic(topic)
            queue_id = h.int("queueId")
            if queue_id < 0:  # the broker picks, as RocketMQ
                config = self.b.topics.get(topic)
                queue_id = random.randrange(config.write_queue_nums) if config else 0
            born = born_host(conn)
            sys_flag = h.int("sysFlag", 0)
            born_ts = h.int("bornTimestamp", 0)
            reconsume = h.int("reconsumeTimes", 0)
            if not batch and cpp_batch(flag, body, sys_flag):
                batch = True  # stored and checked as SEND_BATCH_MESSAGE's body would be
            traits = UNKNOWN_TRAITS
            if batch:
                try:
                    records, sizes, traits = batch_records(
                        body,
                        topic_bytes,
                        queue_id=queue_id,
                        born_timestamp=born_ts,
                        born=born,
                        sys_flag=sys_flag,
                        reconsume_times=reconsume,
                        batch_properties=with_cluster(h.get("properties"), self.cluster_property),
                    )
                except PropertiesSizeExceededError:
                    raise  # a batch, with too much in one message's properties
                except MessageIllegalError as exc:
                    raise MessageIllegalError(_not_a_batch(cmd, h, exc)) from None
            else:
                records = encode_record(
                    topic=topic_bytes,
                    body=body,
                    properties=with_cluster(h.get("properties"), self.cluster_property),
                    born_timestamp=born_ts,
                    born_host=born,
                    queue_id=queue_id,
                    flag=h.int("flag", 0),
                    sys_flag=sys_flag,
                    reconsume_times=reconsume,
                    body_crc=0,  # the CommitLog's stamp computes it
                )
                sizes = [len(records)]
            self._check_creation(conn, cmd, topic)
            result = self.b.send.append(
                records,
                topic,
                queue_id,
                default_topic=h.get("defaultTopic") or "",
                default_queue_nums=h.int("defaultTopicQueueNums", 0),
                producer_group=h.get("producerGroup") or "",
                batch=batch,
                traits=traits,
            )
        except Exception as exc:
            answer = error_response(cmd, exc)
            self._count(batch=batch, code=answer.code, started=started)
            return answer
        if not self.b.send.waits:
            return self._answer(cmd, queue_id, result, sizes, PutStatus.PUT_OK, started, batch)

        def stored(status: PutStatus | BaseException) -> None:
            if isinstance(status, BaseException):  # Raft: the leader stepped down meanwhile
                answer = error_response(cmd, status)
            else:
                answer = self._answer(cmd, queue_id, result, sizes, status, started, batch)
            if conn.is_open:
                conn.send(answer)

        self.b.send.wait_stored_then(result.end_offset, stored)
        return None

    def _check_creation(self, conn: Connection, cmd: RemotingCommand, topic: str) -> None:
        """A send to a topic the broker does not have would auto-create it: that needs
        Create on it (with authorization on)."""
        if self.b.topics.get(topic) is None:
            refused = self.b.security.creation_refused(conn, cmd, topic)
            if refused is not None:
                raise NoPermissionError(
                    f"{refused}; topic {topic!r} does not exist and sending would create it"
                )

    def send_topics(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """SEND_TOPICS_BATCH: each segment (a topic's messages for one queue) is checked
        and stored as SEND_BATCH_MESSAGE's body would be, whole or not at all; one
        segment's refusal leaves the others stored. The answer, once the stored ones have
        had their waits (flush, slave, quorum), holds each segment's result.

        With many topics each segment holds a message or two, so what is done per segment
        is done about once a message: the segments are read as columns (no object per
        segment), each topic's checked name and record field come from one cache, and
        its records are built from the body in place."""
        started = time.perf_counter()
        h = SendHeader(cmd)
        try:
            body = cmd.body if cmd.body is not None else b""
            self._check_body_size(len(body), batch=True)
            data = body if isinstance(body, bytes) else bytes(body)
            topics, queue_ids, starts, ends = decode_segment_columns(data)
            born = born_host(conn)
            born_ts = h.int("bornTimestamp", 0)
            default_topic = h.get("defaultTopic") or ""
            default_queue_nums = h.int("defaultTopicQueueNums", 0)
            producer_group = h.get("producerGroup") or ""
        except Exception as exc:
            answer = error_response(cmd, exc)
            self._count(batch=True, code=answer.code, started=started)
            return answer
        view = memoryview(data)
        born_ip = born[:4]
        born_port = int.from_bytes(born[4:8], "big")
        # Each segment's result, one list per field (no object per segment): its code,
        # queue (queue_ids, as sent until the broker picks one), first queue offset and
        # text (offset message ids, or the refusal's remark).
        n = len(topics)
        codes = [int(ResponseCode.SUCCESS)] * n
        offsets = [-1] * n
        texts = [""] * n
        # Each segment's records, checked and built; then all of them stored in one go.
        ready: list[tuple[bytes, bytes, int]] = []  # records, topic bytes, queue id
        ready_at: list[int] = []  # the segment of each
        ready_sizes: list[list[int]] = []  # its records' sizes
        ready_topics: list[str] = []
        ready_traits: list[int] = []
        configs = self.b.topics.topics
        processor = self.b.send
        sendable = processor.sendable
        cluster_property = self.cluster_property
        try:
            processor.accepting()
            refused_all: Exception | None = None
        except Exception as exc:  # no writes now (a slave, a full disk...): none stored
            refused_all = exc
        for index in range(n):
            topic = topics[index]
            queue_id = queue_ids[index]
            try:
                known = sendable.get(topic)  # a name checked before
                if known is None:
                    known = processor.sendable_topic(topic, producer_group)
                raw, topic_part = known
                config = configs.get(topic)
                if queue_id < 0:  # the broker picks, as for a send
                    queue_id = random.randrange(config.write_queue_nums) if config else 0
                    queue_ids[index] = queue_id
                try:
                    records, sizes, traits = records_of(
                        view,
                        starts[index],
                        ends[index],
                        topic_part,
                        queue_id,
                        born_ts,
                        born_ip,
                        born_port,
                        0,
                        0,
                        cluster_property,
                    )
                except PropertiesSizeExceededError:
                    raise
                except MessageIllegalError as exc:
                    raise MessageIllegalError(
                        f"the messages of topic {topic!r} in the topics batch are not "
                        f"RocketMQ's batch encoding: {exc}"
                    ) from None
                if config is None:
                    self._check_creation(conn, cmd, topic)
                if refused_all is not None:
                    raise refused_all
                processor.part_config(topic, queue_id, config, default_topic, default_queue_nums)
                check_batch(records, traits)
            except Exception as exc:
                refusal = error_response(cmd, exc)
                codes[index] = refusal.code
                texts[index] = refusal.remark or ""
                continue
            ready.append((records, raw, queue_id))
            ready_at.append(index)
            ready_sizes.append(sizes)
            ready_topics.append(topic)
            ready_traits.append(traits)
        stored: list[tuple[int, AppendResult, list[int]]] = []  # result index, append, sizes
        end_offset = 0
        if ready:
            try:
                appended: Sequence[AppendResult | Exception] = processor.store_parts(
                    ready, ready_topics, ready_traits
                )
            except Exception as exc:  # the write failed (a full disk...): none stored
                appended = [exc] * len(ready)
            for i in range(len(ready)):
                index = ready_at[i]
                outcome = appended[i]
                if isinstance(outcome, AppendResult):
                    stored.append((index, outcome, ready_sizes[i]))
                    offsets[index] = outcome.queue_offset
                    if outcome.end_offset > end_offset:
                        end_offset = outcome.end_offset
                else:
                    refusal = error_response(cmd, outcome)
                    codes[index] = refusal.code
                    texts[index] = refusal.remark or ""
        results = _TopicsResults(codes, queue_ids, offsets, texts, stored)
        if not stored or not processor.waits:
            return self._topics_answer(cmd, results, PutStatus.PUT_OK, started)

        def done(status: PutStatus | BaseException) -> None:
            answer = self._topics_answer(cmd, results, status, started)
            if conn.is_open:
                conn.send(answer)

        processor.wait_stored_then(end_offset, done)
        return None

    def _topics_answer(
        self,
        cmd: RemotingCommand,
        results: _TopicsResults,
        status: PutStatus | BaseException,
        started: float,
    ) -> RemotingCommand:
        """SEND_TOPICS_BATCH's answer: the stored segments get the wait's outcome (their
        offset message ids), or the error that ended the wait (a Raft leader stepping
        down), the refused ones their error."""
        codes, offsets, texts = results.codes, results.offsets, results.texts
        if isinstance(status, BaseException):
            failed = error_response(cmd, status)
            code, text = failed.code, failed.remark or ""
            for index, _result, _sizes in results.stored:
                codes[index] = code
                offsets[index] = -1
                texts[index] = text
        else:
            code = PUT_CODES[status]
            host = self.b.store.commitlog.store_host
            for index, result, sizes in results.stored:
                codes[index] = code
                texts[index] = _offset_ids(host, result, sizes)
        self._count(batch=True, code=ResponseCode.SUCCESS, started=started)
        return cmd.response(
            ResponseCode.SUCCESS,
            None,
            encode_result_columns(codes, results.queue_ids, offsets, texts),
        )

    def _answer(
        self,
        cmd: RemotingCommand,
        queue_id: int,
        result: AppendResult,
        sizes: list[int],
        status: PutStatus,
        started: float,
        batch: bool,
    ) -> RemotingCommand:
        ids = _offset_ids(self.b.store.commitlog.store_host, result, sizes)
        code = PUT_CODES[status]
        self._count(batch=batch, code=code, started=started)
        return cmd.response(
            code,
            {
                "msgId": ids,
                "queueId": str(queue_id),
                "queueOffset": str(result.queue_offset),
                "MSG_REGION": "DefaultRegion",
                "TRACE_ON": "true",
            },
        )

    def _check_body_size(self, size: int, *, batch: bool) -> None:
        """A body over max_message_size is refused as soon as the request is read, before
        a record is made of it or it meets the send queue's checks: MESSAGE_ILLEGAL, as
        RocketMQ's broker answers a message its store finds too large (and its client's
        Validators say it, in these words, before sending). A batch's whole body counts
        (DefaultMessageStore.checkMessages)."""
        limit = self.b.store.config.max_message_size
        if size <= limit:
            return
        if batch:
            raise MessageIllegalError(
                f"the batch is {size} bytes; a batch may hold at most {limit} "
                "(max_message_size): split it"
            )
        raise MessageIllegalError(
            f"the message body size over max value, MAX: {limit} (the body is {size} bytes; "
            "max_message_size)"
        )

    def _count(self, *, batch: bool, code: int, started: float) -> None:
        metrics = self.b.metrics
        if metrics is not None:
            metrics.answered(
                SEND_BATCH_MESSAGE if batch else SEND_MESSAGE,
                response_code_name(code),
                started,
                protocol=REMOTING,
            )


def _offset_ids(host: bytes, result: AppendResult, sizes: list[int]) -> str:
    """The comma-joined offset message id of each record an append wrote, in order."""
    offset = result.wrote_offset
    ids = []
    for size in sizes:
        ids.append(encode_offset_msg_id(host, offset))
        offset += size
    return ",".join(ids)


def _not_a_batch(cmd: RemotingCommand, h: SendHeader, exc: MessageIllegalError) -> str:
    """Why a batch request's body was refused, naming what made the request a batch."""
    if cmd.code == RequestCode.SEND_BATCH_MESSAGE:
        return (
            "SEND_BATCH_MESSAGE's body is not RocketMQ's batch encoding "
            f"(MessageDecoder.encodeMessages): {exc}"
        )
    field = V2_NAMES["batch"] if h.v2 else "batch"
    return (
        f"the send request's header says batch ({field}={h.get('batch')}) but its body is "
        f"not RocketMQ's batch encoding (MessageDecoder.encodeMessages): {exc}; send a single "
        "message without the batch flag"
    )
