"""``rocketq bench recovery``: how long a broker is gone after a SIGKILL, by CommitLog size.

For each size, one fresh ASYNC_FLUSH broker and one nameserver (the launcher that
``rocketq cluster up`` uses) take batches of ``batch`` x ``size``-byte messages from
``senders`` concurrent senders until the message bodies add up to the size. The broker is
SIGKILLed (its abort file stays, so the restart runs the crash recovery), started again,
and a new producer sends until its first SEND_OK: the time from the restart to that
answer is the figure. Two sizes in one run by default, so a recovery that grows with the
CommitLog shows as a ratio; the broker's own recovery log lines add what it checked and
what it re-dispatched, and when the re-dispatch caught up. The same command with
``--topics`` compares topic counts instead (``rocketq.bench.restart_bench``), with the
restart and log helpers of this module: ``fresh_cluster`` and ``stop_and_restart`` are the
start, stop, restart and measure steps both modes share.
"""

from __future__ import annotations

import asyncio
import re
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from rocketq.bench.report import MB, BenchOptionError, json_line, rate

if TYPE_CHECKING:
    from rocketq.cluster.launcher import LocalCluster

TOPIC: Final = "RecoveryBench"
QUEUES: Final = 8
GB: Final = 1_000_000_000  # decimal, as report.MB
DEFAULT_SIZES: Final = "0.4,3"
MAX_GB: Final = 1000.0
SEND_OK_LIMIT_S: Final = 120.0  # no SEND_OK this long after the restart fails the run
CAUGHT_UP_WAIT_S: Final = 30.0  # how long to wait for the re-dispatch's log line
RETRY_PAUSE_S: Final = 0.01  # between two sends of the new producer while it fails

# The broker's log lines (storage.recovery, storage.message_store).
_CHECKED: Final = re.compile(
    r"checked (\d+) records \((\d+) bytes\) of the CommitLog from offset (\d+)"
    r"(?P<cp> \(the checkpoint's flushed offsets\))?, end at (\d+).*?; "
    r"re-dispatch from offset (\d+) \((\d+) bytes\)"
)
_CAUGHT_UP: Final = re.compile(
    r"re-dispatch after recovery caught up at CommitLog offset \d+ in ([\d.]+) s"
)
# An older broker's line: "store loaded from ...: CommitLog [a, b), n queues, scanned k records".
_OLD_LOADED: Final = re.compile(r"CommitLog \[(\d+), (\d+)\), \d+ queues, scanned (\d+) records")
_OLD_SEGMENT: Final = re.compile(r"recovering from segment (\d+)")


