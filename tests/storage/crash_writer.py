"""Child process of the crash tests: appends seeded batches under SYNC_FLUSH until killed.

Run as ``python tests/storage/crash_writer.py <store_dir> <seed>``. After each batch the
store acknowledges with PUT_OK, one line per message goes to stdout (flushed at once)::

    <topic> <queue id> <queue offset> <physical offset> <record size> <key> <sha256 of body>

A line is printed only once the batch is on disk, so every line the parent has read names a
message that must survive a SIGKILL. The test modules import the config and batch helpers.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from rocketq.common.config import StoreConfig
from rocketq.common.message import Message
from rocketq.common.record import encode_host, encode_message
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutStatus

TOPICS: Final = ("CrashA", "CrashB")
QUEUES: Final = 3
BORN_HOST: Final = encode_host("127.0.0.1:40000")
# Small segments so a few hundred messages roll CommitLog, ConsumeQueue and index files.
COMMIT_LOG_SIZE: Final = 64 * 1024


def store_config(
    root: Path,
    *,
    flush_disk_type: Literal["ASYNC_FLUSH", "SYNC_FLUSH"] = "SYNC_FLUSH",
    cq_entries: int = 64,
    flush_interval_consume_queue: int = 1000,
) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=COMMIT_LOG_SIZE,
        mapped_file_size_consume_queue=20 * cq_entries,
        max_hash_slot_num=64,
        max_index_num=512,
        flush_disk_type=flush_disk_type,
        flush_interval_consume_queue=flush_interval_consume_queue,
        # Retention must not run during a test.
        clean_resource_interval=3_600_000,
    )


@dataclass(frozen=True, slots=True)
class Batch:
    """An encoded batch and, per message, its record size, key and body."""

    blob: bytes
    sizes: list[int]
    keys: list[str]
    bodies: list[bytes]


def encode_batch(
    topic: str, bodies: list[bytes], keys: list[str], *, born_timestamp: int = 0
) -> Batch:
    records = [
        encode_message(
            Message(topic=topic, body=body, keys=[key]),
            born_timestamp=born_timestamp,
            born_host=BORN_HOST,
        )
        for body, key in zip(bodies, keys, strict=True)
    ]
    return Batch(b"".join(records), [len(r) for r in records], keys, bodies)


def random_body_size(rng: random.Random) -> int:
    """Mostly small bodies, now and then a large one (8 large ones still fit a segment)."""
    if rng.random() < 0.06:
        return rng.randint(4000, 7000)
    return rng.randint(0, 1500)


async def write_until_killed(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = MessageStore(store_config(root))
    await store.start()
    out = sys.stdout
    n = 0
    while True:
        topic = rng.choice(TOPICS)
        queue_id = rng.randrange(QUEUES)
        count = rng.randint(1, 8)
        bodies = [rng.randbytes(random_body_size(rng)) for _ in range(count)]
        keys = [f"s{seed}-m{n + i}" for i in range(count)]
        n += count
        batch = encode_batch(topic, bodies, keys, born_timestamp=n)
        result = await store.put(batch.blob, topic, queue_id)
        if result.status is not PutStatus.PUT_OK:
            print(f"batch at {result.append.wrote_offset}: {result.status}", file=sys.stderr)
            continue
        phy = result.append.wrote_offset
        lines = []
        for i, (size, key, body) in enumerate(
            zip(batch.sizes, batch.keys, batch.bodies, strict=True)
        ):
            digest = hashlib.sha256(body).hexdigest()
            qoff = result.append.queue_offset + i
            lines.append(f"{topic} {queue_id} {qoff} {phy} {size} {key} {digest}\n")
            phy += size
        out.write("".join(lines))
        out.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} <store_dir> <seed>", file=sys.stderr)
        return 2
    asyncio.run(write_until_killed(Path(argv[1]), int(argv[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
