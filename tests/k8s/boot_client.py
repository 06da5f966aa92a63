"""The client pod of the boot test: sends or consumes through the nameserver Service's DNS
name, from a network namespace of its own, and prints one JSON line of what it did.

    python boot_client.py send NAMESRV TOPIC FIRST COUNT SECONDS
        -> {"acked": [bodies the brokers acknowledged], "failed": n}
    python boot_client.py consume NAMESRV TOPIC GROUP SECONDS BODY...
        -> {"consumed": [bodies]}  (stops once every BODY was seen, or after SECONDS)

Credentials come from ROCKETQ_ACCESS_KEY and ROCKETQ_SECRET_KEY (the SDK reads them);
BOOT_TLS_CA_FILE, when set, makes every connection TLS checked against that CA (not the
host name: brokers are reached at their pod IPs); BOOT_TLS_CERT_FILE and BOOT_TLS_KEY_FILE
are the client certificate to show.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from rocketq import ConsumeFrom, Message, Producer
from rocketq.sdk.pull_consumer import PullConsumer


def tls_settings() -> dict[str, Any]:
    ca = os.environ.get("BOOT_TLS_CA_FILE")
    if not ca:
        return {}
    settings: dict[str, Any] = {"tls": True, "tls_ca_file": ca, "tls_verify_hostname": False}
    if os.environ.get("BOOT_TLS_CERT_FILE"):
        settings["tls_cert_file"] = os.environ["BOOT_TLS_CERT_FILE"]
        settings["tls_key_file"] = os.environ["BOOT_TLS_KEY_FILE"]
    return settings


async def send(namesrv: str, topic: str, first: int, count: int, seconds: float) -> None:
    acked: list[str] = []
    failed = 0
    deadline = time.monotonic() + seconds
    async with Producer("boot-producer", namesrv, **tls_settings()) as producer:
        for i in range(first, first + count):
            body = f"m-{i}"
            while True:
                try:
                    result = await producer.send(Message(topic, body.encode()))
                except Exception:  # a leader change: try again until the deadline
                    if time.monotonic() > deadline:
                        failed += 1
                        break
                    await asyncio.sleep(0.2)
                    continue
                if result.ok:
                    acked.append(body)
                else:
                    failed += 1
                break
    print(json.dumps({"acked": acked, "failed": failed}), flush=True)


async def consume(namesrv: str, topic: str, group: str, seconds: float, want: set[str]) -> None:
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    consumer = PullConsumer(group, namesrv, consume_from=ConsumeFrom.FIRST_OFFSET, **tls_settings())
    consumer.subscribe(topic, "*")
    async with consumer:
        while not want <= set(seen) and time.monotonic() < deadline:
            for msg in await consumer.poll(timeout=1.0):
                seen.append(msg.body.decode())
        await consumer.commit()
    print(json.dumps({"consumed": seen}), flush=True)


def main(argv: list[str]) -> None:
    if argv[0] == "send":
        _, namesrv, topic, first, count, seconds = argv
        asyncio.run(send(namesrv, topic, int(first), int(count), float(seconds)))
    else:
        _, namesrv, topic, group, seconds, *bodies = argv
        asyncio.run(consume(namesrv, topic, group, float(seconds), set(bodies)))


if __name__ == "__main__":
    main(sys.argv[1:])
