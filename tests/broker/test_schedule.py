"""Delay levels in the broker's config and the delay progress file."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.broker.config import DEFAULT_DELAY_LEVELS, load_broker_config, parse_delay_levels
from rocketq.broker.schedule import ScheduleMessageService
from rocketq.common.config import StoreConfig
from rocketq.common.exceptions import ConfigError, StoreCorruptError
from rocketq.storage.message_store import MessageStore


def test_default_levels_are_rocketmqs_eighteen() -> None:
    levels = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    assert len(levels) == 18
    assert levels[:4] == [1000, 5000, 10_000, 30_000] and levels[-1] == 7_200_000
    assert parse_delay_levels("250ms 1d") == [250, 86_400_000]


@pytest.mark.parametrize("text", ["", "1x", "5", "0s", "1s fast"])
def test_bad_levels_name_the_culprit(tmp_path: Path, text: str) -> None:
    path = tmp_path / "broker.toml"
    path.write_text(f'message_delay_level = "{text}"\n')
    with pytest.raises(ConfigError, match="message_delay_level") as info:
        load_broker_config(path)
    assert "unit ms, s, m, h or d" in str(info.value) or "no delay levels" in str(info.value)


def service(tmp_path: Path) -> ScheduleMessageService:
    store = MessageStore(StoreConfig(store_path_root_dir=str(tmp_path / "store")))
    return ScheduleMessageService(store, [1000, 2000, 3000], tmp_path / "delay_offset.json")


def test_progress_round_trips_through_the_file(tmp_path: Path) -> None:
    s = service(tmp_path)
    s.load()
    assert s.offsets == {}
    s.offsets.update({1: 7, 3: 2})
    s.persist()
    again = service(tmp_path)
    again.load()
    assert again.offsets == {1: 7, 3: 2}


@pytest.mark.parametrize("content", ['{"offsetTable": [1, 2]}', "[1, 2]", "{not json"])
def test_damaged_progress_file_is_a_clear_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "delay_offset.json").write_text(content)
    with pytest.raises(StoreCorruptError, match=r"delay_offset\.json"):
        service(tmp_path).load()


def test_a_bad_entry_of_the_progress_file_is_logged_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "delay_offset.json").write_text(
        '{"offsetTable": {"1": "x", "2": 7, "x y": 3, "3": -1, "9": 9}}'
    )
    s = service(tmp_path)
    with caplog.at_level("ERROR", logger="rocketq.broker.schedule"):
        s.load()
    assert s.offsets == {2: 7}  # levels 1-3 here
    assert caplog.text.count("delay_offset.json: skipping the entry") == 4