def parse_sizes(text: str) -> list[float]:
    """``"0.4,3"`` -> [0.4, 3.0] GB, ascending. One size N also runs N/8, so every run
    compares two sizes."""
    try:
        sizes = sorted({float(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise BenchOptionError(
            "--gb", f"{text!r} is not a comma list of sizes in GB such as 0.4,3"
        ) from None
    if not sizes:
        raise BenchOptionError("--gb", "give one or two sizes in GB, e.g. 0.4,3")
    if len(sizes) > 2:
        raise BenchOptionError("--gb", f"at most two sizes per run, got {text!r}")
    if sizes[0] <= 0 or sizes[-1] > MAX_GB or any(s != s for s in sizes):
        raise BenchOptionError(
            "--gb", f"sizes must be more than 0 and at most {MAX_GB:g} GB, got {text!r}"
        )
    if len(sizes) == 1:
        sizes = [sizes[0] / 8, sizes[0]]
    return sizes


def check_options(*, senders: int, batch: int, size: int, segment_size: int) -> None:
    for flag, value, low in (
        ("--senders", senders, 1),
        ("--batch", batch, 1),
        ("--size", size, 1),
        ("--segment-size", segment_size, 4096),
    ):
        if value < low:
            raise BenchOptionError(flag, f"must be at least {low}, got {value}")
    if batch * size > 4 * 1024 * 1024:
        raise BenchOptionError(
            "--batch", f"a batch of {batch} x {size} B is over the 4 MiB a send may carry"
        )
    if batch * (size + 300) * 2 > segment_size:
        raise BenchOptionError(
            "--segment-size", f"{segment_size} B is too small for batches of {batch} x {size} B"
        )


@dataclass
class SizeResult:
    gb: float
    messages: int = 0
    commitlog_bytes: int = 0
    fill_s: float = 0.0
    send_failed: int = 0
    restart_to_send_ok_s: float = 0.0
    restart_to_ready_s: float = 0.0
    failed_sends_after_restart: int = 0
    # From the broker's log (-1: not found).
    scanned_records: int = -1
    scanned_bytes: int = -1
    scan_from: int = -1
    from_checkpoint: bool | None = None
    redispatch_bytes: int = -1
    redispatch_caught_up_s: float = -1.0
    errors: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gb": self.gb,
            "messages": self.messages,
            "commitlog_bytes": self.commitlog_bytes,
            "fill_s": round(self.fill_s, 3),
            "fill_msgs_per_s": round(rate(self.messages, self.fill_s), 1),
            "send_failed": self.send_failed,
            "restart_to_send_ok_s": round(self.restart_to_send_ok_s, 3),
            "restart_to_ready_s": round(self.restart_to_ready_s, 3),
            "failed_sends_after_restart": self.failed_sends_after_restart,
            "scanned_records": self.scanned_records,
            "scanned_bytes": self.scanned_bytes,
            "scan_from": self.scan_from,
            "from_checkpoint": self.from_checkpoint,
            "redispatch_bytes": self.redispatch_bytes,
            "redispatch_caught_up_s": round(self.redispatch_caught_up_s, 3),
            "errors": self.errors,
        }


def read_recovery_log(text: str, result: SizeResult) -> None:
    """Fill the log facts of ``result`` from the restarted broker's log."""
    if m := _CHECKED.search(text):
        result.scanned_records, result.scanned_bytes = int(m[1]), int(m[2])
        result.scan_from = int(m[3])
        result.from_checkpoint = m["cp"] is not None
        result.commitlog_bytes = int(m[5])
        result.redispatch_bytes = int(m[7])
    elif m := _OLD_LOADED.search(text):
        # Before re-dispatch moved to the background: scanned from a segment start.
        result.scanned_records = int(m[3])
        result.commitlog_bytes = int(m[2])
        if s := _OLD_SEGMENT.search(text):
            result.scan_from = int(s[1])
            result.scanned_bytes = result.redispatch_bytes = result.commitlog_bytes - int(s[1])
        result.from_checkpoint = False
    if m := _CAUGHT_UP.search(text):
        result.redispatch_caught_up_s = float(m[1])


def log_tail(path: Path, offset: int) -> str:
    """A log's text from ``offset`` on ("" when it cannot be read)."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def log_size(path: Path) -> int:
    """Where the next run's lines of a log will begin."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


async def wait_recovery_log(log: Path, offset: int, result: SizeResult) -> str:
    """Read the restarted broker's recovery lines into ``result``, waiting (at most
    ``CAUGHT_UP_WAIT_S``) for the line saying the background re-dispatch caught up when
    there is one to wait for; -> the log's text from ``offset``. The recovery line comes
    before the broker's ready line, so call it once the broker is ready."""
    deadline = time.monotonic() + CAUGHT_UP_WAIT_S
    while True:
        text = log_tail(log, offset)
        read_recovery_log(text, result)
        # No recovery line: the store was shut down cleanly, nothing is re-dispatched.
        done = result.redispatch_caught_up_s >= 0 or result.redispatch_bytes <= 0
        if done or time.monotonic() > deadline:
            return text
        await asyncio.sleep(0.2)


async def _fill(
    namesrv: str, target: int, *, senders: int, batch: int, body: bytes, result: SizeResult
) -> None:
    from rocketq import Message, Producer

    sent = 0
    async with Producer(group="recovery_bench_fill", namesrv=namesrv) as producer:

        async def sender() -> None:
            nonlocal sent
            while sent < target:
                sent += batch
                try:
                    out = await producer.send_batch([Message(TOPIC, body) for _ in range(batch)])
                except Exception as exc:
                    sent -= batch
                    result.send_failed += batch
                    what = type(exc).__name__
                    result.errors[what] = result.errors.get(what, 0) + 1
                    if result.send_failed > max(1000, target // 10):
                        raise
                    continue
                if not out.ok:
                    raise RuntimeError(f"filling: a send answered {out.status.name}")

        start = time.monotonic()
        await asyncio.gather(*(sender() for _ in range(senders)))
        result.fill_s = time.monotonic() - start
    result.messages = sent


async def first_send_ok(
    namesrv: str, topic: str, body: bytes, t0: float, *, group: str = "recovery_bench_probe"
) -> tuple[float, int]:
    """Send to ``topic`` from a new producer until a SEND_OK; -> when it came (monotonic)
    and how many sends failed before it."""
    from rocketq import Message, Producer

    failed = 0
    async with Producer(group=group, namesrv=namesrv) as producer:
        while True:
            if time.monotonic() - t0 > SEND_OK_LIMIT_S:
                raise RuntimeError(
                    f"no SEND_OK within {SEND_OK_LIMIT_S:g} s of the restart; see the broker log"
                )
            try:
                out = await producer.send(Message(topic, body), timeout=2.0)
            except Exception:
                failed += 1
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            if out.ok:
                return time.monotonic(), failed
            failed += 1


@dataclass(frozen=True)
class TimedRestart:
    """A node started again while a new producer sent to it (seconds from the start)."""

    to_ready_s: float  # the launcher saw its ready line and its registration
    to_send_ok_s: float  # the producer's first SEND_OK
    failed_sends: int  # the producer's sends that failed before it
    started_wall: float  # time.time() at the start, to place the broker's log lines


async def timed_restart(cluster: LocalCluster, name: str, topic: str, body: bytes) -> TimedRestart:
    """Start the (stopped) node ``name`` again and, meanwhile, send to ``topic`` from a new
    producer until its first SEND_OK."""

    async def restart() -> float:
        await asyncio.to_thread(cluster.restart, name)
        return time.monotonic()

    wall = time.time()
    t0 = time.monotonic()
    ready = asyncio.ensure_future(restart())
    probe = asyncio.ensure_future(first_send_ok(cluster.namesrv_addr, topic, body, t0))
    try:
        # A start that fails ends the probe too, instead of its SEND_OK_LIMIT_S.
        await asyncio.wait({ready, probe}, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        probe.cancel()  # nothing when it is done
        await asyncio.gather(ready, probe, return_exceptions=True)
    for task in (ready, probe):
        if not task.cancelled() and (exc := task.exception()) is not None:
            raise exc
    ok_at, failed = probe.result()
    return TimedRestart(ready.result() - t0, ok_at - t0, failed, wall)


@asynccontextmanager
async def fresh_cluster(
    base: Path, prefix: str, *, segment_size: int, settings: Mapping[str, str] | None = None
) -> AsyncIterator[LocalCluster]:
    """One nameserver and one ASYNC_FLUSH broker (the launcher that ``rocketq cluster up``
    uses) on a new store in a temporary directory under ``base``; started on the way in,
    stopped and removed on the way out. ``settings`` adds broker settings."""
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster

    with tempfile.TemporaryDirectory(prefix=prefix, dir=base) as tmp:
        spec = ClusterSpec(
            data_dir=Path(tmp),
            broker_settings={
                "mapped_file_size_commit_log": str(segment_size),
                "flush_disk_type": "ASYNC_FLUSH",
                **(settings or {}),
            },
            ready_timeout=SEND_OK_LIMIT_S,
        )
        cluster = LocalCluster(spec)
        await asyncio.to_thread(cluster.start)
        try:
            yield cluster
        finally:
            await asyncio.to_thread(cluster.stop)


@dataclass(frozen=True)
class BrokerRestart:
    """The broker stopped by a signal and started again (``stop_and_restart``)."""

    stop_s: float  # the signal until the process exited
    timed: TimedRestart  # the start again, and the new producer's first SEND_OK
    log: str  # the broker's log from the start again on


async def stop_and_restart(
    cluster: LocalCluster, sig: signal.Signals, topic: str, body: bytes, facts: SizeResult
) -> BrokerRestart:
    """Stop the cluster's broker with ``sig`` (SIGKILL: a crash, its abort file stays and the
    start runs the crash recovery; SIGTERM: a clean stop), start it again while a new
    producer sends ``body`` to ``topic`` until its first SEND_OK (that send is stored), and
    read the start's recovery log lines into ``facts``."""
    broker = cluster.brokers[0]
    t0 = time.monotonic()
    await asyncio.to_thread(cluster.kill, broker.name, sig)
    stop_s = time.monotonic() - t0
    log_offset = log_size(broker.log)
    timed = await timed_restart(cluster, broker.name, topic, body)
    text = await wait_recovery_log(broker.log, log_offset, facts)
    return BrokerRestart(stop_s, timed, text)


async def _one_size(
    gb: float,
    *,
    base: Path,
    senders: int,
    batch: int,
    size: int,
    segment_size: int,
    echo: Callable[[str], None],
) -> SizeResult:
    from rocketq.bench.client_bench import ensure_topic

    result = SizeResult(gb)
    body = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    target = max(batch, -(-int(gb * GB) // size))
    async with fresh_cluster(base, "bench-recovery-", segment_size=segment_size) as cluster:
        broker = cluster.brokers[0]
        await ensure_topic(cluster.namesrv_addr, TOPIC, QUEUES)
        echo(f"{gb:g} GB: filling {target:,} messages of {size} B from {senders} senders")
        await _fill(
            cluster.namesrv_addr, target, senders=senders, batch=batch, body=body, result=result
        )
        echo(
            f"{gb:g} GB: {result.messages:,} messages in {result.fill_s:.1f} s; "
            f"SIGKILL {broker.name} and restart it"
        )
        restart = await stop_and_restart(cluster, signal.SIGKILL, TOPIC, body, result)
        result.restart_to_send_ok_s = restart.timed.to_send_ok_s
        result.restart_to_ready_s = restart.timed.to_ready_s
        result.failed_sends_after_restart = restart.timed.failed_sends
    return result


async def run_recovery_bench(
    sizes: Sequence[float],
    *,
    senders: int = 8,
    batch: int = 32,
    size: int = 1024,
    segment_size: int = 1 << 30,
    data_dir: str | None = None,
    echo: Callable[[str], None] = print,
) -> list[SizeResult]:
    """Run every size (ascending) on a fresh broker; -> one result per size."""
    base = Path(data_dir or "data")
    base.mkdir(parents=True, exist_ok=True)
    results = []
    for gb in sizes:
        results.append(
            await _one_size(
                gb,
                base=base,
                senders=senders,
                batch=batch,
                size=size,
                segment_size=segment_size,
                echo=echo,
            )
        )
    return results


def _mb(n: int) -> str:
    return "-" if n < 0 else f"{n / MB:,.1f}"


def table(results: Sequence[SizeResult]) -> list[str]:
    """The results as text lines, one row per size."""
    head = (
        f"{'size GB':>8} {'messages':>11} {'CommitLog MB':>13} {'fill msg/s':>11} "
        f"{'to SEND_OK s':>13} {'to ready s':>11} {'checked MB':>11} {'re-dispatch MB':>15} "
        f"{'caught up s':>12}"
    )
    lines = [head]
    for r in results:
        caught = "-" if r.redispatch_caught_up_s < 0 else f"{r.redispatch_caught_up_s:.2f}"
        lines.append(
            f"{r.gb:>8g} {r.messages:>11,} {_mb(r.commitlog_bytes):>13} "
            f"{rate(r.messages, r.fill_s):>11,.0f} {r.restart_to_send_ok_s:>13.2f} "
            f"{r.restart_to_ready_s:>11.2f} {_mb(r.scanned_bytes):>11} "
            f"{_mb(r.redispatch_bytes):>15} {caught:>12}"
        )
    if len(results) == 2 and results[0].restart_to_send_ok_s > 0:
        small, large = results
        lines.append(
            f"CommitLog x{rate(large.commitlog_bytes, small.commitlog_bytes):.1f}, time to the "
            f"first SEND_OK x{rate(large.restart_to_send_ok_s, small.restart_to_send_ok_s):.2f}"
        )
    return lines


def json_report(results: Sequence[SizeResult], *, senders: int, batch: int, size: int) -> str:
    fields: dict[str, object] = {
        "bench": "recovery",
        "senders": senders,
        "batch": batch,
        "size": size,
        "sizes": [r.to_dict() for r in results],
    }
    if len(results) == 2 and results[0].restart_to_send_ok_s > 0:
        fields["send_ok_ratio"] = rate(
            results[1].restart_to_send_ok_s, results[0].restart_to_send_ok_s
        )
    return json_line(fields)


__all__ = [
    "DEFAULT_SIZES",
    "BrokerRestart",
    "SizeResult",
    "TimedRestart",
    "check_options",
    "first_send_ok",
    "fresh_cluster",
    "json_report",
    "log_size",
    "log_tail",
    "parse_sizes",
    "read_recovery_log",
    "run_recovery_bench",
    "stop_and_restart",
    "table",
    "timed_restart",
    "wait_recovery_log",
]
