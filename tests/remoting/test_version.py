"""rocketq's ``version`` numbers (remoting/codes.py's RocketqVersion): what every
command rocketq writes carries, and how a connection list names any client's version."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from rocketq.remoting.codes import MQVersion, RocketqVersion
from rocketq.remoting.command import VERSION, RemotingCommand, decode, encode


def test_rocketqs_release_is_its_version() -> None:
    assert RocketqVersion.CURRENT == RocketqVersion.of(version("rocketq")) == VERSION
    assert RocketqVersion.of("0.1.0") == 10010
    assert RocketqVersion.of("1.2.3.dev4") == 11023
    assert RocketqVersion.of("2") == 12000
    # Above every RocketMQ ordinal, so every check a 4.9 server makes passes.
    assert VERSION > MQVersion.V4_9_8 > MQVersion.V4_9_4 > MQVersion.V3_1_8_SNAPSHOT
    assert RocketqVersion.of("21.99.9") == 31999  # the binary header's int16 holds it
    for release in ("0.100.0", "0.1.10", "22.0.0"):
        with pytest.raises(ValueError, match="RocketqVersion"):
            RocketqVersion.of(release)


def test_a_command_carries_it_in_either_header() -> None:
    for serialize_type in (0, 1):  # JSON, ROCKETMQ (int16)
        cmd = RemotingCommand(34, serialize_type=serialize_type)
        back = decode(encode(cmd)[4:])
        assert (back.version, back.language) == (VERSION, 3)  # PYTHON


@pytest.mark.parametrize(
    ("number", "name"),
    [
        (10010, "rocketq 0.1.0"),
        (11023, "rocketq 1.2.3"),
        (MQVersion.V4_9_8, "V4_9_8"),
        (MQVersion.V4_9_4, "V4_9_4"),
        (MQVersion.V4_0_0, "V4_0_0"),
        (412, "V5_0_0_SNAPSHOT"),
        (475, "V5_3_1"),
        (611, "V5_9_9"),
        (612, "HIGHER_VERSION"),
        (MQVersion.V3_4_9, "V3_4_9"),
        (5, "5"),
    ],
)
def test_versions_are_named_as_mqadmin_names_them(number: int, name: str) -> None:
    assert RocketqVersion.describe(number) == name
