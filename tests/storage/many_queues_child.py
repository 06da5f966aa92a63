"""Child process of ``test_many_queues``: a store with thousands of queues under a low limit
of open files.

Run as ``python tests/storage/many_queues_child.py <store_dir> <topics> <fd_limit>``. It sets
RLIMIT_NOFILE to ``fd_limit``, then: writes one message to each of 4 queues per topic,
flushes and shuts down; restarts (clean), checks every queue and writes one more each, and
stops as a crash would; restarts (crash recovery) and checks every queue holds both. It
prints one JSON line: the queues and the most descriptors open at any step.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
from pathlib import Path

from rocketq.common.config import StoreConfig
from rocketq.common.message import Message
from rocketq.common.record import encode_host, encode_message
from rocketq.storage.message_store import MessageStore

QUEUES_PER_TOPIC = 4
BORN_HOST = encode_host("127.0.0.1:40000")


def config(root: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=20 * 64,
        max_hash_slot_num=1024,
        max_index_num=32768,
        clean_resource_interval=3_600_000,
    )


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def write_round(store: MessageStore, topics: list[str], round_: int) -> None:
    for topic in topics:
        for queue_id in range(QUEUES_PER_TOPIC):
            body = f"{topic}-{queue_id}-{round_}".encode()
            blob = encode_message(Message(topic, body), born_timestamp=1, born_host=BORN_HOST)
            result = await store.put(blob, topic, queue_id)
            assert result.append.queue_offset == round_, (topic, queue_id, result)
    await wait_dispatched(store)


async def wait_dispatched(store: MessageStore, timeout: float = 60.0) -> None:
    """Until dispatch caught up; a dead dispatch task fails at once with its error."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while store.dispatch_behind_bytes:
        for task in store._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise RuntimeError(f"store task {task.get_name()} died") from task.exception()
        if loop.time() > deadline:
            raise TimeoutError(f"dispatch did not catch up within {timeout} s")
        await asyncio.sleep(0.001)


def check(store: MessageStore, topics: list[str], count: int) -> None:
    for topic in topics:
        for queue_id in range(QUEUES_PER_TOPIC):
            got = store.max_offset_in_queue(topic, queue_id)
            assert got == count, f"{topic}-{queue_id} holds {got} entries, not {count}"


async def run(root: Path, topics: list[str]) -> dict[str, int]:
    peak = open_fds()
    store = MessageStore(config(root))
    await store.start()
    await write_round(store, topics, 0)
    peak = max(peak, open_fds())
    await asyncio.to_thread(store.flush_logics, thorough=True)
    await store.shutdown()

    store = MessageStore(config(root))
    await store.start()
    peak = max(peak, open_fds())
    check(store, topics, 1)
    await write_round(store, topics, 1)
    await asyncio.to_thread(store.flush_logics)  # a periodic round: least pages
    peak = max(peak, open_fds())
    await store.crash()

    store = MessageStore(config(root))
    await store.start()
    assert store.recovery is not None and not store.recovery.fast
    await wait_dispatched(store)
    peak = max(peak, open_fds())
    check(store, topics, 2)
    queues = len(store.queues.queues)
    await store.shutdown()
    return {"queues": queues, "peak_fds": peak}


def main(argv: list[str]) -> int:
    root, topics, limit = Path(argv[1]), int(argv[2]), int(argv[3])
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    names = [f"Topic{i:05d}" for i in range(topics)]
    print(json.dumps(asyncio.run(run(root, names))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
