"""The topic store: topics.json (the snapshot) plus topics.log (one line per change set),
replayed on load, compacted at a bound or in the background; and the change journal that
delta registrations read."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from rocketq.broker import topic_config
from rocketq.broker.topic_config import TopicConfigManager, TopicDelta
from rocketq.common.exceptions import StoreCorruptError
from rocketq.common.message import TopicConfig


def manager(tmp_path: Path, *, auto_create: bool = True) -> TopicConfigManager:
    topics = TopicConfigManager(
        tmp_path / "topics.json", auto_create=auto_create, default_queue_nums=4
    )
    topics.load()
    return topics


def log_lines(topics: TopicConfigManager) -> list[dict[str, object]]:
    if not topics.log_path.exists():
        return []
    return [json.loads(line) for line in topics.log_path.read_bytes().splitlines()]


def snapshot(topics: TopicConfigManager) -> dict[str, object]:
    doc = json.loads(topics.path.read_bytes())
    assert isinstance(doc, dict)
    return doc


# ---------------------------------------------------------------- the log


def test_a_change_appends_one_line_and_does_not_rewrite_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topics = manager(tmp_path)
    topics.update(TopicConfig("First", 2, 2))
    topics.compact()
    snapshots: list[Path] = []
    monkeypatch.setattr(topic_config, "write_json_atomic", lambda p, doc: snapshots.append(p))

    for i in range(50):
        topics.update(TopicConfig(f"T{i}", 4, 4))
    topics.create_in_send("Auto", "TBW102", 4)
    topics.delete("T0")

    assert snapshots == []  # no rewrite of the table per topic
    lines = log_lines(topics)
    assert len(lines) == 52
    assert lines[0] == {
        "dataVersion": 2,
        "put": [
            {
                "topic_name": "T0",
                "read_queue_nums": 4,
                "write_queue_nums": 4,
                "perm": 6,
                "topic_sys_flag": 0,
                "order": False,
            }
        ],
        "delete": [],
    }
    assert lines[-1] == {"dataVersion": 53, "put": [], "delete": ["T0"]}


def test_load_is_the_snapshot_plus_the_log_replayed(tmp_path: Path) -> None:
    topics = manager(tmp_path)
    topics.update(TopicConfig("Kept", 2, 2))
    topics.compact()
    topics.update(TopicConfig("Logged", 8, 8))
    topics.update(TopicConfig("Kept", 3, 3))
    topics.delete("Logged")
    topics.update(TopicConfig("Last", 1, 1))
    assert snapshot(topics)["dataVersion"] == 1

    again = manager(tmp_path)

    assert again.data_version == 5
    assert again.topics == topics.topics
    assert again.get("Kept") == TopicConfig("Kept", 3, 3)
    assert again.get("Logged") is None
    # The replay was compacted: the snapshot holds it all and the log starts empty.
    assert snapshot(again)["dataVersion"] == 5
    assert log_lines(again) == []


def test_lines_the_snapshot_already_holds_are_skipped(tmp_path: Path) -> None:
    """A compaction that wrote its snapshot but died before the log restarted."""
    topics = manager(tmp_path)
    topics.update(TopicConfig("A", 2, 2))
    topics.update(TopicConfig("B", 2, 2))
    old_log = topics.log_path.read_bytes()
    topics.update(TopicConfig("A", 5, 5))  # version 3, in the snapshot below
    topics.compact()
    topics.update(TopicConfig("C", 1, 1))  # version 4, only in the log
    newer = topics.log_path.read_bytes()
    # The old log (versions 1-2, older than the snapshot) followed by the newer line.
    topics.log_path.write_bytes(old_log + newer)

    again = manager(tmp_path)

    assert again.data_version == 4
    assert again.get("A") == TopicConfig("A", 5, 5)  # not set back to 2 queues
    assert again.get("C") == TopicConfig("C", 1, 1)


def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    topics = manager(tmp_path)
    topics.update(TopicConfig("Whole", 2, 2))
    with topics.log_path.open("ab") as f:
        f.write(b'{"dataVersion":2,"put":[{"topic_name":"Torn","read_queu')

    again = manager(tmp_path)

    assert again.get("Whole") == TopicConfig("Whole", 2, 2)
    assert again.get("Torn") is None
    assert again.data_version == 1
    # The next change starts on a clean line and survives the next load.
    again.update(TopicConfig("After", 1, 1))
    assert manager(tmp_path).get("After") == TopicConfig("After", 1, 1)


def test_a_damaged_line_before_the_end_is_logged_once_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topics = manager(tmp_path)
    topics.update(TopicConfig("A", 2, 2))
    topics.update(TopicConfig("B", 2, 2))
    lines = topics.log_path.read_bytes().splitlines(keepends=True)
    topics.log_path.write_bytes(lines[0] + b"#garbage#\n" + lines[1])

    with caplog.at_level("ERROR", logger="rocketq.broker.topic_config"):
        again = manager(tmp_path)
    assert again.get("A") == TopicConfig("A", 2, 2)
    assert again.get("B") == TopicConfig("B", 2, 2)
    assert [r.getMessage() for r in caplog.records if "line 2" in r.getMessage()] != []
    assert "topics.log: skipping line 2" in caplog.text
    # Compacted at once: the next load has nothing to say.
    caplog.clear()
    with caplog.at_level("ERROR", logger="rocketq.broker.topic_config"):
        assert manager(tmp_path).topics == again.topics
    assert caplog.records == []


def test_a_topic_with_a_bad_name_in_the_log_is_skipped_and_the_rest_loads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What an auto-create without a name check left behind: 'payments 1 1 0' in the log,
    between good changes. The broker loads the rest and drops that one."""
    topics = manager(tmp_path)
    topics.update(TopicConfig("payments", 4, 4))
    version = topics.data_version
    bad = {
        "dataVersion": version + 1,
        "put": [
            {"topic_name": "payments 1 1 0", "read_queue_nums": 4, "write_queue_nums": 4},
            {"topic_name": "kept", "read_queue_nums": 2, "write_queue_nums": 2},
        ],
        "delete": [],
    }
    later = {"dataVersion": version + 2, "put": [{"topic_name": "later"}], "delete": []}
    with topics.log_path.open("ab") as f:
        f.write(json.dumps(bad).encode() + b"\n" + json.dumps(later).encode() + b"\n")

    with caplog.at_level("ERROR", logger="rocketq.broker.topic_config"):
        again = manager(tmp_path)
    assert "payments 1 1 0" not in again.topics
    assert again.get("payments") == TopicConfig("payments", 4, 4)
    assert again.get("kept") == TopicConfig("kept", 2, 2)
    assert again.get("later") is not None
    assert again.data_version == version + 2
    assert "line 2" in caplog.text and "illegal characters" in caplog.text


