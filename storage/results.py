"""What the store answers: put and get statuses and results (RocketMQ's names)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rocketq.storage.commitlog import AppendResult


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class PutResult:
    status: PutStatus
    append: AppendResult


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    """Records read for a pull: stored bytes, contiguous runs joined into one view each."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[memoryview] = field(default_factory=list)
    message_count: int = 0
    buffer_total_size: int = 0
    # Physical offset the read reached, for the "far behind: read from a slave" rule.
    max_phy_offset_pulling: int = 0

    def to_bytes(self) -> bytes:
        """All records as one blob (what a pull response carries)."""
        return b"".join(self.buffers)

    def release(self) -> None:
        """Drop the views so the segments they map can be unmapped."""
        for view in self.buffers:
            view.release()
        self.buffers = []
