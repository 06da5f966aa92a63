"""The ``rocketq`` data source for Spark 4's Python Data Source API: batch and streaming
reads (one Spark partition per message queue, long ranges split) and writes.

Everything here is planned on the driver (options, queues, offsets) and carried to the
tasks in the pickled reader and its partitions; a task opens its own connections.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

try:  # Spark 4.1 and later hand a stream writer Arrow record batches, as a batch writer
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriter
except ImportError:  # Spark 4.0: rows
    from pyspark.sql.datasource import (  # type: ignore[assignment, unused-ignore]
        DataSourceStreamWriter as _StreamWriter,
    )

from rocketq.sdk.spark.options import (
    EARLIEST,
    LATEST,
    Offsets,
    QueueId,
    ReadOptions,
    SparkOptionError,
    decode_offsets,
    encode_offsets,
    parse_read_options,
    parse_write_options,
    queue_label,
)
from rocketq.sdk.spark.queues import DataLossError, QueueClient, blocking, read_range
from rocketq.sdk.spark.writing import write_rows

log = logging.getLogger(__name__)

SCHEMA = (
    "topic string, broker string, queue_id int, queue_offset long, msg_id string, "
    "keys array<string>, tags string, body binary, properties map<string,string>, "
    "born_timestamp timestamp, store_timestamp timestamp, born_host string, "
    "store_host string, reconsume_times int"
)


class RocketqDataSource(DataSource):
    """``spark.read.format("rocketq")``, ``readStream``, ``write`` and ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "rocketq"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketqReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RocketqStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return RocketqWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return RocketqStreamWriter(self.options, schema)


@dataclass(frozen=True, slots=True)
class QueueRange(InputPartition):
    """Offsets [start, end) of one queue: one Spark task."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int


def plan(ranges: dict[QueueId, tuple[int, int]], per_partition: int) -> list[QueueRange]:
    """One partition per queue with something to read, ranges longer than
    ``per_partition`` cut into pieces."""
    out: list[QueueRange] = []
    for (topic, broker, queue_id), (start, end) in sorted(ranges.items()):
        for lo in range(start, end, per_partition):
            out.append(QueueRange(topic, broker, queue_id, lo, min(end, lo + per_partition)))
    return out


class _Reading:
    """What batch and streaming readers share: the tasks' read of a partition."""

    opts: ReadOptions

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        q = (partition.topic, partition.broker, partition.queue_id)
        o = self.opts
        yield from read_range(
            o.namesrv,
            q,
            partition.start,
            partition.end,
            group=o.pull_group,
            expression=o.expression,
            expression_type=o.expression_type,
            fail_on_data_loss=o.fail_on_data_loss,
            timeout=o.read_timeout,
            security=o.security,
        )


async def _bounds(client: QueueClient, topics: tuple[str, ...]) -> tuple[Offsets, Offsets]:
    queues = await client.queues(topics)
    lows = await client.offsets(queues, "GetMinOffset")
    highs = await client.offsets(queues, "GetMaxOffset")
    return lows, highs


async def _starting(client: QueueClient, opts: ReadOptions, lows: Offsets) -> Offsets:
    """Where reading starts, per queue known now (before the data-loss check)."""
    if opts.starting_timestamp is not None:
        found = await client.offsets(
            sorted(lows), "SearchOffsetByTimestamp", timestamp=opts.starting_timestamp
        )
        return {q: found.get(q, lows[q]) for q in lows}
    return dict(lows)


def _resolve(spec: str | Offsets, lows: Offsets, highs: Offsets, default: int) -> Offsets:
    """Named or JSON offsets -> numbers for every queue in ``highs`` (-2/-1 resolved; a
    queue the JSON leaves out takes ``default``)."""
    if isinstance(spec, str):
        chosen = lows if spec == "earliest" else highs
        return {q: chosen[q] for q in highs}
    out: Offsets = {}
    for q in highs:
        value = spec.get(q, default)
        out[q] = lows[q] if value == EARLIEST else highs[q] if value == LATEST else value
    unknown = sorted(set(spec) - set(highs))
    if unknown:
        raise SparkOptionError(
            "offsets name queues the cluster does not have (or whose broker does not answer): "
            + ", ".join(queue_label(q) for q in unknown)
        )
    return out


