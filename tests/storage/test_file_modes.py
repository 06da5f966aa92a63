"""A store's files are its owner's alone: folders 0700 and files 0600 even under a lax
umask (0022: the places that create them ask for private modes), and a store an older
version left 0755/0644 is narrowed when it opens, logged once; logs keep group read."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.common.file_modes import LOG_FILE, open_log, tighten
from rocketq.common.json_file import write_json_atomic
from rocketq.nameserver.kv_config import KVConfigManager
from rocketq.storage.message_store import MessageStore
from tests.storage.conftest import batch, small_config


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def modes(root: Path) -> dict[str, int]:
    """Every path under ``root`` (``root`` itself as ".") -> its permission bits."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def open_to_others(root: Path) -> dict[str, str]:
    return {p: oct(m) for p, m in modes(root).items() if m & 0o077}


async def test_a_new_store_is_private_even_under_a_lax_umask(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "store")
    with umask(0o022):
        store = MessageStore(cfg)
        await store.start()
        try:
            for i in range(60):  # past one CommitLog segment, into index and queues
                store.append(batch("T", [bytes([i]) * 300], keys=[f"k{i}"]), "T", i % 2)
        finally:
            await store.shutdown()
    found = modes(tmp_path / "store")
    for part in ("commitlog", "consumequeue", "index", "checkpoint"):
        assert any(p.startswith(part) for p in found), f"no {part} in {sorted(found)}"
    assert open_to_others(tmp_path / "store") == {}


def test_a_json_state_file_is_private(tmp_path: Path) -> None:
    with umask(0o022):
        write_json_atomic(tmp_path / "config" / "offsets.json", {"a": 1})
    assert modes(tmp_path / "config") == {".": 0o700, "offsets.json": 0o600}


def make_old_tree(root: Path) -> None:
    """What an older version left: 0755 folders, 0644 files, and a log."""
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / "00000000000000000000").write_bytes(b"x")
    (root / "config").mkdir()
    (root / "config" / "topics.log").write_text("{}\n")  # state, not a log
    (root / "logs").mkdir()
    (root / "logs" / "broker.log").write_text("started\n")
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_tighten_narrows_an_old_tree_once_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "old"
    make_old_tree(root)
    outside = tmp_path / "outside"
    outside.write_text("not ours to change")
    outside.chmod(0o644)
    (root / "link").symlink_to(outside)
    caplog.set_level(logging.WARNING, logger="rocketq.common.file_modes")
    changed = tighten(root, "store", is_log=lambda p: p.parent.name == "logs")
    assert changed == 7
    assert modes(root) == {
        ".": 0o700,
        "commitlog": 0o700,
        "commitlog/00000000000000000000": 0o600,
        "config": 0o700,
        "config/topics.log": 0o600,
        "logs": 0o700,
        "logs/broker.log": 0o640,
        "link": stat.S_IMODE(os.lstat(root / "link").st_mode),
    }
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # a symlink is not followed
    (line,) = [r.getMessage() for r in caplog.records]
    assert "store: 7 files and folders under" in line and "now private" in line
    caplog.clear()
    assert tighten(root, "store", is_log=lambda p: p.parent.name == "logs") == 0
    assert caplog.records == []  # nothing changed: nothing logged


async def test_an_old_store_is_narrowed_when_it_opens(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "store")
    store = MessageStore(cfg)
    await store.start()
    store.append(batch("T", [b"one"]), "T", 0)
    await store.shutdown()
    for path in [tmp_path / "store", *(tmp_path / "store").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert open_to_others(tmp_path / "store")
    again = MessageStore(cfg)
    await again.start()
    try:
        assert open_to_others(tmp_path / "store") == {}
        assert again.max_offset_in_queue("T", 0) == 1
    finally:
        await again.shutdown()


def test_a_log_is_0640_and_an_old_one_narrowed(tmp_path: Path) -> None:
    with umask(0o022):
        fd = open_log(tmp_path / "logs" / "node.log")
    os.close(fd)
    assert stat.S_IMODE((tmp_path / "logs" / "node.log").stat().st_mode) == LOG_FILE
    assert stat.S_IMODE((tmp_path / "logs").stat().st_mode) == 0o700
    old = tmp_path / "old.log"
    old.write_text("x")
    old.chmod(0o666)
    os.close(open_log(old))
    assert stat.S_IMODE(old.stat().st_mode) == 0o640


def test_a_nameservers_kv_config_is_private_and_an_old_one_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    with umask(0o022):
        kv = KVConfigManager(path)
        kv.put("ORDER_TOPIC_CONFIG", "orders", "broker-a:4")
    assert modes(tmp_path / "namesrv") == {".": 0o700, "kvConfig.json": 0o600}
    path.chmod(0o644)
    again = KVConfigManager(path)
    again.load()
    assert mode_of(path) == 0o600
    assert again.table == {"ORDER_TOPIC_CONFIG": {"orders": "broker-a:4"}}


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)
