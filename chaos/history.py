"""A chaos run's history: one JSON object a line in ``<data dir>/history.jsonl``.

Every process of a run (the runner, each producer, each consumer) appends to the same file,
one ``os.write`` of one whole line per operation on a descriptor opened with ``O_APPEND``, so
lines of different processes never interleave. Each line has ``t`` (Unix time, seconds, a
float) and ``type``; the other fields by type:

``run``          ``config`` (the run's options) - the first line of a run.
``send``         ``process``, ``op`` (the process's operation number), ``keys`` (the unique
                 key of each message of the operation, ``<process>-<sequence>``), ``mode``
                 (``single``, ``batch`` or ``orderly``), ``shard`` (the sharding key of an
                 orderly send, else null): a send invoked.
``send_ok``      ``process``, ``op``, ``keys``, ``msg_ids``, ``group`` (broker name),
                 ``queue``, ``offset`` (the first message's queue offset): answered SEND_OK.
``send_failed``  ``process``, ``op``, ``keys``, ``error``: answered with an error or another
                 status; the messages may still have been stored.
``send_timeout`` ``process``, ``op``, ``keys``, ``error``: no answer in time.
``receive``      ``process``, ``key``, ``msg_id``, ``group``, ``queue``, ``offset``,
                 ``reconsume`` (its reconsume times), ``shard``: handed to a consumer's
                 listener (logged before the listener answers).
``fault_start``  ``fault`` (its kind), ``target`` (a node or consumer name), ``group`` (the
                 broker group it hits, null for a nameserver or consumer).
``fault_end``    the same three fields: healed.
``fault_end``    may add ``detail``: what the heal reports (the hostile traffic's counts,
                 a full disk's refusal, a wiped or new member's catch-up).
``server_memory`` ``node``, ``pid``, ``rss_kib`` (largest VmRSS sampled), ``hwm_kib`` (its
                 VmHWM, the peak resident set), ``samples``: one per server process, at the
                 end of the run.
``server_exit``  ``node``, ``pid``, ``returncode``: a server process seen gone.
``members``      ``caught_up`` (every member held what its leader or master held),
                 ``waited_ms``, ``timeout_s``, ``groups`` (per group: ``leader``,
                 ``max_offset`` and ``min_offset`` per member, ``behind``: bytes each
                 member lacks, ``errors``, ``caught_up``): checked once the producers
                 stopped.
``phase``        ``phase``: ``faults_stopped``, ``recovered``, ``producers_stopped``,
                 ``drained`` or ``done`` - how far the run got; a history without ``done``
                 is partial (the run was cut short).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rocketq.common.exceptions import RocketqError

HISTORY_FILE: Final = "history.jsonl"
RECORD_TYPES: Final = frozenset(
    {
        "run",
        "send",
        "send_ok",
        "send_failed",
        "send_timeout",
        "receive",
        "fault_start",
        "fault_end",
        "phase",
        "server_memory",
        "server_exit",
        "members",
    }
)
PHASES: Final = ("faults_stopped", "recovered", "producers_stopped", "drained", "done")


class ChaosError(RocketqError):
    """A chaos run could not be made or checked (bad option, unreadable history...)."""


class HistoryWriter:
    """Appends records to a history file shared with other processes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append one record; ``t`` defaults to now (a field ``t`` overrides it)."""
        record = {"t": time.time(), "type": type_, **fields}
        data = memoryview((json.dumps(record, separators=(",", ":")) + "\n").encode())
        while data:  # a short write (a full disk) must not tear the line silently
            written = os.write(self._fd, data)
            if written <= 0:
                raise ChaosError(f"{self.path}: the history could not be written")
            data = data[written:]
        return record

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class History:
    """The records of a history file, in file order, and what could not be read.

    File order is the order the writes happened in (appends are serialised by the kernel),
    so it orders records of different processes even where their ``t`` are a tie."""

    records: list[dict[str, Any]] = field(default_factory=list)
    # Lines that are not a JSON object with a known "type" and a numeric "t"
    # (a torn last line of a killed run, or damage), as (line number, reason).
    bad_lines: list[tuple[int, str]] = field(default_factory=list)

    def of_type(self, type_: str) -> Iterator[dict[str, Any]]:
        return (r for r in self.records if r["type"] == type_)

    @property
    def phases(self) -> list[str]:
        return [str(r.get("phase")) for r in self.of_type("phase")]

    @property
    def complete(self) -> bool:
        return "done" in self.phases


def parse_line(line: str) -> dict[str, Any] | str:
    """The record of one line, or why it is not one."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        return f"not JSON ({exc})"
    if not isinstance(record, dict):
        return "not a JSON object"
    if record.get("type") not in RECORD_TYPES:
        return f"unknown record type {record.get('type')!r}"
    if not isinstance(record.get("t"), int | float) or isinstance(record.get("t"), bool):
        return "no numeric 't'"
    return record


def read_history(path: str | os.PathLike[str]) -> History:
    """Every record of the file; lines that are not records are kept aside, not fatal."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ChaosError(
            f"{p}: no such history; `rocketq chaos run` writes one to <data dir>/{HISTORY_FILE}"
        ) from None
    except IsADirectoryError:
        raise ChaosError(f"{p} is a directory; give its {HISTORY_FILE}") from None
    except OSError as exc:
        raise ChaosError(f"{p}: cannot read the history ({exc})") from None
    history = History()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parsed = parse_line(line)
        if isinstance(parsed, str):
            history.bad_lines.append((number, parsed))
        else:
            history.records.append(parsed)
    return history