def test_a_bad_entry_of_the_snapshot_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = {
        "good": {"topic_name": "good", "read_queue_nums": 1, "write_queue_nums": 1},
        "bad name": {"topic_name": "bad name"},
        "%DLQ%x y": {"topic_name": "%DLQ%x y"},
        "odd": {"topic_name": "odd", "perm": 99},
    }
    (tmp_path / "topics.json").write_text(json.dumps({"dataVersion": 3, "topicConfigTable": table}))
    with caplog.at_level("ERROR", logger="rocketq.broker.topic_config"):
        loaded = manager(tmp_path)
    assert loaded.get("good") == TopicConfig("good", 1, 1)
    assert {"bad name", "%DLQ%x y", "odd"}.isdisjoint(loaded.topics)
    assert loaded.data_version == 3
    assert caplog.text.count("topics.json: skipping the entry") == 3
    # Rewritten without them: logged once, not at every start.
    assert "bad name" not in (tmp_path / "topics.json").read_text()


def test_a_damaged_snapshot_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text("{not json")
    with pytest.raises(StoreCorruptError, match=r"topics\.json"):
        manager(tmp_path)
    (tmp_path / "topics.json").write_text('{"dataVersion": 1, "topicConfigTable": [7]}')
    with pytest.raises(StoreCorruptError, match=r"topics\.json: not a topic config snapshot"):
        manager(tmp_path)


def test_the_log_is_compacted_past_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topic_config, "COMPACT_MIN_CHANGES", 10)
    topics = manager(tmp_path)  # 4 system topics and T: the bound is 10 changes

    for i in range(1, 10):
        topics.update(TopicConfig("T", i, i))
    assert len(log_lines(topics)) == 9
    topics.update(TopicConfig("T", 10, 10))

    assert log_lines(topics) == []
    assert snapshot(topics)["dataVersion"] == 10
    # With more topics than that, the bound is the table's size: 25 topics, 25 changes.
    for i in range(20):
        topics.update(TopicConfig(f"U{i}", 1, 1))
    assert len(log_lines(topics)) == 20
    for i in range(5):
        topics.update(TopicConfig("T", i + 1, i + 1))
    assert log_lines(topics) == []
    assert snapshot(topics)["dataVersion"] == 35
    assert manager(tmp_path).topics == topics.topics


