"""A registration's topics as plain data: the full table of a FULL registration (zlib of a
serialized ``TopicConfigList``, checked against its CRC32, or plain ``topics`` when it
carries no body) and the changes of a DELTA."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Final

from rocketq.cluster.message import TopicConfig
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb

# A table larger than this once inflated is refused (a million topics take about 30 MiB).
MAX_TABLE_BYTES: Final = 256 * 1024 * 1024


class RegisterBodyError(ValueError):
    """The body of a full registration cannot be read."""


def topic_configs(datas: Iterable[pb.TopicConfigData]) -> list[TopicConfig]:
    return [
        TopicConfig(
            t.topic_name,
            t.read_queue_nums,
            t.write_queue_nums,
            t.perm,
            t.topic_sys_flag,
            t.order,
        )
        for t in datas
    ]


def full_table(req: pb.RegisterBrokerRequest) -> list[TopicConfig]:
    """The whole topic table of a FULL registration."""
    if not req.topic_body:
        return topic_configs(req.topics)
    body = req.topic_body
    crc = zlib.crc32(body)
    if crc != req.body_crc32:
        raise RegisterBodyError(
            f"the topic table's CRC32 is {crc:#010x}, the request says {req.body_crc32:#010x} "
            f"({len(body)} bytes): damaged on the way"
        )
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(body, MAX_TABLE_BYTES)
    except zlib.error as exc:
        raise RegisterBodyError(f"the topic table is not zlib data ({exc})") from None
    if inflate.unconsumed_tail:
        raise RegisterBodyError(
            f"the topic table inflates past {MAX_TABLE_BYTES} bytes; register fewer topics "
            "per broker"
        )
    if not inflate.eof:
        raise RegisterBodyError(f"the topic table ends early ({len(body)} bytes compressed)")
    table = pb.TopicConfigList()
    try:
        table.ParseFromString(raw)
    except Exception as exc:  # protobuf's DecodeError, a RuntimeWarning...
        raise RegisterBodyError(f"the topic table is not a TopicConfigList ({exc})") from None
    return topic_configs(table.topics)
