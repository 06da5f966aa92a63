"""ConsumeQueue writes: a run of entries is written in one pass when it continues the queue
within its last file, and otherwise entry by entry, with the same bytes either way."""

from __future__ import annotations

from pathlib import Path

from rocketq.storage.consume_queue import ConsumeQueue, CQEntry

UNITS = 4  # entries per file


def queue(path: Path) -> ConsumeQueue:
    cq = ConsumeQueue("T", 0, path, UNITS * 20)
    cq.load()
    return cq


def entries(first: int, n: int) -> list[CQEntry]:
    return [(q * 100, 100, q % 7, q) for q in range(first, first + n)]


def test_put_many_matches_put_across_files_and_repeats(tmp_path: Path) -> None:
    runs = [entries(0, 3), entries(3, 3), entries(6, 1), entries(2, 5), entries(7, 4)]
    one, many = queue(tmp_path / "one"), queue(tmp_path / "many")
    new_one = [sum(one.put(*e) for e in run) for run in runs]
    new_many = [many.put_many(run) for run in runs]
    # Entries 2-6 again (re-dispatch): nothing new; 3-5 straddles a file boundary.
    assert new_many == new_one == [3, 3, 1, 0, 4]
    assert many.max_offset == one.max_offset == 11
    assert [many.entry(i) for i in range(11)] == [one.entry(i) for i in range(11)]
    assert many.entry(5) == (500, 100, 5)
    one_files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert sorted(p.name for p in (tmp_path / "many").iterdir()) == one_files
    for name in one_files:
        assert (tmp_path / "many" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    one.close()
    many.close()


def test_put_many_after_a_gap_fills_it_as_put_does(tmp_path: Path) -> None:
    cq = queue(tmp_path / "q")
    assert cq.put_many(entries(0, 2)) == 2
    assert cq.put_many(entries(3, 2)) == 2  # entry 2 never came: a blank fills it
    assert cq.entry(1) == (100, 100, 1) and cq.entry(3) == (300, 100, 3)
    assert cq.max_offset == 5
    cq.close()