async def test_background_compaction_keeps_the_changes_made_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topic_config, "COMPACT_MIN_CHANGES", 10)
    topics = manager(tmp_path)
    real_write = topic_config.write_json_atomic
    writing, release = threading.Event(), threading.Event()

    def slow_write(path: Path, doc: object) -> None:
        writing.set()
        assert release.wait(10)
        real_write(path, doc)

    monkeypatch.setattr(topic_config, "write_json_atomic", slow_write)
    for i in range(1, 11):
        topics.update(TopicConfig("T", i, i))  # the 10th starts a compaction
    assert await asyncio.to_thread(writing.wait, 10)
    for i in range(3):
        topics.update(TopicConfig(f"U{i}", 2, 2))  # while the snapshot is being written
    release.set()
    await topics.close()

    assert snapshot(topics)["dataVersion"] == 10
    assert [line["dataVersion"] for line in log_lines(topics)] == [11, 12, 13]
    again = manager(tmp_path)
    assert again.data_version == 13 and again.topics == topics.topics


async def test_changes_are_synced_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = topic_config.os.fdatasync
    monkeypatch.setattr(topic_config.os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    topics = manager(tmp_path)

    for i in range(20):
        topics.update(TopicConfig(f"T{i}", 1, 1))
    await topics.close()

    # Coalesced: far fewer syncs than appends, at least one after the last append.
    assert 1 <= len(synced) < 20


# ---------------------------------------------------------------- the journal


def test_changes_since_gives_the_latest_of_each_topic(tmp_path: Path) -> None:
    topics = manager(tmp_path)
    base = topics.data_version
    topics.update(TopicConfig("A", 1, 1))
    topics.update(TopicConfig("B", 1, 1))
    topics.update(TopicConfig("A", 2, 2))
    topics.delete("B")
    topics.update(TopicConfig("C", 3, 3))

    assert topics.changes_since(base) == TopicDelta(
        put=[TopicConfig("C", 3, 3), TopicConfig("A", 2, 2)], deleted=["B"]
    )
    assert topics.changes_since(base + 3) == TopicDelta(put=[TopicConfig("C", 3, 3)], deleted=["B"])
    assert topics.changes_since(topics.data_version) == TopicDelta([], [])
    assert topics.changes_since(topics.data_version + 1) is None  # not a version we had


def test_changes_before_the_journal_need_the_full_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topic_config, "JOURNAL_MAX", 5)
    topics = manager(tmp_path)
    for i in range(8):
        topics.update(TopicConfig(f"T{i}", 1, 1))

    assert topics.changes_since(2) is None
    assert topics.changes_since(3) == TopicDelta(
        put=[TopicConfig(f"T{i}", 1, 1) for i in (7, 6, 5, 4, 3)], deleted=[]
    )
    # A new process knows nothing before its load.
    assert manager(tmp_path).changes_since(7) is None


def test_a_newer_copy_of_the_master_is_one_change_set(tmp_path: Path) -> None:
    slave = manager(tmp_path)
    slave.update(TopicConfig("Gone", 1, 1))
    slave.update(TopicConfig("Same", 1, 1))
    base = slave.data_version
    master = {**slave.topics, "New": TopicConfig("New", 8, 8), "Same": TopicConfig("Same", 2, 2)}
    del master["Gone"]
    changes: list[int] = []
    slave.on_change = lambda: changes.append(slave.data_version)

    slave.replace_all(master, 40)

    assert changes == [40]
    assert slave.topics == master and slave.data_version == 40
    delta = slave.changes_since(base)
    assert delta is not None
    assert sorted(t.topic_name for t in delta.put) == ["New", "Same"]
    assert delta.deleted == ["Gone"]
    assert [line["dataVersion"] for line in log_lines(slave)] == [1, 2, 40]
    assert manager(tmp_path).topics == master


def test_an_older_copy_rewrites_the_snapshot_and_drops_our_newer_lines(
    tmp_path: Path,
) -> None:
    topics = manager(tmp_path)
    for i in range(5):
        topics.update(TopicConfig(f"Own{i}", 1, 1))
    older = {"Theirs": TopicConfig("Theirs", 2, 2)}

    topics.replace_all(older, 3)

    assert log_lines(topics) == []
    assert topics.changes_since(1) is None
    again = manager(tmp_path)
    assert again.data_version == 3
    assert again.get("Theirs") == TopicConfig("Theirs", 2, 2)
    assert again.get("Own4") is None  # our version-4/5 lines are not replayed over it