def _check_loss(start: Offsets, lows: Offsets, fail_on_data_loss: bool) -> dict[QueueId, int]:
    """Queues whose start is below what the broker still has: raise or skip ahead."""
    out = dict(start)
    for q, offset in sorted(start.items()):
        low = lows.get(q)
        if low is not None and offset < low:
            what = (
                f"{queue_label(q)}: offsets [{offset}, {low}) were removed (CommitLog "
                "retention) before they were read"
            )
            if fail_on_data_loss:
                raise DataLossError(
                    f"{what}; set failOnDataLoss=false to skip them, or read the archive of them"
                )
            log.warning("%s; skipped (failOnDataLoss=false)", what)
            out[q] = low
    return out


class RocketqReader(_Reading, DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts

        async def ranges(client: QueueClient) -> dict[QueueId, tuple[int, int]]:
            lows, highs = await _bounds(client, opts.topics)
            missing = sorted(set(lows) ^ set(highs))
            if missing:
                raise SparkOptionError(
                    "brokers did not answer for "
                    + ", ".join(queue_label(q) for q in missing)
                    + ": a batch read needs every queue"
                )
            if opts.starting_timestamp is not None:
                start = await _starting(client, opts, lows)
            else:
                start = _resolve(opts.starting, lows, highs, EARLIEST)
            end = _resolve(opts.ending, lows, highs, LATEST)
            start = _check_loss(start, lows, opts.fail_on_data_loss)
            return {q: (start[q], end[q]) for q in highs if start[q] < end[q]}

        return plan(blocking(opts.namesrv, ranges, opts.security), opts.partition_offsets)


class RocketqStreamReader(_Reading, DataSourceStreamReader):
    """Offsets are ``{topic: {"broker:queue": offset}}``; a batch reads [start, end) of
    each queue. Queues that appear later start at their min offset."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._known: Offsets | None = None  # the last end planned or committed
        self._latest: Offsets = {}

    def initialOffset(self) -> dict[str, Any]:
        opts = self.opts

        async def initial(client: QueueClient) -> Offsets:
            lows, highs = await _bounds(client, opts.topics)
            if opts.starting_timestamp is not None:
                return await _starting(client, opts, lows)
            return _resolve(opts.starting, lows, highs, EARLIEST)

        start = blocking(opts.namesrv, initial, opts.security)
        self._known = start
        return encode_offsets(start)

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        """Each queue's max offset now, at most ``maxOffsetsPerTrigger`` past ``start`` in
        all. Spark 4.2 and later pass ``start`` and the read limit (admission control); 4.0
        and 4.1 pass nothing, and the cap counts from the last end this reader planned or
        committed, so the first batch after a (re)start reads all there is."""
        opts = self.opts

        async def latest(client: QueueClient) -> tuple[Offsets, Offsets]:
            return await _bounds(client, opts.topics)

        lows, highs = blocking(opts.namesrv, latest, opts.security)
        # A broker that does not answer keeps its queues where they were.
        merged = {**self._latest, **highs}
        self._latest = merged
        if start is not None:
            known: Offsets | None = decode_offsets(start, "the stream's start offsets")
            cap = getattr(limit, "max_rows", None)
        else:
            known, cap = self._known, opts.max_offsets_per_trigger
        if known is not None:
            # Never behind the start: a queue the brokers do not report now stays put.
            merged = {**known, **{q: max(o, known.get(q, o)) for q, o in merged.items()}}
        if cap is None or known is None:
            return encode_offsets(merged)
        begin = {q: known.get(q, lows.get(q, 0)) for q in merged}
        return encode_offsets(limit_offsets(begin, merged, int(cap)))

    def getDefaultReadLimit(self) -> Any:
        """``maxOffsetsPerTrigger`` as Spark's read limit (Spark 4.2 and later)."""
        from pyspark.sql.streaming.datasource import (  # type: ignore[import-not-found, unused-ignore]
            ReadAllAvailable,
            ReadMaxRows,
        )

        cap = self.opts.max_offsets_per_trigger
        return ReadMaxRows(cap) if cap is not None else ReadAllAvailable()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        opts = self.opts
        begin = decode_offsets(start, "the stream's start offsets")
        finish = decode_offsets(end, "the stream's end offsets")
        new = sorted(set(finish) - set(begin))

        async def low(client: QueueClient) -> Offsets:
            await client.queues(opts.topics)
            return await client.offsets(sorted(finish), "GetMinOffset")

        lows = blocking(opts.namesrv, low, opts.security)
        for q in new:
            begin[q] = lows.get(q, 0)
            log.info("%s appeared: read from offset %d", queue_label(q), begin[q])
        begin = _check_loss({q: begin[q] for q in finish}, lows, opts.fail_on_data_loss)
        self._known = finish
        ranges = {q: (begin[q], finish[q]) for q in finish if begin[q] < finish[q]}
        return plan(ranges, opts.partition_offsets)

    def commit(self, end: dict[str, Any]) -> None:
        offsets = decode_offsets(end, "the stream's committed offsets")
        self._known = offsets
        group = self.opts.group
        if group is None:
            return

        async def store(client: QueueClient) -> None:
            await client.queues(self.opts.topics)
            await client.commit(group, offsets)

        try:
            blocking(self.opts.namesrv, store, self.opts.security)
        except Exception as exc:  # progress for monitoring only: never fail the query
            log.warning("committing the stream's offsets to group %s failed: %s", group, exc)


def limit_offsets(start: Offsets, latest: Offsets, cap: int) -> Offsets:
    """At most ``cap`` offsets in all past ``start``, shared in proportion to each queue's
    backlog (as Kafka's maxOffsetsPerTrigger); at least one offset moves when any is due."""
    backlog = {q: max(0, latest[q] - start[q]) for q in latest}
    total = sum(backlog.values())
    if total <= cap:
        return dict(latest)
    out = {q: start[q] + backlog[q] * cap // total for q in latest}
    if all(out[q] == start[q] for q in latest):
        q = max(backlog, key=lambda k: backlog[k])
        out[q] += 1
    return out


# -- writing ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SentCommit(WriterCommitMessage):
    messages: int


class _Sending:
    """What the batch and stream writers share: the options, checked on the driver, and a
    task's send of its rows (sdk/spark/writing.py)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.columns = [f.name for f in schema.fields]
        self.opts = parse_write_options(options, self.columns)
        self.write_id = uuid.uuid4().hex[:12]

    def _send(self, iterator: Iterator[Any], *, per_stage: bool) -> SentCommit:
        """Send a task's rows; the row key names the write, (the stage,) the partition."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        place = [ctx.partitionId() if ctx is not None else 0]
        if per_stage:
            place.insert(0, ctx.stageId() if ctx is not None else 0)
        prefix = "-".join([self.write_id, *map(str, place)])
        return SentCommit(write_rows(self.opts, self.columns, iterator, prefix).sent)


def _sent(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.messages for m in messages if isinstance(m, SentCommit))


class RocketqWriter(_Sending, DataSourceArrowWriter):
    """Each task sends its rows (Arrow record batches) in batches through the SDK's
    producer and fails unless every send is SEND_OK. A retried task sends its rows again:
    each message carries ``SPARK_ROW_KEY`` (the same for a row's every attempt) for
    consumers to deduplicate on."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._send(iterator, per_stage=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("rocketq write %s: %d messages sent", self.write_id, _sent(messages))


class RocketqStreamWriter(_Sending, _StreamWriter):
    """As :class:`RocketqWriter`, per micro-batch (the row key names the batch's stage)."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._send(iterator, per_stage=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("rocketq stream write batch %d: %d messages sent", batchId, _sent(messages))
