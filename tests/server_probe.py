"""Probing a server from outside, for the bounds tests: raw connections that say what a
hostile peer says, waiting for the server to cut one off, a process's memory peak from
/proc, and a process's ``rocketq_remoting_rejected_total`` by reason."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from rocketq.cluster.launcher import Node

Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
"""A raw connection: no client, no handshake, just bytes."""


async def connect(port: int, host: str = "127.0.0.1") -> Conn:
    """A raw connection to ``host:port``."""
    return await asyncio.open_connection(host, port)


async def cut_off(reader: asyncio.StreamReader, timeout: float) -> float:
    """Seconds until the server closes (or resets) the connection; AssertionError when it
    is still open after ``timeout`` s. What arrives meanwhile is read and dropped."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            while await reader.read(65536):
                pass
    except ConnectionError:
        pass
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open {timeout:g} s") from None
    return time.monotonic() - started


async def closed_by_server(conn: Conn, timeout: float = 10.0) -> float:
    """``cut_off`` for ``conn``, then closes our end whatever happened."""
    reader, writer = conn
    try:
        return await cut_off(reader, timeout)
    finally:
        writer.close()


def close_all(conns: Iterable[Conn]) -> None:
    """Close our end of every connection."""
    for _, writer in conns:
        writer.close()


def proc_status_kib(pid: int, field: str) -> int:
    """A kB field of ``/proc/<pid>/status`` (``VmHWM``, ``VmRSS``...), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for process {pid}")


def vm_hwm_kib(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in KiB."""
    return proc_status_kib(pid, "VmHWM")


def rejected(node: Node) -> dict[str, float]:
    """The node's rocketq_remoting_rejected_total, by reason (from its metrics port)."""
    with urllib.request.urlopen(node.metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "rocketq_remoting_rejected":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[sample.labels["reason"]] = sample.value
    return out
