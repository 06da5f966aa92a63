"""KVConfigManager: RocketMQ's kvConfig.json format, atomic rewrites, clear load errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rocketq.common.exceptions import ConfigError
from rocketq.nameserver.kv_config import KVConfigManager


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "namesrv" / "kvConfig.json"


def test_missing_file_loads_empty(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.load()
    assert kv.table == {}
    assert kv.get("ORDER_TOPIC_CONFIG", "T") is None
    assert not path.exists()


def test_persistence_format_is_rocketmq_config_table(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4;broker-b:4")
    kv.put("ORDER_TOPIC_CONFIG", "TopicB", "broker-a:8")
    kv.put("OTHER", "k", "v")

    assert json.loads(path.read_text()) == {
        "configTable": {
            "ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:4;broker-b:4", "TopicB": "broker-a:8"},
            "OTHER": {"k": "v"},
        }
    }


def test_round_trip_through_a_new_manager(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("NS", "a", "1")
    kv.put("NS", "b", "2")
    kv.put("NS", "a", "3")

    again = KVConfigManager(path)
    again.load()

    assert again.get("NS", "a") == "3"
    assert again.get("NS", "b") == "2"
    assert again.table == kv.table


def test_delete_persists_and_drops_empty_namespaces(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("NS", "a", "1")
    kv.put("NS", "b", "2")

    assert kv.delete("NS", "a")
    assert json.loads(path.read_text()) == {"configTable": {"NS": {"b": "2"}}}
    assert kv.delete("NS", "b")
    assert json.loads(path.read_text()) == {"configTable": {}}
    assert not kv.delete("NS", "b")
    assert not kv.delete("NOPE", "x")


def test_loads_a_bare_table_and_stringifies_values(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"NS": {"n": 5, "flag": True}}))

    kv = KVConfigManager(path)
    kv.load()

    assert kv.get("NS", "n") == "5"
    assert kv.get("NS", "flag") == "True"


def test_rewrite_replaces_the_file_by_rename_and_leaves_no_temp(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("NS", "a", "1")
    first_inode = path.stat().st_ino

    kv.put("NS", "a", "2")

    # A new file was renamed over the old one (not rewritten in place).
    assert path.stat().st_ino != first_inode
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


@pytest.mark.parametrize("failing", ["write", "fsync", "replace"])
def test_failed_rewrite_leaves_the_old_file_whole(
    path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    kv = KVConfigManager(path)
    kv.put("NS", "a", "old")
    before = path.read_bytes()

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(f"nameserver.kv_config.os.{failing}", boom)
    with pytest.raises(OSError, match="No space left"):
        kv.put("NS", "a", "new" * 1000)
    monkeypatch.undo()

    assert path.read_bytes() == before
    reloaded = KVConfigManager(path)
    reloaded.load()
    assert reloaded.get("NS", "a") == "old"


def test_leftover_temp_file_from_a_crash_is_ignored(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("NS", "a", "1")
    # A crash between write and rename leaves a torn temp file beside the real one.
    path.with_name(path.name + ".tmp").write_text('{"configTable": {"NS": {"a": "2"')

    reloaded = KVConfigManager(path)
    reloaded.load()
    assert reloaded.get("NS", "a") == "1"

    reloaded.put("NS", "b", "2")
    assert json.loads(path.read_text()) == {"configTable": {"NS": {"a": "1", "b": "2"}}}


@pytest.mark.parametrize(
    "content",
    [
        b'{"configTable": {"NS": {"a": "1"',  # torn
        b"",  # empty
        b"\xff\xfe\x00garbage",  # not text
        b"[1, 2, 3]",  # not an object
        b'{"configTable": {"NS": "not a table"}}',  # namespace is not an object
        b'{"configTable": []}',
    ],
    ids=["torn", "empty", "binary", "list", "bad-namespace", "bad-table"],
)
def test_corrupt_file_raises_config_error_naming_the_file(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    kv = KVConfigManager(path)

    with pytest.raises(ConfigError) as info:
        kv.load()

    assert str(path) in str(info.value)
    assert kv.table == {}


def test_unreadable_path_raises_config_error(path: Path) -> None:
    path.mkdir(parents=True)  # a directory where the file should be
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        KVConfigManager(path).load()


def test_file_is_created_with_its_directory(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "kv.json"
    KVConfigManager(path).put("NS", "k", "v")
    assert json.loads(path.read_text()) == {"configTable": {"NS": {"k": "v"}}}
