"""What the hostile neighbour (:mod:`rocketq.chaos.hostile`) sends: valid RocketMQ frames
of its own topic, group, broker and cluster names with JSON and binary headers, their
mutations, length words past any limit, zlib bombs, garbage for the HA and Raft ports and
HTTP requests that never end. Pure functions of a seeded generator, so the tests check
each against a plain listener.
"""

from __future__ import annotations

import random
import struct
import time
import zlib
from collections.abc import Callable
from typing import Final

from rocketq.remoting.codes import RequestCode, SerializeType
from rocketq.remoting.command import RemotingCommand, RemotingError, decode, encode
from rocketq.remoting.register_body import crc32, encode_body
from rocketq.sdk.wire import send_request

# A 37-byte frame with a binary header whose one ext field announces a value of 65,530
# bytes that are not there.
KNOWN_BAD_FRAME: Final = bytes.fromhex(
    "000000210100001d006a00000000000001000000000000000000000008000000000000fffa"
)
HOSTILE_TOPIC: Final = "HostileTopic"
HOSTILE_GROUP: Final = "HostileGroup"
HOSTILE_BROKER: Final = "hostile-broker"
HOSTILE_CLUSTER: Final = "HostileCluster"
MIB: Final = 1024 * 1024
_U32: Final = struct.Struct(">I")
_I32: Final = struct.Struct(">i")


def _ext_binary_safe(ext: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in ext.items() if v is not None}


def base_frames() -> list[bytes]:
    """Valid requests, each with a JSON and a binary header: what mutation starts from."""
    now = int(time.time() * 1000)
    props = "KEYS\x01hostile\x02"
    send_v2 = send_request(
        b"hostile", props, group=HOSTILE_GROUP, topic=HOSTILE_TOPIC, queue_id=0, born_timestamp=now
    )
    assert send_v2.ext is not None
    send_v1 = RemotingCommand(
        RequestCode.SEND_MESSAGE,
        {
            "producerGroup": HOSTILE_GROUP,
            "topic": HOSTILE_TOPIC,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": "0",
            "sysFlag": "0",
            "bornTimestamp": str(now),
            "flag": "0",
            "properties": props,
            "reconsumeTimes": "0",
            "unitMode": "false",
        },
        b"hostile",
    )
    pull = RemotingCommand(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": HOSTILE_GROUP,
            "topic": HOSTILE_TOPIC,
            "queueId": "0",
            "queueOffset": "0",
            "maxMsgNums": "32",
            "sysFlag": "0",
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
        },
    )
    heartbeat = RemotingCommand(
        RequestCode.HEART_BEAT,
        {},
        b'{"clientID":"hostile@1","consumerDataSet":[{"groupName":"HostileGroup",'
        b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",'
        b'"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[],'
        b'"unitMode":false}],"producerDataSet":[]}',
    )
    route = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": HOSTILE_TOPIC})
    register = register_request(encode_body([], 1, []))
    frames = []
    for n, cmd in enumerate((send_v2, send_v1, pull, heartbeat, route, register)):
        for serialize in (SerializeType.JSON, SerializeType.ROCKETMQ):
            copy = RemotingCommand(
                cmd.code,
                _ext_binary_safe(dict(cmd.ext or {})),
                cmd.body,
                opaque=n + 1,
                serialize_type=serialize,
            )
            frames.append(encode(copy))
    return frames


def register_request(body: bytes) -> RemotingCommand:
    """A REGISTER_BROKER of the neighbour's own broker and cluster with ``body``."""
    ext = {
        "brokerName": HOSTILE_BROKER,
        "brokerAddr": "127.0.0.1:1",
        "clusterName": HOSTILE_CLUSTER,
        "haServerAddr": "",
        "brokerId": "0",
        "maxPhyOffset": "0",
        "registerKind": "FULL",
        "dataVersion": "1",
        "compressed": "true",
        "bodyCrc32": str(crc32(body)),
    }
    return RemotingCommand(RequestCode.REGISTER_BROKER, ext, body)


class StoppedError(Exception):
    """The neighbour was stopped while it made a bomb."""


_BOMBS: dict[tuple[bytes, int], bytes] = {}


def zlib_bomb(prefix: bytes, inflated: int, stopped: Callable[[], bool] = bool) -> bytes:
    """zlib of ``prefix`` then zeros up to ``inflated`` bytes, made a MiB at a time
    (about a second for 256 MiB; kept for the next call). Raises :class:`StoppedError` when
    ``stopped()`` turns true meanwhile."""
    key = (prefix, inflated)
    if key in _BOMBS:
        return _BOMBS[key]
    deflate = zlib.compressobj(9)
    parts = [deflate.compress(prefix)]
    block = bytes(MIB)
    left = max(0, inflated - len(prefix))
    while left > 0:
        if stopped():
            raise StoppedError
        parts.append(deflate.compress(block[: min(left, MIB)]))
        left -= MIB
    parts.append(deflate.flush())
    bomb = _BOMBS[key] = b"".join(parts)
    return bomb


def bomb_frames(inflated: int, stopped: Callable[[], bool] = bool) -> tuple[bytes, bytes]:
    """(REGISTER_BROKER whose table is a bomb announcing countless topics, SEND_MESSAGE_V2
    flagged compressed whose body is a bomb), each inflating to ``inflated`` bytes."""
    version = b'{"counter":1,"timestamp":0}'
    table_head = _I32.pack(len(version)) + version + _I32.pack(2**31 - 1)
    register = encode(register_request(zlib_bomb(table_head, inflated, stopped)))
    send = send_request(
        zlib_bomb(b"", inflated, stopped),
        "KEYS\x01hostile-bomb\x02",
        group=HOSTILE_GROUP,
        topic=HOSTILE_TOPIC,
        queue_id=0,
        born_timestamp=int(time.time() * 1000),
        sys_flag=0x1,  # COMPRESSED
    )
    return register, encode(send)


# Requests a flip may make that would change the cluster for the workload (admin
# requests with whatever fields the flip left): a frame decoding as one is not sent.
def harmless(frame: bytes, code: int) -> bool:
    try:
        cmd = decode(frame[4:])
    except (RemotingError, ValueError, UnicodeError, OverflowError, RecursionError):
        return True
    return cmd.is_response or cmd.code == code


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """``frame`` with a few bytes flipped, a length word changed, cut or extended."""
    data = bytearray(frame)
    choice = rng.randrange(6)
    if choice == 0:  # flip a few bytes anywhere past the length word
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(4, len(data))
            data[i] = rng.randrange(256)
    elif choice == 1:  # the header length word
        data[4:8] = _U32.pack(
            (data[4] << 24) | rng.choice((0, 1, 0xFFFFFF, len(data), rng.randrange(1 << 24)))
        )
    elif choice == 2:  # the frame length says more or less than is sent
        size = len(data) - 4 + rng.choice((-8, -1, 1, 8, 1000))
        data[0:4] = _U32.pack(max(0, size))
    elif choice == 3:  # cut short (the length word still says the whole)
        data = data[: rng.randrange(4, len(data))]
    elif choice == 4:  # a binary header's length fields set to extremes
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(8, max(9, len(data) - 4))
            data[i : i + 4] = rng.choice(
                (b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\xff\xfa")
            )
    else:  # bytes appended past the frame (the next frame's start is garbage)
        data += rng.randbytes(rng.randint(1, 64))
    return bytes(data)


def length_frames() -> list[bytes]:
    """Length words no frame may have, and headers that run past their frame."""
    return [
        b"\xff\xff\xff\xff" + bytes(8),
        b"\x7f\xff\xff\xff" + bytes(8),
        _U32.pack(16 * MIB + 1) + bytes(8),
        _U32.pack(0),
        _U32.pack(1) + b"\x00",
        _U32.pack(3) + b"\x00\x00\x00",
        _U32.pack(8) + _U32.pack(0x00FFFFFF) + b"{}{}",  # JSON header past the frame
        _U32.pack(8) + _U32.pack(0x01FFFFFF) + b"\x00" * 4,  # binary header past it
        _U32.pack(8) + _U32.pack(0x07000004) + b"{}{}",  # unknown serialize type
        KNOWN_BAD_FRAME,
    ]


def big_frames(size: int) -> tuple[bytes, bytes]:
    """(REGISTER_BROKER with an uncompressed body of ``size`` zero bytes - not JSON -,
    SEND_MESSAGE_V2 with a body of ``size`` bytes, past any broker's max_message_size):
    whole frames near the frame limit that a server reads before it can refuse them."""
    register = register_request(bytes(size))
    assert register.ext is not None
    register.ext["compressed"] = "false"
    register.ext.pop("bodyCrc32")
    send = send_request(
        bytes(size),
        "KEYS\x01hostile-big\x02",
        group=HOSTILE_GROUP,
        topic=HOSTILE_TOPIC,
        queue_id=0,
        born_timestamp=int(time.time() * 1000),
    )
    return encode(register), encode(send)


def garbage(rng: random.Random) -> bytes:
    """Random bytes, or small frames announcing sizes past any limit (HA, Raft)."""
    choice = rng.randrange(4)
    if choice == 0:
        return rng.randbytes(rng.randint(1, 64 * 1024))
    if choice == 1:
        return struct.pack(">qi", rng.randrange(-(2**63), 2**63), 2**31 - 1) + rng.randbytes(16)
    if choice == 2:
        return b"\xff" * rng.randint(4, 4096)
    return _U32.pack(rng.choice((0, 0xFFFFFFFF, 0x7FFFFFFF, 64 * MIB))) + rng.randbytes(
        rng.randint(0, 32)
    )


SLOWLORIS_HEAD: Final = b"GET /metrics HTTP/1.1\r\nHost: hostile\r\n"
HUGE_HEADER: Final = b"GET /metrics HTTP/1.1\r\nX-Hostile: " + b"a" * (256 * 1024) + b"\r\n\r\n"
